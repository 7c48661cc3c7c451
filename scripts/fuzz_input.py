"""The longer fuzz run of issue 8 (docs/reliability.md): N mutated lines of every type through
the API on one in-memory store, counted.

    python3 scripts/fuzz_input.py 5000

Prints inputs, accepted, refused (by error) and crashes; exits 1 on the first crash, with its
traceback and the line that caused it. The same check runs in CI with 200 examples
(tests/application/test_fuzz.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "application")]

from fuzz_lines import FuzzRun, mutated_lines  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402


def main(examples: int, seed: int = 8) -> int:
    import tempfile

    run = FuzzRun(Path(tempfile.mkdtemp(prefix="chatrecord-fuzz-")) / "fuzz.sqlite")

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(mutated_lines())
    def feed(line: object) -> None:
        run.feed(line)  # type: ignore[arg-type]

    feed._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    started = time.perf_counter()
    try:
        feed()
    finally:
        seconds = time.perf_counter() - started
        counts = run.counts
        print(f"inputs: {counts['inputs']}, accepted: {counts['accepted']}, refused: {counts['refused']}, "
              f"crashes: {counts['crashes']} ({seconds:.0f} s, seed {seed})")
        for key, n in sorted(counts.items()):
            if key.startswith("refused: "):
                print(f"  {key}: {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5000, int(sys.argv[2]) if len(sys.argv) > 2 else 8))

"""The longer fuzz run of issue 8 (docs/reliability.md): N mutated lines of every type through
the API on one in-memory store, counted.

    python3 scripts/fuzz_input.py 5000 [SEED] [--keep-going] [--root PATH] [--backend sqlite|postgres]

Prints inputs, accepted, refused (by error) and crashes; stops at the first crash, with its
traceback and the line that caused it, unless --keep-going (then every crash and every read that
failed afterwards is counted by type). --root runs the same lines against another checkout's
code (the figures before the fix in docs/reliability.md). --backend postgres runs them on a fresh
schema of CHATRECORD_TEST_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/test),
dropped at the end, instead of a SQLite file. The same check runs in CI with 200 examples
(tests/application/test_fuzz.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
ROOT = Path(sys.argv[sys.argv.index("--root") + 1]).resolve() if "--root" in sys.argv else HERE
sys.path[:0] = [str(ROOT), str(HERE / "tests" / "application")]

from fuzz_lines import FuzzRun, mutated_lines  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402


def main(examples: int, seed: int = 8, keep_going: bool = False, backend: str = "sqlite") -> int:
    if backend == "postgres":
        import os
        import uuid

        import psycopg

        url = os.environ.get("CHATRECORD_TEST_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/test"
        schema = f"fuzz_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        run = FuzzRun(
            keep_going=keep_going, settings={"CHATRECORD_DATABASE_URL": f"{url}{'&' if '?' in url else '?'}schema={schema}"}
        )
        try:
            return fuzz(run, examples, seed)
        finally:
            run.chat.close()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    import tempfile

    return fuzz(FuzzRun(Path(tempfile.mkdtemp(prefix="chatrecord-fuzz-")) / "fuzz.sqlite", keep_going), examples, seed)


def fuzz(run: FuzzRun, examples: int, seed: int) -> int:

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False, suppress_health_check=list(HealthCheck))
    @given(mutated_lines())
    def feed(line: object) -> None:
        run.feed(line)  # type: ignore[arg-type]
        if run.counts["inputs"] % 250 == 0:  # progress, so a run stopped early still says something
            c = run.counts
            print(
                f"... inputs: {c['inputs']}, accepted: {c['accepted']}, refused: {c['refused']}, "
                f"crashes: {c['crashes']}, reads failed afterwards: {c['unreadable']} "
                f"({time.perf_counter() - started:.0f} s)",
                flush=True,
            )

    feed._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    started = time.perf_counter()
    try:
        feed()
    finally:
        seconds = time.perf_counter() - started
        counts = run.counts
        print(
            f"inputs: {counts['inputs']}, accepted: {counts['accepted']}, refused: {counts['refused']}, "
            f"crashes: {counts['crashes']}, reads failed afterwards: {counts['unreadable']} "
            f"({seconds:.0f} s, seed {seed}, code {ROOT})"
        )
        for key, n in sorted(counts.items()):
            if key.startswith(("refused: ", "crash: ", "unreadable: ")):
                print(f"  {key}: {n}")
    return 1 if counts["crashes"] or counts["unreadable"] else 0


if __name__ == "__main__":
    numbers = [int(a) for a in sys.argv[1:] if a.isdigit()]
    backend = sys.argv[sys.argv.index("--backend") + 1] if "--backend" in sys.argv else "sqlite"
    if backend not in ("sqlite", "postgres"):
        sys.exit("--backend is sqlite or postgres")
    sys.exit(main(numbers[0] if numbers else 5000, numbers[1] if len(numbers) > 1 else 8, "--keep-going" in sys.argv, backend))

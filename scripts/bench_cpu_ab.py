"""The API's CPU per line of the real mix in two checkouts, in one run (issue 37, item 2): runs
`scripts/bench_cpu_mix.py` of each checkout (this one and `--base`, e.g. a worktree of an older
commit) as a subprocess, alternating which goes first in each round, and prints each round's CPU
ms per line (this process's CPU: `time.process_time` in the child, so the database server's work
and the waits on it are not counted), the medians and their ratio (this / base).

    git worktree add /tmp/base 77d705d
    python3 scripts/bench_cpu_ab.py --base /tmp/base --rounds 5
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
FIGURE = re.compile(r"([\d.]+) ms CPU per real-mix segment.*?; ([\d.]+) lines a segment")


def cpu_ms_per_line(tree: Path, backend: str, warmup: int, segments: int) -> float:
    """Returns the median CPU ms per line of three runs of `segments` segments after `warmup`,
    measured by `tree`'s own bench_cpu_mix.py in a fresh process (a fresh schema or file)."""
    out = subprocess.run(
        [sys.executable, "scripts/bench_cpu_mix.py", "--backend", backend, "--warmup", str(warmup), "--segments", str(segments)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = FIGURE.search(out)
    if found is None:
        raise SystemExit(f"no figure in the output of {tree}: {out!r}")
    return float(found.group(1)) / float(found.group(2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, type=Path, help="the checkout to compare with")
    ap.add_argument("--backend", default="pg", help="pg (default) or sqlite")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--segments", type=int, default=300)
    args = ap.parse_args()
    trees = {"base": args.base.resolve(), "this": HERE}
    figures: dict[str, list[float]] = {"base": [], "this": []}
    for n in range(args.rounds):
        order = ("base", "this") if n % 2 == 0 else ("this", "base")
        for name in order:
            figures[name].append(cpu_ms_per_line(trees[name], args.backend, args.warmup, args.segments))
        ratio = figures["this"][-1] / figures["base"][-1]
        print(
            f"round {n + 1}: base {figures['base'][-1]:.3f}  this {figures['this'][-1]:.3f} ms CPU per line  ({ratio:.2f}x)",
            flush=True,
        )
    ratios = [t / b for t, b in zip(figures["this"], figures["base"], strict=True)]
    base, this = statistics.median(figures["base"]), statistics.median(figures["this"])
    print(
        f"{args.backend}: base {base:.3f}, this {this:.3f} ms CPU per line (medians of {args.rounds} rounds); "
        f"this / base {this / base:.2f} (median of the rounds' ratios {statistics.median(ratios):.2f}, "
        f"{min(ratios):.2f}-{max(ratios):.2f})"
    )


if __name__ == "__main__":
    main()

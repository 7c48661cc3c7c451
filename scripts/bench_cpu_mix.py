"""Python CPU time per real-mix segment (issue 25): the demo tour's segments cycled through
`Chatrecord.record` line by line, each segment followed by `turn_notes`, on PostgreSQL (a fresh
schema of CHATRECORD_TEST_DATABASE_URL, dropped at the end) or SQLite.

Measures this process's CPU time (`time.process_time`), not wall-clock time, so that a machine
shared with other work still gives comparable figures: the server's work is not counted, nor
the waits on it. Prints CPU ms per segment over `--segments` segments after `--warmup` segments
(`--repeats` times, each on the same conversation going on), then, with `--profile`, a cProfile
of further segments with `time.process_time` as its timer: the top functions by own time and
by cumulative time. Not a test.

    PYTHONPATH=. python scripts/bench_cpu_mix.py                       # CPU ms per segment
    PYTHONPATH=. python scripts/bench_cpu_mix.py --profile --top 40    # and where it goes
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_flat_support import MixWriter, backend, print_top

from adapters.api import Chatrecord
from adapters.bootstrap import build_store


def cpu_ms_per_segment(mix: MixWriter, segments: int) -> float:
    if segments == 0:  # warm-up alone (the base a run under valgrind subtracts)
        return 0.0
    t0 = time.process_time()
    for _ in range(segments):
        mix.append_and_read()
    return 1000 * (time.process_time() - t0) / segments


def profile(mix: MixWriter, segments: int, top: int, dump: str | None = None) -> None:
    prof = cProfile.Profile(time.process_time)
    t0 = time.process_time()
    prof.enable()
    for _ in range(segments):
        mix.append_and_read()
    prof.disable()
    spent = time.process_time() - t0
    stats = pstats.Stats(prof)
    if dump:
        stats.dump_stats(dump)
    print(f"\nunder cProfile (CPU clock): {1000 * spent / segments:.2f} ms CPU per segment over {segments} segments")
    for key, title in ((2, "own time"), (3, "cumulative time")):
        print(f"\ntop {top} by {title} (ms CPU per segment):")
        print_top(stats, segments, top, key)
    sys.stdout.flush()


def _frames(frame: object) -> list[object]:
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back  # type: ignore[attr-defined]
    return frames[::-1]


def sample(mix: MixWriter, segments: int, top: int, dump: str | None = None, interval: float = 0.0005) -> None:
    """A sampling profile on the CPU clock: SIGPROF every `interval` s of this process's CPU
    time (setitimer ITIMER_PROF), each sample the stack of frames then running; prints the share
    of the samples where a function runs (own) and where it is on the stack (inclusive). Far less
    distortion than cProfile, which makes every Python call several times dearer."""
    import collections
    import signal

    own: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    callers: collections.Counter[str] = collections.Counter()
    stacks: collections.Counter[tuple[str, ...]] = collections.Counter()
    taken = 0

    def where(frame: object) -> str:
        code = frame.f_code  # type: ignore[attr-defined]
        return f"{'/'.join(Path(code.co_filename).parts[-2:])}:{code.co_firstlineno} {code.co_name}"

    def on_signal(_signum: int, frame: object) -> None:
        nonlocal taken
        taken += 1
        if frame is None:
            return
        own[where(frame)] += 1
        if frame.f_back is not None:  # type: ignore[attr-defined]
            callers[f"{where(frame)}  <-  {where(frame.f_back)}"] += 1  # type: ignore[attr-defined]
        seen = set()
        stacks[tuple(where(f) for f in _frames(frame))] += 1
        while frame is not None:
            name = where(frame)
            if name not in seen:
                seen.add(name)
                inclusive[name] += 1
            frame = frame.f_back  # type: ignore[attr-defined]

    signal.signal(signal.SIGPROF, on_signal)
    t0 = time.process_time()
    signal.setitimer(signal.ITIMER_PROF, interval, interval)
    try:
        for _ in range(segments):
            mix.append_and_read()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
    per = 1000 * (time.process_time() - t0) / segments
    if dump:
        import pickle

        Path(dump).write_bytes(pickle.dumps((per, taken, stacks)))
    print(f"\nsampled ({taken} samples): {per:.2f} ms CPU per segment over {segments} segments")
    for counter, title in ((own, "own"), (callers, "own, by caller"), (inclusive, "inclusive")):
        print(f"\ntop {top} by {title} samples (ms CPU per segment, of {per:.2f}):")
        for name, n in counter.most_common(top):
            print(f"  {per * n / max(taken, 1):7.3f}  {100 * n / max(taken, 1):5.1f}%  {name}")
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="pg", help="pg (default) or sqlite")
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--segments", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile on the CPU clock")
    ap.add_argument("--sample", action="store_true", help="a sampling profile on the CPU clock")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--dump", help="also write the profile's stats to this file (pstats)")
    args = ap.parse_args()
    with backend(args.backend) as b:
        chat = Chatrecord(build_store(b.env("cpu_mix")))
        mix = MixWriter(chat, "cpu-mix")
        for _ in range(args.warmup):
            mix.append_and_read()
        figures = [cpu_ms_per_segment(mix, args.segments) for _ in range(args.repeats)]
        print(
            f"{b.name}: {statistics.median(figures):.3f} ms CPU per real-mix segment, min {min(figures):.3f} "
            f"(median of {', '.join(f'{f:.3f}' for f in figures)}; {args.segments} segments each "
            f"after {args.warmup}; {mix.lines / max(mix.segments, 1):.3f} lines a segment)",
            flush=True,
        )
        if args.profile:
            profile(mix, args.segments, args.top, args.dump)
        if args.sample:
            sample(mix, args.segments, args.top, args.dump and args.dump + ".stacks")


if __name__ == "__main__":
    main()

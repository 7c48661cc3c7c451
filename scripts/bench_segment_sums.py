"""What the segment sums' check (README, "Input limits") adds to reading a line: reads one
`segment_returned` line of 50,000 `llm` steps (the most a segment may have, each stating tokens and
a cost) with the line model as it is and as it is without the check, alternating the order, and prints the best
time of each and their ratio. Nothing is stored.

    python3 -m scripts.bench_segment_sums [--rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from typing import Any

import orjson

from adapters.ingest import read_lines
from adapters.ingest.line_models import SegmentReturnedLine
from domain.limits import STEPS_MAX

STEP = {
    "kind": "llm",
    "round": 1,
    "durationMs": 1.0,
    "promptTokens": 100,
    "completionTokens": 10,
    "totalTokens": 110,
    "estimatedCost": 0.001,
}


def _line() -> bytes:
    return orjson.dumps(
        {
            "type": "segment_returned",
            "conversation": "c",
            "at": "2026-10-28T09:00:00Z",
            "segment": "r/1",
            "run": "r",
            "trigger": "turn",
            "outcome": "completed",
            "steps": [STEP] * STEPS_MAX,
        }
    )


def _best(raw: bytes, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        list(read_lines([raw], "bench.jsonl"))
        best = min(best, time.perf_counter() - started)
    return best


def _without_check() -> Any:
    """Returns the line model rebuilt with `steps` unchecked (the model as before the check)."""
    from typing import Annotated

    from pydantic import Field

    from adapters.ingest.step_models import Step

    class Unchecked(SegmentReturnedLine):
        steps: Annotated[list[Step], Field(max_length=STEPS_MAX)] = []

    return Unchecked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    raw = _line()
    from pydantic import TypeAdapter

    import adapters.ingest as ingest
    from adapters.ingest.step_models import check_segment_sums

    kept = ingest._LINE
    checked_adapter = TypeAdapter(SegmentReturnedLine)  # each a model alone, not the union: alike
    unchecked_adapter = TypeAdapter(_without_check())
    print(f"load average at the start: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    checked = unchecked = float("inf")
    for round_no in range(args.rounds):  # the order alternates, and each read starts after a collection
        for adapter in (checked_adapter, unchecked_adapter)[:: 1 if round_no % 2 == 0 else -1]:
            ingest._LINE = adapter
            gc.collect()
            if adapter is checked_adapter:
                checked = min(checked, _best(raw, 1))
            else:
                unchecked = min(unchecked, _best(raw, 1))
    ingest._LINE = kept
    [line] = read_lines([raw], "bench.jsonl")
    alone = float("inf")
    for _ in range(args.rounds):
        started = time.perf_counter()
        check_segment_sums(line.steps)  # type: ignore[union-attr]
        alone = min(alone, time.perf_counter() - started)
    print(f"a line of {STEPS_MAX:,} llm steps, best of {args.rounds}:")
    print(f"  without the sums' check  {unchecked * 1000:8.1f} ms")
    print(f"  with it                  {checked * 1000:8.1f} ms")
    print(f"  ratio                    {checked / unchecked:8.3f}")
    print(f"  the check alone          {alone * 1000:8.1f} ms ({alone / unchecked:.1%} of the read without it)")
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()

"""Benchmark: the append on PostgreSQL with the library's NOTIFY and without it, alternated.

Each run ingests the same generated export (`bench_ingest.demo_export`: the demo's shapes, four
conversations interleaved) line by line, one transaction per line, into a fresh schema of
CHATRECORD_TEST_DATABASE_URL (default postgresql://postgres@127.0.0.1:5432/test, dropped at the
end): "notify" with the append function as the store makes it, "silent" with its NOTIFY line
left out (the function of before issue 36). The two alternate (notify, silent, silent, notify,
...) so that a change of the machine's load falls on both. Prints lines/s per run, each
variant's median, and the machine's load before and after. Not a test.

    PYTHONPATH=. python scripts/bench_notify.py                 # 2,000 lines, 3 rounds
    PYTHONPATH=. python scripts/bench_notify.py --lines 500 --rounds 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import demo_export, fresh_store, line_by_line, machine, uptime

from adapters.backends.postgres import append

NOTIFY_LINE = "  NOTIFY {channel};\n"
WITH_NOTIFY = append._APPEND_FUNCTION_SQL
WITHOUT_NOTIFY = WITH_NOTIFY.replace(NOTIFY_LINE, "")


def run(variant: str, folder: Path, path: Path) -> float:
    """Returns the lines/s of one line-by-line ingest of `path` into a fresh schema."""
    append._APPEND_FUNCTION_SQL = WITH_NOTIFY if variant == "notify" else WITHOUT_NOTIFY
    lines = sum(1 for _ in path.open("rb"))
    with fresh_store("postgres", folder) as settings:
        seconds, appended = line_by_line(settings, path)
    assert appended > 0
    return lines / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    assert NOTIFY_LINE in WITH_NOTIFY, "the append function sends no NOTIFY"
    print(machine())
    print("load before:", uptime())
    rates: dict[str, list[float]] = {"notify": [], "silent": []}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "export.jsonl"
        path.write_bytes(b"".join(demo_export(args.lines)))
        for round_ in range(args.rounds):
            order = ("notify", "silent") if round_ % 2 == 0 else ("silent", "notify")
            for variant in order:
                rate = run(variant, folder, path)
                rates[variant].append(rate)
                print(f"round {round_ + 1} {variant:6} {rate:8.1f} lines/s", flush=True)
    print("load after:", uptime())
    for variant, found in rates.items():
        print(f"{variant:6} median {statistics.median(found):8.1f} lines/s  (runs: {', '.join(f'{r:.1f}' for r in found)})")


if __name__ == "__main__":
    main()

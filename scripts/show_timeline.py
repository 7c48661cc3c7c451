"""Ingests a chat's JSON Lines (default: the demo SEO tour) into the store and prints each
stored conversation's timeline, one line per event: version, time, type, key facts.

The store is the one `adapters.settings` picks: the SQLite file CHATRECORD_DB (default
./chatrecord.sqlite), or PostgreSQL when CHATRECORD_DATABASE_URL is set. Ingesting the same
file twice stores nothing new.

Example:
    python scripts/show_timeline.py
    python scripts/show_timeline.py tests/data/demo_seo_tour.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from adapters.ingest import read_file  # noqa: E402
from adapters.settings import describe_backend, open_store  # noqa: E402
from domain.errors import ChatrecordError  # noqa: E402
from domain.events import ConversationEvent, SegmentReturned  # noqa: E402

DEMO = Path(__file__).resolve().parents[1] / "adapters" / "data" / "demo_seo_tour.jsonl"
COMMON = {"originator_id", "originator_version", "timestamp", "source"}


def facts(event: ConversationEvent) -> str:
    """Returns the event's key facts as `name=value` pairs; a segment's steps as a summary."""
    if isinstance(event, SegmentReturned):
        tools = [s.tool_name for s in event.steps if s.kind == "tool"]
        writes = [f"{s.write_target}({s.write_completeness or 'unconfirmed'})" for s in event.steps if s.write_target]
        waiting = [w.tool_name + (f"@{w.target}" if w.target else "") for w in event.waiting]
        parts = [
            f"segment={event.segment}",
            f"trigger={event.trigger}",
            f"outcome={event.outcome}",
            f"tools={','.join(tools) or '-'}",
            f"written={','.join(writes) or '-'}",
            f"waiting={','.join(waiting) or '-'}",
        ]
        if event.nothing_saved:
            parts.append("nothingSaved")
        return " ".join(parts)
    shown = []
    for name, value in event.model_dump(exclude=COMMON, exclude_none=True).items():
        if isinstance(value, str) and len(value) > 40:
            value = value[:37] + "..."
        elif isinstance(value, (list, tuple)):
            value = f"[{len(value)}]"
        shown.append(f"{name}={value}")
    return " ".join(shown)


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else DEMO
    store = open_store()
    try:
        new = sum(len(store.handle(line).appended) for line in read_file(path))
        print(f"{path.name}: {new} new events in {describe_backend(store)}")
        for conversation in store.conversation_ids():
            print(f"\n{conversation}")
            for event in store.events(conversation):
                when = event.timestamp.strftime("%Y-%m-%d %H:%M:%S")
                print(f"{event.originator_version:>4}  {when}  {type(event).__name__:<18} {facts(event)}")
    except ChatrecordError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

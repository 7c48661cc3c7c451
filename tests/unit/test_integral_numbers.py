"""A whole number written as `1.0` is a whole number (JSON Schema's integer, PHP's json_encode
with JSON_PRESERVE_ZERO_FRACTION); `1.5` is refused with the field named (issue 23)."""

from __future__ import annotations

import orjson
import pytest

from adapters.ingest import parse_line
from domain.errors import InvalidInput

STARTED = {"type": "conversation_started", "conversation": "c", "at": "2026-10-28T09:00:00Z", "kind": "chat", "owner": 7}
SEGMENT = {
    "type": "segment_returned",
    "conversation": "c",
    "at": "2026-10-28T09:00:00Z",
    "segment": "s",
    "run": "r",
    "trigger": "turn",
    "outcome": "completed",
    "steps": [{"kind": "tool_write", "round": 2, "durationMs": 1.0, "writeTargetTable": "pages", "writeTargetUid": 42}],
}


def test_an_integral_float_is_the_whole_number_with_the_same_digest() -> None:
    as_int = parse_line(orjson.dumps(STARTED), 1, "in")
    as_float = parse_line(orjson.dumps(STARTED | {"owner": 7.0}), 1, "in")
    assert (as_float.owner, type(as_float.owner), as_float.digest) == (7, int, as_int.digest)
    step = SEGMENT["steps"][0] | {"round": 2.0, "writeTargetUid": 42.0}
    nested = parse_line(orjson.dumps(SEGMENT | {"steps": [step]}), 1, "in")
    assert (nested.steps[0].round, nested.steps[0].writeTargetUid) == (2, 42)
    assert nested.digest == parse_line(orjson.dumps(SEGMENT), 1, "in").digest


@pytest.mark.parametrize(
    ("line", "field"),
    [(STARTED | {"owner": 7.5}, "owner"), (SEGMENT | {"steps": [SEGMENT["steps"][0] | {"round": 2.5}]}, "steps[0].round")],
)
def test_a_fraction_is_refused_naming_the_field(line: dict, field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        parse_line(orjson.dumps(line), 3, "in")
    assert (raised.value.line, raised.value.field) == (3, field)
    assert "expected a whole number" in str(raised.value)

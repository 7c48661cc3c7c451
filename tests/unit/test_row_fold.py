"""The row read models equal a fresh fold of the log, for random conversations (hypothesis).

`projections.row_fold.apply_to_rows` applies each event to a conversation's rows (here the in-memory
rows the memory store uses); the folded read models (`projections.turn.apply`) are the
reference. Edits, undecided cards, stray continuations and legacy rows all come up.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import EPISODES, tell

from adapters.views.log_fold import fold_into
from adapters.views.memory_rows import MemoryConversation, MemoryRows
from adapters.views.row_state import _state
from projections import turn
from projections.rules import resolve
from projections.turn_notes import apply_notes, turn_notes


def rows_of(events, rules: str = "2026-11-02"):
    rows = MemoryRows(MemoryConversation())
    summary = fold_into(rows, None, events, resolve(rules))
    return rows, summary


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(legacy=st.integers(0, 2), episodes=EPISODES, rules=st.sampled_from(["2026-11-02", "2026-11-01"]))
def test_the_rows_are_the_fold_of_the_log(legacy, episodes, rules):
    events = tell(legacy, episodes).events
    folded = turn.TurnState()
    for event in events:
        folded = turn.apply(folded, event, rules)

    rows, summary = rows_of(events, rules)
    state = _state(rows, summary)

    assert state.record.entries == folded.record.entries
    assert state.record.dropped == folded.record.dropped
    assert state.outcomes.outcomes == folded.outcomes.outcomes
    assert state.transcript == folded.transcript
    assert state.view.to_json() == folded.view.to_json()
    assert summary.outcomes == len(folded.outcomes.outcomes)
    assert summary.length == len(folded.transcript.messages)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(legacy=st.integers(0, 2), episodes=EPISODES, hidden=st.sampled_from([None, 42]))
def test_turn_notes_put_into_the_transcript_are_the_turns_messages(legacy, episodes, hidden):
    can_see = lambda page: page != hidden
    events = tell(legacy, episodes).events
    expected = turn.build_turn_input(events, "2026-11-02", can_see)
    rows, summary = rows_of(events)
    rules = resolve("2026-11-02")

    notes = turn_notes(
        "conv-test",
        summary.version,
        summary.kind,
        summary.view,
        _state(rows, summary).record,
        rows.outcomes(newest=rules.max_notes + 1),
        summary.outcomes,
        summary.length,
        rows.messages_at,
        rows.block_ends,
        rules,
        can_see,
    )

    assert [n.text for n in notes.notes] == list(expected.notes)
    assert apply_notes(rows.messages(), notes.notes) == expected.messages
    assert notes.page_line == expected.system


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(legacy=st.integers(0, 2), episodes=EPISODES)
def test_a_changed_summary_is_the_summaries_model_copy(legacy, episodes):
    from projections.summary_rows import _changed

    _, summary = rows_of(tell(legacy, episodes).events)
    update = {"version": summary.version + 1, "edited": None, "length": summary.length + 2, "last_role": "user"}

    changed, copied = _changed(summary, update), summary.model_copy(update=update)

    assert changed == copied and changed is not summary
    assert changed.model_fields_set == copied.model_fields_set
    assert changed.model_dump_json() == copied.model_dump_json()
    assert type(summary).model_validate_json(changed.model_dump_json()) == copied
    assert summary.version == update["version"] - 1  # the summary itself is unchanged


def test_the_texts_an_event_brings_are_searched_whatever_its_fields():
    from domain.events import (
        CardDecided,
        ConversationStarted,
        SegmentReturned,
        UserMessagePosted,
    )
    from projections.transcript import _text_fields

    assert _text_fields(UserMessagePosted) == ("text", None, None)
    assert _text_fields(SegmentReturned) == (None, "answer", None)
    assert _text_fields(CardDecided) == ("text", "answer", None)
    assert _text_fields(ConversationStarted) == (None, None, None)


def test_a_sealed_message_body_is_the_models_json_with_its_text_sealed():
    import uuid

    import orjson

    from adapters.backends.sql.views_rows import SQLRows
    from adapters.store.crypto import ViewTexts
    from projections.transcript import Message

    class Keys:
        def key(self, originator_id, *, create):
            return bytes(range(32))

    cid = str(uuid.uuid4())
    texts = ViewTexts(Keys())
    rows = SQLRows(None, {}, cid, "?", texts)
    for message in (
        Message(role="user", text="Hallo „Welt“", number=3),
        Message(role="assistant", text="a\n\nb", segments=("s/1", "s/2"), ends=(1, 4)),
    ):
        for body in (rows._message_body(message), rows._message_body(message, texts.sealer(cid))):
            fields = orjson.loads(body)
            expected = message.model_dump(mode="json")
            assert texts.open(cid, fields.pop("sealed")) == expected.pop("text")
            assert fields == expected and list(fields) == list(expected)
        assert rows._decode_messages([rows._message_body(message)]) == (message,)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(legacy=st.integers(0, 2), episodes=EPISODES)
def test_an_event_of_tail_only_leaves_every_row_before_the_last_user_message_as_it_was(legacy, episodes):
    # what a turn read keeps of the transcript rows (adapters.views.caches.BlocksCache) relies on it
    from projections.row_fold import TAIL_ONLY

    rows = MemoryRows(MemoryConversation())
    summary = None
    for event in tell(legacy, episodes).events:
        last_user = summary.last_user if summary is not None and summary.last_user is not None else -1
        before = (
            {i: m for i, m in rows.r.messages.items() if i < last_user},
            {i: e for i, e in rows.r.block_ends.items() if i < last_user},
        )
        summary = fold_into(rows, summary, [event], resolve("2026-11-02"))
        if isinstance(event, TAIL_ONLY):
            after = (
                {i: m for i, m in rows.r.messages.items() if i < last_user},
                {i: e for i, e in rows.r.block_ends.items() if i < last_user},
            )
            assert after == before, type(event).__name__


def test_the_events_that_rewrite_or_cut_rows_are_not_tail_only():
    from domain.events import ConversationErased, LegacyRowImported, MessageEdited, TranscriptReplaced, TurnsTruncated
    from projections.row_fold import TAIL_ONLY

    assert not {MessageEdited, TurnsTruncated, TranscriptReplaced, LegacyRowImported, ConversationErased} & set(TAIL_ONLY)


def test_buffered_rows_read_back_what_they_hold_and_send_it_at_the_flush():
    import uuid

    import orjson

    from adapters.backends.sql.views_buffered import StatementRows
    from adapters.backends.sql.views_tables import table_names
    from adapters.store.crypto import ViewTexts
    from projections.run_record import Entry, ToolCount
    from projections.transcript import Message

    class Keys:
        def key(self, originator_id, *, create):
            return bytes(range(32))

    class Cursor:  # no rows stored: every read finds none
        def __init__(self):
            self.sent: list[tuple[str, list[tuple]]] = []

        def execute(self, sql, params=()):
            self.sent.append((sql, [tuple(params)]))
            return self

        def executemany(self, sql, rows):
            self.sent.append((sql, [tuple(r) for r in rows]))

        def fetchone(self):
            return None

    cid = str(uuid.uuid4())
    texts = ViewTexts(Keys())
    curs = Cursor()
    rows = StatementRows(curs, table_names(1), cid, "?", texts)
    first = Entry(segment="s/1", trigger="turn", ending="completed", tools=(ToolCount(name="get_page", calls=2),), seq=2)
    second = Entry(segment="s/2", trigger="turn", ending="awaiting_approval", seq=4)
    rows.put_entry(first)
    rows.put_entry(second)  # the first is now held as its row
    assert rows.entry("s/1") == first and rows.entry("s/2") == second
    rows.put_entry(first.model_copy(update={"decision": "Behalten"}))
    rows.delete_entries([4])
    assert rows.entry("s/2") is None and rows.entry("s/1").decision == "Behalten"
    user = Message(role="user", text="Hallo „Welt“", number=1)
    answer = Message(role="assistant", text="Fertig.", segments=("s/1",), ends=(7,))
    rows.put_message(0, user)
    rows.put_message(1, answer)  # the user message is now held sealed
    assert rows.message(0) == user and rows.message(1) == answer and rows.message(2) is None
    rows.end_block(0, None)

    rows.flush()

    sent = {
        sql.split(" (")[0].split()[-1] + (" ended" if "block_end" in sql else ""): params
        for sql, params in curs.sent
        if not sql.startswith("SELECT")
    }
    assert sent["views_g1_entries"] == [(cid, 2, "s/1", first.model_copy(update={"decision": "Behalten"}).model_dump_json())]
    assert [(r[0], r[1]) for r in sent["views_g1_entries"]] == [(cid, 2)]
    assert "DELETE FROM views_g1_entries" in " ".join(sql for sql, _ in curs.sent)
    ((_, idx, role, number, end, body),) = sent["views_g1_messages ended"]
    assert (idx, role, number, end) == (0, "user", 1, None)
    assert rows._decode_messages([body]) == (user,) and "Welt" not in body
    ((_, idx, role, number, body),) = sent["views_g1_messages"]
    assert (idx, role, number) == (1, "assistant", None) and orjson.loads(body)["segments"] == ["s/1"]
    assert rows.entry("s/1") is None and rows.message(0) is None  # nothing held after the flush


EXTRA = st.lists(st.sampled_from(["retry", "replace", "segment", "failed", "card", "decide", "user"]), max_size=6)


def _more(chat, extra: list[str]) -> None:
    """Tells `extra` after a conversation: retries, a replaced transcript, segments that join
    the last answer or fail, cards proposed and decided (steps it refuses are skipped)."""
    from factories import call, model_round

    from domain.errors import ChatrecordError

    for n, step in enumerate(extra):
        try:
            if step == "retry":
                chat.retry(chat.state.last_message)
            elif step == "replace":
                chat.replace([("user", "neu"), ("assistant", "ok"), ("user", "weiter")])
            elif step in ("segment", "failed"):
                chat.segment(
                    "turn",
                    "completed" if step == "segment" else "failed",
                    "Mehr." if step == "segment" else None,
                    [*model_round(1)],
                    run=f"x{n}",
                )
            elif step == "card":
                chat.segment("turn", "awaiting_approval", "Karte", [*model_round(1)], [call(fields=("title",))], run=f"x{n}")
            elif step == "decide":
                chat.decide(True, "Übernehmen")
            else:
                chat.user("Noch was", page=42)
        except ChatrecordError:
            continue


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    legacy=st.integers(0, 2), episodes=EPISODES, extra=EXTRA, cap=st.sampled_from([2, 3, 200]), hidden=st.sampled_from([None, 42])
)
def test_the_latest_turn_built_from_the_rows_is_the_turn_the_fold_builds(legacy, episodes, extra, cap, hidden):
    """After every event: where the summary says the rows still hold what the latest turn saw
    (`turn_intact`), its input built from them is the one a fold of the log up to that turn
    builds, byte for byte; edits, cuts, replaced transcripts, legacy rows, retries, failed
    segments and the record's cap (small here, so entries fall out after the turn) come up."""
    from adapters.views.row_state import turn_rows_state

    chat = tell(legacy, episodes)
    _more(chat, extra)
    events = chat.events
    rules = resolve("2026-11-02").model_copy(update={"record_entries": cap})
    can_see = lambda page: page != hidden
    rows, summary, built = MemoryRows(MemoryConversation()), None, 0
    for k, event in enumerate(events):
        summary = fold_into(rows, summary, [event], rules)
        if summary.turn is None or not summary.turn_intact:
            continue
        built += 1
        expected = turn.build_turn_input(events[: k + 1], rules, can_see)
        got = turn.turn_input(turn_rows_state(rows, summary), summary.turn.message, summary.turn.at, rules, can_see)
        assert got.to_json() == expected.to_json()  # the replay contract, byte for byte
        assert (got.messages, got.notes, got.system, got.record) == (
            expected.messages,
            expected.notes,
            expected.system,
            expected.record,
        )
    assert built > 0  # the last event starts a turn at least, or the rows were cut after it


def test_the_latest_turn_is_built_from_the_rows_after_its_segments_and_cards_and_the_cap():
    """A turn followed by its segments, a card decided and an entry fallen out of a record of
    two: the rows still hold that turn (the entry set aside), and an edit's cut starts the next."""
    from factories import call, model_round

    from adapters.views.row_state import turn_rows_state

    chat = tell(0, [("plain", False), ("plain", False)])
    chat.segment("turn", "awaiting_approval", "Karte", [*model_round(1)], [call(fields=("title",))], run="x")
    chat.decide(True, "Übernehmen")
    rules = resolve("2026-11-02").model_copy(update={"record_entries": 2})
    rows = MemoryRows(MemoryConversation())
    summary = fold_into(rows, None, chat.events, rules)

    assert summary.turn_intact and summary.turn.version < summary.version
    assert [e.seq for e in rows.aside()] == [e.seq for e in turn.build_turn_input(chat.events, rules).record][:1]
    got = turn.turn_input(turn_rows_state(rows, summary), summary.turn.message, summary.turn.at, rules)
    assert got.to_json() == turn.build_turn_input(chat.events, rules).to_json()
    done = len(chat.events)
    chat.edit(1, "anders")  # its cut starts the next turn, and what was set aside goes
    summary = fold_into(rows, summary, chat.events[done:], rules)
    assert summary.turn_intact and summary.turn.message == 1 and rows.aside() == ()


MESSAGES = st.builds(
    lambda role, text, number, segments: (
        role,
        text,
        number if role == "user" else None,
        segments if role == "assistant" else (),
    ),
    st.sampled_from(["user", "assistant"]),
    st.text(max_size=30),
    st.integers(1, 10**9),
    st.lists(st.text(max_size=8), max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(messages=st.lists(MESSAGES, max_size=6), sealed=st.booleans())
def test_row_bodies_read_back_as_the_validated_messages_they_were_written_from(messages, sealed):
    """A transcript row's body, plain or its text sealed, read back without validation
    (`decode_messages`, `message_of_row`) is the message validation of the same JSON makes:
    equal, each field of the same type (tuples, not lists), the same fields set."""
    import uuid

    from adapters.backends.sql.views_rows import SQLRows
    from adapters.store.crypto import ViewTexts
    from adapters.views.row_bodies import decode_messages
    from projections.transcript import Message

    class Keys:
        def key(self, originator_id, *, create):
            return bytes(range(32))

    cid = str(uuid.uuid4())
    texts = ViewTexts(Keys())
    rows = SQLRows(None, {}, cid, "?", texts if sealed else None)
    models = [
        Message(role=role, text=text, number=number, segments=tuple(segments), ends=tuple(range(1, len(segments) + 1)))
        for role, text, number, segments in messages
    ]
    bodies = [rows._message_body(m) for m in models]
    assert all(('"sealed":' in b) == sealed for b in bodies)

    read = decode_messages(bodies, texts if sealed else None, cid)

    assert read == tuple(models)
    for got, model in zip(read, models, strict=True):
        validated = Message.model_validate_json(model.model_dump_json())
        assert got.__dict__ == validated.__dict__ and list(got.__dict__) == list(Message.model_fields)
        assert [type(v) for v in got.__dict__.values()] == [type(v) for v in validated.__dict__.values()]
        assert got.model_fields_set == validated.model_fields_set
        assert got.model_dump_json() == model.model_dump_json()


def test_message_of_row_knows_every_field_of_a_message():
    """`message_of_row` names each field of `Message`: a field added to it must be added there."""
    from adapters.views.row_bodies import message_of_row
    from projections.transcript import Message

    assert tuple(Message.model_fields) == ("role", "text", "number", "segments", "ends")
    made = message_of_row({"role": "user", "text": "Hallo", "number": 1})  # a body without the defaults
    assert made == Message(role="user", text="Hallo", number=1) and made.model_fields_set == {"role", "text", "number"}

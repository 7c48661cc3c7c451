"""Recomputing the hash chains: ok, or the first broken link.

`verify` streams events and chain rows in pages, in key order, and recomputes from GENESIS. Memory
stays flat. Per conversation it yields one `Verdict`: ok with the head, or the first break:

- `deleted`: an event is gone (its hash is recorded), or a version is missing;
- `inserted`: an event has no recorded hash;
- `reordered`: the event at the next version belongs at this one;
- `hash_changed`: the recorded hash was changed;
- `changed`: the event's bytes were changed (also the newest event or its hash);
- `unchained`: no event has a hash: it predates the chain (`upgrade` chains it);
- `unkeyed`: plain SHA-256 links while a master key is set;
- against kept heads (`read_heads`): `rewritten` (a head's hash differs) and `cut_off`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import groupby, takewhile
from pathlib import Path
from typing import Any, cast
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from adapters.store.application import ConversationStore
from adapters.store.chain import GENESIS, PAGE, ChainedRecorder, Link, Stored, link, state_bytes
from adapters.store.chain_key import unkeyed
from adapters.store.heads_file import KeptHead, read_heads
from domain.errors import ChatrecordError
from domain.events import ConversationStarted, conversation_uuid


@dataclass(frozen=True)
class Verdict:
    """One conversation's chain: `problem` None with the head (`version`, `hash`) when ok. Else the
    first break's kind, its `version` and a sentence."""

    conversation: str
    originator_id: UUID
    version: int
    events: int
    hash: bytes | None = None
    problem: str | None = None
    detail: str | None = None
    kept: int | None = None
    """None: every hash of the chain was recomputed for this verdict. Else the version up to
    which an earlier verdict of this process recomputed every hash (`verify_after`): this one
    found that version's event and recorded hash still there and unchanged, and recomputed every
    hash after it. What it cannot see is an event at or before `kept` whose stored bytes were
    changed since without touching any recorded hash (`chatrecord verify` recomputes all)."""
    kept_at: datetime | None = None
    """When the earlier verdict that recomputed every hash up to `kept` was made (UTC)."""
    kept_by: str | None = None
    """What made that earlier verdict: `this server` (kept in this process), or what the
    stored verified position names (`adapters.store.chain_checks.VerifiedPosition.by`:
    `chatrecord verify`, `the server`)."""
    found_at: datetime | None = None
    """None: the break (if any) was found by this verdict's own look. Else the verdict is the
    break an earlier check found and stored (`adapters.store.chain_checks.BrokenChain`), shown as it
    is until a look that recomputes every hash finds the chain ok: when it was found (UTC)."""
    found_by: str | None = None
    """What found the stored break (`chatrecord verify`, `the server`, …); with `found_at`."""

    @property
    def ok(self) -> bool:
        """Returns True when the whole chain verified."""
        return self.problem is None

    def to_json(self) -> dict[str, Any]:
        """Returns `{"conversation", "id", "ok", "version", "hash", "events", "problem", "detail"}`."""
        return {
            "conversation": self.conversation,
            "id": str(self.originator_id),
            "ok": self.ok,
            "version": self.version,
            "hash": self.hash.hex() if self.hash else None,
            "events": self.events,
            "problem": self.problem,
            "detail": self.detail,
        }

    def line(self) -> str:
        """Returns the verdict as one line of text."""
        if self.ok:
            return f"{self.conversation}: ok, {self.events} event{'' if self.events == 1 else 's'}"
        return f"{self.conversation}: broken at version {self.version} ({self.problem}): {self.detail}"


Item = tuple[UUID, int, Stored | None, bytes | None]
NameOf = Callable[[Stored], str]


def _pages(
    fetch: Callable[[tuple[UUID, int] | None, UUID | None], list[Any]], only: UUID | None, after: tuple[UUID, int] | None = None
) -> Iterator[Any]:
    while True:
        page = fetch(after, only)
        yield from page
        if len(page) < PAGE:
            return
        after = (page[-1][0], page[-1][1])


def merged(recorder: ChainedRecorder, only: UUID | None = None, after: tuple[UUID, int] | None = None) -> Iterator[Item]:
    """Yields (originator id, version, stored event or None, hash or None) in key order, from
    the key after `after` if given."""
    return _merge(_pages(recorder.chain_events, only, after), _pages(recorder.chain_links, only, after))


def _merge(events: Iterator[Stored], links: Iterator[Link]) -> Iterator[Item]:
    """Yields the items of `events` and `links`, both in key order, merged by key."""
    event, chained = next(events, None), next(links, None)
    while event is not None or chained is not None:
        if chained is None or (event is not None and (event[0], event[1]) < (chained[0], chained[1])):
            assert event is not None  # one of the two is left
            yield (event[0], event[1], event, None)
            event = next(events, None)
        elif event is None or (chained[0], chained[1]) < (event[0], event[1]):
            yield (chained[0], chained[1], None, chained[2])
            chained = next(links, None)
        else:
            yield (event[0], event[1], event, chained[2])
            event, chained = next(events, None), next(links, None)


NOT_IN_STORE = "not in the store"
"""How the detail of the verdict of a heads file's line for a conversation the store holds no
event of starts: the file's claim, which no stored break keeps (no such conversation)."""


def verify(
    recorder: ChainedRecorder, name_of: NameOf, only: UUID | None = None, heads: Mapping[UUID, KeptHead] | None = None
) -> Iterator[Verdict]:
    """Yields a Verdict per conversation (only `only` if given) in key order. Then one per conversation
    of `heads` the store does not hold."""
    heads = heads or {}
    seen: set[UUID] = set()
    for key, items in groupby(merged(recorder, only), key=lambda item: item[0]):
        seen.add(key)
        yield _check(key, items, name_of, heads.get(key), mac=recorder.chain_key)
    for key, head in heads.items():
        if key not in seen and (only is None or key == only):
            yield Verdict(
                head.conversation,
                key,
                1,
                0,
                problem="cut_off",
                detail=f"{NOT_IN_STORE}: the heads file records version {head.version} (hash {head.hash.hex()}); the "
                "store holds no event of it",
            )


def verify_after(recorder: ChainedRecorder, kept: Verdict, now: datetime | None = None, by: str = "this server") -> Verdict:
    """Returns the verdict of `kept`'s conversation, from an earlier ok verdict that recomputed every
    hash. It checks the kept head is still there (else `rewritten`, `deleted` or `cut_off`). It
    recomputes only the links after it, so it costs what was appended since. `Verdict.kept`,
    `kept_at` and `kept_by` say what it did not recompute."""
    assert kept.ok and kept.hash is not None
    since = kept.kept if kept.kept is not None else kept.version
    at = kept.kept_at if kept.kept is not None else (now or datetime.now(UTC))
    made_by = kept.kept_by if kept.kept is not None and kept.kept_by is not None else by
    stream = merged(recorder, kept.originator_id, (kept.originator_id, kept.version - 1))
    first = next(stream, None)
    key, name, version = kept.originator_id, kept.conversation, kept.version
    if first is None or first[0] != key:
        return Verdict(
            name,
            key,
            version,
            0,
            problem="cut_off",
            detail=f"version {version}, verified earlier, is no longer stored: the newest events were removed",
        )
    if first[1] != version:
        return Verdict(
            name,
            key,
            version,
            0,
            problem="deleted",
            detail=f"version {version}, verified earlier, is missing: neither its event nor its hash is stored",
        )
    if first[2] is None:
        return Verdict(
            name, key, version, 0, problem="deleted", detail="the event was deleted: its hash is recorded, the event is not"
        )
    if first[3] != kept.hash:
        return Verdict(
            name,
            key,
            version,
            0,
            problem="rewritten",
            detail="the hash differs from the one verified earlier: the log up to here was rewritten and its chain recomputed",
        )
    tail = (item for item in stream if item[0] == key)
    found = _check(key, tail, lambda _: name, None, (name, kept.hash, version + 1, kept.events), recorder.chain_key)
    return unkeyed(recorder, replace(found, kept=since, kept_at=at, kept_by=made_by))


def _check(
    key: UUID,
    items: Iterable[Item],
    name_of: NameOf,
    head: KeptHead | None,
    start: tuple[str, bytes, int, int] | None = None,
    mac: bytes | None = None,
) -> Verdict:
    """Returns the verdict of one conversation's items, from GENESIS or from `start`; `mac` is the
    chain key."""
    stream = iter(items)
    current: Item | None = next(stream, None)
    if start is not None:
        name, running, expected, count = start
        if current is None:
            return Verdict(name, key, expected - 1, count, hash=running)
    else:
        assert current is not None
        name = _name(current, name_of, head)
        running, expected, count = GENESIS, _first_version(current), 0

    def broken(version: int, problem: str, detail: str) -> Verdict:
        for _ in stream:  # the rest of this conversation is not checked
            pass
        return Verdict(name, key, version, count, problem=problem, detail=detail)

    while current is not None:
        following = next(stream, None)
        _, version, stored, recorded = current
        if version < expected:  # only before the first: the versions are a key, in order
            return broken(version, "inserted", f"an event at version {version}, before the first (1): written beside the store")
        if version != expected:
            return broken(expected, "deleted", f"version {expected} is missing: neither its event nor its hash is stored")
        if stored is None:
            return broken(version, "deleted", "the event was deleted: its hash is recorded, the event is not")
        if recorded is None:
            if version == 1 and _unchained(stream):
                return Verdict(
                    name,
                    key,
                    1,
                    0,
                    problem="unchained",
                    detail="no event has a recorded hash: stored before the chain existed; run: chatrecord verify --upgrade",
                )
            return broken(version, "inserted", "the event has no recorded hash: it was written beside the store")
        computed = link(running, key, version, stored[2], stored[3], mac)
        if computed != recorded:
            return broken(version, *_diagnose(running, computed, current, following, mac))
        if head is not None and head.version == version and computed != head.hash:
            return broken(
                version,
                "rewritten",
                "the hash differs from the heads file: the log up to here was rewritten and its chain recomputed",
            )
        running, expected, count, current = computed, version + 1, count + 1, following
    if head is not None and head.version >= expected:
        return Verdict(
            name,
            key,
            expected,
            count,
            problem="cut_off",
            detail=f"the heads file records version {head.version} (hash {head.hash.hex()}); the store ends at version "
            f"{expected - 1}",
        )
    return Verdict(name, key, expected - 1, count, hash=running)


def _first_version(item: Item) -> int:
    """Returns the version a chain starts at: 0 when its first item is a link at 0, else 1."""
    return 0 if item[1] == 0 and item[3] is not None else 1


def _unchained(stream: Iterator[Item]) -> bool:
    """Reads the rest of a conversation's items; says whether none has a recorded hash."""
    unchained = True
    for item in stream:
        unchained = unchained and item[3] is None
    return unchained


def _diagnose(running: bytes, computed: bytes, current: Item, following: Item | None, mac: bytes | None) -> tuple[str, str]:
    key, version, _, recorded = current
    if following is not None and following[2] is not None and following[3] is not None:
        _, next_version, next_stored, next_recorded = following
        assert next_stored is not None
        stored = next_stored
        if link(running, key, version, stored[2], stored[3], mac) == recorded:
            return "reordered", f"the event stored as version {next_version} belongs here: events were reordered"
        if link(computed, key, next_version, stored[2], stored[3], mac) == next_recorded:
            return "hash_changed", "the recorded hash was changed; the event matches the links around it"
        if link(recorded or b"", key, next_version, stored[2], stored[3], mac) == next_recorded:
            return "changed", "the event's stored bytes were changed after it was appended"
    return "changed", "the event does not match its recorded hash: the event or its hash was changed"


def _name(item: Item, name_of: NameOf, head: KeptHead | None) -> str:
    if item[1] == _first_version(item) and item[2] is not None:
        try:
            return name_of(item[2])
        except Exception:  # noqa: BLE001 - a changed first event fails in any way: the verdict says so, the id names it
            pass
    return head.conversation if head else str(item[0])


# ---------------------------------------------------------------------- heads


def head_line(verdict: Verdict) -> str:
    """Returns the verdict's head as the text `verify --heads` prints: `NAME VERSION HASH`."""
    return f"{verdict.conversation} {verdict.version} {verdict.hash.hex() if verdict.hash else '-'}"


# ---------------------------------------------------------------------- a store's chains


class NoChain(ChatrecordError):
    """Raised when the store keeps no hash chain (a store built beside adapters.backends.settings)."""


def verdicts(store: ConversationStore, conversation: str | None = None, against: Path | None = None) -> Iterator[Verdict]:
    """Yields every conversation's verdict (only `conversation` if given), in id order. Checked against
    the heads in `against` if given. Raises NoChain for a store without a chain. Raises BadHeadsFile
    for a heads file it cannot read."""
    recorder = store.recorder
    if not isinstance(recorder, ChainedRecorder):
        raise NoChain("this store keeps no hash chain; open it with adapters.backends.settings")
    heads = read_heads(against) if against is not None else None

    def name_of(stored: Stored) -> str:
        event = store.mapper.to_domain_event(StoredEvent(stored[0], stored[1], stored[2], stored[3]))
        return cast(ConversationStarted, event).conversation  # a log's first event starts it

    only = conversation_uuid(conversation) if conversation is not None else None
    found = (
        advised(recorder, unkeyed(recorder, v)) for v in verify(recorder, name_of, only, heads)
    )  # with a master key: keyed, or not ok
    return iter(sorted(found, key=lambda v: (v.conversation, v.originator_id)))


def advised(recorder: ChainedRecorder, verdict: Verdict) -> Verdict:
    """Returns `verdict`; an `unchained` one advises `verify --upgrade` only where the upgrade would
    chain it."""
    reason = recorder.upgrade_refusal(verdict.originator_id) if verdict.problem == "unchained" else None
    if reason is None:
        return verdict
    return replace(
        verdict, detail=f"its chain rows were deleted in the database (a tamper): {reason}; verify --upgrade refuses it"
    )


def chain_verdict(store: ConversationStore, conversation: str) -> Verdict | None:
    """Returns the verdict of one conversation's chain, None when the store keeps no chain."""
    if not isinstance(store.recorder, ChainedRecorder):
        return None
    return next(iter(verdicts(store, conversation)), None)


def chain_verdict_upto(
    store: ConversationStore, conversation: str, version: int, stored: Sequence[StoredEvent] | None = None
) -> Verdict | None:
    """Returns the chain verdict of stored id `conversation` up to `version` only. `stored` are those
    events as the caller read them, so only chain rows are read again. Returns None when the store
    keeps no chain. A break after `version` is not seen."""
    if not isinstance(store.recorder, ChainedRecorder):
        return None
    key = conversation_uuid(conversation)
    events: Iterator[Stored]
    links: Iterator[Link]
    if stored is None:
        events, links = _pages(store.recorder.chain_events, key), _pages(store.recorder.chain_links, key)
    else:  # their hashes in one read: those up to `version` are among the first `version` rows
        events = iter([(key, e.originator_version, e.topic, state_bytes(e.state)) for e in stored])
        links = iter(store.recorder.chain_links(None, key, version + 1))  # from version 0 at most
    items = _merge(takewhile(lambda e: e[1] <= version, events), takewhile(lambda e: e[1] <= version, links))
    return unkeyed(store.recorder, _check(key, items, lambda _: conversation, None, None, store.recorder.chain_key))

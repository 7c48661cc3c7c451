"""Lines into the store, one path for every entrypoint (CLI, Python API, HTTP). `parse` reads a line (UTF-8,
a BOM before line 1, blank is None). A `RecordLines` command carries one line, or one conversation's
lines stored all or nothing. A refusal names source, line and field (`demo.jsonl: line 7, segment: …`).
`follows` is checked on the state loaded in the store's retry loop, so check and append are atomic."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from adapters.ingest import ParsedLine, at_line, parse_numbered
from adapters.service.line_commands import decide, recorded
from adapters.store.commands import HandleResult, Lookups
from adapters.store.crypto import TextsErased
from domain.conversation import Conversation, History, project_conversation
from domain.errors import ChatrecordError, InvalidInput, shown_id
from domain.events import ConversationEvent
from domain.history_index import LayeredHistory, index_event


class VersionMismatch(ChatrecordError):
    """Raised when a write expected the conversation at another version than the store holds
    (HTTP `If-Match`); nothing is stored. `expected` and `actual` are versions (0: not started)."""

    def __init__(self, conversation: str, expected: int, actual: int) -> None:
        self.conversation, self.expected, self.actual = conversation, expected, actual
        super().__init__(f"conversation {shown_id(conversation, 'repr')} is at version {actual}, not {expected}; read it again")


def parse(raw: str | bytes, line_no: int, source: str) -> ParsedLine | None:
    """Returns line `line_no` (1-based) of `source` parsed, None for a blank line. Raises InvalidInput
    naming source, line, field path and what was expected."""
    return parse_numbered(raw, line_no, source)


class RecordLines:
    """The store command of one or more parsed lines of one conversation. `follows`: the version the
    conversation must be at (0: not started), else VersionMismatch. After `decide`, `counts[i]` is how
    many events line i decided (0: recorded before). `new_segments`: the segment ids its
    `segment_returned` lines record."""

    def __init__(self, lines: Sequence[ParsedLine], follows: int | None = None) -> None:
        if not lines:
            raise ValueError("RecordLines needs at least one line")
        self.lines = tuple(lines)
        self.conversation = lines[0].conversation
        self.follows = follows
        self.counts: list[int] = []
        self.new_segments = frozenset(line.segment for line in self.lines if line.type == "segment_returned")
        self.starts = self.lines[0].type == "conversation_started"
        self.versions: list[tuple[int, int] | None] = []
        self.sources: tuple[str, ...] = tuple(line.digest for line in self.lines)
        """Each line's digest as its events' `source`: plain until the store keys it (`key_digests`)."""
        self.refused_at: ParsedLine | None = None
        """After `decide` raised: the line that was refused."""
        self.folded: tuple[ConversationEvent, Conversation | None] | None = None
        """After `decide` returned events: the last of them and the state after them, which it
        folded deciding them (the store takes it instead of folding them again)."""
        self.indexed: LayeredHistory | None = None
        """After `decide` returned events: the history it decided on with the index writes of
        those events held on top (`LayeredHistory.top`, `delta`), folded as it decided them."""
        self._lookups = self._looked_up()

    def _looked_up(self) -> Lookups:
        """What deciding the lines looks up. One line: its digest, segment and run, read with its index row
        (`SQLHistory.prefetch`). Many: their digests, segment ids and run ids, read at once
        (`prefetch_many`); empty for one line. A keyed digest is looked up in both forms, the plain one
        as `legacy` for one line (`key_digests`)."""
        plain = [line.digest for line, source in zip(self.lines, self.sources, strict=True) if source != line.digest]
        if len(self.lines) == 1:
            fields = vars(self.lines[0])  # a model's fields: no failed getattr through pydantic's __getattr__
            segment, run = fields.get("segment"), fields.get("run")
            return Lookups(
                self.sources[0],
                segment if isinstance(segment, str) else None,
                run if isinstance(run, str) else None,
                self.new_segments,
                ([], [], []),
                plain[0] if plain else None,
            )
        segments = [segment for line in self.lines if isinstance(segment := vars(line).get("segment"), str)]
        runs = [run for line in self.lines if isinstance(run := vars(line).get("run"), str)]
        return Lookups(new_segments=self.new_segments, many=([*self.sources, *plain], segments, runs))

    def key_digests(self, keyed: Callable[[str], str] | None) -> None:
        """Takes each line's digest keyed by `keyed` (`adapters.store.line_digests`), the plain digest
        when None, as its events' `source`; the store calls it before deciding (`KeyedLines`)."""
        plain = tuple(line.digest for line in self.lines)
        self.sources = plain if keyed is None else tuple(keyed(digest) for digest in plain)
        self._lookups = self._looked_up()

    def lookups(self) -> Lookups:
        """Returns what deciding the lines looks up in the history index (`_looked_up`)."""
        return self._lookups

    def decide(self, state: Conversation | None, history: History) -> list[ConversationEvent]:
        version = state.version if state is not None else 0
        if (
            self.follows is not None
            and self.follows != version
            and not all(recorded(line, source, history) for line, source in zip(self.lines, self.sources, strict=True))
        ):
            # lines recorded before are a repeat at any version, as a line's own `follows` is
            raise VersionMismatch(self.conversation, self.follows, version)
        decided: list[ConversationEvent] = []
        self.folded = self.indexed = None
        self.counts = []
        self.versions = []
        seen = LayeredHistory(history)  # the batch's earlier lines, not stored yet
        self.refused_at = None
        for line, source in zip(self.lines, self.sources, strict=True):
            try:
                events = decide(line, state, seen, source)
            except InvalidInput:
                self.refused_at = line
                raise
            except ChatrecordError as error:
                self.refused_at = line
                raise at_line(error, line.source_name, line.line) from None
            for event in events:
                index_event(seen, state, event)
                state = project_conversation(state, [event])
            decided.extend(events)
            self.counts.append(len(events))
            self.versions.append((events[0].originator_version, events[-1].originator_version) if events else None)
        self.folded = (decided[-1], state) if decided else None
        self.indexed = seen if decided else None
        return decided

    def erased(self, error: TextsErased) -> TextsErased:
        """Returns the refusal of a text for an erased conversation as the other refusals read: `source:
        line N, field:` and the conversation's id."""
        line = next(
            (
                line
                for line, span in zip(self.lines, self.versions, strict=True)
                if span is not None and error.version is not None and span[0] <= error.version <= span[1]
            ),
            self.lines[0],
        )
        field = error.path or "text"
        return TextsErased(
            f"{line.source_name}: line {line.line}, {field}: conversation {shown_id(self.conversation, 'repr')} "
            "was erased; no text can be stored for it",
            error.version,
            field,
        )


@dataclass(frozen=True)
class Recorded:
    """What one write stored. `version`: the conversation's version after. `events`: those appended, or for
    a one-line repeat those first recorded. `lines`: events per line (0: recorded before). `repeated`:
    nothing was appended."""

    conversation: str
    version: int
    appended: int
    repeated: bool
    events: tuple[ConversationEvent, ...]
    lines: tuple[int, ...]
    read_after: str | None = None
    """The write's read-after position where the service reads from standbys
    (`adapters.api.Chatrecord.position`): a later read given it is never older; None otherwise."""

    @classmethod
    def of(cls, result: HandleResult, command: RecordLines) -> Recorded:
        counts = tuple(command.counts) if result.appended else tuple(0 for _ in command.lines)
        version = result.state.version if result.state is not None else 0
        return cls(result.conversation, version, len(result.appended), result.repeated, result.events, counts)

    def to_json(self) -> dict[str, object]:
        """Returns `{"conversation", "version", "appended", "repeated", "events": [{"type",
        "version"}], "lines": [{"line", "appended", "repeated"}]}` (lines numbered from 1)."""
        return {
            "conversation": self.conversation,
            "version": self.version,
            "appended": self.appended,
            "repeated": self.repeated,
            "events": [{"type": type(e).__name__, "version": e.originator_version} for e in self.events],
            "lines": [{"line": i, "appended": n, "repeated": n == 0} for i, n in enumerate(self.lines, 1)],
        }


@dataclass
class IngestReport:
    """What ingesting one source did. `stopped` is the error that ended it early, if any."""

    source: str
    appended: int = 0
    repeated: int = 0
    rejected: list[str] = field(default_factory=list)
    stopped: ChatrecordError | None = None
    stopped_at: int = 0
    lines: int = 0
    """Lines stored, or found recorded before (`repeated` of them)."""
    last_line: int = 0
    """The number (1-based) of the last line stored or found recorded; 0 before the first."""
    read_lines: int = 0
    """Lines read so far, blank and bad ones too."""
    read_bytes: int = 0
    """Bytes of the lines read so far."""
    reproductions: int = 0
    """Reproduction records (`export --with-reproductions`) kept as streams; one kept before is `repeated`."""
    interrupted: bool = False
    """Whether an interrupt (Ctrl-C, SIGTERM) ended the ingest; every line up to `last_line` is
    stored, and ingesting the source again stores the rest."""

    def summary(self) -> str:
        """Returns one line: `demo.jsonl: 24 events appended, 0 lines already recorded`."""
        text = f"{self.source}: {_count(self.appended, 'event')} appended, {_count(self.repeated, 'line')} already recorded"
        if self.reproductions:
            text += f", {_count(self.reproductions, 'reproduction')} kept"
        if self.rejected:
            text += f", {_count(len(self.rejected), 'line')} rejected"
        if self.stopped is not None:
            text += f"; stopped at line {self.stopped_at}"
        if self.interrupted:
            text += f"; interrupted after line {self.last_line}" if self.last_line else "; interrupted before any line was stored"
        return text


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")

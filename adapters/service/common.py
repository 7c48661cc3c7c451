"""What the use cases of `adapters.api.Chatrecord` share: the store, opened on first use (`OpenedStore`),
method wrappers (`in_store_terms`, `reads`) and argument checks."""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from adapters.backends import StoreFactory
from adapters.backends.replicas import recovery_conflict, wrote_on_standby
from adapters.backends.settings import read_wait, store_errors
from adapters.ingest import ParsedLine
from adapters.service.conversations import stored_id
from adapters.store.application import ConversationStore
from adapters.views.readmodels import ReadModels
from domain.errors import ChatrecordError, InvalidInput

log = logging.getLogger("chatrecord")


class OpenedStore:
    """The store the use cases run on (`store`), opened by `opener` on first use if none was given. `opened`
    is None until then. Its read models come from `read_models_of(store)`, which raises NoReadModels for
    a store built without them."""

    def __init__(
        self,
        store: ConversationStore | None,
        opener: Callable[[], ConversationStore],
        read_models_of: Callable[[ConversationStore], ReadModels],
    ) -> None:
        self.opened = store
        self._opener = opener
        self._read_models_of = read_models_of

    @property
    def store(self) -> ConversationStore:
        """The store, opened on first use. Raises StoreUnusable where it cannot be opened."""
        if self.opened is None:
            with store_errors():
                self.opened = self._opener()
        return self.opened

    @property
    def read_models(self) -> ReadModels:
        """The store's read models, built with it by the composition root (`adapters.bootstrap`)."""
        return self._read_models_of(self.store)

    def stored_id(self, conversation: str) -> str:
        """Returns the key `conversation` (the chat's id, or the stored form a command printed)
        is stored under (`adapters.service.conversations.stored_id`)."""
        return stored_id(self.store, conversation)

    def close(self) -> None:
        """Closes the store's connections, where it was opened."""
        if self.opened is not None:
            self.opened.close()


Method = TypeVar("Method", bound=Callable[..., Any])


def in_store_terms(method: Method) -> Method:
    """Makes a method or generator method of an object with a `store` raise its store's errors as
    `store_errors` does."""
    if inspect.isgeneratorfunction(method):

        @functools.wraps(method)
        def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
            with store_errors(self.store):
                return (yield from method(self, *args, **kwargs))

        return generate  # type: ignore[return-value]  # functools.wraps: the method's own signature

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        with store_errors(self.store):
            return method(self, *args, **kwargs)

    return call  # type: ignore[return-value]  # functools.wraps: the method's own signature


RECOVERY_CONFLICT_TRIES = 3
"""Tries of a read on the standby that recovery cancelled, before the primary answers it."""


def reads(method: Method) -> Method:
    """Makes a read-only Chatrecord method run on the store `Chatrecord._reader(after)` picks. The method
    takes keyword `after`, a write's `read_after` position or None. The standby answers unless it has not
    replayed `after` in time. A try cancelled by recovery is repeated, up to RECOVERY_CONFLICT_TRIES. The
    primary answers when the last try is cancelled, the standby's connection fails or the read must
    write. The caller sees none of these."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, after: str | None = None, **kwargs: Any) -> Any:
        reader = self._reader(after)
        if reader is not self._opened_standby:  # no reading store, or the primary answers
            return method(reader, *args, **kwargs)
        for attempt in range(1, RECOVERY_CONFLICT_TRIES + 1):
            try:
                return method(reader, *args, **kwargs)
            except ChatrecordError as error:
                to_primary = reader.store.connection_lost(error) or wrote_on_standby(error)
                if not (to_primary or recovery_conflict(error)):
                    raise
                if to_primary or attempt == RECOVERY_CONFLICT_TRIES:
                    break
        return method(self._on_primary, *args, **kwargs)

    return call  # type: ignore[return-value]


def opened_read_only(store: ConversationStore) -> bool:
    """Says whether `store`'s database was opened read-only (`StoreFactory.read_only`). False on the
    library's own factories."""
    factory = store.factory
    return isinstance(factory, StoreFactory) and factory.read_only


def lines_argument(call: str, lines: object) -> None:
    """Raises TypeError when `lines` is one str or bytes, which iterates as characters or bytes."""
    if isinstance(lines, (str, bytes, bytearray, memoryview)):
        raise TypeError(
            f"{call}: lines must be an iterable of lines (each a str or bytes), not one "
            f"{type(lines).__name__}; split a text into its lines first (text.splitlines())"
        )


def conversation_argument(call: str, conversation: object) -> str:
    """Returns `conversation` if it is a str (a conversation's id); raises TypeError naming the
    argument if not."""
    if not isinstance(conversation, str):
        raise TypeError(f"{call}: conversation must be a conversation's id as a str, not {type(conversation).__name__}")
    return conversation


def required_line(line: ParsedLine | None, source: str, line_no: int) -> ParsedLine:
    if line is None:
        raise InvalidInput(source, line_no, "(line)", "is blank; expected one JSON object")
    return line


def read_wait_setting() -> float:
    with store_errors():
        return read_wait()

"""The history index's statements in both dialects (`HistoryStatements`), built once per dialect, and the
tables' CREATE statements (`create_statements`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from adapters.backends.sql.dialect import SQLITE, Dialect

TABLES = ("chatrecord_index", "chatrecord_segments", "chatrecord_messages", "chatrecord_sources")


def create_statements(dialect: Dialect = SQLITE) -> list[str]:
    """Returns the CREATE statements of the index tables."""
    q = dialect.table
    return [
        f"CREATE TABLE IF NOT EXISTS {q('chatrecord_index')} (cid TEXT PRIMARY KEY, version BIGINT NOT NULL, "
        "outcomes BIGINT NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {q('chatrecord_segments')} (cid TEXT NOT NULL, segment TEXT NOT NULL, "
        "run TEXT NOT NULL, message BIGINT NOT NULL, version BIGINT NOT NULL, cut INTEGER NOT NULL, "
        "body TEXT NOT NULL, PRIMARY KEY (cid, segment))",
        f"CREATE INDEX IF NOT EXISTS chatrecord_segments_run ON {q('chatrecord_segments')} (cid, run)",
        f"CREATE INDEX IF NOT EXISTS chatrecord_segments_message ON {q('chatrecord_segments')} (cid, message)",
        f"CREATE TABLE IF NOT EXISTS {q('chatrecord_messages')} (cid TEXT NOT NULL, number BIGINT NOT NULL, "
        "live INTEGER NOT NULL, PRIMARY KEY (cid, number))",
        f"CREATE TABLE IF NOT EXISTS {q('chatrecord_sources')} (cid TEXT NOT NULL, digest TEXT NOT NULL, "
        "first BIGINT NOT NULL, last BIGINT NOT NULL, PRIMARY KEY (cid, digest))",
    ]


@dataclass(frozen=True)
class HistoryStatements:
    """The statements of one conversation's index rows in one dialect. Each takes the conversation's UUID
    text first. `*_in` end in `IN`; the caller adds the values. `prefetch` and `prefetch_chained` read
    one command's rows at once; the chained one also the hash at the index's version."""

    dialect: Dialect
    index_row: str
    segment: str
    segments_from: str
    run_cut: str
    message_uncut: str
    messages_after: str
    source: str
    sources_in: str
    segments_in: str
    cut_runs_in: str
    put_segment: str
    put_message: str
    add_outcomes: str
    put_source: str
    set_version: str
    clear: tuple[str, ...]
    upsert_sources: str
    upsert_segments: str
    upsert_messages: str
    upsert_index: str

    def prefetch(self, chain_table: str | None) -> str:
        """Returns `SQLHistory.prefetch`'s statement. Parameters: cid, digest, segment, run, legacy (a
        line's plain digest; texts, "" for none), then the chain's id where `chain_table` is given."""
        return _prefetch(self.dialect, chain_table)

    def within(self, select: str, count: int) -> str:
        """Returns `select` (one of `*_in`) with a list of `count` placeholders."""
        return f"{select} ({self.dialect.params(count)})"


@functools.cache
def _prefetch(dialect: Dialect, chain_table: str | None) -> str:
    t, p = dialect.table, dialect.param
    if chain_table is None:
        tip, chain_id = "NULL", ""
    else:
        tip = f"(SELECT c.hash FROM {chain_table} c WHERE c.originator_id = k.chain_id AND c.originator_version = i.version)"
        chain_id = f", {p} AS chain_id"
    return (
        f"SELECT i.version, i.outcomes, s.first, s.last, l.first AS legacy_first, l.last AS legacy_last, {tip} AS tip, "
        f"(SELECT g.body FROM {t('chatrecord_segments')} g WHERE g.cid = k.cid AND g.segment = k.segment) "
        f"AS segment, (SELECT 1 FROM {t('chatrecord_segments')} r WHERE r.cid = k.cid AND r.run = k.run "
        f"AND r.cut = 1 LIMIT 1) AS run_cut FROM (SELECT CAST({p} AS TEXT) AS cid, CAST({p} AS TEXT) AS digest, "
        f"CAST({p} AS TEXT) AS segment, CAST({p} AS TEXT) AS run, CAST({p} AS TEXT) AS legacy{chain_id}) k "
        f"LEFT JOIN {t('chatrecord_index')} i ON i.cid = k.cid "
        f"LEFT JOIN {t('chatrecord_sources')} s ON s.cid = k.cid AND s.digest = k.digest "
        f"LEFT JOIN {t('chatrecord_sources')} l ON l.cid = k.cid AND l.digest = k.legacy"
    )


@functools.cache
def history_statements(dialect: Dialect) -> HistoryStatements:
    """Returns the index's statements in `dialect`, built once per dialect."""
    index, segments = dialect.table("chatrecord_index"), dialect.table("chatrecord_segments")
    messages, sources = dialect.table("chatrecord_messages"), dialect.table("chatrecord_sources")
    p = dialect.param
    upsert_sources = (
        f"INSERT INTO {sources} (cid, digest, first, last) VALUES ({dialect.params(4)}) "
        "ON CONFLICT (cid, digest) DO UPDATE SET last = excluded.last"
    )
    upsert_segments = (
        f"INSERT INTO {segments} (cid, segment, run, message, version, cut, body) VALUES ({dialect.params(7)}) "
        "ON CONFLICT (cid, segment) DO UPDATE SET cut = excluded.cut, body = excluded.body"
    )
    upsert_messages = (
        f"INSERT INTO {messages} (cid, number, live) VALUES ({dialect.params(3)}) "
        "ON CONFLICT (cid, number) DO UPDATE SET live = excluded.live"
    )
    return HistoryStatements(
        dialect=dialect,
        index_row=f"SELECT version, outcomes FROM {index} WHERE cid = {p}",
        segment=f"SELECT body FROM {segments} WHERE cid = {p} AND segment = {p}",
        segments_from=f"SELECT body FROM {segments} WHERE cid = {p} AND message >= {p} AND cut = 0 ORDER BY version",
        run_cut=f"SELECT 1 AS found FROM {segments} WHERE cid = {p} AND run = {p} AND cut = 1 LIMIT 1",
        message_uncut=f"SELECT live FROM {messages} WHERE cid = {p} AND number = {p}",
        messages_after=f"SELECT number FROM {messages} WHERE cid = {p} AND number > {p} AND live = 1 ORDER BY number",
        source=f"SELECT first, last FROM {sources} WHERE cid = {p} AND digest = {p}",
        sources_in=f"SELECT digest, first, last FROM {sources} WHERE cid = {p} AND digest IN",
        segments_in=f"SELECT segment, body FROM {segments} WHERE cid = {p} AND segment IN",
        cut_runs_in=f"SELECT DISTINCT run FROM {segments} WHERE cid = {p} AND cut = 1 AND run IN",
        put_segment=upsert_segments,
        put_message=upsert_messages,
        add_outcomes=(
            f"INSERT INTO {index} (cid, version, outcomes) VALUES ({p}, 0, {p}) "
            f"ON CONFLICT (cid) DO UPDATE SET outcomes = {index}.outcomes + excluded.outcomes"
        ),
        put_source=upsert_sources,
        set_version=(
            f"INSERT INTO {index} (cid, version, outcomes) VALUES ({p}, {p}, 0) "
            "ON CONFLICT (cid) DO UPDATE SET version = excluded.version"
        ),
        clear=tuple(f"DELETE FROM {dialect.table(name)} WHERE cid = {p}" for name in TABLES),
        upsert_sources=upsert_sources,
        upsert_segments=upsert_segments,
        upsert_messages=upsert_messages,
        upsert_index=(
            f"INSERT INTO {index} (cid, version, outcomes) VALUES ({dialect.params(3)}) "
            f"ON CONFLICT (cid) DO UPDATE SET version = excluded.version, outcomes = {index}.outcomes + excluded.outcomes"
        ),
    )

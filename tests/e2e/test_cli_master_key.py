"""`chatrecord` on a store protected by a master key, run as the user runs it: another key or
none is refused with one line and exit status 1, and nothing of the refused file is stored."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.e2e.conftest import DATA, DEMO, runner

A = base64.b64encode(bytes(range(32))).decode()
B = base64.b64encode(bytes(range(100, 132))).decode()


@pytest.fixture(params=["sqlite", "postgres"])
def store_settings(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The settings of a store of the test's own: a SQLite file, then a fresh PostgreSQL schema."""
    if request.param == "sqlite":
        return {"CHATRECORD_DB": str(tmp_path / "store.sqlite")}
    url = request.getfixturevalue("postgres_url")
    schema = request.getfixturevalue("postgres_schema")
    return {"CHATRECORD_DATABASE_URL": f"{url}{'&' if '?' in url else '?'}schema={schema}"}


def test_a_store_refuses_another_master_key_and_none_with_one_line(store_settings: dict[str, str], tmp_path: Path) -> None:
    with_a = runner(tmp_path, **store_settings, CHATRECORD_MASTER_KEY=A)
    with_b = runner(tmp_path, **store_settings, CHATRECORD_MASTER_KEY=B)
    without = runner(tmp_path, **store_settings)
    assert with_a("ingest", DEMO).returncode == 0

    other = with_b("ingest", DATA / "behalten_tour.jsonl")
    assert (other.returncode, other.stdout, other.stderr) == (
        1, "", "error: CHATRECORD_MASTER_KEY is not the master key of this store (it does not unwrap its data "
               "keys); set the master key the store was written with\n")
    none = without("ingest", DATA / "behalten_tour.jsonl")
    assert (none.returncode, none.stdout, none.stderr) == (
        1, "", "error: the data keys of this store are wrapped by a master key; set CHATRECORD_MASTER_KEY to it\n")

    assert with_a("verify").stdout == "conv-demo-seo: ok, 20 events\n1 conversation verified: 1 ok, 0 broken\n"
    again = with_a("ingest", DATA / "behalten_tour.jsonl")
    assert (again.returncode, again.stdout) == (0, "behalten_tour.jsonl: 12 events appended, 0 lines already recorded\n")

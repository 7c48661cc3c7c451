"""`chatrecord` on a store protected by a master key, run as the user runs it: another key or
none is refused with one line and exit status 1, and nothing of the refused file is stored."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from adapters.store.chain_key import derive_chain_key, key_mark
from tests.e2e.conftest import DATA, DEMO, runner

A = base64.b64encode(bytes(range(32))).decode()
B = base64.b64encode(bytes(range(100, 132))).decode()
KEYED_A = f"the hash chain is keyed (hmac-sha256, key mark {key_mark(derive_chain_key(bytes(range(32))))})\n"
"""What `verify` says after its count of a store whose chain is keyed with A's chain key."""


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
        1,
        "",
        "error: CHATRECORD_MASTER_KEY is not the master key of this store (it does not unwrap its data "
        "keys); set the master key the store was written with\n",
    )
    none = without("ingest", DATA / "behalten_tour.jsonl")
    assert (none.returncode, none.stdout, none.stderr) == (
        1,
        "",
        "error: the data keys of this store are wrapped by a master key; set CHATRECORD_MASTER_KEY to it\n",
    )

    assert with_a("verify").stdout == "conv-demo-seo: ok, 20 events\n1 conversation verified: 1 ok, 0 broken\n" + KEYED_A
    again = with_a("ingest", DATA / "behalten_tour.jsonl")
    assert (again.returncode, again.stdout) == (0, "behalten_tour.jsonl: 12 events appended, 0 lines already recorded\n")


UNBOUND = (
    "error: CHATRECORD_MASTER_KEY is set, but this store has no master key and keeps data keys unwrapped; "
    "run `chatrecord keys wrap` to wrap them with it, or unset CHATRECORD_MASTER_KEY\n"
)


def test_a_reading_command_with_a_master_key_never_binds_the_store(store_settings: dict[str, str], tmp_path: Path) -> None:
    # issue 20, item 6: `CHATRECORD_MASTER_KEY=… chatrecord verify` wrapped the store's keys for good
    with_a = runner(tmp_path, **store_settings, CHATRECORD_MASTER_KEY=A)
    without = runner(tmp_path, **store_settings)
    assert without("ingest", DEMO).returncode == 0
    state = json.loads(without("keys", "status", "--json").stdout)

    for command in (("verify",), ("audit", "conv-demo-seo"), ("replay", "--conversation", "conv-demo-seo")):
        refused = with_a(*command)
        assert (refused.returncode, refused.stdout, refused.stderr) == (1, "", UNBOUND)

    assert json.loads(without("keys", "status", "--json").stdout) == state
    assert {k: state[k] for k in ("protected", "wrapped", "unwrapped", "erased")} == {
        "protected": False,
        "wrapped": 0,
        "unwrapped": 1,
        "erased": 0,
    }
    assert without("verify").stdout == "conv-demo-seo: ok, 20 events\n1 conversation verified: 1 ok, 0 broken\n"


def test_keys_wrap_rotate_and_unwrap_say_what_they_did(store_settings: dict[str, str], tmp_path: Path) -> None:
    with_a = runner(tmp_path, **store_settings, CHATRECORD_MASTER_KEY=A)
    with_b = runner(tmp_path, **store_settings, CHATRECORD_MASTER_KEY=B)
    rotating = runner(tmp_path, **store_settings, CHATRECORD_MASTER_KEY=A, CHATRECORD_NEW_MASTER_KEY=B)
    without = runner(tmp_path, **store_settings)
    assert without("ingest", DEMO).returncode == 0
    store = json.loads(without("keys", "status", "--json").stdout)["store"]

    wrapped = with_a("keys", "wrap")
    assert (wrapped.returncode, wrapped.stdout, wrapped.stderr) == (
        0,
        f"{store}: wrapped 1 data key with CHATRECORD_MASTER_KEY; from now on every command on this store needs that key\n"
        f"{store}: recomputed 20 links of the hash chain under the new key\n",
        "",
    )
    assert with_a("keys", "wrap").stdout == (
        f"{store}: every data key is wrapped by CHATRECORD_MASTER_KEY already (1 wrapped, 0 unwrapped, 0 erased); "
        "nothing changed\n"
    )
    assert without("verify").stderr == (
        "error: the data keys of this store are wrapped by a master key; set CHATRECORD_MASTER_KEY to it\n"
    )
    assert with_a("keys", "status").stdout == f"{store}: a master key protects it; data keys: 1 wrapped, 0 unwrapped, 0 erased\n"
    assert with_a("ingest", DATA / "behalten_tour.jsonl").returncode == 0

    rotated = rotating("keys", "rotate", "--json")
    assert (rotated.returncode, json.loads(rotated.stdout)) == (
        0,
        {
            "action": "rotate",
            "changed": True,
            "rewrapped": 2,
            "rekeyed": 32,
            "protected": True,
            "wrapped": 2,
            "unwrapped": 0,
            "erased": 0,
            "store": store,
        },
    )
    assert with_a("verify").stderr.startswith("error: CHATRECORD_MASTER_KEY is not the master key of this store")
    keyed_b = f"the hash chain is keyed (hmac-sha256, key mark {key_mark(derive_chain_key(bytes(range(100, 132))))})\n"
    assert with_b("verify").stdout.endswith("2 conversations verified: 2 ok, 0 broken\n" + keyed_b)

    unwrapped = with_b("keys", "unwrap")
    assert unwrapped.stdout == (
        f"{store}: unwrapped 2 data keys and removed the master key; commands need no CHATRECORD_MASTER_KEY now, "
        "and whoever reads the database can read the texts\n"
        f"{store}: recomputed 32 links of the hash chain under the new key\n"
    )
    replay = without("replay", "--conversation", "conv-behalten", "--at", "1", "--json")
    assert replay.returncode == 0 and "SEO optimieren" in replay.stdout
    assert rotating("keys", "rotate").stderr == (
        "error: this store has no master key to rotate; run `chatrecord keys wrap` with CHATRECORD_MASTER_KEY set "
        "to bind it to one\n"
    )
    bad = runner(tmp_path, **store_settings, CHATRECORD_MASTER_KEY=A, CHATRECORD_NEW_MASTER_KEY="kurz")("keys", "rotate")
    assert (bad.returncode, bad.stderr) == (
        1,
        "error: CHATRECORD_NEW_MASTER_KEY must be base64 of 32 bytes (openssl rand -base64 32), not base64 of 3 bytes\n",
    )
    assert with_b("keys", "rotate").stderr == (
        "error: set CHATRECORD_NEW_MASTER_KEY to the new master key (base64 of 32 random bytes: openssl rand -base64 32)\n"
    )

"""`chatrecord verify`, `erase` and the chain line of `audit`, run as the user runs them."""

from __future__ import annotations

import base64
import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import DATA, DEMO, Run, cli_env, json_lines, runner

DEMO_ID = "5d91b7e3ea14590fbbd7a5f872bc7e3d"  # conversation_uuid("conv-demo-seo").hex
DEMO_TEXTS = ("SEO optimieren", "Alles der Reihe nach", "Womit sollen wir beginnen?", "was ist hier passiert?")


def test_verify_reports_each_conversation_and_its_head(store_run: Run) -> None:
    assert store_run("ingest", DEMO, DATA / "behalten_tour.jsonl").returncode == 0
    done = store_run("verify")
    assert (done.returncode, done.stdout) == (
        0,
        "conv-behalten: ok, 12 events\nconv-demo-seo: ok, 20 events\n2 conversations verified: 2 ok, 0 broken\n",
    )
    heads = store_run("verify", "--heads").stdout.splitlines()
    assert [re.fullmatch(r"(\S+) (\d+) [0-9a-f]{64}", h).groups() for h in heads] == [  # type: ignore[union-attr]
        ("conv-behalten", "12"),
        ("conv-demo-seo", "20"),
    ]
    as_json = json_lines(store_run("verify", "conv-demo-seo", "--json").stdout)
    assert [(v["conversation"], v["ok"], v["version"], v["hash"]) for v in as_json] == [
        ("conv-demo-seo", True, 20, heads[1].split()[2])
    ]


def test_verify_names_a_changed_event_and_exits_1(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"))
    run("ingest", DEMO)
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        conn.execute(
            "UPDATE stored_events SET state = replace(state, '\"uid\":42}', '\"uid\":7}') "
            "WHERE originator_id = ? AND originator_version = 8",
            (DEMO_ID,),
        )
    done = run("verify")
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "conv-demo-seo: broken at version 8 (changed): the event's stored bytes were changed after it was appended",
        "1 conversation checked: 0 ok, 1 broken",
    ]
    audit = run("audit", "conv-demo-seo")
    assert audit.returncode == 1 and audit.stdout.splitlines()[-1].startswith("chain: BROKEN at version 8 (changed)")
    rows = json.loads(run("audit", "conv-demo-seo", "--json").stdout)
    assert [r["version"] for r in rows if r["verified"]] == [r["version"] for r in rows if r["version"] < 8]


def test_demo_warns_of_a_break_the_store_keeps(tmp_path: Path) -> None:
    """Found by a fresh user: on a store whose event 8 was changed by hand, `demo` printed the
    turn from the read models with no warning and exit 0 (replay warned). It warns with the
    stored verdict (the guard's) and exits 1, the turn still printed."""
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"))
    assert run("demo").returncode == 0
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        conn.execute(
            "UPDATE stored_events SET state = replace(state, '\"uid\":42}', '\"uid\":7}') "
            "WHERE originator_id = ? AND originator_version = 8",
            (DEMO_ID,),
        )
    done = run("demo")
    assert done.returncode == 1
    assert "was ist hier passiert" in done.stdout
    assert done.stderr.splitlines()[-1].startswith(
        "warning: the hash chain of conversation conv-demo-seo does not verify, broken at version 8 (changed): "
    )
    assert done.stderr.splitlines()[-1].endswith(
        "; the turn was read from the read models, which may not match its log (chatrecord verify names the break)"
    )


def test_kept_heads_find_the_newest_events_cut_off(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"))
    run("ingest", DEMO)
    (tmp_path / "heads.txt").write_text(run("verify", "--heads").stdout)
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        for table in ("stored_events", "chatrecord_chain"):
            conn.execute(f"DELETE FROM {table} WHERE originator_id = ? AND originator_version = 20", (DEMO_ID,))
    done = run("verify", "--against", "heads.txt")
    head = (tmp_path / "heads.txt").read_text().split()[2]
    assert (done.returncode, done.stdout.splitlines()[0]) == (
        1,
        f"conv-demo-seo: broken at version 20 (cut_off): the heads file records version 20 (hash {head}); the store ends "
        "at version 19",
    )


def test_a_heads_file_that_is_not_one_is_an_error(sqlite_run: Run, tmp_path: Path) -> None:
    sqlite_run("ingest", DEMO)
    (tmp_path / "bad.txt").write_text("conv-demo-seo 20 nothex\n")
    done = sqlite_run("verify", "--against", "bad.txt")
    assert (done.returncode, done.stderr) == (
        1,
        "error: bad.txt: line 1 is not a head; expected NAME VERSION HASH (64 hex digits) or a line of verify --json\n",
    )


@pytest.mark.parametrize(
    "text, said",
    [
        (
            '{"conversation": "conv-demo-seo"}\n',
            "line 1 is not a head; expected NAME VERSION HASH (64 hex digits) or a line of verify --json",
        ),
        ("", "holds no head; expected lines NAME VERSION HASH (verify --heads) or the lines of verify --json"),
    ],
    ids=["no-hash", "empty"],
)
def test_a_heads_file_that_says_nothing_is_an_error_not_a_pass(sqlite_run: Run, tmp_path: Path, text: str, said: str) -> None:
    sqlite_run("ingest", DEMO)
    (tmp_path / "h.txt").write_text(text)
    done = sqlite_run("verify", "--against", "h.txt")
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"error: h.txt: {said}\n")


def test_verify_of_an_unknown_conversation_is_an_error(sqlite_run: Run) -> None:
    sqlite_run("ingest", DEMO)
    done = sqlite_run("verify", "conv-nope")
    assert done.returncode == 1 and done.stderr.startswith("error: no conversation 'conv-nope' in SQLite file")


def test_verify_of_an_unknown_conversation_lists_the_stored_ids_as_audit_does(store_run: Run, tmp_path: Path) -> None:
    # a fresh user: `verify nope` said "no conversation 'nope' in SQLite file …", audit added "(stored: …)"
    store_run("ingest", DEMO)
    audit = store_run("audit", "nope")

    assert audit.returncode == 1 and audit.stderr.startswith("error: no conversation 'nope' in ")
    assert audit.stderr.endswith(" (stored: conv-demo-seo)\n")
    if "SQLite" in audit.stderr:
        assert (
            audit.stderr == f"error: no conversation 'nope' in SQLite file {tmp_path / 'store.sqlite'} (stored: conv-demo-seo)\n"
        )
    for args in (["nope"], ["nope", "--rows"], ["nope", "--heads"], ["nope", "--json"]):
        done = store_run("verify", *args)
        assert (done.returncode, done.stdout, done.stderr) == (1, "", audit.stderr), args


def test_erase_leaves_the_facts_and_no_text(store_run: Run) -> None:
    store_run("ingest", DEMO)
    first = store_run("erase", "conv-demo-seo", "--yes")
    assert first.returncode == 0
    assert re.fullmatch(
        r"conv-demo-seo: texts erased at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(event version 21\); "
        r"the facts stay\n",
        first.stdout,
    )
    again = store_run("erase", "conv-demo-seo", "-y")
    assert again.stdout.startswith("conv-demo-seo: erased already at ") and again.returncode == 0
    assert again.stdout.endswith(
        "; this run did each later step again (its data key is gone, its read models are folded again, the files "
        "scrubbed), so none keeps a text\n"
    )
    outputs = [
        store_run(*args)
        for args in (
            ("replay", "--conversation", "conv-demo-seo", "--json"),
            ("audit", "conv-demo-seo"),
            ("audit", "conv-demo-seo", "--json"),
            ("verify",),
            ("demo",),
        )
    ]
    shown = "".join(o.stdout + o.stderr for o in outputs)
    assert [t for t in DEMO_TEXTS[:3] if t in shown] == []
    assert "[erased]" in outputs[0].stdout
    assert outputs[1].stdout.splitlines()[-1].startswith("chain: verified, 21 events, head ")
    rows = json.loads(outputs[2].stdout)
    assert (rows[-1]["kind"], rows[-1]["verified"]) == ("erased", True)
    assert sum(r["kind"] == "segment" for r in rows) == 8  # the facts stay
    assert outputs[3].stdout.startswith("conv-demo-seo: ok, 21 events")


def test_erase_without_a_terminal_needs_yes_and_erases_nothing(store_run: Run) -> None:
    store_run("ingest", DEMO)
    refused = store_run("erase", "conv-demo-seo")  # standard input is not a terminal here
    assert refused.returncode == 2 and refused.stdout == ""
    assert "erase cannot be undone; give --yes to erase without a terminal to confirm on" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert store_run("verify", "conv-demo-seo").stdout.startswith("conv-demo-seo: ok, 20 events")  # no erasure event
    assert "SEO optimieren" in store_run("replay", "--conversation", "conv-demo-seo", "--json").stdout


def on_a_terminal(tmp_path: Path, answer: bytes, *args: str) -> tuple[int, str]:
    """Runs the CLI with a pseudo-terminal as its standard input and output, types `answer`,
    and returns the exit status and what the terminal showed."""
    import pty

    env = cli_env(CHATRECORD_DB=str(tmp_path / "store.sqlite"))
    pid, fd = pty.fork()
    if pid == 0:  # the child: runs the CLI and never returns here
        os.chdir(tmp_path)
        os.execve(sys.executable, [sys.executable, "-m", "adapters.cli", *args], env)
    os.write(fd, answer)
    shown = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), shown.decode("utf-8").replace("\r\n", "\n")


def test_erase_on_a_terminal_asks_first_and_a_no_erases_nothing(sqlite_run: Run, tmp_path: Path) -> None:
    sqlite_run("ingest", DEMO)
    status, shown = on_a_terminal(tmp_path, b"n\n", "erase", "conv-demo-seo")
    assert status == 1
    assert shown.endswith(
        "Erase the texts of conv-demo-seo? This cannot be undone [y/N]: error: conv-demo-seo: nothing erased (not confirmed)\n"
    )
    assert sqlite_run("verify", "conv-demo-seo").stdout.startswith("conv-demo-seo: ok, 20 events")
    status, shown = on_a_terminal(tmp_path, b"y\n", "erase", "conv-demo-seo")
    assert status == 0 and "[y/N]: conv-demo-seo: texts erased at " in shown
    assert sqlite_run("verify", "conv-demo-seo").stdout.startswith("conv-demo-seo: ok, 21 events")


def test_erase_of_an_unknown_id_is_worded_as_audit_words_it(store_run: Run) -> None:
    store_run("ingest", DEMO)
    erased, audited = store_run("erase", "conv-nope", "--yes"), store_run("audit", "conv-nope")
    assert (erased.returncode, audited.returncode) == (1, 1)
    assert erased.stderr == audited.stderr
    assert re.fullmatch(r"error: no conversation 'conv-nope' in .+ \(stored: conv-demo-seo\)\n", erased.stderr)


def test_a_text_for_an_erased_conversation_is_refused_as_other_refusals_are(sqlite_run: Run, tmp_path: Path) -> None:
    at = "2026-11-02T10:00:00Z"
    (tmp_path / "start.jsonl").write_text(
        json.dumps({"type": "conversation_started", "conversation": "priv", "at": at, "kind": "chat", "owner": 7}) + "\n"
    )
    sqlite_run("ingest", "start.jsonl")
    sqlite_run("erase", "priv", "--yes")
    late = json.dumps({"type": "user_message", "conversation": "priv", "at": at, "message": 1, "text": "x", "page": 0})
    done = subprocess.run(
        [sys.executable, "-m", "adapters.cli", "ingest", "-"],
        cwd=tmp_path,
        input=late + "\n",
        env=cli_env(CHATRECORD_DB=str(tmp_path / "store.sqlite")),
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (
        1,
        "error: stdin: line 1, text: conversation 'priv' was erased; no text can be stored for it\n",
    )
    assert done.stdout == "stdin: 0 events appended, 0 lines already recorded; stopped at line 1\n"


def test_a_bad_master_key_is_one_line(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"), CHATRECORD_MASTER_KEY="too-short")
    done = run("ingest", DEMO)
    assert (done.returncode, done.stderr) == (
        1,
        "error: CHATRECORD_MASTER_KEY must be base64 of 32 bytes (openssl rand -base64 32), not a value of 9 characters\n",
    )


def test_a_master_key_of_31_bytes_says_how_many_bytes_it_decodes_to(tmp_path: Path) -> None:
    """Found by a fresh user: base64 of 31 bytes is 44 characters, as a valid key is, so "not a
    value of 44 characters" told them nothing."""
    short = base64.b64encode(bytes(range(31))).decode()
    assert len(short) == 44
    done = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"), CHATRECORD_MASTER_KEY=short)("ingest", DEMO)
    assert (done.returncode, done.stderr) == (
        1,
        "error: CHATRECORD_MASTER_KEY must be base64 of 32 bytes (openssl rand -base64 32), not base64 of 31 bytes\n",
    )


LATER = {
    "type": "user_message",
    "conversation": "conv-demo-seo",
    "at": "2026-11-03T10:00:00Z",
    "message": 4,
    "text": "Und jetzt?",
    "page": 0,
}


def test_an_append_to_a_conversation_stored_before_the_chain_waits_for_verify_upgrade(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"))
    run("ingest", DEMO)
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        conn.execute("DELETE FROM chatrecord_chain WHERE originator_id = ?", (DEMO_ID,))
        conn.execute("DELETE FROM chatrecord_chain_broken")  # as an earlier version left it: no break the guard stored
    (tmp_path / "later.jsonl").write_text(json.dumps(LATER) + "\n")

    refused = run("ingest", "later.jsonl")
    upgraded = run("verify", "--upgrade")
    again = run("ingest", "later.jsonl")

    assert (refused.returncode, refused.stderr) == (
        1,
        (
            'error: conversation "conv-demo-seo" was stored before the hash chain: nothing was appended; run: chatrecord '
            "verify --upgrade (it chains the stored events, and logs it), then send the lines again\n"
        ),
    )
    assert (upgraded.returncode, upgraded.stdout.splitlines()[-1]) == (0, "1 conversation verified: 1 ok, 0 broken")
    assert upgraded.stderr == (
        "chatrecord: chained 20 events of conversation conv-demo-seo "
        "(5d91b7e3-ea14-590f-bbd7-a5f872bc7e3d), stored before the chain (verify --upgrade)\n"
    )
    assert again.returncode == 0 and run("verify").stdout.splitlines()[0] == "conv-demo-seo: ok, 21 events"


def test_verify_rows_names_a_rewritten_row_and_exits_1(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"))
    run("ingest", DEMO)
    assert run("verify", "--rows").stdout.splitlines()[-1] == "rows of 1 conversation held against its log: 1 ok, 0 differ"
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        conn.execute('UPDATE views_g1_entries SET body = replace(body, \'"name":"get_page"\', \'"name":"x"\')')

    done = run("verify", "--rows")

    assert (done.returncode, done.stdout.splitlines()) == (
        1,
        [
            "conv-demo-seo: ok, 20 events",
            "conv-demo-seo: rows differ from the fold of its log at version 20 (run record); run: chatrecord rebuild --rules 2026-11-02",
            "1 conversation verified: 1 ok, 0 broken",
            "rows of 1 conversation held against its log: 0 ok, 1 differ",
        ],
    )


def test_verify_rows_advises_a_rebuild_under_the_rule_set_the_store_is_pinned_to(tmp_path: Path) -> None:
    # A bare `chatrecord rebuild`, as it advised, switches the store to the newest rule set.
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"))
    run("ingest", DEMO)
    assert run("rebuild", "--rules", "2026-11-01").returncode == 0  # generation 2, under 2026-11-01
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        conn.execute('UPDATE views_g2_entries SET body = replace(body, \'"name":"get_page"\', \'"name":"x"\')')

    done = run("verify", "--rows")

    assert done.returncode == 1
    assert done.stdout.splitlines()[1] == (
        "conv-demo-seo: rows differ from the fold of its log at version 20 (run record); "
        "run: chatrecord rebuild --rules 2026-11-01"
    )

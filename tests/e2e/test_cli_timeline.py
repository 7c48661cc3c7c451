"""`chatrecord timeline`: one self-contained HTML file, on each backend."""

from __future__ import annotations

import json
import re
import sqlite3
from html import unescape
from pathlib import Path

from tests.e2e.conftest import DEMO, Run, runner
from tests.e2e.test_cli_chain import DEMO_ID


def test_timeline_writes_one_self_contained_page(store_run: Run, tmp_path: Path) -> None:
    assert store_run("ingest", DEMO).returncode == 0

    done = store_run("timeline", "conv-demo-seo", "-o", tmp_path / "page.html")

    html = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr == f"{tmp_path / 'page.html'}: timeline of conv-demo-seo, {len(html.encode()):,} bytes\n"
    assert (
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:;"
        in unescape(html)
    )
    assert "<script" not in html and 'src="http' not in html and 'href="http' not in html
    assert 'id="chain-state">✔ Chain verified: 20 events' in html
    assert re.search(r"every hash, from the first event to event 20, was recomputed when this file was written \(\d{4}-", html)
    assert html.count('class="input card static') == 6  # turns of messages 1 and 3, under each of the three rule sets
    assert 'section class="input card static latest" id="turn-3-2026-11-02"' in html


def test_timeline_of_an_unknown_conversation_is_an_error(store_run: Run, tmp_path: Path) -> None:
    assert store_run("ingest", DEMO).returncode == 0

    done = store_run("timeline", "conv-nope", "-o", tmp_path / "page.html")

    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("error: no conversation 'conv-nope' in ")
    assert not (tmp_path / "page.html").exists()


def test_timeline_holds_the_model_input_of_the_newest_turns_it_is_asked_for(sqlite_run: Run, tmp_path: Path) -> None:
    assert sqlite_run("ingest", DEMO).returncode == 0

    done = sqlite_run("timeline", "conv-demo-seo", "-o", tmp_path / "page.html", "--inputs", "1")

    html = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert done.returncode == 0
    assert re.findall(r'id="(turn-\d+-[\w-]+)"', html) == ["turn-3-2026-11-02", "turn-3-transcript-only", "turn-3-2026-11-01"]
    assert "model input: <code>replay --at 1</code>" in html


def test_timeline_shows_where_the_chain_breaks_and_marks_the_rows_from_there(tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "s.sqlite"))
    assert run("ingest", DEMO).returncode == 0
    with sqlite3.connect(tmp_path / "s.sqlite") as conn:
        conn.execute(
            "UPDATE stored_events SET state = replace(state, '\"uid\":42}', '\"uid\":7}') "
            "WHERE originator_id = ? AND originator_version = 8",
            (DEMO_ID,),
        )

    done = run("timeline", "conv-demo-seo", "-o", tmp_path / "page.html")

    html = (tmp_path / "page.html").read_text(encoding="utf-8")
    # written all the same, and exit 1 with a warning, as export and audit do (it exited 0)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"{tmp_path / 'page.html'}: timeline of conv-demo-seo, {len(html.encode()):,} bytes\n"
        "warning: the hash chain of conversation conv-demo-seo does not verify, broken at version 8 (changed): "
        "the event's stored bytes were changed after it was appended; the page shows the events as the store "
        "holds them now (chatrecord verify names the break)\n"
    )
    assert 'id="chain-state">✘ Chain broken at event 8 (changed): the event&#39;s stored bytes were changed' in html
    marked = sorted({int(v) for v in re.findall(r'class="row [a-z_]+(?: is-cut)? is-unverified" data-version="(\d+)"', html)})
    assert marked == list(range(8, 20))  # event 20 is user message 3, the newest turn's heading
    rows = json.loads(run("audit", "conv-demo-seo", "--json").stdout)
    assert (
        html.count("untrusted: the chain breaks at event 8") == sum(1 for r in rows if r["version"] >= 8) == 19
    )  # 18 rows, and the heading of user message 3
    assert re.search(r"\bverified\b", html) is None


def test_timeline_writes_pages_of_twenty_turns_linked_and_the_latest_input_folded(store_run: Run, tmp_path: Path) -> None:
    """Issue 39, item 2: the file costs what it shows. A conversation of 46 turns: --pages 2
    writes the newest 20 turns and the 20 before them, each file linking to the other, the
    last naming the command for more; the latest turn's input whole, its earlier messages
    behind a <details>, every other input its last messages only."""
    from tests.application.test_replay_at import EDITED, edited_and_retried

    (tmp_path / "long.jsonl").write_text("\n".join(edited_and_retried(later=40)) + "\n", encoding="utf-8")
    assert store_run("ingest", tmp_path / "long.jsonl").returncode == 0

    done = store_run("timeline", EDITED, "-o", tmp_path / "page.html", "--pages", "2", "--inputs", "3")

    first, second = ((tmp_path / name).read_text(encoding="utf-8") for name in ("page.html", "page-2.html"))
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"{tmp_path / 'page.html'}: timeline of {EDITED}, {len(first.encode()):,} bytes",
        f"{tmp_path / 'page-2.html'}: timeline of {EDITED}, page 2, {len(second.encode()):,} bytes",
    ]  # no progress: standard error is not a terminal
    assert first.count('<article class="turn"') == second.count('<article class="turn"') == 20
    assert '<a class="more" href="page-2.html">Older turns →</a>' in first and "Newer turns" not in first
    assert '<a href="page.html">← Newer turns</a>' in second
    assert f"Older turns: <code>chatrecord timeline {EDITED} -o page.html --pages 3</code>" in second
    assert first.count('<details class="earlier"><summary>') == 1  # the latest turn's, under the live rule set
    assert first.count("earlier messages not in this file") == 8  # the 3 newest turns x 3 rule sets, but that one
    assert 'class="input card' not in second

"""`chatrecord traces show` on each backend: OTLP/JSON to a file or stdout, the same bytes
twice; an unknown conversation is one line `error: …`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.conftest import DEMO, Run


def test_traces_show_writes_the_demo_as_otlp_json(store_run: Run, tmp_path: Path) -> None:
    assert store_run("ingest", DEMO).returncode == 0
    out = tmp_path / "trace.json"

    written = store_run("traces", "show", "conv-demo-seo", "-o", out)
    printed = store_run("traces", "show", "conv-demo-seo")

    assert (written.returncode, written.stdout, printed.returncode) == (0, "", 0)
    assert written.stderr == f"{out}: trace of conv-demo-seo as OTLP/JSON, {out.stat().st_size:,} bytes\n"
    assert out.read_text(encoding="utf-8") == printed.stdout
    spans = json.loads(printed.stdout)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert [s["name"].startswith("invoke_agent nr-llm (") for s in spans].count(True) == 8 and len(spans) == 43
    assert [s["name"] for s in spans if "parentSpanId" not in s] == ["turn 1 (completed)", "turn 3 (no_answer)"]
    assert {s["traceId"] for s in spans} == {"ab017908985970fae12f269351fe58e5", "23e1ce8a780e54d4e773a37d8e59d636"}


def test_export_format_otlp_writes_what_traces_show_writes(store_run: Run) -> None:
    assert store_run("ingest", DEMO).returncode == 0

    exported = store_run("export", "conv-demo-seo", "--format", "otlp")
    shown = store_run("traces", "show", "conv-demo-seo")
    lines = store_run("export", "conv-demo-seo")

    assert (exported.returncode, exported.stderr) == (0, "")
    assert exported.stdout == shown.stdout
    assert len(json.loads(exported.stdout)["resourceSpans"][0]["scopeSpans"][0]["spans"]) == 43
    assert json.loads(lines.stdout.splitlines()[0])["type"] == "conversation_started"  # jsonl stays the default


def test_traces_of_an_unknown_conversation_is_one_line_error(store_run: Run) -> None:
    assert store_run("ingest", DEMO).returncode == 0

    done = store_run("traces", "show", "conv-nope")

    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: no conversation 'conv-nope'") and len(done.stderr.splitlines()) == 1


def test_an_endpoint_that_is_no_url_is_refused_up_front_in_one_line(store_run: Run) -> None:
    """Found by a fresh user: `--endpoint 'not a url'` failed deep in the exporter."""
    store_run("ingest", DEMO)
    done = store_run("traces", "push", "conv-demo-seo", "--endpoint", "not a url")
    assert (done.returncode, done.stderr) == (
        1,
        "error: --endpoint 'not a url' is not an http(s) URL; give one such as http://127.0.0.1:6006 (nothing was sent)\n",
    )

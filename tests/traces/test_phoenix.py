"""`chatrecord traces push` against a real OTLP receiver: Arize Phoenix, started on free
loopback ports in a temp dir, read back through Phoenix's own client.

By hand only (marker `phoenix`, deselected by default): Phoenix takes about 2.5 min to install
and 40 s to start on the CI machine. Run it with
    pip install -e '.[phoenix]' && python3 -m pytest tests/traces/test_phoenix.py -m phoenix -n 0
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import DEMO, runner
from tests.traces.lines import PLANTED, PLANTED_CONVERSATION, planted_lines

pytestmark = pytest.mark.phoenix


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Yields the base URL of a Phoenix server of this module's own; stops it afterwards."""
    if shutil.which("phoenix") is None:
        pytest.fail("Phoenix is not installed: pip install -e '.[phoenix]'", pytrace=False)
    work = tmp_path_factory.mktemp("phoenix")
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (work / "phoenix.log").open("w")
    server = subprocess.Popen(["phoenix", "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=1) as response:
                    if response.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
            assert server.poll() is None, (work / "phoenix.log").read_text()
        else:
            pytest.fail("Phoenix did not answer within 120 s", pytrace=False)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def spans_in(url: str, expected: int) -> list[dict]:
    """Returns the spans Phoenix holds, once it holds `expected` (it ingests in the background)."""
    from phoenix.client import Client

    client = Client(base_url=url)
    spans: list = []
    for _ in range(60):
        spans = list(client.spans.get_spans(project_identifier="default", limit=1000))
        if len(spans) >= expected:
            break
        time.sleep(0.5)
    return spans


def test_phoenix_receives_the_demo_and_the_same_ids_after_a_second_push(phoenix: str, tmp_path: Path) -> None:
    run = runner(tmp_path, CHATRECORD_DB=str(tmp_path / "store.sqlite"))
    planted = tmp_path / "planted.jsonl"
    planted.write_text("\n".join(planted_lines()) + "\n", encoding="utf-8")
    assert run("ingest", DEMO).returncode == 0 and run("ingest", planted).returncode == 0

    pushed = run("traces", "push", "conv-demo-seo", PLANTED_CONVERSATION, "--endpoint", phoenix)
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout.splitlines() == [
        f"conv-demo-seo: 24 spans sent to {phoenix}",
        f"{PLANTED_CONVERSATION}: 25 spans sent to {phoenix}",
    ]
    first = spans_in(phoenix, 49)
    again = run("traces", "push", "conv-demo-seo", PLANTED_CONVERSATION, "--endpoint", phoenix)
    assert again.returncode == 0, again.stderr
    time.sleep(2)  # what a duplicate would need to land; the count below must not grow
    second = spans_in(phoenix, 49)

    ids = sorted((s["context"]["trace_id"], s["context"]["span_id"]) for s in first)
    assert len(ids) == 49 and sorted((s["context"]["trace_id"], s["context"]["span_id"]) for s in second) == ids
    demo = [s for s in second if s["attributes"]["gen_ai.conversation.id"] == "conv-demo-seo"]
    agents = [s for s in demo if s["attributes"]["gen_ai.operation.name"] == "invoke_agent"]
    assert len(agents) == 8 and {s["context"]["trace_id"] for s in demo} == {agents[0]["context"]["trace_id"]}
    children = [s for s in demo if s["parent_id"] in {a["context"]["span_id"] for a in agents}]
    assert Counter(s["attributes"]["gen_ai.tool.name"] for s in children) == Counter(
        {"chat_set_progress": 8, "update_page_metadata": 5, "get_page": 1, "ask_choice": 1, "set_page_social_image": 1}
    )
    marked = sorted(
        (s["attributes"]["gen_ai.tool.name"], s["attributes"]["chatrecord.tool.reading"], s["status_code"])
        for s in second
        if s["attributes"]["gen_ai.conversation.id"] == PLANTED_CONVERSATION
        and s["attributes"].get("chatrecord.tool.reading") not in (None, "ran")
    )
    assert marked == [("get_page", "failed", "ERROR"), ("update_page_metadata", "held", "UNSET")]
    assert PLANTED not in repr(second)

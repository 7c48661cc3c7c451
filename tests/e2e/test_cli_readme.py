"""The README's examples are real (issue 35, item 10): its `$ chatrecord …` blocks of the master
key, `list` and a bug report's round trip, run in the README's order on a store of its own files
(tests/data, the demo and conv-behalten, erased as the README's Erase section erases it),
print what the README shows; and its boxes are 80 columns wide, as it says its outputs are."""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import DATA, ROOT, cli_env, runner

README = (ROOT / "README.md").read_text(encoding="utf-8")

PROMPT = re.compile(r"^(?:server|laptop)?\$ (.*)$")


def code_blocks() -> list[str]:
    """Returns the README's fenced code blocks, in its order."""
    return README.split("```")[1::2]


def block_starting(command: str) -> list[tuple[str, str]]:
    """Returns the commands of the README's block whose first line is `$ command` (or a
    `server$` one), each with the output the README shows for it."""
    (block,) = [b for b in code_blocks() if re.search(rf"^\n?(?:server|laptop)?\$ {re.escape(command)}\n", b)]
    pairs: list[tuple[str, list[str]]] = []
    for line in block.strip("\n").split("\n"):
        prompt = PROMPT.match(line)
        if prompt:
            pairs.append((prompt.group(1), []))
        else:
            pairs[-1][1].append(line)
    return [(shell, "\n".join(shown)) for shell, shown in pairs]


def test_the_key_list_and_round_trip_examples_print_what_the_readme_shows(tmp_path: Path) -> None:
    (tmp_path / "tests" / "data").mkdir(parents=True)
    for data in DATA.glob("*.jsonl"):
        shutil.copy(data, tmp_path / "tests" / "data")
    for name in ("master.key", "new.key"):
        (tmp_path / name).write_text(base64.b64encode(name.encode().ljust(32, b"-")).decode() + "\n")
    run = runner(tmp_path)  # ./chatrecord.sqlite, as the README's outputs name it
    assert run("ingest", "tests/data/demo_seo_tour.jsonl", "tests/data/behalten_tour.jsonl").returncode == 0
    assert run("erase", "conv-behalten", "--yes").returncode == 0  # README, "Erase", before the keys

    firsts = (
        "chatrecord keys status",
        "CHATRECORD_MASTER_KEY=$(cat master.key) chatrecord keys wrap",
        "chatrecord list",
        "chatrecord export conv-demo-seo --upto 1 -o bug.jsonl",
    )
    blocks = [block_starting(first) for first in firsts]
    printed = []
    for block in blocks:
        for shell, _ in block:
            done = subprocess.run(
                ["bash", "-c", f'chatrecord() {{ "$PYTHON" -m adapters.cli "$@"; }}\n{shell} 2>&1'],
                cwd=tmp_path,
                env={**cli_env(), "PYTHON": sys.executable},
                capture_output=True,
                text=True,
                encoding="utf-8",
                timeout=120,
            )
            printed.append((shell, done.stdout.rstrip("\n")))  # a replay ends with a blank line

    # the keys counted 2 unwrapped, 0 erased; the list showed chat17:…, which no file holds
    assert printed == [pair for block in blocks for pair in block]


def test_the_readmes_boxes_are_80_columns_wide() -> None:
    # a replay of the round trip was 100 columns wide
    wide = [line for block in code_blocks() for line in block.split("\n") if line.startswith(("╭", "│", "╰")) and len(line) != 80]
    assert wide == []
    assert "80 columns wide" in README

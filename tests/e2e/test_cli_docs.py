"""The docs are tested: every command has help text ending with an example and is shown in
the README with a real `$ chatrecord …` run; the README's quick start makes a virtual environment
(PEP 668) and names `python3`, never `python`."""

from __future__ import annotations

import typer.core
import typer.main

from adapters.cli import app
from tests.e2e.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_command_has_help_ending_with_an_example_and_appears_in_the_readme():
    commands = dict(typer.main.get_command(app).commands)

    assert sorted(commands) == ["audit", "demo", "erase", "ingest", "init", "keys", "rebuild", "replay", "serve",
                                "traces", "verify"]
    keys = commands["keys"]
    assert isinstance(keys, typer.core.TyperGroup)
    assert sorted(keys.commands) == ["rotate", "status", "unwrap", "wrap"]
    for name, command in keys.commands.items():
        assert command.help and "Example" in command.help, name
        assert command.help.rstrip().splitlines()[-1].strip().startswith(f"chatrecord keys {name}"), name
        assert f"chatrecord keys {name}" in README, name
    traces = commands.pop("traces")  # a group: its subcommands are the commands
    commands.update({f"traces {sub}": command for sub, command in traces.commands.items()})
    for name, command in commands.items():
        assert command.help and "Example:" in command.help, name
        assert command.help.rstrip().splitlines()[-1].strip().startswith(f"chatrecord {name}"), name
        assert f"\n$ chatrecord {name}" in README, name


def test_the_quick_start_is_install_and_demo_then_the_test_command():
    quick_start = README.split("## Quick start", 1)[1].split("##", 1)[0]

    assert (
        'python3 -m venv .venv && . .venv/bin/activate\npip install . && chatrecord demo\n'
        'pip install -e ".[test]" && python3 -m pytest\n'
    ) in quick_start
    assert "python -m" not in README.replace("python3 -m", "")

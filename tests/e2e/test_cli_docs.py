"""The docs are tested: every command has help text ending with an example and is shown in
the README with a real `$ chatrecord …` run; the README's quick start makes a virtual environment
(PEP 668) and names `python3`, never `python`."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import typer.core
import typer.main

from adapters.cli import app
from tests.e2e.conftest import ROOT, cli_env, runner

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_command_has_help_ending_with_an_example_and_appears_in_the_readme():
    commands = dict(typer.main.get_command(app).commands)

    assert sorted(commands) == [
        "audit",
        "demo",
        "erase",
        "export",
        "ingest",
        "init",
        "keys",
        "list",
        "rebuild",
        "replay",
        "reproduce",
        "serve",
        "timeline",
        "traces",
        "usage",
        "verify",
    ]
    keys = commands["keys"]
    assert isinstance(keys, typer.core.TyperGroup)
    assert sorted(keys.commands) == ["rotate", "status", "unwrap", "wrap"]
    for name, command in keys.commands.items():
        assert command.epilog and command.epilog.startswith("Example"), name  # printed after the options
        assert command.epilog.rstrip().splitlines()[-1].strip().startswith(f"chatrecord keys {name}"), name
        assert command.help and "Example" not in command.help, name
        assert f"chatrecord keys {name}" in README, name
    traces = commands.pop("traces")  # a group: its subcommands are the commands
    commands.update({f"traces {sub}": command for sub, command in traces.commands.items()})
    for name, command in commands.items():
        assert command.epilog and command.epilog.startswith("Example:"), name  # printed after the options
        assert command.epilog.rstrip().splitlines()[-1].strip().startswith(f"chatrecord {name}"), name
        assert command.help and "Example:" not in command.help, name
        assert f"\n$ chatrecord {name}" in README, name


def test_each_help_ends_with_its_example_and_shows_readable_types(tmp_path: Path) -> None:
    run = runner(tmp_path)
    commands = typer.main.get_command(app).commands
    helps = {}
    for name in [*commands, *(f"{group} {sub}" for group in ("keys", "traces") for sub in commands[group].commands)]:
        shown = helps[name] = run(*name.split(), "--help").stdout
        assert shown.rstrip().splitlines()[-1].strip().startswith(f"chatrecord {name}"), name
        assert shown.index("Options") < shown.rindex("Example"), name
        assert re.findall(r"<[a-z][^>]*>", shown) == [], name  # no <bool>, <int range>, <list[Path]>, <str>
    replay, ingest, audit = (helps[name] for name in ("replay", "ingest", "audit"))
    assert re.search(r"--at +INTEGER \[x>=1\]", replay) and re.search(r"--conversation +-c +TEXT", replay)
    assert re.search(r"--deny-page +INTEGER", replay) and re.search(r"FILE +PATH", replay)
    assert re.search(r"--json +Print JSON", replay)  # a flag shows no type
    assert "FILE..." in ingest and "{CONVERSATION}" in audit
    for name in ("audit", "erase", "export", "timeline", "traces show"):  # the argument is named alike
        usage = next(line for line in helps[name].splitlines() if "Usage:" in line)
        assert usage.rstrip().endswith("[OPTIONS] {CONVERSATION}"), (name, usage)
        assert ":TEXT" not in helps[name] and "{conversation}" not in helps[name], name
    assert "FILE" not in audit  # audit takes no FILE, and its --rules does not speak of one


def test_shell_completion_is_offered_and_completes_commands(tmp_path: Path) -> None:
    shown = runner(tmp_path)("--help").stdout
    assert "--install-completion" in shown and "--show-completion" in shown
    completed = subprocess.run(
        [sys.executable, "-c", "import sys; sys.argv[0] = 'chatrecord'; from adapters.cli import main; main()"],
        cwd=tmp_path,
        env=cli_env(COMP_WORDS="chatrecord re", COMP_CWORD="1", _CHATRECORD_COMPLETE="complete_bash"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (completed.returncode, completed.stdout.split()) == (0, ["rebuild", "replay", "reproduce"])


def test_the_quick_start_is_install_and_demo_then_the_test_command():
    quick_start = README.split("## Quick start", 1)[1].split("##", 1)[0]

    assert (
        "python3 -m venv .venv && . .venv/bin/activate\npip install . && chatrecord demo\n"
        'pip install -e ".[test]" && python3 -m pytest\n'
    ) in quick_start
    assert "python -m" not in README.replace("python3 -m", "")


def test_every_http_problem_of_the_table_is_in_the_readmes_error_list() -> None:
    from adapters.http import problems

    table = re.findall(r"^\| (\d{3}) +\| ([a-z-]+) +\|", problems.__doc__ or "", re.M)
    errors = README.split("Errors are RFC 9457", 1)[1].split("\n", 1)[0]
    assert len(table) > 10
    assert [(status, name) for status, name in table if f"`{name}`" not in errors] == []
    assert [(status, name) for status, name in table if status not in errors] == []


def test_no_help_points_to_a_file_an_installed_package_does_not_have() -> None:
    # `export --help` pointed to docs/input-format.md and `replay --help` to docs/spec-map.md,
    # which a wheel does not hold (only domain, projections and adapters are packaged)
    root = typer.main.get_command(app)
    shown: dict[str, str] = {}

    def collect(name: str, command: typer.core.click.Command) -> None:
        texts = [command.help or "", command.epilog or "", *(getattr(p, "help", None) or "" for p in command.params)]
        shown[name] = " ".join(" ".join(texts).split())
        for sub, child in getattr(command, "commands", {}).items():
            collect(f"{name} {sub}".strip(), child)

    collect("", root)

    assert len(shown) > 15
    assert {name: re.findall(r"docs/[\w.-]+", text) for name, text in shown.items() if "docs/" in text} == {}
    assert "its `type` (conversation_started, user_message," in shown["export"]

"""scripts/show_timeline.py: the interim main job until the CLI lands."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "show_timeline.py"


def load_script():
    spec = importlib.util.spec_from_file_location("show_timeline", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_timeline_of_the_demo_has_one_line_per_event_and_a_rerun_adds_nothing(
    tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.delenv("CHATRECORD_DATABASE_URL", raising=False)
    monkeypatch.setenv("CHATRECORD_DB", str(tmp_path / "t.sqlite"))
    script = load_script()

    assert script.main([]) == 0
    first = capsys.readouterr().out.splitlines()
    assert first[0] == f"demo_seo_tour.jsonl: 20 new events in SQLite file {tmp_path / 't.sqlite'}"
    events = [line for line in first if line[:4].strip().isdigit()]
    assert len(events) == 20
    assert "TourEnded" in events[18] and "written=pages:42(complete)" in events[7]

    assert script.main([]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("demo_seo_tour.jsonl: 0 new events")


def test_a_bad_file_is_one_error_line(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("CHATRECORD_DB", str(tmp_path / "t.sqlite"))
    monkeypatch.delenv("CHATRECORD_DATABASE_URL", raising=False)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "nonsense", "conversation": "c", "at": "2026-10-28T09:00:00Z"}\n')

    assert load_script().main([str(bad)]) == 1
    assert capsys.readouterr().err.startswith("error: bad.jsonl: line 1, type:")

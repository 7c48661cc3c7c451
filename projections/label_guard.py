"""Disarming a forged note label: only the chat's own notes may open with `[Chat record`.

A user or an answer could write the label, or something that reads as it, to forge a note.
Rather than a list of spellings, the text is folded character by character into a comparison
form of the same length, and the label is searched there:

- compatibility normalisation (NFKD, so every NFKC equivalent: `［`, `ｃ`, `𝐂`) with accents
  dropped, then case folding;
- confusable letters folded to the Latin ones they look like (Cyrillic `С`, Greek `Τ`, …);
- invisible characters (format characters such as U+200B, U+2062, a soft hyphen, bidi
  controls; combining marks; variation selectors) skipped;
- every opening bracket-like character (Unicode categories Ps and Pi, `<`) folded to `[`;
- a closing bracket ends a possible opening; anything else that is not a letter or digit
  (`-`, `_`, `:`, spaces) is a separator.

A `[` followed by separators, `chat`, separators, `record` in the folded form is a forged
opening; its bracket is replaced by `(` in the text, so its length stays the same and the
rest is sent as written. Linear in the text: one `str.translate` and one regular expression
that cannot backtrack across two openings.
"""

from __future__ import annotations

import re
import unicodedata

_INVISIBLE = "\x00"  # stands for a skipped character in the folded form
_OTHER = "\x01"  # a character that is neither a letter of the label, a bracket nor a separator

_CONFUSABLE = {
    # Cyrillic
    "а": "a", "с": "c", "ԁ": "d", "е": "e", "һ": "h", "о": "o", "г": "r", "т": "t", "ᴛ": "t",
    "ɑ": "a", "ⅽ": "c", "ϲ": "c", "ɗ": "d", "ꭓ": "x",
    # Greek (after case folding)
    "α": "a", "ο": "o", "τ": "t", "ε": "e", "ρ": "p", "η": "h", "κ": "k",
    # Latin small capitals and others that read as the label's letters
    "ᴀ": "a", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ʜ": "h", "ᴏ": "o", "ʀ": "r",
}


class _Fold(dict[int, str]):
    """The folding table, filled on first use of each character (str.translate asks it)."""

    def __missing__(self, code: int) -> str:
        folded = self[code] = _fold(chr(code))
        return folded


def _fold(char: str) -> str:
    category = unicodedata.category(char)
    if category in ("Cf", "Mn", "Me") or char == "\u00ad":
        return _INVISIBLE
    if char == "(" or unicodedata.normalize("NFKC", char) == "(":
        return "("  # the disarmed opening is not an opening any more
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


def folded(text: str) -> str:
    """Returns the comparison form of `text`: one character for each of its characters."""
    return text.translate(_TABLE)


ASCII_OPENINGS = "<[{"
"""The ASCII characters whose folded form is an opening `[` (`_fold`): an ASCII text without
one of them holds no label's opening, whatever else it holds."""


def has_forged_label(text: str) -> bool:
    """Returns True when `text` holds something that reads as a note label's opening. An ASCII
    text without an opening bracket (`ASCII_OPENINGS`), most texts, is not folded at all."""
    if not text or (text.isascii() and not any(opening in text for opening in ASCII_OPENINGS)):
        return False
    return FORGED.search(folded(text)) is not None


def disarm(text: str) -> str:
    """Returns `text` with the bracket of every forged label opening (see the module) turned
    into `(`; the length stays the same, and nothing else changes."""
    starts = [match.start() for match in FORGED.finditer(folded(text))]
    if not starts:
        return text
    parts: list[str] = []
    previous = 0
    for start in starts:
        parts += [text[previous:start], "("]
        previous = start + 1
    parts.append(text[previous:])
    return "".join(parts)

"""Script-aware units of text: words with their marks, bigrams where no spaces are.

Two facts of Unicode break naive ``\\w+`` tokenising outside Latin scripts:

- ``\\w`` does not match combining marks, so a Devanagari, Thai or Arabic word
  with vowel signs or harakat splits into fragments (``किताबें`` into ``क``,
  ``त``, ``ब``). ``WORD`` matches letters and digits together with the marks
  (and zero-width joiners) that belong to them.
- Chinese, Japanese, Thai, Lao, Khmer and Myanmar put no spaces between words,
  so a whole clause reads as one "word" that no query shares. Their runs are cut
  into overlapping character bigrams (a one-character run is its own unigram),
  the usual indexing unit for such text: ``東京タワー`` gives ``東京 京タ タワ
  ワー``, and a query shares the bigrams of the words it shares. Korean (Hangul)
  is bigrammed too: its spaced words carry particles (``병원에서``) that bigrams
  see through.

``family`` names the script of a word so that a caller can pick a stemmer for
it. The lexical index (``store.lexicon``), the hashing embedder and the chatter
detector all read text through this module, so they agree on what a word is.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator
from itertools import pairwise

__all__ = ["MARKS", "UNSPACED", "UNSPACED_CHAR", "WORD", "bigrams", "family", "pieces", "units"]


def _mark_class() -> str:
    """A regex class body of every combining mark (categories Mn, Mc, Me) below
    U+20000, plus the zero-width non-joiner and joiner, which sit inside words in
    Persian and Indic text. Built at import (about 15 ms), so it follows the
    Unicode version of the running Python."""
    codes = [c for c in range(0x20000) if unicodedata.category(chr(c)).startswith("M")]
    codes += [0x200C, 0x200D]
    spans: list[tuple[int, int]] = []
    for code in sorted(codes):
        if spans and code == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], code)
        else:
            spans.append((code, code))
    return "".join(f"\\U{a:08x}-\\U{b:08x}" if a != b else f"\\U{a:08x}" for a, b in spans)


MARKS = _mark_class()

#: Scripts written without spaces between words (Han with its marks and
#: radicals, kana, Hangul, Thai, Lao, Myanmar, Khmer) as a regex class body.
UNSPACED = (
    "\u0e00-\u0eff\u1000-\u109f\u1100-\u11ff\u1780-\u17ff\u19e0-\u19ff\u2e80-\u2fdf"
    "\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c\u3040-\u30ff\u3130-\u318f"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\ua9e0-\ua9ff\uaa60-\uaa7f"
    "\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)

UNSPACED_CHAR = re.compile(f"[{UNSPACED}]")

#: A word: letters and digits, each with the marks that follow it (no underscore; a
#: mark with no letter before it, such as an emoji's variation selector, is not one).
WORD = re.compile(f"(?:[^\\W_][{MARKS}]*)+")
_PIECE = re.compile(
    f"(?P<run>(?:[{UNSPACED}][{MARKS}]*)+)|(?P<word>(?:(?![{UNSPACED}])[^\\W_][{MARKS}]*)+)"
)
_CLUSTER = re.compile(f"[^{MARKS}][{MARKS}]*")

# (first code point, family) in ascending order; a code point belongs to the last
# start at or below it. Latin covers ASCII, the Latin blocks and fullwidth forms.
_FAMILIES = (
    (0x0000, "latin"), (0x0370, "greek"), (0x0400, "cyrillic"), (0x0530, "armenian"),
    (0x0590, "hebrew"), (0x0600, "arabic"), (0x0700, "other"), (0x0750, "arabic"),
    (0x0780, "other"), (0x0870, "arabic"), (0x0900, "devanagari"), (0x0980, "other"),
    (0x0B80, "tamil"), (0x0C00, "other"), (0x1C80, "cyrillic"), (0x1C90, "other"),
    (0x1D00, "latin"), (0x1DC0, "other"), (0x1E00, "latin"), (0x1F00, "greek"),
    (0x2000, "other"), (0x2C60, "latin"), (0x2C80, "other"), (0x2DE0, "cyrillic"),
    (0x2E00, "other"), (0xA640, "cyrillic"), (0xA6A0, "other"), (0xA720, "latin"),
    (0xA800, "other"), (0xA8E0, "devanagari"), (0xA900, "other"), (0xAB30, "latin"),
    (0xAB70, "other"), (0xFB00, "latin"), (0xFB13, "other"), (0xFB1D, "hebrew"),
    (0xFB50, "arabic"), (0xFE00, "other"), (0xFE70, "arabic"), (0xFF00, "latin"),
    (0xFFF0, "other"), (sys.maxunicode + 1, "other"),
)  # fmt: skip
_STARTS = [start for start, _ in _FAMILIES]


def family(word: str) -> str:
    """The script family of ``word``'s first character: ``latin``, ``greek``,
    ``cyrillic``, ``armenian``, ``hebrew``, ``arabic``, ``devanagari``, ``tamil``
    or ``other``. Digits and other ASCII read as Latin."""
    if not word:
        return "other"
    return _FAMILIES[bisect_right(_STARTS, ord(word[0])) - 1][1]


def pieces(text: str) -> Iterator[tuple[bool, str]]:
    """The words and unspaced runs of ``text`` in order, as ``(unspaced, piece)``.

    A run of an unspaced script ends a word without a space: ``iphone用`` is the
    word ``iphone`` and the run ``用``.
    """
    for match in _PIECE.finditer(text):
        run = match.group("run")
        yield (True, run) if run is not None else (False, match.group("word"))


def bigrams(run: str) -> list[str]:
    """Overlapping bigrams of a run's characters (each with its marks); a run of
    one character gives that character."""
    clusters = _CLUSTER.findall(run)
    if len(clusters) < 2:
        return clusters
    return [left + right for left, right in pairwise(clusters)]


def units(text: str) -> list[str]:
    """Words and the bigrams of unspaced runs, in order, unnormalised."""
    out: list[str] = []
    for unspaced, piece in pieces(text):
        if unspaced:
            out += bigrams(piece)
        else:
            out.append(piece)
    return out

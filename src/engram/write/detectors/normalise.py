"""Views of a text with the usual disguises taken off, for the instruction detector.

An injected "ignore previous instructions" hides behind invisible characters (soft
hyphens, joiners, tag characters, variation selectors, bidi controls), look-alike
letters from other scripts, letter-spacing ("i g n o r e", "i.g.n.o.r.e"), leetspeak
and simple encodings (base64, hex, URL-encoding, HTML entities, rot13, tag-character
ASCII). ``views`` returns the text under each of these readings; the detector asks
its patterns of every view. Views are for detection only: stored content is unchanged.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import html
import re
import unicodedata
from urllib.parse import unquote_plus

__all__ = ["clean", "decoded_segments", "despace", "fold", "unleet", "views"]

# Unicode Default_Ignorable_Code_Point and format (Cf) ranges: soft hyphen, CGJ, Arabic
# letter mark, Hangul fillers, Khmer inherent vowels, Mongolian selectors and vowel
# separator, zero-widths and bidi controls, word joiner and invisible operators,
# variation selectors, BOM, interlinear annotation, shorthand format, musical format,
# tag characters and supplementary variation selectors.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
_TAGS = re.compile("[\U000e0020-\U000e007e]+")

# Cyrillic, Greek, IPA and small-capital letters that render like Latin ones.
_CONFUSABLES = str.maketrans(
    "аеорсухіјѕԁһԛԝӏɡοαντιεκρυχμηωβϲϳɩɪʀʏᴀᴄᴅᴇᴊᴋᴍᴏᴘᴛᴜᴠᴡᴢıɑАВЕКМНОРСТХІЈЅԚԜΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdhqwlgoavtiekpuxunwbcjiiryacdejkmoptuvwziaABEKMHOPCTXIJSQWABEZHIKMNOPTYX",
)
_LEET = str.maketrans("0134578@$!|", "oieastbasil")
_LEET_WORD = re.compile(r"\b(?=\w*[a-z])(?=\w*[0-9@$!|])[\w@$!|]{3,}", re.IGNORECASE)
_SPACED = re.compile(r"(?<![^\W\d_])[^\W\d_]([ .\-_*·|/+~])(?:[^\W\d_]\1)+[^\W\d_](?![^\W\d_])")
_BASE64 = re.compile(r"(?<![\w+/=-])[A-Za-z0-9+/_-]{16,}={0,2}(?![\w+/=-])")
_HEX = re.compile(r"(?:\\x[0-9a-fA-F]{2}){6,}|(?<![0-9a-fA-F])(?:[0-9a-fA-F]{2}[ :]?){8,}")


def clean(text: str) -> str:
    """NFKC-fold and drop default-ignorable and format characters; curly quotes to ``'``."""
    folded = unicodedata.normalize("NFKC", text)
    if not folded.isascii():
        folded = _IGNORABLE.sub("", folded)
        folded = "".join(c for c in folded if unicodedata.category(c) != "Cf")
    return folded.replace("\u2019", "'").replace("\u2018", "'")


def fold(text: str) -> str:
    """Look-alike letters to Latin and accents dropped: a Latin reading of mixed scripts.

    ASCII text is its own fold (no look-alikes, nothing to decompose), so it is returned
    without the per-character pass.
    """
    if text.isascii():
        return text
    latin = text.translate(_CONFUSABLES)
    stripped = unicodedata.normalize("NFKD", latin)
    return "".join(c for c in stripped if not unicodedata.combining(c))


def despace(text: str) -> str:
    """Join letters spaced out by one repeated separator: ``i g n o r e`` to ``ignore``."""
    return _SPACED.sub(lambda m: re.sub(r"[^\w]|_", "", m.group(0)), text)


def unleet(text: str) -> str:
    """Read digits and symbols inside words as letters: ``1gn0r3`` to ``ignore``."""
    return _LEET_WORD.sub(lambda m: m.group(0).translate(_LEET), text)


def _printable(raw: bytes) -> str | None:
    """Decoded bytes as text when they read as text (mostly printable, some letters)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    shown = sum(c.isprintable() or c in "\n\t" for c in text)
    letters = sum(c.isalpha() for c in text)
    return text if text and shown >= 0.95 * len(text) and letters >= 0.5 * len(text) else None


def _from_base64(segment: str) -> str | None:
    padded = segment + "=" * (-len(segment) % 4)
    try:
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return None
    return _printable(raw)


def _from_hex(segment: str) -> str | None:
    digits = re.sub(r"\\x|[ :]", "", segment)
    if len(digits) % 2:
        digits = digits[:-1]
    try:
        return _printable(bytes.fromhex(digits))
    except ValueError:
        return None


def decoded_segments(text: str) -> list[str]:
    """Texts hidden in the text: base64 and hex runs, URL-encoding, entities, tag ASCII."""
    found = [_from_base64(m.group(0)) for m in _BASE64.finditer(text)]
    found += [_from_hex(m.group(0)) for m in _HEX.finditer(text)]
    if re.search(r"%[0-9a-fA-F]{2}", text):
        found.append(unquote_plus(text))
    if re.search(r"&#?\w+;", text):
        found.append(html.unescape(text))
    found += ["".join(chr(ord(c) - 0xE0000) for c in m.group(0)) for m in _TAGS.finditer(text)]
    return [segment for segment in found if segment]


def views(text: str) -> tuple[list[str], list[str]]:
    """Readings of ``text``: ``(plain, derived)``.

    ``plain`` holds the cleaned text, its Latin fold, its de-spaced form and any decoded
    segments (each cleaned and folded too); every pattern is asked of them. ``derived``
    holds readings that turn ordinary text into noise (rot13, leetspeak read as letters,
    the letters-only squeeze of de-spaced text); only the specific injection phrases are
    asked of them, so noise cannot trip the broad imperative patterns.
    """
    base = clean(text)
    latin = fold(base)
    spaced = despace(latin)
    plain = [base, latin]
    if spaced != latin:
        plain.append(spaced)
    for segment in decoded_segments(text):
        plain += [clean(segment), fold(clean(segment))]
    derived = [codecs.encode(latin, "rot13"), unleet(spaced)]
    if spaced != latin:
        derived.append(re.sub(r"[^a-z]", "", spaced.lower()))
    plain = list(dict.fromkeys(plain))
    return plain, [view for view in dict.fromkeys(derived) if view not in plain]

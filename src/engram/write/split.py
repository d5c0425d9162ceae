"""Cutting long content into passages of at most a number of UTF-8 bytes.

The cut prefers the largest natural boundary: a paragraph (a blank line), then
a line, then a sentence, then a word; only a single word longer than a passage
is cut between characters (never inside a UTF-8 sequence). A fenced code block
(```` ``` ```` or ``~~~``) is one paragraph however many blank lines it holds,
so it stays whole when it fits; a larger one is cut at its line boundaries.
Pieces are packed greedily, so a passage holds as many whole paragraphs as fit.

The concatenation of the raw pieces is exactly the input; each passage is then
stripped of the whitespace at its cut (stored content is always stripped), and a
piece that is only whitespace is dropped.
"""

from __future__ import annotations

import re

__all__ = ["split_text"]

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_SENTENCE_END = re.compile(r"[.!?\u3002\uff01\uff1f][\"')\]\u201d\u2019]*\s+")
_WORD_END = re.compile(r"\s+")


def split_text(text: str, limit: int) -> list[str]:
    """``text`` as stripped, non-empty passages of at most ``limit`` UTF-8 bytes each."""
    if limit < 4:
        raise ValueError("a passage must hold at least one character (4 bytes)")
    raw = _pack(_blocks(text), limit, 0)
    return [piece.strip() for piece in raw if piece.strip()]


def _size(text: str) -> int:
    return len(text.encode())


def _pack(segments: list[str], limit: int, level: int) -> list[str]:
    """Join consecutive segments while they fit (whitespace trailing a passage does
    not count: it is stripped); a segment too large alone is cut at the next finer
    boundary and its last piece stays open for what follows."""
    out: list[str] = []
    current, used = "", 0
    for segment in segments:
        size, kept = _size(segment), _size(segment.rstrip())  # a cut strips what trails
        if used + kept <= limit:
            current, used = current + segment, used + size
            continue
        if current:
            out.append(current)
        if kept <= limit:
            current, used = segment, size
            continue
        pieces = _pack(_finer(segment, level + 1, limit), limit, level + 1)
        out.extend(pieces[:-1])
        current = pieces[-1]
        used = _size(current)
    if current:
        out.append(current)
    return out


def _finer(text: str, level: int, limit: int) -> list[str]:
    """``text`` cut at the boundaries of ``level``: 1 lines, 2 sentences, 3 words,
    then pieces of at most ``limit`` bytes. The pieces concatenate to ``text``."""
    if level == 1:
        return text.splitlines(keepends=True)
    if level == 2:
        return _cut_after(text, _SENTENCE_END)
    if level == 3:
        return _cut_after(text, _WORD_END)
    return _bytes_cut(text, limit)


def _cut_after(text: str, pattern: re.Pattern[str]) -> list[str]:
    ends = [match.end() for match in pattern.finditer(text)]
    starts = [0, *ends]
    pieces = [text[a:b] for a, b in zip(starts, [*ends, len(text)], strict=True)]
    return [piece for piece in pieces if piece]


def _bytes_cut(text: str, limit: int) -> list[str]:
    """Pieces of at most ``limit`` bytes, cut between characters."""
    data, start, pieces = text.encode(), 0, []
    while start < len(data):
        piece = data[start : start + limit].decode(errors="ignore")  # drops a cut character
        pieces.append(piece)
        start += len(piece.encode())
    return pieces


def _blocks(text: str) -> list[str]:
    """Paragraphs and fenced code blocks, each with the blank lines after it."""
    blocks: list[str] = []
    current, fence, blank = "", "", False
    for line in text.splitlines(keepends=True):
        if fence:
            current += line
            if _closes(line, fence):
                fence, blank = "", True  # what follows the block starts a new one
            continue
        opening = _FENCE.match(line)
        starts_new = (blank and line.strip()) or opening is not None
        if starts_new and current.strip():
            blocks.append(current)
            current = ""
        current += line
        blank = not line.strip()
        if opening is not None:
            fence = opening.group(1)
    if current:
        blocks.append(current)
    return blocks


def _closes(line: str, fence: str) -> bool:
    """A fence closes on a line of at least as many of the same fence characters."""
    stripped = line.strip()
    return len(stripped) >= len(fence) and set(stripped) == {fence[0]}

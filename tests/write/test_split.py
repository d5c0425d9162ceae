"""Cutting long content into passages: sizes, boundaries, fenced code, UTF-8."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.write.split import split_text


def _squashed(text: str) -> str:
    return re.sub(r"\s+", "", text)


def test_short_text_is_one_passage() -> None:
    assert split_text("  One paragraph.  ", 100) == ["One paragraph."]


def test_paragraphs_are_packed_and_cut_between_paragraphs() -> None:
    paragraphs = [f"Paragraph {i} " + "word " * 10 for i in range(6)]
    passages = split_text("\n\n".join(paragraphs), 130)
    assert all(len(p.encode()) <= 130 for p in passages)
    assert passages == ["\n\n".join(paragraphs[i : i + 2]).strip() for i in range(0, 6, 2)]


def test_a_long_paragraph_is_cut_at_sentences_then_words() -> None:
    text = "First sentence is here. Second one follows it. " + "x" * 30 + " tail"
    passages = split_text(text, 30)
    assert passages[:2] == ["First sentence is here.", "Second one follows it."]
    assert all(len(p.encode()) <= 30 for p in passages)
    assert _squashed("".join(passages)) == _squashed(text)


def test_a_fenced_block_that_fits_stays_whole() -> None:
    block = "```python\ndef f():\n\n    return 1\n```"
    text = "Intro line.\n\n" + "pad " * 20 + "\n\n" + block + "\n\nAfter."
    passages = split_text(text, len(block) + 10)
    assert block in passages or any(block in p for p in passages)


def test_a_fenced_block_larger_than_a_passage_is_cut_at_lines() -> None:
    lines = [f"    value_{i} = compute({i})" for i in range(40)]
    text = "```\n" + "\n".join(lines) + "\n```"
    passages = split_text(text, 200)
    body = [line.strip() for p in passages for line in p.splitlines()]
    assert body == ["```", *(line.strip() for line in lines), "```"]


def test_a_word_longer_than_a_passage_is_cut_between_characters() -> None:
    text = "é" * 10 + "🙂" * 5  # 2-byte and 4-byte characters
    passages = split_text(text, 7)
    assert all(len(p.encode()) <= 7 for p in passages)
    assert "".join(passages) == text


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=600), st.integers(min_value=4, max_value=64))
def test_any_text_is_cut_within_the_limit_and_loses_only_whitespace(text: str, limit: int) -> None:
    passages = split_text(text, limit)
    assert all(0 < len(p.encode()) <= limit and p == p.strip() for p in passages)
    assert _squashed("".join(passages)) == _squashed(text)


def test_a_limit_below_one_character_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one character"):
        split_text("abc", 3)

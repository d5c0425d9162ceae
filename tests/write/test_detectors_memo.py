"""``detectors.answering_once``: inside the block a detector scans each text once.

A share asks the detectors of each content twice (its redaction, then the write
policy on the copy); the memo answers the repeat. Outside the block every call
scans, the memo is gone when the block ends, and a caller cannot change what a
later call returns by changing the list it got.
"""

from __future__ import annotations

from engram.write import detectors
from engram.write.detectors.base import Finding
from engram.write.detectors.memo import answering_once, once

CARD = "Pay with card 4111 1111 1111 1111 today."


def test_inside_the_block_each_text_is_scanned_once() -> None:
    scanned: list[str] = []

    def detector(text: str) -> list[Finding]:
        scanned.append(text)
        return [Finding("secret", "card_number", 0, len(text))]

    counted = once("counted", detector)
    counted("a")
    counted("a")
    assert scanned == ["a", "a"]  # no block: every call scans
    with answering_once():
        first = counted("a")
        first.clear()  # the caller's list, not the memo's
        assert counted("a") == [Finding("secret", "card_number", 0, 1)]
        counted("b")
    assert scanned == ["a", "a", "a", "b"]
    counted("a")
    assert scanned == ["a", "a", "a", "b", "a"]  # the memo ended with the block


def test_the_exported_detectors_answer_as_the_plain_ones() -> None:
    plain = detectors.find_secrets(CARD), detectors.find_personal_data(CARD)
    with answering_once():
        assert (detectors.find_secrets(CARD), detectors.find_personal_data(CARD)) == plain
        assert detectors.find_secrets(CARD) == plain[0]
    assert [f.kind for f in plain[0]] == ["card_number"]

"""One answer per text within a block: detectors are pure, so a repeat is free.

A share redacts each original (secrets, personal data) and then runs the write
policy on the copy, which asks the same detectors of the same text when the
redaction found nothing (the common case): two scans of every content where
one gives the answer. Inside ``answering_once()`` the detectors the package
exports (``find_secrets``, ``find_personal_data``) answer each text once and
repeat that answer. The memo lives only for the block (a context variable, so
threads and tasks keep their own), so no content outlives the call that holds
it anyway, and nothing needs forgetting at erasure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from engram.write.detectors.base import Finding

__all__ = ["answering_once", "once"]

Detector = Callable[[str], list[Finding]]
_MEMO: ContextVar[dict[tuple[str, str], tuple[Finding, ...]] | None] = ContextVar(
    "engram_detector_memo", default=None
)


@contextmanager
def answering_once() -> Iterator[None]:
    """Within the block, each detector made by ``once`` scans a given text once."""
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def once(name: str, detector: Detector) -> Detector:
    """``detector``, answering from the block's memo inside ``answering_once``."""

    def answer(text: str) -> list[Finding]:
        memo = _MEMO.get()
        if memo is None:
            return detector(text)
        key = (name, text)
        found = memo.get(key)
        if found is None:
            found = memo[key] = tuple(detector(text))
        return list(found)

    answer.__doc__ = detector.__doc__
    answer.__name__ = detector.__name__
    return answer

"""Detectors for text that must not be remembered as it is.

The write policy asks four questions of every candidate memory: does it hold a secret
(``secret``), personal data including special categories (``personal``, ``special``),
instruction-like text (``instruction``, asked of untrusted sources only), or nothing but
chatter (``chatter``). Each answer is a pure function over a string: regular expressions
compiled at import, checksums (Luhn, IBAN mod-97) and value tests (``values``: entropy,
placeholders, code expressions) where a pattern alone would flag too much. Findings
carry spans, never copies of the text. Ordinary memories must pass untouched: versions,
dates, timestamps, short git SHAs, UUIDs, order numbers, code and how-tos. Inside
``answering_once()`` the two scans a share repeats answer each text once (``memo``).
"""

from __future__ import annotations

from engram.write.detectors import personal, secret
from engram.write.detectors.base import Finding, redact
from engram.write.detectors.chatter import is_transient_chatter
from engram.write.detectors.instruction import looks_like_instruction
from engram.write.detectors.memo import answering_once, once
from engram.write.detectors.special import (
    ART9_KINDS,
    SPECIAL_CATEGORY_KINDS,
    find_special_category,
)

# Pure detectors, answering each text once inside ``answering_once`` (``memo``).
find_personal_data = once("personal", personal.find_personal_data)
find_secrets = once("secrets", secret.find_secrets)

__all__ = [
    "ART9_KINDS",
    "SPECIAL_CATEGORY_KINDS",
    "Finding",
    "answering_once",
    "find_personal_data",
    "find_secrets",
    "find_special_category",
    "is_transient_chatter",
    "looks_like_instruction",
    "redact",
]

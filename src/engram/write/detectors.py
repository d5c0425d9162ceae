"""Detectors for text that must not be remembered as it is.

The write policy asks four questions of every candidate memory: does it hold a secret,
personal data, instruction-like text (asked of untrusted sources only), or nothing but
chatter. Each answer is a pure function over a string: regular expressions compiled at
import, plus checksums (Luhn, IBAN mod-97) where a pattern alone would flag too much.
Findings carry spans, never copies of the text. Ordinary memories must pass untouched:
versions, dates, times, timestamps, short git SHAs, UUIDs and order numbers.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Finding",
    "find_personal_data",
    "find_secrets",
    "is_transient_chatter",
    "looks_like_instruction",
    "redact",
]


Category = Literal["secret", "personal"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One detected span: ``text[start:end]`` is a ``kind`` of secret or personal data."""

    category: Category
    kind: str
    start: int
    end: int


_I = re.IGNORECASE
Span = tuple[int, int]
Locate = Callable[[re.Match[str]], Span | None]


# A rule: the finding's kind, its pattern, and how a match becomes a span (or is rejected).
_Rule = tuple[str, re.Pattern[str], Locate]


def _group(*names: int | str, valid: Callable[[str], bool] | None = None) -> Locate:
    """Locate the first of ``names`` (default: the whole match) that took part, if valid."""

    def locate(match: re.Match[str]) -> Span | None:
        name = next((n for n in names or (0,) if match.group(n) is not None), None)
        if name is None or not match.group(name) or (valid and not valid(match.group(name))):
            return None
        return match.span(name)

    return locate


def _rule(kind: str, pattern: str, locate: Locate | None = None, flags: int = 0) -> _Rule:
    """A rule from pattern text; by default the whole match is the finding."""
    return kind, re.compile(pattern, flags), locate or _group()


def _longest_valid_prefix(check: Callable[[str], bool], min_chars: int) -> Locate:
    """Locate the longest prefix of separated chunks whose compact form passes ``check``.

    A greedy pattern overruns a card number followed by an expiry date; trimming recovers it.
    """

    def locate(match: re.Match[str]) -> Span | None:
        chunks = list(re.finditer(r"[^ -]+", match.group(0)))
        for count in range(len(chunks), 0, -1):
            end = chunks[count - 1].end()
            compact = re.sub(r"[ -]", "", match.group(0)[:end])
            if len(compact) >= min_chars and check(compact):
                return match.start(), match.start() + end
        return None

    return locate


def _scan(rules: Sequence[_Rule], category: Category, text: str) -> list[Finding]:
    """Run rules in priority order; a span overlapping an earlier finding is dropped."""
    kept: list[Finding] = []
    for kind, pattern, locate in rules:
        for match in pattern.finditer(text):
            span = locate(match)
            if span is None or any(span[0] < k.end and k.start < span[1] for k in kept):
                continue
            kept.append(Finding(category, kind, span[0], span[1]))
    return sorted(kept, key=lambda f: (f.start, f.end))


# --- checksums and value tests ------------------------------------------------

# Visa, Mastercard, Amex, Diners, JCB, Discover, UnionPay: where issued card numbers start.
_CARD_PREFIX = re.compile(r"4|5[1-5]|2[2-7]|3[04-8]|6(?:011|2|4[4-9]|5)")
_IBAN_COUNTRIES = frozenset(
    "AD AE AL AT AZ BA BE BG BH BR BY CH CR CY CZ DE DK DO EE EG ES FI FO FR GB GE GI GL GR GT"
    " HR HU IE IL IQ IS IT JO KW KZ LB LC LI LT LU LV MC MD ME MK MR MT MU NL NO PK PL PS PT QA"
    " RO RS SA SC SE SI SK SM ST SV TL TN TR UA VA VG XK".split()
)
_NOT_A_VALUE = frozenset(
    "a an the is was not none null nil true false yes no required optional string str int redacted"
    " hidden masked unknown empty unset same different weak strong secure insecure long short wrong"
    " correct incorrect invalid valid expired changed reset stored saved kept set in on at from see"
    " for to of with and or too very also still needed".split()
)
_PLACEHOLDER = re.compile(r"^(?:[$%<{\[*]|x{3,}|\.{3}|os\.environ|env\(|getenv|process\.env)", _I)
_DATE_START = re.compile(r"^(?:\d{1,2}[./-]\d{1,2}[./-]\d{2,4}|\d{4}[./-]\d\d?[./-]\d\d?)(?!\d)")


def _luhn_ok(digits: str) -> bool:
    """The Luhn checksum every payment card number carries."""
    doubled = (int(char) * (1 + index % 2) for index, char in enumerate(reversed(digits)))
    return sum(value - 9 if value > 9 else value for value in doubled) % 10 == 0


def _is_card(digits: str) -> bool:
    """13-19 digits from a card issuer range that pass Luhn (not one repeated digit)."""
    in_range = digits.isdigit() and 13 <= len(digits) <= 19 and len(set(digits)) > 1
    return in_range and _CARD_PREFIX.match(digits) is not None and _luhn_ok(digits)


def _is_iban(compact: str) -> bool:
    """An IBAN: known country, plausible length and the ISO 13616 mod-97 check."""
    if compact[:2] not in _IBAN_COUNTRIES or not 15 <= len(compact) <= 34:
        return False
    return int("".join(str(int(char, 36)) for char in compact[4:] + compact[:4])) % 97 == 1


def _mixed(value: str) -> bool:
    """Letters and digits both: real keys and tokens have them, English words do not."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _is_password_value(value: str) -> bool:
    """A password-like value, not a placeholder, env reference or ordinary word."""
    stripped = value.strip("\"'`")
    ordinary = stripped.lower() in _NOT_A_VALUE or _PLACEHOLDER.match(stripped)
    return len(stripped) >= 3 and not ordinary


def _is_key_value(value: str) -> bool:
    """A key-like value: long enough and mixing letters and digits, or very long."""
    stripped = value.strip("\"'`")
    long_enough = (len(stripped) >= 8 and _mixed(stripped)) or len(stripped) >= 24
    return long_enough and _is_password_value(stripped) and " " not in stripped


def _is_ssn(value: str) -> bool:
    """A US SSN outside the never-issued ranges (000, 666, 9xx areas; 00 group; 0000 serial)."""
    digits = re.sub(r"\D", "", value)
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    issued = area not in {"000", "666"} and area[0] != "9" and group != "00" and serial != "0000"
    return len(digits) == 9 and issued


def _phone_digits_ok(value: str) -> bool:
    """9 to 15 digits: fewer is a short code or a date, more exceeds E.164."""
    return 9 <= sum(c.isdigit() for c in value) <= 15


def _is_national_phone(value: str) -> bool:
    """A 0-prefixed national number: one kind of separator, used, and not a date."""
    separators = set(re.findall(r"[ .-]", value))
    return len(separators) == 1 and _phone_digits_ok(value) and not _DATE_START.match(value)


def _locate_ni(match: re.Match[str]) -> Span | None:
    """A UK NI number: canonical spaced upper-case form, or any form after a keyword."""
    has_keyword = match.start() != match.start("ni")
    spaced_upper = bool(match.group("sp")) and match.group("ni").isupper()
    return match.span("ni") if has_keyword or spaced_upper else None


# --- secrets ----------------------------------------------------------------

_PASSWORD_KEY = r"(?:[a-z0-9]+[_.-])*(?:password|passwd|passphrase|passcode|pwd)"
_SECRET_KEY = (
    r"(?:[a-z0-9]+[_.-])*(?:api[_-]?key|apikey|api[_-]?secret|(?:access|auth|refresh)[_-]?token"
    r"|client[_-]?secret|secret[_-]?key|secret|token|private[_-]?key|secret[_-]?access[_-]?key)"
)
_ASSIGNED = (
    r"\s*[\"']?\s*(?::=|=>|[:=])\s*"
    r"(?:\"(?P<dq>[^\"\n]{1,200})\"|'(?P<sq>[^'\n]{1,200})'|(?P<bare>[^\s\"',;]{1,200}))"
)
_STATED = (
    r"\s+(?:is|was)\s*:?\s+(?:\"(?P<dq>[^\"\n]{1,100})\"|'(?P<sq>[^'\n]{1,100})'"
    r"|(?P<bare>[^\s\"',;]{1,100}?))(?=[.,;!?)]*(?:\s|$))"
)


def _assigned(key: str, form: str) -> re.Pattern[str]:
    """``<key> = value`` or ``<key> is value``, where key may carry a prefix (``DB_PASSWORD``)."""
    return re.compile(rf"(?<![a-z0-9_]){key}\b{form}", _I)


_PRIVATE_KEY = (
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
_AWS = r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}\b"
_URL_PASSWORD = r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:(?P<pw>[^\s/@]+)@"
_BASIC_AUTH = r"\bauthorization:\s*basic\s+(?P<tok>[A-Za-z0-9+/]{8,}={0,2})"
_PIN = r"\bpin(?:\s+(?:code|number))?\s+(?:is|was|[:=])\s*(?P<pin>\d{4,8})\b"
_CARD = r"(?<![\w.-])\d(?:[ -]?\d){12,22}(?![\w-]|\.\d)"
_SECRET_RULES: tuple[_Rule, ...] = (
    _rule("private_key", _PRIVATE_KEY, flags=re.DOTALL),
    _rule("aws_access_key", _AWS),
    _rule("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,255})\b"),
    _rule("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    _rule("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b"),
    _rule("openai_key", r"\bsk-[A-Za-z0-9_-]{20,}", _group(valid=_mixed)),
    _rule("slack_token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}"),
    _rule("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}"),
    _rule("google_api_key", r"\bAIza[A-Za-z0-9_-]{35}"),
    _rule("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    _rule("url_credentials", _URL_PASSWORD, _group("pw"), _I),
    _rule("bearer_token", r"\bbearer\s+(?P<tok>[\w.~+/-]{16,}=*)", _group("tok", valid=_mixed), _I),
    _rule("basic_auth", _BASIC_AUTH, _group("tok"), _I),
    *(
        (kind, _assigned(key, form), _group("dq", "sq", "bare", valid=valid))
        for kind, key, valid in (
            ("password_assignment", _PASSWORD_KEY, _is_password_value),
            ("generic_api_key", _SECRET_KEY, _is_key_value),
        )
        for form in (_ASSIGNED, _STATED)
    ),
    _rule("pin", _PIN, _group("pin"), _I),
    _rule("card_number", _CARD, _longest_valid_prefix(_is_card, 13)),
)


def find_secrets(text: str) -> list[Finding]:
    """Find API keys, tokens, private keys, password assignments and card numbers.

    Why: a stored secret would be replayed into prompts and exports, so the write policy
    rejects whatever this returns. Findings are sorted by position and never overlap.
    """
    return _scan(_SECRET_RULES, "secret", text)


# --- personal data ----------------------------------------------------------

_EMAIL = (
    r"(?<![\w.+-])[A-Za-z0-9][\w.%+-]{0,63}@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}\b(?!:\S|@)"
)
_IBAN = r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b"
_SSN_KEYWORD = (
    r"\b(?:ssn|social security(?: number| no\.?)?)\b[^\d\n]{0,15}"
    r"(?P<num>\d{3}[ -]?\d{2}[ -]?\d{4})(?!\d)"
)
_UK_NI = (
    r"(?:\b(?:national insurance|ni|nino)\b[^\n]{0,30}?)?\b(?P<ni>(?!BG|GB|KN|NK|NT|TN|ZZ)"
    r"[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z](?P<sp> ?)\d{2}(?P=sp)\d{2}(?P=sp)\d{2}(?P=sp)[A-D])\b"
)
_PASSPORT = r"(?i:\bpassport\b)[^\n]{0,30}?(?<![A-Za-z0-9])(?P<num>[A-Z0-9]{6,9})(?![A-Za-z0-9])"
_PHONE_INTL = r"(?<![\w+])\+\d{1,3}(?:[ .-]?(?:\(\d{1,4}\)|\d{1,5})){1,6}(?!\w)"
_PHONE_KEYWORD = (
    r"\b(?:phone|tel|telephone|mobile|cell|cellphone|whatsapp|fax|sms|text me|call me|reach me)\b"
    r"(?:\s*(?:number|no\.?|#|is|at|on|:))*\s*(?P<num>\+?\d(?:[ .()-]?\d){8,14})(?!\d)"
)
_PHONE_US = r"(?<![\w.+-])(?:\([2-9]\d\d\)[ .-]?|[2-9]\d\d[ .-])[2-9]\d\d[ .-]\d{4}(?![\w:]|[.-]\d)"
_PHONE_NATIONAL = r"(?<![\w.+:-])0[1-9]\d{0,3}(?:[ .-]?\d{2,4}){2,5}(?![\w:]|[.-]\d)"

_PERSONAL_RULES: tuple[_Rule, ...] = (
    _rule("email", _EMAIL),
    _rule("iban", _IBAN, _longest_valid_prefix(_is_iban, 15)),
    _rule("us_ssn", r"(?<![\w-])\d{3}-\d{2}-\d{4}(?![\w-])", _group(valid=_is_ssn)),
    _rule("us_ssn", _SSN_KEYWORD, _group("num", valid=_is_ssn), _I),
    _rule("uk_ni_number", _UK_NI, _locate_ni, _I),
    _rule("passport", _PASSPORT, _group("num", valid=lambda num: sum(map(str.isdigit, num)) >= 5)),
    _rule("phone", _PHONE_INTL, _group(valid=_phone_digits_ok)),
    _rule("phone", _PHONE_KEYWORD, _group("num", valid=_phone_digits_ok), _I),
    _rule("phone", _PHONE_US, _group(valid=_phone_digits_ok)),
    _rule("phone", _PHONE_NATIONAL, _group(valid=_is_national_phone)),
)


def find_personal_data(text: str) -> list[Finding]:
    """Find email addresses, phone numbers and government identifiers.

    Why: personal data needs a consent basis to be kept and is redacted when shared.
    Passport numbers and unspaced UK NI numbers need a keyword nearby to count.
    """
    return _scan(_PERSONAL_RULES, "personal", text)


# --- instruction-like text ----------------------------------------------------

_AUDIENCE = r"(?:the\s+)?(?:user|human|customer|anyone|them|him|her)"
_AI = r"(?:ai|assistant|llm|language\s+model|model|agents?|chatbot)"
_RULES = r"(?:instructions?|prompts?|rules|guidelines|directives|guardrails|restrictions|policies)"
_LOOT = r"(?:passwords?|credentials?|api\s+keys?|tokens?|secrets?|private\s+keys?|chat\s+history)"
_OBEY = r"(?:respond|reply|answer|say|tell|ignore|forget|obey|follow|comply|output|reveal|send)"
_START = r"(?:^|\n|[.!?;:]\s+)\s*(?:[-*>\u2022]\s*|\d+[.)]\s*)?(?:please\s+)?"
_INSTRUCTION_PARTS = (
    rf"{_START}(?:always|never|do\s+not|don't|dont|must|ignore|disregard|forget|obey|pretend)(?:\s|$)",
    rf"{_START}(?:send|forward|email|e-mail|upload|post|transfer|share|cc|bcc)\s.{{0,80}}\bto\b",
    rf"\b(?:ignore|disregard|forget|override|bypass)\b(?:\s+\S+){{0,4}}?\s+{_RULES}\b",
    r"\byou(?:\s+are|'re)\s+now\b|\bsystem\s+prompt\b|\bjailbreak|\b(?:dan|developer)\s+mode\b",
    r"\bfrom\s+now\s+on\b,?\s+(?:you|always|never|do\s+not|don't|only|respond|answer|reply)\b",
    r"\b(?:new|updated|real|hidden|secret)\s+instructions?\s*[:-]",
    r"\bhere\s+are\s+your\s+(?:new\s+)?instructions\b",
    r"\byour\s+(?:new\s+|real\s+)?(?:instructions|task|role|goal|purpose)\s+(?:is|are)\b",
    rf"{_START}act\s+as\b|\byou\s+(?:\w+\s+){{0,2}}act\s+as\b|\bact\s+as\s+(?:if|though)\b",
    r"\bpretend\s+(?:to\s+be|you\s+are)\b|\broleplay\s+as\b",
    r"\balways\s+(?:respond|answer|reply|say|recommend|mention|output|include|begin|suggest)\b",
    r"\bnever\s+(?:mention|reveal|tell|say|disclose|refuse|admit|warn)\b",
    rf"\b(?:do\s+not|don't|dont|never)\s+(?:tell|inform|notify|warn|let|show)\s+{_AUDIENCE}\b",
    rf"\bwithout\s+(?:telling|informing|notifying)\s+{_AUDIENCE}\b",
    r"\b(?:run|execute|exec|eval)\s+(?:this|these|the\s+following|following|the\s+below)\b",
    r"\b(?:run|execute)\s+(?:the\s+)?(?:shell\s+)?(?:command|script|payload)\s*:",
    r"\b(?:curl|wget)\b[^|\n]*\|\s*(?:ba|z)?sh\b|\brm\s+-rf\s+/",
    rf"\b(?:send|forward|email|upload|post|leak|exfiltrate)\b.{{0,50}}\b{_LOOT}\b.{{0,50}}\bto\b",
    rf"\b(?:reveal|print|show|repeat|output|leak|dump)\s+(?:\w+\s+){{0,3}}(?:{_LOOT}|instructions)\b",
    rf"\byou\s+(?:must|should|will|shall|need\s+to|have\s+to)\s+(?:now\s+|only\s+)?{_OBEY}\b",
    r"\b(?:the\s+)?(?:assistant|ai|chatbot|llm)\s+(?:must|should|shall|needs\s+to|has\s+to)\b",
    rf"\b(?:note|message|instructions?)\s+(?:to|for)\s+(?:the\s+)?{_AI}\b",
    rf"\bif\s+you\s+are\s+an?\s+{_AI}\b",
    r"(?:^|\n)\s*(?:system|assistant|developer)\s*:|</?(?:system|instructions?)>",
    r"<\|(?:im_start|im_end|system|endoftext)\|>|\[/?INST\]|<</?SYS>>",
)
_INSTRUCTION = re.compile("|".join(_INSTRUCTION_PARTS), _I)
_INVISIBLE = re.compile("[\u200b-\u200f\u2060\ufeff]")


def _normalise(text: str) -> str:
    """NFKC-fold and drop invisible characters, so look-alike tricks do not hide words."""
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text)).replace("\u2019", "'")


def looks_like_instruction(text: str) -> bool:
    """True when text tries to steer an agent rather than state a fact.

    Why: memories from documents, tools or shares are replayed into prompts, where an
    injected "ignore previous instructions" would become a standing order. Asked only
    of untrusted sources, so deliberately broad: imperatives (always/never/do not/must/
    ignore ...) count, plain facts do not.
    """
    return _INSTRUCTION.search(_normalise(text)) is not None


# --- transient chatter ----------------------------------------------------------

_CHATTER_WORDS = frozenset(
    """ok okay okey k kk okie alright aight fine sure yes yeah yep yup ya yea no nope nah thanks
    thank thx ty tysm thankyou cheers ta you u much so very a lot lots all appreciated lol lmao rofl
    haha hahaha hehe heh ha xd omg wow oh ah aha uh um hmm hm mhm ooh oops hi hello hey heya hiya yo
    there everyone folks guys morning afternoon evening night good bye goodbye cya see later soon
    ttyl brb gtg g2g bbl afk back np nw welcome youre you're sounds great cool nice awesome perfect
    excellent lovely neat sweet gotcha got it understood noted will do done right true exactly
    indeed agreed same me too makes sense that this sorry my bad whatever nevermind nvm wait sec
    one moment hold on please plz pls""".split()
)
_WORD = re.compile(r"[a-z']+|\d+")


def is_transient_chatter(text: str) -> bool:
    """True for content-free turns: greetings, thanks, acknowledgements, laughter.

    Why: such turns carry nothing worth recalling and would crowd real memories.
    A turn is chatter when it is short and every word is a chatter word; text that
    is only punctuation or emoji is chatter too. Numbers are never chatter.
    """
    words = _WORD.findall(_normalise(text).lower())
    if len(words) > 8:
        return False
    return all(word in _CHATTER_WORDS for word in words)


# --- redaction ------------------------------------------------------------------


def redact(text: str, findings: Sequence[Finding]) -> str:
    """Replace each finding's span with ``[REDACTED:<kind>]``.

    Why: sharing and logging need the memory without the sensitive part. Overlapping
    spans merge under the kind of the one that starts first, so no part of any finding
    survives; spans are clipped to the text.
    """
    pieces: list[str] = []
    cursor = 0
    for finding in sorted(findings, key=lambda f: (f.start, -f.end)):
        start, end = max(finding.start, 0), min(finding.end, len(text))
        if end <= max(start, cursor):
            continue  # empty, outside the text, or inside the previous span
        if start >= cursor:
            pieces += [text[cursor:start], f"[REDACTED:{finding.kind}]"]
        cursor = end
    return "".join(pieces) + text[cursor:]

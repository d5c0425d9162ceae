"""Personal data: email addresses, phone numbers, IBANs and government identifiers.

Checksums (IBAN mod-97) and issued ranges (SSN) keep a pattern from flagging every
long number. Addresses at the domains RFC 2606 and RFC 6761 reserve for examples and
tests (``example.com``, ``*.test``, ``*.invalid``, ``*.localhost``, ``*.example``),
no-reply and role mailboxes (``support@``, ``feedback@``) and placeholder phone numbers
(``+1234567890``) belong to no one, so they are not personal data. Special-category
data (health, religion ... see ``special``) is personal data too and is reported here.
"""

from __future__ import annotations

import re

from engram.write.detectors.base import Finding, Rule, Span, group, longest_valid_prefix, rule, scan
from engram.write.detectors.special import find_special_category

__all__ = ["find_personal_data"]

_IBAN_COUNTRIES = frozenset(
    "AD AE AL AT AZ BA BE BG BH BR BY CH CR CY CZ DE DK DO EE EG ES FI FO FR GB GE GI GL GR GT"
    " HR HU IE IL IQ IS IT JO KW KZ LB LC LI LT LU LV MC MD ME MK MR MT MU NL NO PK PL PS PT QA"
    " RO RS SA SC SE SI SK SM ST SV TL TN TR UA VA VG XK".split()
)
_DATE_START = re.compile(r"^(?:\d{1,2}[./-]\d{1,2}[./-]\d{2,4}|\d{4}[./-]\d\d?[./-]\d\d?)(?!\d)")
# RFC 2606 / RFC 6761 reserved names, plus the stand-ins of tutorials ("yourdomain.com").
_RESERVED_DOMAIN = re.compile(
    r"(?:^|\.)(?:example\.(?:com|net|org)|[^.]+\.(?:test|example|invalid|localhost)|localhost"
    r"|(?:your|my)-?(?:domain|company|site|email|mail)\.[a-z]+|domain\.tld)$",
    re.IGNORECASE,
)
# No-reply and role mailboxes of organisations (GDPR: not data about a natural person).
_NOBODY = re.compile(
    r"^(?:no-?reply|do-?not-?reply|info|support|feedback|contact|sales|hello|help|admin|office"
    r"|team|press|billing|privacy|security|abuse|postmaster|webmaster|hr|jobs|careers)"
    r"(?:[+.].*)?$",
    re.IGNORECASE,
)


def _is_iban(compact: str) -> bool:
    """An IBAN: known country, plausible length and the ISO 13616 mod-97 check."""
    if compact[:2] not in _IBAN_COUNTRIES or not 15 <= len(compact) <= 34:
        return False
    return int("".join(str(int(char, 36)) for char in compact[4:] + compact[:4])) % 97 == 1


def _is_personal_email(address: str) -> bool:
    """An address someone could own: not at a reserved example domain, not a no-reply box."""
    local, _, domain = address.rpartition("@")
    return not _RESERVED_DOMAIN.search(domain) and not _NOBODY.match(local)


def _is_ssn(value: str) -> bool:
    """A US SSN outside the never-issued ranges (000, 666, 9xx areas; 00 group; 0000 serial)."""
    digits = re.sub(r"\D", "", value)
    area, group_, serial = digits[:3], digits[3:5], digits[5:]
    issued = area not in {"000", "666"} and area[0] != "9" and group_ != "00" and serial != "0000"
    return len(digits) == 9 and issued


def _phone_digits_ok(value: str) -> bool:
    """9 to 15 digits, not a placeholder run: fewer is a short code, more exceeds E.164.

    ``+1234567890`` and ``000 000 0000`` are the stand-ins of forms and tutorials.
    """
    digits = "".join(c for c in value if c.isdigit())
    placeholder = digits.startswith(("123456789", "987654321")) or len(set(digits)) < 3
    return 9 <= len(digits) <= 15 and not placeholder


def _is_national_phone(value: str) -> bool:
    """A 0-prefixed national number: one kind of separator, used, and not a date."""
    separators = set(re.findall(r"[ .-]", value))
    return len(separators) == 1 and _phone_digits_ok(value) and not _DATE_START.match(value)


def _locate_ni(match: re.Match[str]) -> Span | None:
    """A UK NI number: canonical spaced upper-case form, or any form after a keyword."""
    has_keyword = match.start() != match.start("ni")
    spaced_upper = bool(match.group("sp")) and match.group("ni").isupper()
    return match.span("ni") if has_keyword or spaced_upper else None


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

_PERSONAL_RULES: tuple[Rule, ...] = (
    rule("email", _EMAIL, group(valid=_is_personal_email)),
    rule("iban", _IBAN, longest_valid_prefix(_is_iban, 15)),
    rule("us_ssn", r"(?<![\w-])\d{3}-\d{2}-\d{4}(?![\w-])", group(valid=_is_ssn)),
    rule("us_ssn", _SSN_KEYWORD, group("num", valid=_is_ssn), re.IGNORECASE),
    rule("uk_ni_number", _UK_NI, _locate_ni, re.IGNORECASE),
    rule("passport", _PASSPORT, group("num", valid=lambda num: sum(map(str.isdigit, num)) >= 5)),
    rule("phone", _PHONE_INTL, group(valid=_phone_digits_ok)),
    rule("phone", _PHONE_KEYWORD, group("num", valid=_phone_digits_ok), re.IGNORECASE),
    rule("phone", _PHONE_US, group(valid=_phone_digits_ok)),
    rule("phone", _PHONE_NATIONAL, group(valid=_is_national_phone)),
)


def find_personal_data(text: str) -> list[Finding]:
    """Find email addresses, phone numbers, government identifiers and special categories.

    Why: personal data needs a consent basis to be kept and is redacted when shared.
    Passport numbers and unspaced UK NI numbers need a keyword nearby to count.
    Special-category findings (``special.SPECIAL_CATEGORY_KINDS``) come first, so an
    address or birth date inside a disclosure is reported as that disclosure.
    """
    special = find_special_category(text)
    plain = [
        f for f in scan(_PERSONAL_RULES, "personal", text)
        if not any(f.start < s.end and s.start < f.end for s in special)
    ]  # fmt: skip
    return sorted(special + plain, key=lambda f: (f.start, f.end))

"""Secrets: API keys, tokens, private keys, credentials, password assignments, cards.

Known token formats (AWS, GitHub, Anthropic, OpenAI, Stripe, Slack, Google, JWT, PEM)
are recognised by shape; free-form ones (``sk-…``, ``xoxb-…``, bearer, ``api_key = …``)
also by their value (see ``values``): a template such as ``xoxb-your-slack-token`` or
a code expression such as ``password = db.Column(...)`` is not a secret.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from engram.write.detectors.base import Finding, Rule, Span, group, longest_valid_prefix, rule, scan
from engram.write.detectors.values import (
    is_code_expression,
    is_key_value,
    is_password_value,
    is_placeholder,
    is_stated_password,
    is_token_body,
    mixed,
)

__all__ = ["find_secrets"]

_I = re.IGNORECASE

# Visa, Mastercard, Amex, Diners, JCB, Discover, UnionPay: where issued card numbers start.
_CARD_PREFIX = re.compile(r"4|5[1-5]|2[2-7]|3[04-8]|6(?:011|2|4[4-9]|5)")


def _luhn_ok(digits: str) -> bool:
    """The Luhn checksum every payment card number carries."""
    doubled = (int(char) * (1 + index % 2) for index, char in enumerate(reversed(digits)))
    return sum(value - 9 if value > 9 else value for value in doubled) % 10 == 0


def _is_card(digits: str) -> bool:
    """13-19 digits from a card issuer range that pass Luhn (not one repeated digit)."""
    in_range = digits.isdigit() and 13 <= len(digits) <= 19 and len(set(digits)) > 1
    return in_range and _CARD_PREFIX.match(digits) is not None and _luhn_ok(digits)


def _fixed_body(value: str) -> bool:
    """A fixed-format token that is not masked (``AKIAXXXX…``) or one repeated character."""
    return re.search(r"x{4,}|\*{3}|(.)\1{7,}", value, _I) is None


def _pem_body(value: str) -> bool:
    """A PEM block with key material in it, not a header around ``...`` or ``<key>``."""
    return re.search(r"[A-Za-z0-9+/=]{32,}", value) is not None


def _url_password(match: re.Match[str]) -> Span | None:
    """The password of ``scheme://user:password@host`` unless it is a stand-in.

    ``postgres://postgres:postgres@localhost`` (the password repeats the user name) and
    ``<password>`` / ``${DB_PASS}`` are the defaults and templates of how-tos.
    """
    user, password = match.group("user"), match.group("pw")
    stand_in = password.lower() == user.lower() or is_placeholder(password)
    return None if stand_in or len(password) < 3 else match.span("pw")


def _assignment(valid: Callable[[str], bool]) -> Callable[[re.Match[str]], Span | None]:
    """Locate an assigned value; a bare word followed by more words after ``:`` is prose."""
    locate = group("dq", "sq", "bare", valid=valid)

    def judge(match: re.Match[str]) -> Span | None:
        bare = match.group("bare")
        if bare is not None and is_code_expression(bare):
            return None
        prose = bare is not None and bare.isalpha() and match.groupdict().get("sep") == ":"
        if prose and re.match(r"[ \t]+[A-Za-z]", match.string[match.end() :]):
            return None
        return locate(match)

    return judge


_PASSWORD_KEY = r"(?:[a-z0-9]+[_.-])*(?:password|passwd|passphrase|passcode|pwd)"
_SECRET_KEY = (
    r"(?:[a-z0-9]+[_.-])*(?:api[_-]?key|apikey|api[_-]?secret|(?:access|auth|refresh)[_-]?token"
    r"|client[_-]?secret|secret[_-]?key|secret|token|private[_-]?key|secret[_-]?access[_-]?key)"
)
_ASSIGNED = (
    r"\s*[\"']?\s*(?P<sep>:=|=>|[:=])\s*"
    r"(?:\"(?P<dq>[^\"\n]{1,200})\"|'(?P<sq>[^'\n]{1,200})'|(?P<bare>[^\s\"',;]{1,200}))"
)
_STATED = (
    r"\s+(?:is|was)\s*:?\s+(?:\"(?P<dq>[^\"\n]{1,100})\"|'(?P<sq>[^'\n]{1,100})'"
    r"|(?P<bare>[^\s\"',;]{1,100}?))(?=[.,;!?)]*(?:\s|$))"
)


def _assigned(kind: str, key: str, form: str, valid: Callable[[str], bool]) -> Rule:
    """``<key> = value`` or ``<key> is value``, where key may carry a prefix (``DB_PASSWORD``)."""
    return kind, re.compile(rf"(?<![a-z0-9_]){key}\b{form}", _I), _assignment(valid)


_PRIVATE_KEY = (
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----.*?"
    r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)"
)
_AWS = r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA)[A-Z0-9]{16}\b"
_URL_PASSWORD = r"\b[a-z][a-z0-9+.-]*://(?P<user>[^\s:/@]+):(?P<pw>[^\s/@]+)@"
_BASIC_AUTH = r"\bauthorization:\s*basic\s+(?P<tok>[A-Za-z0-9+/]{8,}={0,2})"
_PIN = r"\bpin(?:\s+(?:code|number))?\s+(?:is|was|[:=])\s*(?P<pin>\d{4,8})\b"
_CARD = r"(?<![\w.-])\d(?:[ -]?\d){12,22}(?![\w-]|\.\d)"
_GITHUB = r"\b(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,255})\b"
_SECRET_RULES: tuple[Rule, ...] = (
    rule("private_key", _PRIVATE_KEY, group(valid=_pem_body), re.DOTALL),
    rule("aws_access_key", _AWS, group(valid=_fixed_body)),
    rule("github_token", _GITHUB, group(valid=_fixed_body)),
    rule("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", group(valid=is_token_body)),
    rule("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}\b", group(valid=_fixed_body)),
    rule("openai_key", r"\bsk-[A-Za-z0-9_-]{20,}", group(valid=is_token_body)),
    rule("slack_token", r"\bxox[abposre]-[A-Za-z0-9-]{10,}", group(valid=is_token_body)),
    rule(
        "slack_webhook",
        r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}",
        group(valid=lambda url: not is_placeholder(url.rsplit("/", 1)[-1])),
    ),
    rule("google_api_key", r"\bAIza[A-Za-z0-9_-]{35}", group(valid=_fixed_body)),
    rule("jwt", r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    rule("url_credentials", _URL_PASSWORD, _url_password, _I),
    rule(
        "bearer_token",
        r"\bbearer\s+(?P<tok>[\w.~+/-]{16,}=*)",
        group("tok", valid=lambda tok: mixed(tok) and is_token_body(tok)),
        _I,
    ),
    rule("basic_auth", _BASIC_AUTH, group("tok", valid=lambda tok: not is_placeholder(tok)), _I),
    _assigned("password_assignment", _PASSWORD_KEY, _ASSIGNED, is_password_value),
    _assigned("password_assignment", _PASSWORD_KEY, _STATED, is_stated_password),
    _assigned("generic_api_key", _SECRET_KEY, _ASSIGNED, is_key_value),
    _assigned("generic_api_key", _SECRET_KEY, _STATED, is_key_value),
    rule("pin", _PIN, group("pin"), _I),
    rule("card_number", _CARD, longest_valid_prefix(_is_card, 13)),
)


def find_secrets(text: str) -> list[Finding]:
    """Find API keys, tokens, private keys, password assignments and card numbers.

    Why: a stored secret would be replayed into prompts and exports, so the write policy
    rejects whatever this returns. Findings are sorted by position and never overlap.
    """
    return scan(_SECRET_RULES, "secret", text)

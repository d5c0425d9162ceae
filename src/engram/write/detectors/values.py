"""Judging a candidate secret by its value, not by the words around it.

A memory service for coding agents must store code and how-tos, so ``password =``
alone proves nothing: ``password = db.Column(db.String(120))`` is code,
``api_key = os.environ["API_KEY"]`` is a reference, ``'xoxb-your-slack-token'`` and
``changeme`` are placeholders. A value counts as a secret only when it is a literal,
is not an obvious placeholder, and (for keys and tokens) looks random: long enough,
mixing character classes, with enough Shannon entropy per character.
"""

from __future__ import annotations

import math
import re
from collections import Counter

__all__ = [
    "entropy",
    "is_code_expression",
    "is_key_value",
    "is_password_value",
    "is_placeholder",
    "is_stated_password",
    "is_token_body",
    "looks_random",
    "mixed",
]

_I = re.IGNORECASE

# Words that follow "password is" / "password:" in prose and configuration, not values.
_NOT_A_VALUE = frozenset(
    "a an the is was not none null nil true false yes no required optional string str int redacted"
    " hidden masked unknown empty unset same different weak strong secure insecure long short wrong"
    " correct incorrect invalid valid expired changed reset stored saved kept set in on at from see"
    " for to of with and or too very also still needed undefined bool bytes text char varchar any"
    " hash await new lambda function async yield self this input getpass prompt ask minimum maximum"
    " min max length characters chars optional field column type value here there now only just"
    " mine yours it its their his her our my your whatever something anything nothing protected"
    " sensitive private public encrypted hashed salted plaintext plain case sensitive".split()
)
# Prefixes of references, templates and password hashes: $VAR, <token>, {{ x }}, pbkdf2:...
_REFERENCE = re.compile(
    r"^(?:[$%<{\[*!#@&]|\.{3}|os\.environ|os\.getenv|env\(|getenv|process\.env|ENV\[|config\.|"
    r"settings\.|secrets\.|vault:|arn:|ssm:|op://|(?:pbkdf2|scrypt|argon2id?|bcrypt|sha\d+|md5)[:$])",
    _I,
)
# Markers no random token contains but every template does ("your", "example", "xxxx" ...).
_MARKER = re.compile(
    r"your|example|placeholder|dummy|sample|changeme|replaceme|redacted|insert|fake|"
    r"x{4,}|\*{3,}|\.{3}|<|>|\{\{|\}\}",
    _I,
)
# Descriptive words: a value made only of these (and digits) names a secret, it is not one.
_VOCABULARY = frozenset(
    "my your the a api key keys secret secrets token tokens password passwd pass pwd passphrase pw"
    " access auth client id value here goes string demo test testing tester sample foo bar baz qux"
    " admin root user username login default dev development local prod production staging app"
    " db database private public super supersecret abc xyz new old temp tmp"
    " bot slack github openai stripe aws google sk pk live hook webhook bearer jwt session cookie"
    " code pin secretkey apikey accesstoken authtoken changeit secure strong wrong correct hashed"
    " plain raw good bad valid invalid other another random simple weak example".split()
)
_WORD_PIECES = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_DOTTED = re.compile(r"^[A-Za-z_$][\w$]*(?:(?:\.|::|->)[A-Za-z_$][\w$]*)+$")
_IDENTIFIER = re.compile(r"^[A-Za-z_]+$")
# URLs and file paths name where a secret lives (``secrets/api.key``), they are not one.
_LOCATION = re.compile(r"://|^(?:\.{0,2}/|~/)|/[\w.-]*\.[a-z]{1,5}$", _I)
_PROSE_WORD = re.compile(r"^[a-z]+(?:ed|ing|ly|ble|ful|less|ous|ive|ion|ment|ness|ity)$", _I)


def entropy(value: str) -> float:
    """Shannon entropy in bits per character (0 for the empty string)."""
    if not value:
        return 0.0
    counts, total = Counter(value), len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def mixed(value: str) -> bool:
    """Letters and digits both: real keys and tokens have them, English words do not."""
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _classes(value: str) -> int:
    """How many of lower, upper, digit and symbol the value uses."""
    tests = (str.islower, str.isupper, str.isdigit, lambda c: not c.isalnum())
    return sum(any(test(c) for c in value) for test in tests)


def _strip(value: str) -> str:
    return value.strip().strip("\"'`")


def is_placeholder(value: str) -> bool:
    """An obvious stand-in: a reference, a template, a marker word, or descriptive words.

    ``YOUR_API_KEY``, ``<token>``, ``${DB_PASS}``, ``sk-your-key-here``, ``changeme``,
    ``xxxx``, ``my-api-key`` and ``test123`` (a descriptive word plus digits, the usual
    test fixture) are placeholders; ``hunter2`` and ``Zx9vQ2mN4pL7`` are not.
    """
    stripped = _strip(value)
    if not stripped or _REFERENCE.match(stripped) or _MARKER.search(stripped):
        return True
    pieces = _WORD_PIECES.findall(stripped)
    words = [p.lower() for p in pieces if not p.isdigit()]
    covered = sum(map(len, pieces)) + len(re.findall(r"[-_.: ]", stripped)) == len(stripped)
    return bool(words) and covered and all(_descriptive(w) for w in words)


def _descriptive(word: str) -> bool:
    """The word is descriptive vocabulary, or runs such words together (``testpass``)."""
    ends = {0}
    for end in range(2, len(word) + 1):
        if any(word[start:end] in _VOCABULARY for start in ends if end - start >= 2):
            ends.add(end)
    return len(word) in ends


def is_code_expression(value: str) -> bool:
    """An unquoted value that is code: a call, subscript, attribute access or variable name.

    ``db.Column(db.String(120))``, ``request.form['pw']``, ``settings.SECRET_KEY``,
    ``API_KEY`` and ``new_password`` are code; ``hunter2`` and ``s3cr3t!`` are not.
    """
    stripped = value.strip()
    if any(c in stripped for c in "()[]{}") or _DOTTED.match(stripped):
        return True
    if _IDENTIFIER.match(stripped):
        return "_" in stripped.strip("_") or re.search(r"[a-z][A-Z]", stripped) is not None
    return False


def is_password_value(value: str) -> bool:
    """A literal password after ``password =``: not a word of prose, code or placeholder."""
    stripped = _strip(value)
    ordinary = stripped.lower() in _NOT_A_VALUE or is_placeholder(stripped)
    return 3 <= len(stripped) <= 128 and not ordinary and not is_code_expression(value)


def is_stated_password(value: str) -> bool:
    """A password after ``password is``: also not an adjective or participle of prose."""
    return is_password_value(value) and not _PROSE_WORD.match(_strip(value))


def looks_random(value: str) -> bool:
    """Long and varied enough to be a generated key rather than a word or an identifier.

    Ten or more characters mixing letters and digits at 3 bits a character or more
    (``Zx9vQ2mN4pL7`` has 3.6), or twenty or more of two classes at 3.5 bits.
    """
    bits = entropy(value)
    if len(value) >= 10 and mixed(value) and bits >= 3.0:
        return True
    return len(value) >= 20 and _classes(value) >= 2 and bits >= 3.5


def is_key_value(value: str) -> bool:
    """A key-like value after ``api_key =`` / ``token:``: a random-looking literal."""
    stripped = _strip(value)
    literal = " " not in stripped and is_password_value(value) and not _LOCATION.search(stripped)
    return literal and looks_random(stripped)


def is_token_body(value: str) -> bool:
    """The body of a free-form token (``sk-…``, ``xoxb-…``, bearer): random, not a template."""
    return not is_placeholder(value) and looks_random(value)

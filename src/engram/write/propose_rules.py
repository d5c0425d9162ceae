"""Sentence rules for the deterministic proposer: one plain statement in, one candidate out.

Each rule recognises one explicit way of stating a name, a timezone, a preference, a
team decision, a standing rule or a prohibition. Rules are anchored at the start of a
sentence and refuse questions, hypotheticals and hedges: a missed memory costs less
than a wrong one. Keys are stable slugs, so the same statement always lands on the
same key and the write path can confirm or supersede it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from functools import cache

from engram import scripts

__all__ = ["Candidate", "extract", "normalise_timezone", "slug"]

_I = re.IGNORECASE


@dataclass(frozen=True, slots=True)
class Candidate:
    """What a rule found: type, stable key, structured value and a self-contained sentence.

    ``personal`` marks facts about the speaker (name, timezone, preference), which
    only count when the speaker is the user or someone speaking about the user.
    """

    type: str
    key: str
    value: str | bool
    content: str
    personal: bool


_DETERMINERS = frozenset("a an the my our your their his her its all any some".split())


def slug(text: str, max_words: int = 8) -> str:
    """A stable key segment: ascii, lower case, ``[a-z0-9_]``, without leading determiners.

    Long phrases keep ``max_words`` words plus a digest of the whole. Letters of
    other scripts have no ascii form: a phrase holding any gets a digest of all its
    letters and marks, so "寿司 and sake" and "ラーメン and sake", or two Hindi words
    differing in a vowel sign, never share a key. No letters or digits: empty.
    """
    text = text.replace("+", " plus ").replace("#", " sharp ")
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    words = re.findall(r"[a-z0-9]+", folded)
    while words and words[0] in _DETERMINERS:
        words = words[1:]
    letters = "".join(c for c in text.lower() if c.isalnum() or unicodedata.category(c)[0] == "M")
    foreign = any(c.isalpha() and scripts.family(c) != "latin" for c in letters)
    whole = letters if foreign or not words else " ".join(words)
    digest = hashlib.sha256(whole.encode()).hexdigest()[:8]
    if not words or foreign:  # a digest keeps what ascii cannot spell addressable
        return "_".join([*words[:max_words], f"u{digest}"]) if whole else ""
    return "_".join(words if len(words) <= max_words else [*words[:max_words], digest])


# --- wording ----------------------------------------------------------------------

_LEAD_IN = re.compile(
    r"^(?:(?:hi|hello|hey)(?: there)?|ok(?:ay)?|so|well|also|btw|by the way|fyi|for the record"
    r"|just so you know|actually|noted|got it|understood|sure|note that|remember that"
    r"|please remember(?: that)?|remember|note)\s*[,:!-]?\s+",
    _I,
)
_STANDING = re.compile(
    r"^(?:from now on|going forward|henceforth|in (?:the )?future|moving forward)\s*[,:-]?\s*", _I
)
_CLAUSE_END = re.compile(
    r"\s*(?:[,;(]|:\s|\s(?:because|since|as|but|so|unless|though|although|which|when)\s).*$", _I
)
_THIRD_PERSON = {"my": "their", "me": "them", "mine": "theirs", "myself": "themselves"}


def _clean(sentence: str) -> str:
    """Collapse spaces, unify apostrophes, drop quotes and trailing end punctuation."""
    text = re.sub(r"\s+", " ", sentence.replace("\u2019", "'")).strip().strip("\"'`")
    return text.rstrip(".!;\u3002\uff01\uff61\u0964\u0965").strip()


def _clip(phrase: str | None) -> str:
    """Cut a captured phrase at the first clause boundary ('because', a comma...)."""
    return _CLAUSE_END.sub("", phrase or "").strip().rstrip(".!,;").strip()


def _third(phrase: str) -> str:
    """Rewrite the speaker's pronouns so the content reads as a statement about the user."""
    return re.sub(
        r"\b(?:my|me|mine|myself)\b", lambda m: _THIRD_PERSON[m.group(0).lower()], phrase, flags=_I
    )


def _sentence(text: str) -> str:
    """First letter up, one final period."""
    text = text.strip().rstrip(".")
    return f"{text[:1].upper()}{text[1:]}." if text else ""


# --- filters ----------------------------------------------------------------------

_QUESTION_START = re.compile(
    r"^(?:(?:do|does|did|can|could|would|will|shall|should|is|are|am|was|were|have|has)\s+"
    r"(?:you|i|we|they|he|she|it|the|this|that|there)\b|(?:what|which|who|whom|whose|how|why|where)\b)",
    _I,
)
_HYPOTHETICAL = re.compile(
    r"^(?:if|suppose|supposing|imagine|assuming|assume|what if|in case|let's say|say)\b"
    r"|\b(?:if (?:i|we) (?:ever|were)|hypothetically|might|maybe|perhaps|probably|possibly|not sure"
    r"|unsure|wonder(?:ing)?|someday|one day|used to|thinking (?:about|of)|considering)\b",
    _I,
)


def _is_question(sentence: str) -> bool:
    """A question asks, it does not state: ends with '?' or opens like one."""
    return sentence.rstrip().endswith("?") or _QUESTION_START.match(sentence) is not None


# --- timezones --------------------------------------------------------------------

_ZONE_ALIASES = (
    "America/Los_Angeles=pst pdt pt pacific; America/Denver=mst mdt mt mountain;"
    " America/Chicago=cst cdt ct central; America/New_York=est edt et eastern;"
    " America/Anchorage=akst akdt alaska; Pacific/Honolulu=hst hawaii; UTC=utc gmt z zulu;"
    " Europe/London=bst; Europe/Berlin=cet cest; Europe/Athens=eet eest; Europe/Lisbon=wet west;"
    " Asia/Kolkata=ist; Asia/Tokyo=jst; Asia/Seoul=kst; Asia/Singapore=sgt; Asia/Hong_Kong=hkt;"
    " Australia/Sydney=aest aedt; Pacific/Auckland=nzst nzdt"
)
_ALIAS_TO_ZONE = {
    alias: zone.strip()
    for zone, _, aliases in (entry.partition("=") for entry in _ZONE_ALIASES.split(";"))
    for alias in aliases.split()
}
_OFFSET = re.compile(
    r"^(?:utc|gmt)\s*(?:(?P<sign>[+\-\u2212])\s*(?P<h>\d\d?)(?::?(?P<m>\d\d))?)?$", _I
)
_ZONE_SUFFIX = re.compile(r"\s+(?:standard\s+|daylight\s+)?(?:time ?zone|time|tz)$", _I)


@cache
def _iana_names() -> dict[str, str]:
    """Lower-cased IANA names to their canonical spelling, from the tz database (system or
    the ``tzdata`` package; without one, only offsets and abbreviations are recognised)."""
    import zoneinfo

    return {name.lower(): name for name in zoneinfo.available_timezones() if "/" in name}


def _utc_offset(raw: str) -> str | None:
    """'UTC+2', 'GMT -05:30' -> 'UTC+02:00', 'UTC-05:30'; plain 'UTC' -> 'UTC'."""
    match = _OFFSET.match(raw)
    if match is None or match.group("sign") is None:
        return "UTC" if match else None
    hours, minutes = int(match.group("h")), int(match.group("m") or 0)
    if hours > 14 or minutes not in (0, 30, 45):
        return None
    sign = "+" if match.group("sign") == "+" else "-"
    return f"UTC{sign}{hours:02d}:{minutes:02d}"


def normalise_timezone(raw: str) -> str | None:
    """Canonical timezone for a user's wording, or None when it is not one.

    IANA names keep their canonical spelling, offsets become ``UTC+HH:MM``, and common
    abbreviations map to one representative zone (PST -> America/Los_Angeles, CET ->
    Europe/Berlin): a stable value matters more than which daylight-saving half was named.
    """
    text = _ZONE_SUFFIX.sub("", re.sub(r"^the\s+", "", raw.strip(), flags=_I))
    lowered = text.lower()
    return _ALIAS_TO_ZONE.get(lowered) or _utc_offset(text) or _iana_names().get(lowered)


# --- profile rules ------------------------------------------------------------------

_NAME = re.compile(
    r"^(?:(?P<is>my name is|my name's|i am called|i'm called|i go by)"
    r"|(?:please |you can |people |everyone )?(?:call|calls) me)\s+(?P<v>.+)$",
    _I,
)
_NOT_A_NAME = frozenset(
    "back later tomorrow when if at on in after before soon anytime now asap maybe again sometime"
    " tonight today not a an the whatever anything please you by".split()
)
_NAME_WORD = re.compile(f"^[^\\W\\d_][\\w'.{scripts.MARKS}-]*$")  # marks: "अनीता" is a name
_NAME_END = frozenset("please instead thanks now from and but or though".split())


def _person_name(raw: str) -> str | None:
    """Up to four name-like words; None when the phrase is not a name ("call me later")."""
    words: list[str] = []
    for word in _clip(raw).split()[:4]:
        if not _NAME_WORD.match(word) or word.lower() in _NAME_END:
            break
        words.append(word.rstrip("."))
    if not words or words[0].lower() in _NOT_A_NAME:
        return None
    name = " ".join(words)
    return name.title() if name.islower() else name


def _name_rule(text: str) -> Candidate | None:
    match = _NAME.match(text)
    name = _person_name(match.group("v")) if match else None
    if match is None or name is None:
        return None
    content = f"User's name is {name}." if match.group("is") else f"User wants to be called {name}."
    return Candidate("profile", "user.name", name, content, personal=True)


_TIMEZONE = re.compile(
    r"^(?:my (?:local )?(?:time ?zone|tz) is(?: now)?"
    r"|(?:please )?(?:set|change) my (?:time ?zone|tz) to"
    r"|(?:i'm|i am|i live|i work|i'm based|i am based)(?: currently| now)? (?:in|on))\s+(?P<v>.+)$",
    _I,
)


def _timezone_rule(text: str) -> Candidate | None:
    match = _TIMEZONE.match(text)
    raw = _clip(match.group("v")) if match else ""
    zone = normalise_timezone(raw) if raw else None
    if zone is None:
        return None
    shown = zone if raw.lower() == zone.lower() else f"{zone} ({raw})"
    return Candidate("profile", "user.timezone", zone, f"User's timezone is {shown}.", True)


# --- preference rules ---------------------------------------------------------------

_ADVERBS = r"(?:(?:really|strongly|definitely|generally|usually|much|also|still|actually|do)\s+)*"
_PREFER = re.compile(
    rf"^i(?: {_ADVERBS}(?P<prefer>prefer|favou?r)|(?:'d| would) {_ADVERBS}(?P<rather>rather))"
    r"\s+(?P<neg>not\s+)?(?P<rest>.+)$",
    _I,
)
_LIKE = re.compile(
    rf"^i {_ADVERBS}(?:like|love|enjoy|adore)\s+(?P<x>.+?)"
    r"(?P<more> (?:better|more)(?: than (?P<y>.+))?)?$",
    _I,
)
_DISLIKE = re.compile(
    rf"^i {_ADVERBS}(?:dislike|hate|detest|can't stand|cannot stand|no longer like"
    r"|(?:don't|do not) (?:like|want|enjoy))\s+(?P<x>.+)$",
    _I,
)
_PLEASE_USE = re.compile(
    r"^please,? (?:always )?use\s+(?P<x>.+?)(?:\s+(?:over|instead of|rather than)\s+(?P<y>.+?))?"
    r"(?:\s+for\s+(?P<for>.+))?$",
    _I,
)
_PRONOUNS = frozenset("it that this them those these you him her one".split())
_VERSUS = r"over|instead of|rather than|vs\.?|versus"
_LEADING_VERB = re.compile(r"^(?:to\s+)?(?:use|using|have|go with|work with|stick with)\s+", _I)


def _phrase(raw: str | None) -> str:
    """A captured phrase, clipped at the first clause boundary; empty for a bare pronoun."""
    return "" if (phrase := _clip(raw)).lower() in _PRONOUNS else phrase


def _preference(key_text: str, value: str | bool, content: str) -> Candidate | None:
    if not (key_part := slug(key_text)) or not content:
        return None
    return Candidate("preference", f"preference.{key_part}", value, content, personal=True)


def _pair(x: str, y: str) -> Candidate | None:
    """One option over another, keyed by both so the reverse choice supersedes it."""
    x, y = _LEADING_VERB.sub("", x), _LEADING_VERB.sub("", y)
    if not slug(x) or not slug(y) or slug(x) == slug(y):
        return None
    key_text = "_vs_".join(sorted((slug(x), slug(y))))
    return _preference(key_text, x, _sentence(f"User prefers {_third(x)} over {_third(y)}"))


def _single(x: str, liked: bool, wording: str) -> Candidate | None:
    """Liking or disliking one thing: keyed by the thing, valued True or False."""
    return _preference(x, liked, _sentence(f"User {wording} {_third(x)}")) if x else None


def _choice(match: re.Match[str]) -> Candidate | None:
    """ "I prefer X (over Y)", "I prefer (not) to X", "I'd rather (not) X (than Y)"."""
    rest, rather = match.group("rest"), match.group("rather") is not None
    action = rather or rest.lower().startswith("to ")
    rest = re.sub(r"^to\s+", "", rest, flags=_I)
    versus = _VERSUS + ("|than" if rather else "|to" * (not action))
    split = re.match(rf"^(?P<x>.+?)\s+(?:{versus})\s+(?P<y>.+)$", rest, _I)
    if match.group("neg"):
        return _single(_phrase(rest), False, "prefers not to" if action else "prefers to avoid")
    if split and _phrase(split.group("y")):
        return _pair(_phrase(split.group("x")), _phrase(split.group("y")))
    return _single(_phrase(rest), True, "prefers to" if action else "prefers")


def _preference_rule(text: str) -> Candidate | None:
    if match := _PREFER.match(text):
        return _choice(match)
    if match := _DISLIKE.match(text):
        return _single(_phrase(match.group("x")), False, "dislikes")
    if match := _LIKE.match(text):
        x, y = _phrase(match.group("x")), _phrase(match.group("y"))
        return _pair(x, y) if y else _single(x, True, "prefers" if match.group("more") else "likes")
    if match := _PLEASE_USE.match(text):
        x, y, topic = (_phrase(match.group(name)) for name in ("x", "y", "for"))
        if not topic:
            return _pair(x, y) if y else _single(x, True, "prefers")
        wording = f"User prefers {x}" + (f" over {y}" if y else "") + f" for {_third(topic)}"
        return _preference(topic, x, _sentence(wording)) if x else None
    return None


# --- team decisions -----------------------------------------------------------------

_DECISION = re.compile(
    r"^(?:we|our team|the team|let's)(?:'ve|'re| have| are)?\s+"
    r"(?:(?:now|currently|always|mostly|primarily|only)\s+)?"
    r"(?:use|using|decided to use|chosen|chose|picked|standardi[sz]ed on|switched to|moved to"
    r"|went with|going with|will use|rely on|settled on)"
    r"\s+(?P<x>.+?)\s+(?:for|as (?:our|the))\s+(?P<y>.+)$",
    _I,
)


def _decision_rule(text: str) -> Candidate | None:
    match = _DECISION.match(text)
    x, y = (_phrase(match.group("x")), _phrase(match.group("y"))) if match else ("", "")
    if not x or not slug(y):
        return None
    content = "The team uses {} for {}.".format(x, re.sub(r"^(?:our|my)\s+", "the ", y, flags=_I))
    return Candidate("decision", f"project.{slug(y)}", x, content, personal=False)


# --- rules and constraints ----------------------------------------------------------

_CONDITION = re.compile(
    r"^(?P<cond>(?:when|whenever|if|before|after|once|while|during|for)\b[^,]+),\s*(?P<rest>.+)", _I
)
_MODAL = re.compile(
    r"^(?:please\s+)?(?:(?P<neg>never|do not|don't|dont|must not|mustn't|you must not"
    r"|you should never|you must never)|always|you must always|you should always|you must"
    r"|make sure (?:to |that you |you )?|be sure to)\s+(?P<action>.+)$",
    _I,
)
_NOT_AN_ACTION = frozenset("mind worry know think remember care understand see recall mean".split())


def _rule_rule(text: str, standing: bool, wording: str) -> Candidate | None:
    """A standing instruction keyed by what it governs, valued 'always' or 'never'.

    Negative ones are constraints, positive ones rules; both share the ``rule.`` key
    space, so "Always X" later supersedes "Never X". After "from now on" no modal
    is needed ("From now on, answer in French"). The content is the user's wording.
    """
    conditional = _CONDITION.match(text)
    condition, rest = conditional.group("cond", "rest") if conditional else ("", text)
    modal = _MODAL.match(rest)
    if modal is None and (not standing or condition.lower().startswith("if")):
        return None
    action = modal.group("action") if modal else rest
    negative = bool(modal and modal.group("neg"))
    key_part = slug(f"{condition} {action}", max_words=10)
    if not key_part or action.split()[0].lower() in _NOT_AN_ACTION:
        return None
    kind, value = ("constraint", "never") if negative else ("rule", "always")
    return Candidate(kind, f"rule.{key_part}", value, wording, personal=False)


# --- entry point ----------------------------------------------------------------------


def _strip_lead_ins(text: str) -> tuple[str, bool]:
    """Drop greetings and "remember that"; say whether "from now on" opened the sentence."""
    standing = False
    while True:
        stripped = _LEAD_IN.sub("", text, count=1)
        if (rest := _STANDING.sub("", stripped, count=1)) != stripped:
            standing, stripped = True, rest
        if stripped == text:
            return text, standing
        text = stripped


def extract(sentence: str) -> Candidate | None:
    """The candidate memory one sentence states, or None.

    Questions, hypotheticals and hedged sentences give None. The first matching
    rule wins, in order: name, timezone, preference, team decision, rule/constraint.
    A rule or constraint keeps the speaker's wording, "from now on" included.
    """
    if _is_question(sentence):
        return None
    text, standing = _strip_lead_ins(_clean(sentence))
    if not text or (_HYPOTHETICAL.search(text) and not _CONDITION.match(text)):
        return None
    for rule in (_name_rule, _timezone_rule, _preference_rule, _decision_rule):
        if candidate := rule(text):
            return candidate
    return _rule_rule(text, standing, _sentence(_LEAD_IN.sub("", _clean(sentence))))

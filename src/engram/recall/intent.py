"""Stage 1: the intent gate. Does this request need memory, and of which kind?

Simple, inspectable rules over the query (an explicit ``intent`` argument wins):

* ``none``: a self-contained transformation of text the request already holds
  ("convert this JSON to YAML", "summarise the following"), arithmetic, or
  content-free chatter;
* ``structured``: questions about the user's own settings and profile;
* ``episodic``: questions about what happened before;
* ``hybrid``: everything else.

The same rules assign an ``Intent`` (action / past / profile / general) that the
rerank stage uses for task fit.
"""

from __future__ import annotations

import re

from engram.errors import InvalidArgument
from engram.limits import shown
from engram.recall.model import Intent, Mode

__all__ = ["classify"]

_FLAGS = re.IGNORECASE
_TRANSFORM = re.compile(
    r"^\s*(please\s+)?(convert|translate|reformat|format|rewrite|paraphrase|summari[sz]e|"
    r"proofread|transpose|encode|decode|minify|prettify|sort|count the|extract)\b",
    _FLAGS,
)
_INLINE = re.compile(
    r"(this|the following|below|these)\b.*|[{}\[\]`\"']|:\s*\S|\bto (yaml|json|csv|xml|"
    r"toml|markdown|html|sql|python|english|french|german|spanish)\b",
    _FLAGS,
)
_ARITHMETIC = re.compile(r"^\s*(what is|calculate|compute)?\s*[\d\s.+\-*/^()%=x]+\??\s*$", _FLAGS)
_CHATTER = re.compile(r"^\s*(hi|hello|hey|thanks|thank you|ok|okay|cool|bye)\W*$", _FLAGS)
_PROFILE = re.compile(
    r"\b(my|i)\b.*\b(name|timezone|time zone|prefer|preference|preferences|favou?rite|"
    r"language|settings?|profile|email|address|birthday|like to be called)\b",
    _FLAGS,
)
_PAST = re.compile(
    r"\b(last time|previous(ly)?|before|earlier|ago|remember when|did (we|i|you)|"
    r"what happened|history|incident|when did|how did|used to|yesterday|last (week|month|"
    r"year)|have (we|i) ever|in the past)\b",
    _FLAGS,
)
_ACTION = re.compile(
    r"^\s*(please\s+)?(add|implement|fix|write|create|build|refactor|update|change|deploy|"
    r"run|make|set ?up|configure|migrate|remove|delete|rename|continue|resume|generate|"
    r"design|draft|prepare|review|test|debug|install|upgrade)\b",
    _FLAGS,
)


def _mode_for(query: str) -> tuple[Mode, Intent]:
    text = query.strip()
    if not text or _CHATTER.match(text) or _ARITHMETIC.match(text):
        return Mode.NONE, Intent.GENERAL
    if _TRANSFORM.match(text) and _INLINE.search(text):
        return Mode.NONE, Intent.ACTION
    if _ACTION.match(text):
        return Mode.HYBRID, Intent.ACTION
    if _PROFILE.search(text):
        return Mode.STRUCTURED, Intent.PROFILE
    if _PAST.search(text):
        return Mode.EPISODIC, Intent.PAST
    return Mode.HYBRID, Intent.GENERAL


def classify(query: str, intent: str | None) -> tuple[Mode, Intent]:
    """The retrieval mode and intent; an explicit ``intent`` (a Mode or Intent name) wins."""
    mode, kind = _mode_for(query)
    if intent is None:
        return mode, kind
    if intent in Mode.__members__.values():
        return Mode(intent), kind
    if intent in Intent.__members__.values():
        return (Mode.EPISODIC if intent == Intent.PAST else Mode.HYBRID), Intent(intent)
    allowed = ", ".join([*(m.value for m in Mode), *(i.value for i in Intent)])
    raise InvalidArgument(f"intent must be one of: {allowed}; got {shown(intent)}")

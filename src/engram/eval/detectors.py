"""Labelled sets for the write-policy detectors: load them and score the policy on them.

Each set is a JSON-lines file (``tests/data/detectors/*.jsonl``); a row holds ``text``,
``label`` (``instruction`` / ``secret`` / a special-category kind, or ``clear`` / ``none``),
``lang`` and ``notes``; secret rows also name the ``field`` the text goes in (content,
key, value as JSON, source.ref) and the ``content`` that goes with it. Secrets are never
written into the repository: a row says ``<<github>>`` and ``fill`` puts a freshly
generated fake token of that format there, seeded by the row, so runs are repeatable
and no scanner ever finds a real-looking key in the files.

Scoring runs the whole write policy (``policy.evaluate``) over proposals built as
``remember`` builds them, so what is measured is what a caller gets.
"""

from __future__ import annotations

import base64
import json
import random
import re
import string
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engram.config import Config
from engram.types import Proposal
from engram.write import detectors
from engram.write.policy import Verdict, VerdictKind, evaluate
from engram.write.proposal import build_proposal

__all__ = ["Labelled", "fill", "load", "proposal_for", "score", "verdict_for"]

_ALNUM = string.ascii_letters + string.digits
_UPPER32 = string.ascii_uppercase + "234567"
_URLSAFE = _ALNUM + "-_"


def _pick(rng: random.Random, alphabet: str, size: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(size))


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _visa(rng: random.Random) -> str:
    """A Visa-range number with a valid Luhn check digit (never issued: random digits)."""
    payload = "4" + _pick(rng, string.digits, 14)
    total = sum(
        (d * 2 - 9 if d * 2 > 9 else d * 2) if i % 2 == 0 else d
        for i, d in enumerate(int(c) for c in reversed(payload))
    )
    return payload + str((10 - total % 10) % 10)


def _password(rng: random.Random) -> str:
    body = _pick(rng, _ALNUM, 9) + rng.choice("!#%&*+-?@^") + _pick(rng, string.digits, 2)
    return "".join(rng.sample(body, len(body)))


def _pem(rng: random.Random) -> str:
    lines = "\n".join(_pick(rng, _ALNUM + "+/", 64) for _ in range(4))
    return f"-----BEGIN {'PRIVATE'} KEY-----\n{lines}\n-----END {'PRIVATE'} KEY-----"


def _jwt(rng: random.Random) -> str:
    header = _b64url(b'{"alg":"HS256","typ":"JWT"}')
    claims = _b64url(json.dumps({"sub": _pick(rng, string.digits, 8), "n": rng.random()}).encode())
    return f"{header}.{claims}.{_pick(rng, _URLSAFE, 43)}"


_MAKERS: dict[str, Callable[[random.Random], str]] = {
    "aws": lambda r: "AKIA" + _pick(r, _UPPER32, 16),
    "github": lambda r: "ghp" + "_" + _pick(r, _ALNUM, 36),
    "anthropic": lambda r: "sk-" + "ant-api03-" + _pick(r, _URLSAFE, 60),
    "openai": lambda r: "sk-" + "proj-" + _pick(r, _ALNUM, 40),
    "stripe": lambda r: "sk" + "_live_" + _pick(r, _ALNUM, 24),
    "slack": lambda r: "-".join(
        (
            "xox" + "b",
            _pick(r, string.digits, 12),
            _pick(r, string.digits, 13),
            _pick(r, _ALNUM, 24),
        )
    ),
    "slackhook": lambda r: "/".join(
        ("T" + _pick(r, _UPPER32, 8), "B" + _pick(r, _UPPER32, 8), _pick(r, _ALNUM, 24))
    ),
    "google": lambda r: "AI" + "za" + _pick(r, _URLSAFE, 35),
    "jwt": _jwt,
    "pem": _pem,
    "password": _password,
    "alnum12": lambda r: _pick(r, _ALNUM, 12),
    "hex32": lambda r: _pick(r, "0123456789abcdef", 32),
    "b62_24": lambda r: _pick(r, _ALNUM, 24),
    "b62_32": lambda r: _pick(r, _ALNUM, 32),
    "b62_40": lambda r: _pick(r, _ALNUM, 40),
    "b64_40": lambda r: _pick(r, _ALNUM + "+/", 40),
    "visa": _visa,
}
_SLOT = re.compile(r"<<(\w+)>>")


def fill(text: str, seed: str) -> str:
    """Replace each ``<<format>>`` slot with a generated fake token of that format."""
    rng = random.Random(seed)
    return _SLOT.sub(lambda m: _MAKERS[m.group(1)](rng), text)


@dataclass(frozen=True, slots=True)
class Labelled:
    """One row of a labelled set, slots filled."""

    text: str
    label: str
    lang: str
    notes: str
    field: str = "content"
    content: str | None = None

    @property
    def positive(self) -> bool:
        """Whether the detector should fire (``clear`` / ``none`` rows are negatives)."""
        return self.label not in {"clear", "none"}


def load(path: str | Path) -> list[Labelled]:
    """Read a labelled JSON-lines set, filling token slots per row."""
    source = Path(path)
    rows: list[Labelled] = []
    for index, line in enumerate(source.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        raw: dict[str, Any] = json.loads(line)
        raw["text"] = fill(raw["text"], f"{source.name}:{index}")
        rows.append(Labelled(**raw))
    return rows


def proposal_for(config: Config, row: Labelled, source_kind: str) -> Proposal:
    """The proposal ``remember`` would build with the row's text in the row's field."""
    fields: dict[str, Any] = {"source": {"kind": source_kind}}
    if row.field == "value":
        fields["value"] = json.loads(row.text)
    elif row.field == "key":
        fields["key"] = row.text
    elif row.field == "source.ref":
        fields["source"] = {"kind": source_kind, "ref": row.text}
    content = row.text if row.field == "content" else row.content or "A memory."
    return build_proposal(config, content, **fields)


def verdict_for(config: Config, row: Labelled, source_kind: str) -> Verdict:
    """The write policy's verdict on the row."""
    return evaluate(proposal_for(config, row, source_kind), config.write)


def _rate(hits: int, total: int) -> float:
    return round(hits / total, 4) if total else 0.0


def score(rows: Iterable[Labelled], flagged: Callable[[Labelled], bool]) -> dict[str, Any]:
    """Recall on the positives, false-positive rate on the negatives, misses by row.

    ``flagged`` says whether the policy acted on a row the way the set is about.
    """
    rows = list(rows)
    results = [(row, flagged(row)) for row in rows]
    pos = [(r, f) for r, f in results if r.positive]
    neg = [(r, f) for r, f in results if not r.positive]
    langs = sorted({r.lang for r, _ in pos})
    return {
        "positives": len(pos),
        "negatives": len(neg),
        "recall": _rate(sum(f for _, f in pos), len(pos)),
        "false_positive_rate": _rate(sum(f for _, f in neg), len(neg)),
        "missed": [f"{r.label}/{r.lang}: {r.notes}" for r, f in pos if not f],
        "false_positives": [r.text[:80] for r, f in neg if f],
        "recall_by_lang": {lang: _recall(pos, lang) for lang in langs},
    }


def _recall(pos: list[tuple[Labelled, bool]], lang: str) -> float:
    """Recall on the positives of one language."""
    mine = [hit for row, hit in pos if row.lang == lang]
    return _rate(sum(mine), len(mine))


def instruction_flagged(config: Config) -> Callable[[Labelled], bool]:
    """From a document, an instruction is quarantined (kept only as disputed)."""
    return lambda row: verdict_for(config, row, "document").kind is VerdictKind.QUARANTINE


def secret_flagged(config: Config) -> Callable[[Labelled], bool]:
    """From a conversation, a secret is rejected with code ``secret``."""
    return lambda row: verdict_for(config, row, "conversation").code == "secret"


def special_flagged(config: Config) -> Callable[[Labelled], bool]:
    """A special-category row is rejected for want of a consent basis, with its kind."""

    def flagged(row: Labelled) -> bool:
        verdict = verdict_for(config, row, "conversation")
        kinds = {f.kind for f in detectors.find_special_category(row.text)}
        right_kind = row.label in kinds if row.positive else bool(kinds)
        return verdict.code == "needs_consent" and right_kind

    return flagged

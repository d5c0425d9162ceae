"""Run Engram and the baselines over BEAM chats and score them in one process.

Each chat becomes one user scope (tenant ``beam``, user ``chat-<n>``); each
message one ``episode`` memory, ``source.ref`` = its id, observed at its
batch's anchor plus its position (``engram.eval.beam``). Two stores are filled:

* **Engram's** goes through the SDK exactly as documented: ``Config()`` as is,
  no retention or quota override, one ``remember_many`` per batch. Messages over
  the write policy's 8,192 bytes are stored as passages (each maps back to its
  message), exact repeats are merged (CONFIRM), and an episode expires a year
  (its default retention) after it was last written, confirmed or recalled: with
  ``write_at="observed"`` (the default) a message is written when it was
  observed, as a live agent would, so at the end of a long chat its oldest
  unrecalled episodes may have expired; ``write_at="end"`` writes everything at
  the chat's end, as the LoCoMo run does, so nothing has.
* **The baselines'** holds every message: the write policy's size, secret,
  consent and chatter rules are lifted and retention is permanent, so BM25,
  dense and hybrid (``engram.eval.baselines``) search all of the chat.

Both stores share one embedder (texts embedded once). Questions are asked at
the chat's end plus a day. Engram is asked once per k with
``Budget(max_items=k, max_tokens=100_000)``; a baseline ranks once and answers
each k with its prefix.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

import numpy as np
from numpy.typing import NDArray

from engram.config import Budget, Config, WritePolicy
from engram.embed import Embedder, create_embedder
from engram.embed.base import Wrapped
from engram.engram import Engram
from engram.eval.baselines import Ranker, baseline_rankers, percentiles
from engram.eval.beam import ABSTENTION, BeamChat, BeamMessage, BeamQuestion
from engram.eval.beam_metrics import BeamScores, prefixes, score_beam
from engram.eval.metrics import RetrievalOutcome
from engram.recall.model import RecallStatus
from engram.scope import Context
from engram.types import Operation

__all__ = ["SYSTEMS", "BeamRun", "WriteAt", "context_for", "reason_code", "run_beam"]

SYSTEMS = ("bm25", "dense", "hybrid", "engram")
TENANT = "beam"
MAX_TOKENS = 100_000
"""Engram's token budget: above 25 items of the largest storable message."""
WriteAt = Literal["observed", "end"]
_T = TypeVar("_T")
_OPEN_POLICY = WritePolicy(max_content_bytes=1 << 22, reject_secrets=False,
                           personal_data_needs_consent=False,
                           reject_transient_chatter=False)  # fmt: skip


@dataclass
class BeamRun:
    """Scores per system, what they cost, and what Engram's store could not hold."""

    scores: dict[str, BeamScores]
    write_at: WriteAt = "observed"
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    ingest_seconds: float = 0.0
    messages: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    merged: int = 0
    expired: int = 0
    baseline_missing: int = 0
    gold_unreachable: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary."""
        return {
            "systems": {name: s.to_dict() for name, s in self.scores.items()},
            "latency_ms": {name: percentiles(v) for name, v in self.latency_ms.items()},
            "ingest_seconds": round(self.ingest_seconds, 2),
            "write_at": self.write_at,
            "messages": self.messages,
            "rejected_messages": dict(self.rejected),
            "merged_messages": self.merged,
            "expired_at_recall": self.expired,
            "baseline_missing_messages": self.baseline_missing,
            "gold_unreachable_for_engram": dict(self.gold_unreachable),
        }


class _SharedEmbedder(Wrapped):
    """An embedder that embeds each distinct text once, for two stores in one run.

    Sharing stops before the questions (``stop_sharing``): every system then
    embeds its own queries, so its latency includes the embedding.
    """

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self._rows: dict[str, NDArray[np.float32]] = {}
        self._sharing = True

    def stop_sharing(self) -> None:
        """From now on every call goes to the wrapped embedder."""
        self._sharing = False
        self._rows.clear()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed the texts not seen before, then return every row in order."""
        if not self._sharing:
            return self.inner.embed(texts)
        todo = list(dict.fromkeys(t for t in texts if t not in self._rows))
        if todo:
            self._rows.update(zip(todo, self.inner.embed(todo), strict=True))
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.ascontiguousarray(np.stack([self._rows[t] for t in texts]))


def reason_code(reason: str) -> str:
    """Group a rejection's reason: ``oversized`` and ``secret`` name sizes and kinds."""
    if reason.startswith("content is ") and "bytes; the limit is" in reason:
        return "oversized"
    if reason.startswith("content holds a secret"):
        return "secret"
    return reason


def context_for(chat: BeamChat) -> Context:
    """The scope one chat's memories live in."""
    return Context(tenant_id=TENANT, user_id=f"chat-{chat.chat_id}")


def _batches(chat: BeamChat) -> list[list[BeamMessage]]:
    """The chat's messages grouped by batch, in order."""
    groups: dict[int, list[BeamMessage]] = {}
    for message in chat.messages:
        groups.setdefault(message.batch, []).append(message)
    return list(groups.values())


def _item(message: BeamMessage, **extra: object) -> dict[str, object]:
    """The ``remember_many`` item for one message: an episode sourced from the chat."""
    return {"content": message.content, "type": "episode", "observed_at": message.time,
            "source": {"kind": "conversation", "ref": str(message.id)},
            "consent_basis": "dataset_licence", **extra}  # fmt: skip


def _ingest_engram(mem: Engram, chat: BeamChat, run: BeamRun, asked_at: datetime) -> dict[str, str]:
    """Write the chat through the documented defaults; returns record id -> message id."""
    mapping: dict[str, str] = {}
    for batch in _batches(chat):
        now = batch[-1].time if run.write_at == "observed" else chat.end
        results = mem.remember_many(context_for(chat), [_item(m) for m in batch], now=now)
        for message, result in zip(batch, results, strict=True):
            run.messages += 1
            if result.record is None:
                code = reason_code(result.reason)
                run.rejected[code] = run.rejected.get(code, 0) + 1
            elif result.operation == Operation.CONFIRM:
                run.merged += 1
            elif result.record.expires_at is not None and result.record.expires_at <= asked_at:
                run.expired += 1
            else:  # a long message is stored as passages: each points to the message
                for record_id in result.passages or (result.record.id,):
                    mapping[record_id] = str(message.id)
    return mapping


def _ingest_all(mem: Engram, chat: BeamChat, run: BeamRun) -> dict[str, str]:
    """Write every message for the baselines; returns record id -> message id."""
    items = [_item(m, retention="permanent") for m in chat.messages]
    results = mem.remember_many(context_for(chat), items, now=chat.end)
    mapping = {
        r.record.id: str(m.id)
        for m, r in zip(chat.messages, results, strict=True)
        if r.record is not None and r.operation != Operation.CONFIRM
    }
    run.baseline_missing += len(chat.messages) - len(mapping)
    return mapping


def run_beam(
    chats: Sequence[BeamChat],
    embedder: str | Embedder = "local",
    systems: Sequence[str] = SYSTEMS,
    ks: Sequence[int] = (5, 10, 25),
    write_at: WriteAt = "observed",
) -> BeamRun:
    """Fill both in-memory stores with every chat, ask every question, score each system."""
    run = BeamRun(scores={}, write_at=write_at)
    shared = _SharedEmbedder(create_embedder(embedder))
    open_config = replace(Config(), write=_OPEN_POLICY)
    asked = {c.chat_id: c.end + timedelta(days=1) for c in chats}
    with (
        Engram.open("sqlite://:memory:", embedder=shared) as mem,
        Engram.open("sqlite://:memory:", embedder=shared, config=open_config) as every,
    ):
        started = time.perf_counter()
        engram_ids = {c.chat_id: _ingest_engram(mem, c, run, asked[c.chat_id]) for c in chats}
        run.ingest_seconds = time.perf_counter() - started
        baseline_ids = {c.chat_id: _ingest_all(every, c, run) for c in chats}
        shared.stop_sharing()
        run.gold_unreachable = _unreachable(chats, engram_ids)
        rankers = baseline_rankers(every, max(ks))
        for name in systems:
            times = run.latency_ms.setdefault(name, [])
            if name == "engram":
                outcomes = _ask_all(chats, engram_ids, _engram_answer(mem, ks, asked, times))
            else:
                answer = _baseline_answer(rankers[name], ks, times)
                outcomes = _ask_all(chats, baseline_ids, answer)
            run.scores[name] = score_beam(chats, outcomes, ks)
    return run


Outcomes = dict[tuple[str, str, int], Mapping[int, RetrievalOutcome]]
Answer = Callable[[BeamChat, BeamQuestion, Mapping[str, str]], dict[int, RetrievalOutcome]]


def _ask_all(
    chats: Sequence[BeamChat], id_maps: Mapping[str, Mapping[str, str]], answer: Answer
) -> Outcomes:
    """Every question of every chat, answered with the chat's record id -> message id map."""
    return {q.key: answer(c, q, id_maps[c.chat_id]) for c in chats for q in c.questions}


def _timed(times: list[float], call: Callable[[], _T]) -> _T:
    """Run ``call``, appending its wall time in milliseconds to ``times``."""
    t0 = time.perf_counter()
    result = call()
    times.append((time.perf_counter() - t0) * 1000)
    return result


def _baseline_answer(rank: Ranker, ks: Sequence[int], times: list[float]) -> Answer:
    """Rank once per question at the deepest k; every k gets the prefix."""

    def answer(
        chat: BeamChat, q: BeamQuestion, ids: Mapping[str, str]
    ) -> dict[int, RetrievalOutcome]:
        ranked = _timed(times, lambda: rank(context_for(chat), q.question))
        return prefixes([ids[i] for i in ranked if i in ids], ks)

    return answer


def _engram_answer(
    mem: Engram, ks: Sequence[int], asked: Mapping[str, datetime], times: list[float]
) -> Answer:
    """Recall once per question and k, with a budget of k items, at the chat's end."""

    def once(chat: BeamChat, q: BeamQuestion, ids: Mapping[str, str], k: int) -> RetrievalOutcome:
        budget = Budget(max_items=k, max_tokens=MAX_TOKENS)
        ctx, now = context_for(chat), asked[chat.chat_id]
        result = _timed(times, lambda: mem.recall(ctx, q.question, budget=budget, now=now))
        found = tuple(ids[i] for i in result.ids if i in ids)
        return RetrievalOutcome(found, result.status == RecallStatus.EMPTY)

    def answer(
        chat: BeamChat, q: BeamQuestion, ids: Mapping[str, str]
    ) -> dict[int, RetrievalOutcome]:
        return {k: once(chat, q, ids, k) for k in ks}

    return answer


def _unreachable(
    chats: Sequence[BeamChat], id_maps: Mapping[str, Mapping[str, str]]
) -> dict[str, int]:
    """Gold ids (of questions with gold) Engram cannot return: not stored, or expired."""
    counts: dict[str, int] = {}
    for chat in chats:
        stored = set(id_maps[chat.chat_id].values())
        for question in chat.questions:
            if question.type == ABSTENTION:
                continue
            missing = sum(1 for i in question.gold if str(i) not in stored)
            counts[question.type] = counts.get(question.type, 0) + missing
    return counts

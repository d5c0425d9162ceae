"""Grouping: old episodes into sessions, then sessions into topic groups.

A *slot* is what a summary may mix: episodes of one owner (tenant, user, agent),
one scope and one governance (``private``, ``purpose``, ``consent_basis``), so a
summary is visible to exactly the callers who could see each of its episodes
and carries one consent basis. A *session* is a run of a slot's episodes with
no gap longer than ``session_gap_minutes``. Within a session, a walk in time
order starts a new *topic group* when an episode is less similar than
``topic_similarity`` to the group so far (once the group holds
``min_topic_episodes``) or when the group is full (``max_group_episodes``).

Everything here is pure and deterministic: the same episodes give the same
groups. The walk restarts its state at every boundary, so the groups of the
episodes left after an interrupted run are the groups an uninterrupted run
made of them (``runner`` relies on it to resume without duplicates).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
from numpy.typing import NDArray

from engram.config import ConsolidationConfig
from engram.store.lexicon import stem_set
from engram.types import Record

__all__ = ["Group", "Sessions", "Slot", "slot_of", "topic_groups"]


@dataclass(frozen=True, slots=True)
class Slot:
    """Owner, scope and governance a summary shares with every episode it covers."""

    agent_id: str | None
    scope: str
    private: bool
    purpose: str | None
    consent_basis: str | None


def slot_of(record: Record) -> Slot:
    """The slot of one episode."""
    return Slot(record.agent_id, record.scope, record.private, record.purpose,
                record.consent_basis)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Group:
    """Episodes of one slot and topic, oldest first: the source of one summary."""

    slot: Slot
    episodes: tuple[Record, ...]

    @property
    def ids(self) -> tuple[str, ...]:
        """The episodes' ids, oldest first."""
        return tuple(record.id for record in self.episodes)

    @property
    def start(self) -> datetime:
        """When the first episode was observed."""
        return self.episodes[0].observed_at

    @property
    def end(self) -> datetime:
        """When the last episode was observed."""
        return self.episodes[-1].observed_at


class Sessions:
    """Splits a stream of episodes (oldest first, any slots interleaved) into sessions.

    ``add`` returns the sessions an episode closes (its slot's previous session
    when the gap is too long, and any other slot's session that can no longer
    grow); ``finish`` returns those that ended before ``cutoff`` minus the gap and
    keeps back the rest: a session still running at the cutoff may go on after
    it, so it waits for a later run instead of being summarised in two halves.
    """

    def __init__(self, gap: timedelta) -> None:
        self._gap = gap
        self._open: dict[Slot, list[Record]] = {}

    def add(self, record: Record) -> list[list[Record]]:
        """Take the next episode; the sessions that are now complete."""
        done = [s for slot, s in self._open.items()
                if record.observed_at - s[-1].observed_at > self._gap]  # fmt: skip
        for session in done:
            del self._open[slot_of(session[0])]
        self._open.setdefault(slot_of(record), []).append(record)
        return done

    def finish(self, cutoff: datetime) -> list[list[Record]]:
        """The open sessions that ended a full gap before ``cutoff``, oldest first."""
        done = [s for s in self._open.values() if cutoff - s[-1].observed_at > self._gap]
        self._open.clear()
        return sorted(done, key=lambda s: (s[0].observed_at, s[0].id))


def _unit(vector: NDArray[np.float32]) -> NDArray[np.float32]:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


class _Topic:
    """The group being filled: its episodes, vector centroid and word stems."""

    def __init__(self) -> None:
        self.members: list[Record] = []
        self.total: NDArray[np.float32] | None = None
        self.stems: set[str] = set()

    def similarity(self, record: Record, vector: NDArray[np.float32] | None) -> float:
        """Cosine to the centroid when both have vectors, else the share of the
        episode's word stems the group already holds."""
        if vector is not None and self.total is not None:
            return float(np.dot(_unit(vector), _unit(self.total)))
        stems = stem_set(record.content)
        return len(stems & self.stems) / len(stems) if stems else 0.0

    def take(self, record: Record, vector: NDArray[np.float32] | None) -> None:
        self.members.append(record)
        if vector is not None:
            unit = _unit(vector)
            self.total = unit if self.total is None else self.total + unit
        self.stems |= stem_set(record.content)


def topic_groups(
    session: Sequence[Record], vectors: Mapping[str, NDArray[np.float32]],
    config: ConsolidationConfig,
) -> Iterator[Group]:  # fmt: skip
    """The topic groups of one session, in time order."""
    topic = _Topic()
    for record in session:
        vector = vectors.get(record.id)
        full = len(topic.members) >= config.max_group_episodes
        shifted = (len(topic.members) >= config.min_topic_episodes
                   and topic.similarity(record, vector) < config.topic_similarity)  # fmt: skip
        if topic.members and (full or shifted):
            yield Group(slot_of(topic.members[0]), tuple(topic.members))
            topic = _Topic()
        topic.take(record, vector)
    if topic.members:
        yield Group(slot_of(topic.members[0]), tuple(topic.members))


def sessions_of(records: Iterable[Record], gap: timedelta, cutoff: datetime) -> list[list[Record]]:
    """Every complete session of ``records`` (oldest first), for callers holding them all."""
    splitter = Sessions(gap)
    found = [session for record in records for session in splitter.add(record)]
    return found + splitter.finish(cutoff)

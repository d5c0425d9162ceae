"""The run: each user under a lease, each episode group in one transaction.

For each user of the tenant (or the one named), the runner takes the user's
consolidation lease (``Maintenance.take_lease``; a user another consolidator
holds is reported busy and left alone), refuses a ``now`` earlier than the
user's last finished run (the clock ran backwards), then streams the user's
unconsolidated episodes observed before ``now - min_age_days``, oldest first,
into sessions and topic groups (``grouping``). Each group is:

1. summarised (``Summariser``) and its facts proposed (``facts``), then passed
   through the write policy and embedded, with no lock held;
2. written in ONE transaction that re-takes the lease, re-reads the episodes
   (a group whose episode changed meanwhile is skipped as stale: nothing of a
   forgotten episode reaches a summary), commits the summary and the facts
   through the write path, counts the outcomes its episodes report, marks the
   episodes consolidated and appends the audit entry (ids and reason codes).

A failure in a group (the summariser raising, a lost connection) ends the run
with the groups before it committed and nothing of it; the next run skips the
marked episodes and makes the same groups of the rest, so nothing is
duplicated. Finally near-duplicate facts merge (``merge``), and the lease is
released with ``now`` recorded as the user's last run. A second run with the
same ``now`` finds nothing to do and writes nothing (its lease row aside).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from engram import limits
from engram.config import Config
from engram.errors import Conflict, InvalidArgument, NotFound
from engram.ids import new_id
from engram.lifecycle.consolidate.facts import fact_items
from engram.lifecycle.consolidate.grouping import Group, Sessions, slot_of, topic_groups
from engram.lifecycle.consolidate.merge import merge, plan_merges, slot_visibility
from engram.lifecycle.consolidate.outcomes import episode_outcomes
from engram.lifecycle.consolidate.progress import Progress
from engram.lifecycle.consolidate.report import ConsolidationReport, Tally
from engram.lifecycle.consolidate.summarise import ExtractiveSummariser, Summariser
from engram.lifecycle.consolidate.writes import Batch, commit
from engram.store.audit import AuditEntry
from engram.store.contract import Audit, Consolidated, Lease, SubjectScan
from engram.store.open import Backend
from engram.store.predicate import Subject, Tenant
from engram.types import Operation, Proposal, Record, Sensitivity, Status, WriteResult
from engram.write.commit import Owner
from engram.write.passages import expand
from engram.write.path import WritePath
from engram.write.proposal import build_proposal
from engram.write.propose import Proposer, RuleProposer

__all__ = ["ACTOR", "Tools", "consolidate"]

ACTOR = "consolidation"
_RANK = {Sensitivity.LOW: 0, Sensitivity.MEDIUM: 1, Sensitivity.HIGH: 2}
_REFUSED = (Operation.REJECT, Operation.DISPUTE)


@dataclass(frozen=True, slots=True)
class Tools:
    """What a run works with."""

    store: Backend
    writer: WritePath
    config: Config
    summariser: Summariser
    proposer: Proposer

    @classmethod
    def checked(
        cls, store: Backend, writer: WritePath, config: Config, summariser: object,
        proposer: object,
    ) -> Tools:  # fmt: skip
        """The tools of a run, with the defaults (``ExtractiveSummariser``,
        ``RuleProposer``) for None; ``InvalidArgument`` for one of the wrong shape."""
        if summariser is None:
            summariser = ExtractiveSummariser()
        if not isinstance(summariser, Summariser):
            raise InvalidArgument("summariser must have summarise(episodes, limit) and confidence")
        if proposer is None:
            proposer = RuleProposer()
        if not isinstance(proposer, Proposer):
            raise InvalidArgument("proposer must have a propose(turns) method")
        return cls(store, writer, config, summariser, proposer)


class _Stale(Exception):
    """An episode of the group changed after it was read: skip the group this run."""


def _wall() -> datetime:
    """Lease times are wall-clock times: a lease must run out in real time, whatever
    ``now`` the run was given."""
    return datetime.now(UTC)


class _UserRun:
    """One user's consolidation under its lease."""

    def __init__(self, tools: Tools, subject: Subject, now: datetime, tally: Tally) -> None:
        self.t, self.subject, self.now, self.tally = tools, subject, now, tally
        self.rules = tools.config.consolidation
        self.holder = new_id()

    # -- the lease --------------------------------------------------------------

    def _take(self) -> Lease:
        until = _wall() + timedelta(seconds=self.rules.lease_seconds)
        return self.t.store.take_lease(self.subject, self.holder, _wall(), until)

    def start(self) -> bool:
        """Take the lease (False: another consolidator holds it); refuse a clock that
        runs behind this user's last finished run."""
        lease = self._take()
        if lease.held and lease.last_run is not None and self.now < lease.last_run:
            self.release(finished=False)
            raise InvalidArgument(
                f"now ({self.now.isoformat()}) is before this user's last consolidation "
                f"({lease.last_run.isoformat()}): the clock ran backwards; nothing was changed"
            )
        return lease.held

    def release(self, finished: bool) -> None:
        """Give the lease back; a finished run records ``now`` as the last run."""
        self.t.store.end_lease(self.subject, self.holder, self.now if finished else None)

    # -- reading ----------------------------------------------------------------

    def _episodes(self) -> Iterator[Record]:
        cutoff = self.now - timedelta(days=self.rules.min_age_days)
        after: tuple[datetime, str] | None = None
        while True:
            scan = SubjectScan(self.rules.episode_types, (Status.ACTIVE.value,), cutoff,
                               self.now, self.rules.page_size, after,
                               unconsolidated=True)  # fmt: skip
            page = self.t.store.subject_records(self.subject, scan)
            yield from page
            if len(page) < self.rules.page_size:
                return
            after = (page[-1].observed_at, page[-1].id)

    def groups(self) -> Iterator[Group]:
        """The topic groups of every complete session, in the order sessions close."""
        sessions = Sessions(timedelta(minutes=self.rules.session_gap_minutes))
        for episode in self._episodes():
            for session in sessions.add(episode):
                yield from self._topics(session)
        for session in sessions.finish(self.now - timedelta(days=self.rules.min_age_days)):
            yield from self._topics(session)

    def _topics(self, session: Sequence[Record]) -> Iterator[Group]:
        model = self.t.store.vector_model()
        vis = slot_visibility(self.subject, slot_of(session[0]))
        vectors = self.t.store.vectors(vis, [r.id for r in session], model) if model else {}
        yield from topic_groups(session, vectors, self.rules)

    # -- writing ----------------------------------------------------------------

    def _proposal(self, group: Group, text: str) -> Proposal:
        episodes, slot = group.episodes, group.slot
        confidence = min(e.confidence for e in episodes) * self.t.summariser.confidence
        return build_proposal(
            self.t.config, text, type=self.rules.summary_type, scope=slot.scope,
            confidence=round(confidence, 6), observed_at=group.start,
            source={"kind": "consolidation", "derived_from": list(group.ids)},
            sensitivity=max((e.sensitivity for e in episodes), key=_RANK.__getitem__),
            purpose=slot.purpose, consent_basis=slot.consent_basis,
            importance=max(e.importance for e in episodes), private=slot.private,
        )  # fmt: skip

    def _batch(self, group: Group) -> Batch:
        """The group's summary and facts as write units, policy-checked and embedded."""
        text = self.t.summariser.summarise(group.episodes, self.rules.summary_max_chars)
        text = limits.nul_as_space(text)  # from an older episode or any summariser's own
        tenant, user, slot = self.subject.tenant_id, self.subject.user_id, group.slot
        batch = Batch(self.t.writer)
        owner = Owner(tenant, user, slot.agent_id, slot.scope, ACTOR, slot.agent_id)
        batch.add(
            "summary",
            owner,
            expand(self._proposal(group, text), slot.scope, self.t.config.write, self.now),
        )
        for agent, unit in fact_items(group, self.t.proposer, self.t.config, self.now):
            batch.add("fact", Owner(tenant, user, agent, unit.target, ACTOR, slot.agent_id), unit)
        batch.prepare()
        return batch

    def _check_fresh(self, group: Group) -> None:
        """Inside the group's transaction: every episode is still as it was read."""
        vis = slot_visibility(self.subject, group.slot)
        current = {r.id: r for r in self.t.store.read(vis, list(group.ids))}
        for episode in group.episodes:
            now = current.get(episode.id)
            seen = (episode.status, episode.content_hash, episode.updated_at)
            if now is None or (now.status, now.content_hash, now.updated_at) != seen:
                raise _Stale(episode.id)

    def _write(self, group: Group, batch: Batch) -> tuple[dict[str, list[WriteResult]], int]:
        """The group's transaction (module docstring, step 2)."""
        store = self.t.store
        with store.transaction():
            if not self._take().held:
                raise Conflict("another consolidator took over this user's lease")
            self._check_fresh(group)
            results = commit(store, self.t.writer, batch, self.now)
            vis = slot_visibility(self.subject, group.slot)
            outcomes = episode_outcomes(store, vis, group.episodes, self.now, ACTOR)
            made = results["summary"][0].record
            ids = [made.id] if made is not None else []
            entry = AuditEntry(self.now, self.subject.tenant_id, self.subject.user_id, ACTOR,
                               "CONSOLIDATE", [*ids, *group.ids], "consolidated")  # fmt: skip
            store.apply([*outcomes, Consolidated(self.subject, group.ids, self.now),
                         Audit(entry)])  # fmt: skip
        return results, len(outcomes) // 2

    def consolidate(self, group: Group) -> None:
        """Summarise, extract and mark one group (skipped when it went stale)."""
        batch = self._batch(group)
        try:
            results, outcomes = self._write(group, batch)
        except _Stale:
            self.tally.stale_groups += 1
            return
        self._count(group, batch, results, outcomes)

    def _count(self, group: Group, batch: Batch, results: dict[str, list[WriteResult]],
               outcomes: int) -> None:  # fmt: skip
        tally = self.tally
        tally.groups += 1
        tally.episodes += len(group.episodes)
        tally.outcomes += outcomes
        summary = results["summary"][0]
        if summary.operation == Operation.ADD and summary.record is not None:
            tally.summaries += 1
            tally.summary_ids.append(summary.record.id)
        elif summary.operation == Operation.CONFIRM:
            tally.summaries_confirmed += 1
        else:
            tally.summaries_rejected += 1
            code = batch.code("summary")
            tally.rejected_reasons[code] = tally.rejected_reasons.get(code, 0) + 1
        facts = results.get("fact", [])
        tally.facts_proposed += len(facts)
        tally.facts_accepted += sum(1 for r in facts if r.operation not in _REFUSED)

    def merge_facts(self) -> None:
        """Merge near-duplicate facts, each merge in its own transaction, which
        re-takes (so renews) the lease first, as each group's write does: a run
        whose lease ran out and passed to another consolidator stops merging."""
        store = self.t.store
        for pair in plan_merges(store, self.subject, self.t.config, self.now):
            with store.transaction():
                if not self._take().held:
                    raise Conflict("another consolidator took over this user's lease")
                merged = merge(store, self.subject, pair, ACTOR, self.now)
            if merged:
                self.tally.merges += 1
                self.tally.merged.append((pair.kept.id, pair.loser.id))


def _users(store: Backend, tenant_id: str, user_id: str | None) -> list[str]:
    users = store.subject_users(Tenant(tenant_id))
    if user_id is None:
        return users
    if user_id not in users:
        raise NotFound(f"tenant {tenant_id!r} holds no memories of user {user_id!r}")
    return [user_id]


def consolidate(
    tools: Tools, tenant_id: str, user_id: str | None, now: datetime, progress: Progress | None
) -> ConsolidationReport:
    """Consolidate one user, or every user of the tenant (module docstring)."""
    tally = Tally()
    users = _users(tools.store, tenant_id, user_id)
    if progress is not None:
        progress.total(len(users))
    try:
        for done, user in enumerate(users):
            run = _UserRun(tools, Subject(tenant_id, user), now, tally)
            if not run.start():
                tally.busy_users.append(user)
                continue
            finished = False
            try:
                for group in run.groups():
                    run.consolidate(group)
                    if progress is not None:
                        progress.step(done, user, tally.groups, tally.episodes)
                run.merge_facts()
                finished = True
            finally:
                run.release(finished)
            tally.users += 1
    finally:
        if progress is not None:
            progress.close()
    return ConsolidationReport.of(tenant_id, user_id, now, tally)

"""What must hold after a concurrent run (``concur_support.run``), judged on the store.

* No caller saw an exception Engram does not document (in particular no
  ``sqlite3.OperationalError: database is locked``), and no recall returned
  another user's record.
* Every write that returned is present, unless an erasure acknowledged after it
  removed it: a plain write must be there; a write of the erased user must be
  gone when an erasure began after it returned, and there when every erasure
  attempt ended before it began (overlaps may go either way); a ``forget`` that
  returned leaves nothing of its record; a memory written past its retention may
  have been swept.
* No recall begun after a ``forget`` or an erasure returned returns what it
  removed.
* Each contended key of each user has exactly one active, uncontested version,
  and its versions form one line: numbered 1..n, each superseding the one before,
  with every acknowledged SUPERSEDE in it and no version off it (no fork).
* The audit chain verifies.
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass, field

from concur_support import VICTIM, Ack, Plan, ThreadLog, open_engram, user_context

from engram import Engram, Status
from engram.types import Record

__all__ = ["Verdict", "judge"]

WRITES = ("remember", "remember_many", "supersede")


@dataclass
class Verdict:
    """The problems found (empty: every invariant held) and what the run did."""

    problems: list[str] = field(default_factory=list)
    done: Counter[str] = field(default_factory=Counter)  # acknowledged calls per kind
    calls: Counter[str] = field(default_factory=Counter)  # every call per kind
    failures: Counter[str] = field(default_factory=Counter)  # "kind: Error" -> count
    unverified: int = 0  # erasure receipts whose verification failed
    failed_checks: Counter[str] = field(default_factory=Counter)  # their failed checks
    versions: int = 0  # versions in the contended keys' chains


def judge(plan: Plan, logs: list[ThreadLog]) -> Verdict:
    """Check every invariant of the module docstring against the store."""
    verdict = Verdict()
    acks = [ack for log in logs for ack in log.acks]
    for log in logs:
        for failure in log.failures:
            verdict.failures[f"{failure.kind}: {failure.error}"] += 1
            if not failure.documented:
                verdict.problems.append(f"undocumented {failure.error} in {failure.kind}: "
                                        f"{failure.message}")  # fmt: skip
        verdict.problems += log.foreign
        for kind, times in log.times_ms.items():
            verdict.calls[kind] += len(times)
    verdict.done.update(ack.kind for ack in acks)
    verdict.unverified = sum(1 for a in acks if a.kind in ("forget", "erase") and not a.verified)
    verdict.failed_checks.update(check for a in acks for check in a.unverified)
    mem = open_engram(plan)
    try:
        users = [f"u{n}" for n in range(plan.users)] + [VICTIM]
        stored = {u: {r.id: r for r in mem.list(user_context(plan, u), status=None,
                                                 limit=10_000)} for u in users}  # fmt: skip
        verdict.problems += _presence(logs, stored)
        verdict.problems += _recalled_after_removal(acks)
        verdict.problems += _chains(plan, mem, acks, stored, verdict)
        report = mem.audit_verify()
        if not report.ok:
            verdict.problems.append(f"audit chain does not verify: {report}")
    finally:
        mem.close()
    return verdict


def _presence(logs: list[ThreadLog], stored: dict[str, dict[str, Record]]) -> list[str]:
    """Acknowledged writes present, acknowledged removals absent (module docstring)."""
    acks = [ack for log in logs for ack in log.acks]
    failed = [f for log in logs for f in log.failures]
    erasures = [a for a in acks if a.kind == "erase"]
    attempts = [(a.start, a.end) for a in erasures] + [(f.start, f.end) for f in failed
                                                       if f.kind == "erase"]  # fmt: skip
    forgotten = {i for a in acks if a.kind == "forget" for i in a.ids}
    maybe = {i for f in failed if f.kind == "forget" for i in f.ids}
    every = {i for records in stored.values() for i in records}
    problems = [f"forgotten {i} is still stored" for i in sorted(forgotten & every)]
    for ack in (a for a in acks if a.kind in WRITES):
        for record_id in ack.ids:
            if record_id in forgotten | maybe:
                continue
            want = _expected(ack, erasures, attempts)
            here = record_id in stored[ack.user]
            if want is True and not here:
                problems.append(f"acknowledged {ack.kind} {record_id} of {ack.user} is lost")
            if want is False and here:
                problems.append(f"{record_id} of {VICTIM} survived an erasure begun after "
                                f"it was acknowledged")  # fmt: skip
    return problems


def _recalled_after_removal(acks: list[Ack]) -> list[str]:
    """No recall begun after a removal returned returns what it removed: a record
    whose ``forget`` had returned, or a write of the erased user acknowledged
    before an erasure that had returned."""
    forgotten = {i: a.end for a in acks if a.kind == "forget" for i in a.ids}
    erasures = [a for a in acks if a.kind == "erase"]
    written = {i: a.end for a in acks if a.kind in WRITES and a.user == VICTIM for i in a.ids}
    problems = []
    for recall in (a for a in acks if a.kind == "recall"):
        for record_id in recall.ids:
            gone = forgotten.get(record_id, recall.start) < recall.start
            acked = written.get(record_id)
            erased = acked is not None and any(
                acked < e.start and e.end < recall.start for e in erasures
            )  # fmt: skip
            if gone or erased:
                problems.append(f"a recall of {recall.user} begun after {record_id} was removed "
                                f"returned it")  # fmt: skip
    return problems


def _expected(ack: Ack, erasures: list[Ack], attempts: list[tuple[float, float]]) -> bool | None:
    """True: must be stored; False: must be gone; None: either (a race it may lose)."""
    if ack.ephemeral:
        return None
    if ack.user != VICTIM:
        return True
    if any(e.start > ack.end for e in erasures):
        return False
    if all(end < ack.start for _, end in attempts):
        return True
    return None


def _chains(
    plan: Plan, mem: Engram, acks: list[Ack], stored: dict[str, dict[str, Record]],
    verdict: Verdict,
) -> list[str]:  # fmt: skip
    """One active version per contended key, on one line of versions."""
    problems: list[str] = []
    for user in (f"u{n}" for n in range(plan.users)):
        for key in (f"k{n}" for n in range(plan.keys)):
            mine = [a for a in acks if a.kind == "supersede" and a.user == user and a.key == key]
            rows = [r for r in stored[user].values() if r.key == key]
            verdict.versions += len(rows)
            if mine or rows:
                problems += _one_line(mem, plan, user, key, mine, rows)
    return problems


def _one_line(
    mem: Engram, plan: Plan, user: str, key: str, acks: list[Ack], rows: list[Record]
) -> list[str]:  # fmt: skip
    where = f"{user}/{key}"
    active = [r for r in rows if r.status == Status.ACTIVE and r.contested_with is None]
    if len(active) != 1:
        return [f"{where}: {len(active)} active versions (of {len(rows)})"]
    chain = mem.history(user_context(plan, user), active[0].id)
    problems: list[str] = []
    if [r.version for r in chain] != list(range(1, len(chain) + 1)):
        problems.append(f"{where}: versions {[r.version for r in chain]} are not 1..n")
    for older, newer in itertools.pairwise(chain):
        if newer.supersedes != older.id or older.superseded_by != newer.id:
            problems.append(f"{where}: {newer.id} does not follow {older.id}")
    if chain[-1].id != active[0].id:
        problems.append(f"{where}: the active version is not the chain's last")
    off = {r.id for r in rows} - {r.id for r in chain}
    if off:
        problems.append(f"{where}: versions off the chain (a fork): {sorted(off)}")
    missing = {i for a in acks for i in a.ids} - {r.id for r in chain}
    if missing:
        problems.append(f"{where}: acknowledged SUPERSEDEs not in the chain: {sorted(missing)}")
    adds = [a for a in acks if a.operation == "ADD"]
    if len(adds) > 1 or any(a.operation not in ("ADD", "SUPERSEDE") for a in acks):
        problems.append(f"{where}: decisions {Counter(a.operation for a in acks)}")
    return problems

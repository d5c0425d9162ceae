"""Share copies after the share: revocation deletes them, the original's fate is theirs.

Retracting, correcting (or superseding through ``remember``) and expiring the
original retract or expire its copies in the same transaction; forgetting it,
or erasing its user, deletes them; a revoked grant deletes the copies made
under it and only those. Concurrent shares of one memory make one copy.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from typing import Any

import pytest
from tests.conftest import OpenMem

from backends import table_rows
from engram import Config, Context, Engram, Forbidden, NotFound, Status
from engram.config import SQLiteConfig, StoreConfig

CODER = Context(tenant_id="acme", user_id="u1", agent_id="coder")
REVIEWER = dataclasses.replace(CODER, agent_id="reviewer")
TESTER = dataclasses.replace(CODER, agent_id="tester")
DEPLOY = "Deploy the API with the blue-green script in ops/deploy.sh."


def _shared(mem: Engram, text: str = DEPLOY, type_name: str = "procedure",
            **fields: Any) -> tuple[str, str]:  # fmt: skip
    """A memory of the coder's, shared to the reviewer: (original id, copy id)."""
    written = mem.remember(CODER, text, type=type_name, **fields)
    assert written.record is not None
    (item,) = mem.share(CODER, [written.record.id], "reviewer").items
    assert item.outcome == "shared", item
    assert item.copy_id is not None
    return written.record.id, item.copy_id


def _status(mem: Engram, ctx: Context, memory_id: str) -> Status:
    return mem.get(ctx, memory_id).status


@pytest.fixture
def granted(mem: Engram) -> Engram:
    mem.grant_share("acme", "coder", "reviewer", ["procedure", "fact"])
    return mem


def test_revoking_a_type_deletes_that_types_copies_and_no_others(granted: Engram) -> None:
    mem = granted
    mem.grant_share("acme", "coder", "tester", ["procedure"])
    _, procedure = _shared(mem)
    _, fact = _shared(mem, "The API listens on port 8443.", "fact")
    original = mem.list(CODER, type="procedure")[0].id
    (to_tester,) = mem.share(CODER, [original], "tester").items
    assert to_tester.copy_id is not None
    report = mem.revoke_share("acme", "coder", "reviewer", ["procedure"])
    assert [g.type for g in report.revoked] == ["procedure"]
    assert report.deleted == (procedure,)
    with pytest.raises(NotFound):
        mem.get(REVIEWER, procedure)
    assert _status(mem, REVIEWER, fact) == Status.ACTIVE
    assert _status(mem, TESTER, to_tester.copy_id) == Status.ACTIVE  # another grant's copy
    assert _status(mem, CODER, original) == Status.ACTIVE  # the original is untouched
    assert [(g.to_agent, g.type) for g in mem.list_grants("acme")] == [
        ("reviewer", "fact"), ("tester", "procedure"),
    ]  # fmt: skip
    assert mem.revoke_share("acme", "coder", "reviewer").deleted == (fact,)
    with pytest.raises(Forbidden):
        mem.share(CODER, [original], "reviewer")
    with pytest.raises(NotFound):
        mem.revoke_share("acme", "coder", "reviewer")
    assert mem.audit_verify().ok


def test_after_a_revocation_a_new_grant_shares_anew(granted: Engram) -> None:
    original, copy = _shared(granted)
    granted.revoke_share("acme", "coder", "reviewer")
    granted.grant_share("acme", "coder", "reviewer", ["procedure"])
    (item,) = granted.share(CODER, [original], "reviewer").items
    assert item.outcome == "shared"
    assert item.copy_id not in (None, copy)


def test_retracting_the_original_retracts_its_copies(granted: Engram) -> None:
    original, copy = _shared(granted)
    granted.retract(CODER, original, reason="the script moved")
    assert _status(granted, REVIEWER, copy) == Status.RETRACTED
    assert copy not in granted.recall(REVIEWER, "How do we deploy the API?").ids
    entries = [row for row in table_rows(granted.store, "audit")
               if row["operation"] == "RETRACT" and copy in row["record_ids"]]  # fmt: skip
    assert [row["reason"] for row in entries] == ["original_retracted"]


def test_correcting_the_original_retracts_its_copies_and_the_new_version_shares(
    granted: Engram,
) -> None:
    original, copy = _shared(granted)
    corrected = granted.correct(CODER, original, "Deploy the API with ops/ship.sh.")
    assert corrected.record is not None
    assert _status(granted, REVIEWER, copy) == Status.RETRACTED
    (item,) = granted.share(CODER, [corrected.record.id], "reviewer").items
    assert item.outcome == "shared"
    assert item.copy_id is not None
    fresh = granted.get(REVIEWER, item.copy_id)
    assert (fresh.content, fresh.status) == ("Deploy the API with ops/ship.sh.", Status.ACTIVE)


def test_a_new_value_through_remember_retracts_the_copies_of_the_old(granted: Engram) -> None:
    original, copy = _shared(granted, "The API listens on port 8443.", "fact",
                             key="api.port", value=8443)  # fmt: skip
    newer = granted.remember(CODER, "The API listens on port 9443.", type="fact",
                             key="api.port", value=9443)  # fmt: skip
    assert newer.operation == "SUPERSEDE"
    assert original in newer.superseded
    assert _status(granted, REVIEWER, copy) == Status.RETRACTED


def test_expiring_the_original_expires_its_copies(granted: Engram) -> None:
    original, copy = _shared(granted)
    granted.expire(CODER, original)
    expired = granted.get(REVIEWER, copy)
    assert expired.status == Status.EXPIRED
    assert expired.valid_to is not None


def test_forgetting_the_original_deletes_its_copies(granted: Engram) -> None:
    original, copy = _shared(granted)
    receipt = granted.forget(CODER, original)
    assert copy in receipt.derived
    assert receipt.verified, receipt.failed
    with pytest.raises(NotFound):
        granted.get(REVIEWER, copy)


def test_erasing_the_user_erases_the_copies(granted: Engram) -> None:
    _, copy = _shared(granted)
    receipt = granted.erase_subject("acme", "u1")
    assert receipt.verified, receipt.failed
    with pytest.raises(NotFound):
        granted.get(REVIEWER, copy)


def test_a_copy_shared_on_follows_the_first_original_and_its_grant(granted: Engram) -> None:
    granted.grant_share("acme", "reviewer", "tester", ["procedure"])
    original, copy = _shared(granted)
    (onward,) = granted.share(REVIEWER, [copy], "tester").items
    assert onward.copy_id is not None
    assert granted.get(TESTER, onward.copy_id).source.derived_from == (copy,)
    granted.retract(CODER, original)
    assert _status(granted, TESTER, onward.copy_id) == Status.RETRACTED
    report = granted.revoke_share("acme", "coder", "reviewer")
    assert set(report.deleted) == {copy, onward.copy_id}


def _race(*calls: Callable[[], Any]) -> list[Any]:
    barrier = threading.Barrier(len(calls))
    out: list[Any] = [None] * len(calls)

    def run(i: int, call: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            out[i] = call()
        except Exception as exc:  # the test inspects what each caller got
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return out


def _instances(open_mem: OpenMem, url: str, n: int) -> list[Engram]:
    config = Config(store=StoreConfig(sqlite=SQLiteConfig(busy_timeout_ms=30_000)))
    return [open_mem(url, config=config) for _ in range(n)]


def test_concurrent_shares_of_one_memory_make_one_copy(shared_url: str,
                                                       open_mem: OpenMem) -> None:  # fmt: skip
    first, *others = _instances(open_mem, shared_url, 4)
    first.grant_share("acme", "coder", "reviewer", ["procedure"])
    written = first.remember(CODER, DEPLOY, type="procedure")
    assert written.record is not None
    ids = [written.record.id]
    reports = _race(*(lambda m=m: m.share(CODER, ids, "reviewer") for m in [first, *others]))
    outcomes = sorted(r.items[0].outcome for r in reports)
    assert outcomes == ["already_shared"] * 3 + ["shared"]
    assert len({r.items[0].copy_id for r in reports}) == 1
    assert len(first.list(REVIEWER, status=None)) == 1


def test_a_share_racing_a_revocation_leaves_no_copy_behind(shared_url: str,
                                                           open_mem: OpenMem) -> None:  # fmt: skip
    sharer, admin = _instances(open_mem, shared_url, 2)
    admin.grant_share("acme", "coder", "reviewer", ["procedure"])
    written = sharer.remember(CODER, DEPLOY, type="procedure")
    assert written.record is not None
    ids = [written.record.id]
    shared, revoked = _race(lambda: sharer.share(CODER, ids, "reviewer"),
                            lambda: admin.revoke_share("acme", "coder", "reviewer"))  # fmt: skip
    assert not isinstance(revoked, Exception), revoked
    # either the share committed first (and the revocation deleted its copy) or the
    # revocation did (and the share found no grant)
    assert isinstance(shared, Forbidden) or shared.items[0].outcome == "shared"
    assert admin.list(REVIEWER, status=None) == []

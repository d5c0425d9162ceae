"""Administrative reads: a tenant's users and one user's audit log, on every backend.

Both are tenant-bounded like every other read: another tenant's users never
appear, global records (no user) are not a user, and the audit log of a user
names ids and reason codes only and is empty once the user is erased.
"""

from __future__ import annotations

import pytest

from engram import Context, Engram, InvalidArgument

SECRET_TEXT = "I prefer jasmine tea in the afternoon."


def _seed(mem: Engram) -> str:
    first = mem.remember(Context(tenant_id="acme", user_id="u2"), SECRET_TEXT,
                         type="preference", key="tea", value="jasmine")  # fmt: skip
    mem.remember(Context(tenant_id="acme", user_id="u1"), "Deploys go out on Fridays.")
    mem.remember(Context(tenant_id="acme-corp", user_id="outsider"), "Other tenant's fact.")
    mem.remember(Context(tenant_id="ACME", user_id="lookalike"), "Case look-alike tenant.")
    mem.remember_global("acme", "All laptops use disk encryption.")
    assert first.record is not None
    return first.record.id


def test_users_lists_only_the_tenants_own_users(mem: Engram) -> None:
    _seed(mem)
    assert mem.users("acme") == ["u1", "u2"]
    assert mem.users("acme", limit=1) == ["u1"]
    assert mem.users("nobody") == []


def test_audit_log_names_ids_and_reasons_never_content(mem: Engram) -> None:
    record_id = _seed(mem)
    mem.retract(Context(tenant_id="acme", user_id="u2"), record_id, reason="user said so")
    entries = mem.audit_log("acme", "u2")
    assert [e.operation for e in entries] == ["ADD", "RETRACT"]
    assert all(e.record_ids == (record_id,) for e in entries)
    assert [e.seq for e in entries] == sorted(e.seq for e in entries)
    assert SECRET_TEXT not in repr([e.to_dict() for e in entries])
    assert mem.audit_log("acme", "u1")[0].record_ids != (record_id,)
    assert mem.audit_log("acme-corp", "u2") == []


def test_an_erased_users_audit_log_is_empty(mem: Engram) -> None:
    _seed(mem)
    mem.erase_subject("acme", "u2")
    assert mem.audit_log("acme", "u2") == []
    assert mem.users("acme") == ["u1"]
    assert mem.audit_verify().ok


@pytest.mark.parametrize("bad", ["", " ", "a\nb", 7, None])
def test_bad_identifiers_are_refused(mem: Engram, bad: object) -> None:
    with pytest.raises(InvalidArgument):
        mem.users(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        mem.audit_log("acme", bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0, -1, 10_001, True, 2.5])
def test_bad_limits_are_refused(mem: Engram, limit: object) -> None:
    with pytest.raises(InvalidArgument, match="limit"):
        mem.users("acme", limit=limit)  # type: ignore[arg-type]

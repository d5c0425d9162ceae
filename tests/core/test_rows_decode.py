"""Decoding ``records`` rows: the slot-setting constructor builds exactly what
``Record.__init__`` builds, and ``DecodedRows`` hands out a kept record only for
an identical row, never shares a mutable value, and forgets on a forget."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

from engram import Context, Engram
from engram.store.decoded import DecodedRows
from engram.store.rows import COLUMNS, record_from_values, record_to_row
from engram.types import (
    Authority,
    Record,
    Retention,
    Sensitivity,
    Source,
    SourceKind,
    Status,
    Tier,
)  # fmt: skip

T0 = datetime(2025, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


def _record(**changes: object) -> Record:
    """A record with every optional field set, so each one is compared."""
    base = Record(
        id="01ABC", tenant_id="acme", user_id="u1", agent_id="a1", scope="repo:r1",
        tier=Tier.SEMANTIC, type="constraint", key="k.one", value="sync",
        content="Never deploy on friday.", authority=Authority.TOOL_OBSERVATION,
        confidence=0.75, source=Source(SourceKind.TOOL, "D1:3", ("01X", "01Y")),
        observed_at=T0, valid_from=T0 + timedelta(days=1), valid_to=T0 + timedelta(days=9),
        created_at=T0 + timedelta(seconds=1), updated_at=T0 + timedelta(seconds=2),
        status=Status.SUPERSEDED, version=3, supersedes="01OLD", superseded_by="01NEW",
        sensitivity=Sensitivity.HIGH, purpose="billing", consent_basis="contract",
        retention=Retention.SHORT_TERM, expires_at=T0 + timedelta(days=30), importance=0.25,
        access_count=7, last_accessed_at=T0 + timedelta(hours=3), private=True,
        embedding_model="hashing-v2-384", content_hash="ab" * 32, contested_with="01C",
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def _row(record: Record) -> tuple[object, ...]:
    values = record_to_row(record)
    return tuple(values[column] for column in COLUMNS)


def _fields(record: Record) -> list[tuple[str, object, type]]:
    return [(f.name, getattr(record, f.name), type(getattr(record, f.name)))
            for f in dataclasses.fields(Record)]  # fmt: skip


def test_decoded_record_has_every_field_of_the_original() -> None:
    bare = _record(
        user_id=None, agent_id=None, valid_from=None, valid_to=None, expires_at=None,
        last_accessed_at=None, source=Source(), value=None, contested_with=None,
    )  # fmt: skip
    for record in (_record(), bare):
        decoded = record_from_values(_row(record))
        assert decoded == record
        assert _fields(decoded) == _fields(record)  # same values, same types
        assert decoded.replace(version=4).version == 4  # still a normal, frozen record


def test_kept_record_only_for_an_identical_row() -> None:
    cache = DecodedRows(per_generation=2)
    row = _row(_record())
    first = cache.records([row])[0]
    assert cache.records([tuple(row)])[0] is first
    touched = _row(_record(access_count=8))
    again = cache.records([touched])[0]
    assert again is not first
    assert again.access_count == 8


def test_mutable_values_are_never_shared() -> None:
    cache = DecodedRows()
    row = _row(_record(value={"tz": "UTC"}))
    one, two = cache.records([row, row])
    assert one == two
    assert one is not two
    assert one.value is not two.value
    assert len(cache) == 0


def test_generations_bound_the_cache() -> None:
    cache = DecodedRows(per_generation=3)
    rows = [_row(_record(id=f"01R{i}")) for i in range(10)]
    cache.records(rows)
    assert len(cache) <= 6
    assert cache.records([rows[-1]])[0] is cache.records([rows[-1]])[0]


def test_forget_drops_decoded_records(tmp_path: Path) -> None:
    mem = Engram.open(f"sqlite:///{tmp_path / 'm.db'}", embedder="hashing")
    try:
        c = Context(tenant_id="acme", user_id="u1")
        mem.remember(c, "The staging cluster lives in Frankfurt.")
        assert mem.recall(c, "where is the staging cluster").items
        assert mem.store.holds_cached(c.tenant_id)
        assert len(mem.store.decoded) > 0  # type: ignore[attr-defined]
        mem.forget(c, mem.recall(c, "staging cluster").ids[0])
        assert len(mem.store.decoded) == 0  # type: ignore[attr-defined]
    finally:
        mem.close()

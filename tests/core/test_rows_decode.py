"""Decoding ``records`` rows: the slot-setting constructor builds exactly what
``Record.__init__`` builds, every field with its value and its type."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

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


def test_decoded_record_is_a_frozen_record_whether_or_not_it_was_updated() -> None:
    for record in (_record(), _record(updated_at=T0 + timedelta(seconds=1))):
        decoded = record_from_values(_row(record))
        assert type(decoded) is Record
        assert _fields(decoded) == _fields(record)
        assert decoded.updated_at == record.updated_at
        try:
            decoded.content = "changed"  # type: ignore[misc]
        except dataclasses.FrozenInstanceError:
            pass
        else:
            raise AssertionError("a decoded record accepted an assignment")
        assert decoded.content == record.content
        assert hash(decoded) == hash(record)

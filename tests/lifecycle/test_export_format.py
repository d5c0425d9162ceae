"""The export file (docs/export-format.md): a versioned JSON Lines format, checked whole.

A header line, then one line per record version; reading refuses anything it
cannot vouch for, and a forged or broken file writes nothing. Runs on every
backend; the random-history round trip is in ``test_export_format_properties.py``.
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backends import table_rows
from engram import Context, Engram, Forbidden, InvalidArgument
from engram.lifecycle import jsonl
from engram.types import Record

CTX = Context(tenant_id="acme", user_id="u1", agent_id="coder", repository_id="r1")
OTHER = dataclasses.replace(CTX, user_id="u2")
Lines = list[dict[str, Any]]


def _history(mem: Engram) -> None:
    first = mem.remember(CTX, "Release train leaves on Mondays.", key="release.day", value="mon")
    assert first.record is not None
    mem.correct(CTX, first.record.id, "Release train leaves on Tuesdays.", value="tue")
    wrong = mem.remember(CTX, "The designer is called Sam.", scope="repo:r1").record
    assert wrong is not None
    mem.retract(CTX, wrong.id)
    mem.remember(
        CTX,
        "Summary of the release discussion.",
        type="summary",
        source={"kind": "consolidation", "ref": "s1", "derived_from": [first.record.id]},
    )


def _lines(path: Path) -> Lines:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _save(path: Path, lines: Lines) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def exported(mem: Engram, tmp_path: Path) -> Path:
    _history(mem)
    (tmp_path / "out").mkdir()
    path = tmp_path / "out" / "export.jsonl"
    mem.export_jsonl(CTX, path)
    return path


def _untouched(mem: Engram, audit_rows: int, rows: Lines | None = None) -> None:
    assert mem.export(OTHER) == []
    assert mem.export(CTX) == (rows or [])
    assert len(table_rows(mem.store, "audit")) == audit_rows


def test_the_file_is_a_header_then_one_line_per_version(mem: Engram, exported: Path) -> None:
    header, *rows = _lines(exported)
    assert list(header) == list(jsonl.HEADER_FIELDS)
    assert (header["format"], header["version"]) == ("engram-export", 1)
    assert (header["tenant_id"], header["user_id"], header["agent_id"]) == ("acme", "u1", "coder")
    assert header["records"] == len(rows) == 4
    assert rows == mem.export(CTX)  # every status, links and provenance, oldest first
    assert all(list(row) == list(jsonl.RECORD_FIELDS) for row in rows)
    assert {row["status"] for row in rows} == {"active", "superseded", "retracted"}
    assert [p.name for p in exported.parent.iterdir()] == ["export.jsonl"]  # no temp file


def test_an_open_text_or_binary_file_works_as_well_as_a_path(mem: Engram) -> None:
    _history(mem)
    out = io.StringIO()
    report = mem.export_jsonl(CTX, out)
    assert report.records == report.header.records == 4
    text = out.getvalue()
    first = mem.import_jsonl(OTHER, io.StringIO(text), rehome=True)
    assert first.imported == 4
    again = mem.import_jsonl(OTHER, io.BytesIO(text.encode()), rehome=True)
    assert (again.imported, len(again.skipped)) == (0, 4)


def test_a_round_trip_keeps_contents_statuses_chains_and_provenance(
    mem: Engram, exported: Path
) -> None:
    rows = mem.export(CTX)
    report = mem.import_jsonl(OTHER, exported, rehome=True)
    assert report.imported == len(rows)
    copies = {row["id"]: row for row in mem.export(OTHER)}
    ids = dict(report.id_map)
    for row in rows:
        new = copies[ids[row["id"]]]
        for name in ("content", "status", "version", "type", "key", "value", "authority",
                     "scope", "valid_from", "valid_to", "observed_at", "created_at"):  # fmt: skip
            assert new[name] == row[name], name
        for name in ("supersedes", "superseded_by", "contested_with"):
            assert new[name] == (ids[row[name]] if row[name] else None), name
        derived = [ids.get(i, i) for i in row["source"]["derived_from"]]
        assert new["source"] == {**row["source"], "derived_from": derived}
    assert mem.import_jsonl(OTHER, exported, rehome=True).imported == 0
    assert len(mem.export(OTHER)) == len(rows)  # importing twice changes nothing


def test_the_same_identity_imports_into_another_store(
    exported: Path, tmp_path: Path, open_mem: Callable[..., Engram]
) -> None:
    other = open_mem(f"sqlite:///{tmp_path}/other.db")
    report = other.import_jsonl(CTX, exported)
    assert report.imported == 4
    contents = sorted(r["content"] for r in _lines(exported)[1:])
    assert sorted(r["content"] for r in other.export(CTX)) == contents


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("\n\n", "empty"),
        ('{"format": "csv", "version": 1}\n', "not an Engram export"),
        ("[1, 2]\n", "must be a JSON object"),
        ("not json\n", "line 1 is not valid JSON"),
        ('{"format": "engram-export", "version": 2}\n', "version 2 is not supported"),
        ('{"format": "engram-export", "version": "1"}\n', "version '1' is not supported"),
        ('{"format": "engram-export", "version": true}\n', "version True is not supported"),
    ],
)
def test_a_file_that_is_not_a_known_export_is_refused(
    mem: Engram, tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InvalidArgument, match=message):
        mem.import_jsonl(CTX, path)
    _untouched(mem, 0)


def test_a_missing_file_and_a_wrong_argument_are_clear_errors(mem: Engram, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="no export file"):
        mem.import_jsonl(CTX, tmp_path / "absent.jsonl")
    with pytest.raises(InvalidArgument, match="cannot write an export"):
        mem.export_jsonl(CTX, tmp_path / "no-such-folder" / "export.jsonl")
    with pytest.raises(InvalidArgument, match="a path or an open file"):
        mem.import_jsonl(CTX, 42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument, match="rehome"):
        mem.import_jsonl(CTX, tmp_path / "absent.jsonl", rehome="yes")  # type: ignore[arg-type]


Edit = Callable[[Lines], None]


def _set(index: int, **fields: Any) -> Edit:
    return lambda lines: lines[index].update(fields)


def _drop(index: int, name: str) -> Edit:
    return lambda lines: lines[index].pop(name)


def _chain(lines: Lines) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first version of release.day and the version that superseded it."""
    old = next(line for line in lines[1:] if line.get("superseded_by"))
    new = next(line for line in lines[1:] if line.get("id") == old["superseded_by"])
    return old, new


def _fork(lines: Lines) -> None:
    _, new = _chain(lines)
    lines.append({**new, "id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "content": "Fridays.",
                  "content_hash": _hash("Fridays.")})  # fmt: skip
    lines[0]["records"] += 1


def _hash(text: str) -> str:
    from engram.write.proposal import content_hash

    return content_hash(text)


FORGED: list[tuple[str, Edit, type[Exception], str]] = [
    ("truncated", lambda lines: lines.pop(), InvalidArgument, "announces 4 records but"),
    ("extra header field", _set(0, signed=True), InvalidArgument, "unknown fields"),
    ("missing row field", _drop(2, "version"), InvalidArgument, "lacks fields"),
    ("unknown row field", _set(2, owner="root"), InvalidArgument, "unknown fields"),
    ("another tenant's row", _set(2, tenant_id="globex"), Forbidden, "another tenant"),
    ("another user's row", _set(3, user_id="victim"), Forbidden, "another tenant or user"),
    ("another agent's row", _set(3, agent_id="root"), Forbidden, "another agent"),
    ("a header of another user", _set(0, user_id="victim"), Forbidden, "under that identity"),
    ("a header without a user", _set(0, user_id=None), InvalidArgument, "user_id"),
    ("explicit_admin", _set(1, authority="explicit_admin"), InvalidArgument, "explicit_admin"),
    ("a global row", _set(1, scope="global"), InvalidArgument, "global"),
    ("a tampered id", _set(2, id="01HZZZ-not-an-id"), InvalidArgument, "not an Engram record"),
    ("a tampered link", _set(2, supersedes="../../etc"), InvalidArgument, "not an Engram record"),
    ("a repeated id", lambda lines: lines[3].update(id=lines[2]["id"]), InvalidArgument,
     "id repeats"),
    ("edited content", _set(1, content="Release train leaves on Sundays."), InvalidArgument,
     "content_hash does not match"),
    ("a successor not superseded", lambda lines: _chain(lines)[0].update(status="active"),
     InvalidArgument, "names a successor but its status"),
    ("a link the predecessor denies",
     lambda lines: _chain(lines)[0].update(superseded_by="01ARZ3NDEKTSV4RRFFQ69G5FAV"),
     InvalidArgument, "broken supersedes link"),
    ("a version not above", lambda lines: _chain(lines)[1].update(version=1), InvalidArgument,
     "version is not above"),
    ("a fork", _fork, InvalidArgument, "broken supersedes link"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "error", "message"), [f[1:] for f in FORGED],
                         ids=[f[0] for f in FORGED])  # fmt: skip
def test_a_forged_or_broken_file_is_refused_and_writes_nothing(
    mem: Engram, exported: Path, edit: Edit, error: type[Exception], message: str
) -> None:
    lines, rows = _lines(exported), mem.export(CTX)
    edit(lines)
    before = len(table_rows(mem.store, "audit"))
    with pytest.raises(error, match=message):
        mem.import_jsonl(CTX, _save(exported, lines))
    with pytest.raises(error):
        mem.import_jsonl(OTHER, exported, rehome=True)  # rows still must match the header
    _untouched(mem, before, rows)


def test_a_malformed_line_names_its_number(mem: Engram, exported: Path) -> None:
    text = exported.read_text(encoding="utf-8").splitlines()
    cases = {
        "duplicate key": (text[2][:-1] + ', "status": "active"}', "line 3: field 'status'"),
        "NaN": (text[2].replace('"confidence":1.0', '"confidence":NaN'), "line 3: NaN"),
        "not an object": ("[]", "line 3 must be a JSON object"),
    }
    for name, (line, message) in cases.items():
        edited = [*text[:2], line, *text[3:]]
        exported.write_text("\n".join(edited) + "\n", encoding="utf-8")
        with pytest.raises(InvalidArgument, match=message):
            mem.import_jsonl(OTHER, exported, rehome=True)
        assert mem.export(OTHER) == [], name
    exported.write_bytes(b"\n".join([text[0].encode(), b"\xff\xfe{}"]))
    with pytest.raises(InvalidArgument, match="line 2 is not UTF-8"):
        mem.import_jsonl(OTHER, exported, rehome=True)


def test_the_reader_needs_no_store_and_the_writer_checks_its_count(tmp_path: Path) -> None:
    """The functions the CLI calls, without an Engram."""
    header = jsonl.Header.of(_scope(), _time(), 0)
    path = tmp_path / "empty.jsonl"
    assert jsonl.write(path, header, []) == 0
    read_header, rows = jsonl.read(path)
    assert (read_header, rows) == (header, [])
    with pytest.raises(InvalidArgument, match="announces 0 records, not 1"):
        jsonl.write(path, header, [{"id": "x"}])
    assert jsonl.read(path) == (header, [])  # the failed write left the file as it was


def test_a_header_with_a_blank_tenant_is_refused(tmp_path: Path) -> None:
    header = {"format": "engram-export", "version": 1, "exported_at": _time().isoformat(),
              "tenant_id": " ", "user_id": "u1", "agent_id": None, "records": 0}  # fmt: skip
    with pytest.raises(InvalidArgument, match=r"header's subject is not valid: context\.tenant_id"):
        jsonl.read(_save(tmp_path / "h.jsonl", [header]))


def _scope() -> Any:
    from engram.scope import resolve

    return resolve(CTX)


def _time() -> Any:
    from datetime import UTC, datetime

    return datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def test_version_1_holds_every_field_of_the_record_model_and_documents_each() -> None:
    """A new record field changes the format: this fails until the version is decided."""
    assert tuple(f.name for f in dataclasses.fields(Record)) == jsonl.RECORD_FIELDS
    doc = (Path(__file__).parents[2] / "docs" / "export-format.md").read_text(encoding="utf-8")
    for name in (*jsonl.HEADER_FIELDS, *jsonl.RECORD_FIELDS):
        assert f"| `{name}` |" in doc, f"docs/export-format.md does not document {name}"


def test_an_export_holding_a_nul_is_refused_cleanly_on_every_backend(
    mem: Engram, exported: Path
) -> None:
    """An older SQLite store took content with a NUL (U+0000), which PostgreSQL's text
    cannot hold: its export, read back by ``import_jsonl`` or as ``import_records``
    rows, is refused naming the row, and writes nothing (no 500 on PostgreSQL)."""
    lines, rows = _lines(exported), mem.export(CTX)
    held = "Release train\x00 leaves on Mondays."
    lines[1].update(content=held, content_hash=_hash(held))
    before = len(table_rows(mem.store, "audit"))
    with pytest.raises(InvalidArgument, match="NUL"):
        mem.import_jsonl(CTX, _save(exported, lines))
    with pytest.raises(InvalidArgument, match="NUL"):
        mem.import_records(CTX, [{**rows[0], "content": held, "content_hash": _hash(held)}])
    _untouched(mem, before, rows)

"""export, import and erase: a user's memories leave as JSON with their history, come
back through the write path once however often imported, and an erasure happens
only when confirmed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from cli_support import ID, Engram

from engram import Context
from engram import Engram as EngramSdk

OTHER = ("--tenant", "acme", "--user", "u9")


def _contents(db_url: str, user: str) -> list[tuple[str, str]]:
    with EngramSdk.open(db_url, embedder="hashing") as mem:
        rows = mem.list(Context("acme", user), status=None)
        return sorted((r.content, r.status.value) for r in rows)


def _history(engram: Engram, remembered: Callable[..., str]) -> None:
    first = remembered(
        "Prefers Python for data scripts.",
        "--key",
        "lang.data",
        "--value",
        "Python",
        "--type",
        "preference",
    )
    assert engram("correct", first, "Prefers Rust for data scripts.", *ID).code == 0
    remembered("Works from Lisbon.", "--type", "profile")


def test_export_to_a_file_then_import_elsewhere_twice(
    engram: Engram, remembered: Callable[..., str], db_url: str, tmp_path: Path
) -> None:
    _history(engram, remembered)
    out = tmp_path / "u1.jsonl"
    exported = engram("export", *ID, "--out", str(out))
    assert exported.code == 0
    assert exported.out == ""
    assert "exported 3 memories" in exported.err
    header, *rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert header["format"] == "engram-export"
    assert (header["version"], header["records"], header["user_id"]) == (1, 3, "u1")
    assert {r["status"] for r in rows} == {"active", "superseded"}
    assert not list(tmp_path.glob(".u1.jsonl.*"))  # the temporary file was renamed
    refused = engram("import", str(out), *OTHER)  # the file is u1's: another user is refused
    assert refused.code == 6, refused.err
    assert "rehome" in refused.err
    first = engram("import", str(out), *OTHER, "--rehome", "--json")
    assert first.code == 0, first.err
    assert first.json()["imported"] == 3
    again = engram("import", str(out), *OTHER, "--rehome")
    assert again.code == 0
    assert again.out.startswith("imported 0 rows, skipped 3")
    assert _contents(db_url, "u9") == _contents(db_url, "u1")


def test_export_to_stdout_and_import_from_stdin(
    engram: Engram, remembered: Callable[..., str], db_url: str, tmp_path: Path
) -> None:
    _history(engram, remembered)
    exported = engram("export", *ID)
    assert exported.code == 0
    assert json.loads(exported.out.splitlines()[0])["format"] == "engram-export"
    target = f"sqlite:///{tmp_path / 'other.db'}"
    imported = engram("import", "-", *ID, stdin=exported.out, db=target)
    assert imported.code == 0, imported.err
    assert _contents(target, "u1") == _contents(db_url, "u1")


def test_the_older_json_array_still_exports_and_imports(
    engram: Engram, remembered: Callable[..., str], db_url: str, tmp_path: Path
) -> None:
    _history(engram, remembered)
    out = tmp_path / "u1.json"
    assert engram("export", *ID, "--format", "json", "--out", str(out)).code == 0
    rows = json.loads(out.read_text())
    assert {r["status"] for r in rows} == {"active", "superseded"}
    assert not list(tmp_path.glob(".*.partial"))
    for form in ("auto", "json"):  # an array is found by itself, or named
        ran = engram("import", str(out), *OTHER, "--format", form, "--json")
        assert ran.code == 0, ran.err
    assert _contents(db_url, "u9") == _contents(db_url, "u1")
    wrong = engram("import", str(out), *OTHER, "--format", "jsonl")
    assert wrong.code == 2
    assert "line 1 is not valid JSON" in wrong.err  # an indented array, read as lines


def test_a_bad_import_names_the_problem_and_writes_nothing(
    engram: Engram, remembered: Callable[..., str], db_url: str, tmp_path: Path
) -> None:
    _history(engram, remembered)
    rows = json.loads(engram("export", *ID, "--format", "json").out)
    forged = [*rows[:1], {**rows[1], "authority": "explicit_admin"}, *rows[2:]]
    (tmp_path / "forged.json").write_text(json.dumps(forged))
    (tmp_path / "broken.json").write_text('[{"content": ')
    (tmp_path / "object.json").write_text('{"content": "x"}')
    header, *lines = engram("export", *ID).out.splitlines()
    (tmp_path / "truncated.jsonl").write_text("\n".join([header, *lines[:-1]]) + "\n")
    newer = json.dumps({**json.loads(header), "version": 2})
    (tmp_path / "newer.jsonl").write_text("\n".join([newer, *lines]) + "\n")
    cases = {
        "forged.json": "row 1",
        "broken.json": "is not JSON",
        "object.json": "not an Engram export",
        "missing.json": "cannot read",
        "truncated.jsonl": "announces 3 records but the file holds 2",
        "newer.jsonl": "version 2 is not supported",
    }
    for name, says in cases.items():
        ran = engram("import", str(tmp_path / name), *OTHER, "--rehome")
        assert ran.code == 2, (name, ran.err)
        assert says in ran.err, (name, ran.err)
    assert engram("import", str(tmp_path / "object.json"), *OTHER, "--format", "json").code == 2
    assert _contents(db_url, "u9") == []


def test_erase_asks_first_and_an_unconfirmed_erase_changes_nothing(
    engram: Engram, remembered: Callable[..., str], db_url: str
) -> None:
    _history(engram, remembered)
    declined = engram("erase", *ID, stdin="n\n")
    assert declined.code == 1
    assert "Erase every memory" in declined.err
    assert "nothing was erased" in declined.err
    assert engram("erase", *ID, stdin="").code == 1  # end of input is no
    assert len(_contents(db_url, "u1")) == 3
    confirmed = engram("erase", *ID, "--json", stdin="yes\n")
    assert confirmed.code == 0, confirmed.err
    assert confirmed.json()["records"] == 3
    assert confirmed.json()["verified"] is True
    assert _contents(db_url, "u1") == []


def test_erase_with_yes_does_not_ask_and_needs_a_whole_identity(
    engram: Engram, remembered: Callable[..., str], db_url: str
) -> None:
    remembered("Works from Lisbon.", "--type", "profile")
    assert engram("erase", "--tenant", "acme", "--yes").code == 2
    ran = engram("erase", *ID, "--yes")
    assert ran.code == 0
    assert "Erase every" not in ran.err
    assert "records" in ran.out
    assert _contents(db_url, "u1") == []

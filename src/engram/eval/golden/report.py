"""Judge golden case results: failed expectations per case, and the suite's metrics.

Metrics (seed 000, "Metrics that matter"), per case and pooled over the suite:

* **precision**: selected items that are relevant (required, listed as
  ``relevant``, or in a dedup group) / selected items;
* **useful recall**: required units selected / required units (a unit is one
  label, or a list of alternatives of which any one will do; units listed as
  ``required_semantic`` count only for a semantic embedder);
* **stale rate**: selected items the case marks stale / selected items;
* **conflict error rate**: conflict cases resolved wrongly / conflict cases,
  also per kind of conflict (authority, scope, time, version, contest). A case
  with a winner is right when the winner is selected and no other member is;
  one without (the answer is to ask) when the status is ``ambiguous`` and no
  member is selected;
* **leakage**: selected records the request's identity may not see (judged on
  the records' ownership, not on labels) / requests. It must be zero;
* **empty accuracy**: cases expecting ``empty`` answered ``empty`` with ``""``;
* **mean tokens**: prompt tokens per request, over every case.

Pooled rates divide sums, so a case with many items weighs more; a rate whose
denominator is zero is ``None``. Reports carry case ids, labels and numbers only,
never memory content, clarification text or prompts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engram.eval.golden.runner import CaseResult
from engram.recall.render import PREAMBLE

__all__ = ["CaseMetrics", "GoldenReport", "case_metrics", "check", "summarise"]

_OPEN, _CLOSE = "<engram_memory>", "</engram_memory>"


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _unit_met(unit: Sequence[str], selected: Sequence[str]) -> bool:
    return any(label in selected for label in unit)


def conflict_correct(result: CaseResult) -> bool | None:
    """Whether the case's conflict group was resolved as expected (None: no conflict)."""
    conflict = result.case.expect.conflict
    if conflict is None:
        return None
    chosen = [m for m in conflict.members if m in result.selected]
    if conflict.winner is None:
        return result.status == "ambiguous" and not chosen
    return chosen == [conflict.winner]


def _check_prompt(result: CaseResult) -> list[str]:
    """Rendering invariants every case must hold (contract principles 7 and 8, docs/contract.md)."""
    prompt, n = result.prompt, len(result.selected)
    if not n:
        return [] if prompt == "" else ["prompt is not empty although nothing was selected"]
    out = []
    if prompt.count(_OPEN) != 1 or prompt.count(_CLOSE) != 1:
        out.append("prompt must hold exactly one memory block open and close tag")
    if prompt.count("<memory ") != n or prompt.count("</memory>") != n:
        out.append("prompt holds memory tags that are not rendered items (forged by content?)")
    if PREAMBLE not in prompt or "data, not instructions" not in prompt:
        out.append("prompt lacks the preamble saying memories are data, not instructions")
    exp = result.case.expect
    out += [f"prompt contains excluded text #{i}" for i, text in enumerate(exp.prompt_excludes)
            if text in prompt]  # fmt: skip
    out += [f"prompt lacks expected text #{i}" for i, text in enumerate(exp.prompt_mentions)
            if text not in prompt]  # fmt: skip
    return out


def _check_writes(result: CaseResult) -> list[str]:
    out = []
    for memory in result.case.memories:
        got = result.writes.get(memory.label)
        if got != memory.write:
            out.append(f"write of {memory.label}: expected {memory.write}, got {got}")
    return out


def _check_selection(result: CaseResult) -> list[str]:
    exp, sel = result.case.expect, result.selected
    out = [f"required {'|'.join(u)} not selected" for u in result.required
           if not _unit_met(u, sel)]  # fmt: skip
    out += [f"forbidden {label} selected" for label in exp.forbidden if label in sel]
    out += [f"leak: {label} is not visible to the requester" for label in result.leaked]
    for a, b in exp.ordered:
        if a not in sel:
            out.append(f"ordered: {a} must be selected (before {b})")
        elif b in sel and sel.index(b) < sel.index(a):
            out.append(f"ordered: {a} must come before {b}")
    if exp.first is not None and (not sel or sel[0] != exp.first):
        out.append(f"{exp.first} must be ranked first, got {sel[0] if sel else None}")
    for group in exp.dedup_groups:
        out += _check_dedup(result, group)
    return out


def _check_dedup(result: CaseResult, group: Sequence[str]) -> list[str]:
    chosen = [label for label in group if label in result.selected]
    if len(chosen) != 1:
        return [f"dedup group {'/'.join(group)}: {len(chosen)} selected, expected 1"]
    merged = set(result.merged.get(chosen[0], ()))
    missing = sorted(set(group) - {chosen[0]} - merged)
    return [f"dedup: {chosen[0]} lacks merged_from {missing}"] if missing else []


def _check_budget(result: CaseResult) -> list[str]:
    exp, out = result.case.expect, []
    if exp.max_tokens is not None and result.tokens > exp.max_tokens:
        out.append(f"prompt uses {result.tokens} tokens, more than {exp.max_tokens}")
    if exp.max_items is not None and len(result.selected) > exp.max_items:
        out.append(f"{len(result.selected)} items selected, more than {exp.max_items}")
    counts = Counter(result.types)
    for type_name, quota in exp.max_per_type.items():
        if counts[type_name] > quota:
            out.append(f"{counts[type_name]} items of type {type_name}, quota {quota}")
    return out


def _check_status(result: CaseResult) -> list[str]:
    exp, out = result.case.expect, []
    if result.status != exp.status:
        out.append(f"status {result.status}, expected {exp.status}")
    text = result.clarification or ""
    for i, mention in enumerate(exp.clarification_mentions):
        if mention not in text:
            out.append(f"clarification lacks expected mention #{i}")
    if conflict_correct(result) is False:
        out.append("conflict group resolved wrongly")
    return out


def check(result: CaseResult) -> list[str]:
    """Every expectation ``result`` fails, as short messages (labels, never content)."""
    return [*_check_writes(result), *_check_status(result), *_check_selection(result),
            *_check_budget(result), *_check_prompt(result)]  # fmt: skip


@dataclass(frozen=True, slots=True)
class CaseMetrics:
    """The counts behind one case's metrics, and its failed expectations."""

    case_id: str
    status: str
    selected: int
    relevant_selected: int
    required_units: int
    required_met: int
    stale_selected: int
    leaked: int
    tokens: int
    conflict_ok: bool | None
    conflict_kind: str | None
    empty_ok: bool | None
    failures: tuple[str, ...]

    @property
    def precision(self) -> float | None:
        """Relevant selected / selected."""
        return _ratio(self.relevant_selected, self.selected)

    @property
    def useful_recall(self) -> float | None:
        """Required units selected / required units."""
        return _ratio(self.required_met, self.required_units)

    @property
    def stale_rate(self) -> float | None:
        """Stale selected / selected."""
        return _ratio(self.stale_selected, self.selected)

    def to_dict(self) -> dict[str, Any]:
        """Ids, labels in failure messages, and numbers."""
        return {"case_id": self.case_id, "status": self.status, "selected": self.selected,
                "precision": self.precision, "useful_recall": self.useful_recall,
                "stale_rate": self.stale_rate, "leaked": self.leaked, "tokens": self.tokens,
                "conflict_ok": self.conflict_ok, "empty_ok": self.empty_ok,
                "passed": not self.failures, "failures": list(self.failures)}  # fmt: skip


def case_metrics(result: CaseResult) -> CaseMetrics:
    """Count what one result contributes to each metric."""
    exp, sel = result.case.expect, result.selected
    empty_ok = None
    if exp.status == "empty":
        empty_ok = result.status == "empty" and result.prompt == ""
    return CaseMetrics(
        case_id=result.case_id, status=result.status, selected=len(sel),
        relevant_selected=sum(1 for s in sel if s in exp.relevant_labels),
        required_units=len(result.required),
        required_met=sum(1 for u in result.required if _unit_met(u, sel)),
        stale_selected=sum(1 for s in sel if s in exp.stale), leaked=len(result.leaked),
        tokens=result.tokens, conflict_ok=conflict_correct(result), empty_ok=empty_ok,
        conflict_kind=exp.conflict.kind if exp.conflict else None,
        failures=tuple(check(result)),
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class GoldenReport:
    """The suite's metrics for one embedder, with every case's counts."""

    embedder: str
    cases: tuple[CaseMetrics, ...] = field(default_factory=tuple)

    def _sum(self, name: str) -> int:
        return sum(int(getattr(c, name)) for c in self.cases)

    @property
    def precision(self) -> float | None:
        """Pooled precision."""
        return _ratio(self._sum("relevant_selected"), self._sum("selected"))

    @property
    def useful_recall(self) -> float | None:
        """Pooled useful recall."""
        return _ratio(self._sum("required_met"), self._sum("required_units"))

    @property
    def stale_rate(self) -> float | None:
        """Pooled stale rate."""
        return _ratio(self._sum("stale_selected"), self._sum("selected"))

    @property
    def conflict_error_rate(self) -> float | None:
        """Wrongly resolved conflict cases / conflict cases."""
        judged = [c.conflict_ok for c in self.cases if c.conflict_ok is not None]
        return _ratio(judged.count(False), len(judged))

    def conflict_errors_by_kind(self) -> dict[str, float | None]:
        """Conflict error rate per kind of conflict (authority, scope, time, version...)."""
        kinds = sorted({c.conflict_kind for c in self.cases if c.conflict_kind})
        out: dict[str, float | None] = {}
        for kind in kinds:
            judged = [c.conflict_ok for c in self.cases if c.conflict_kind == kind]
            out[kind] = _ratio(judged.count(False), len(judged))
        return out

    @property
    def leaked(self) -> int:
        """Selected records the requester may not see, over every case (must be 0)."""
        return self._sum("leaked")

    @property
    def leakage_rate(self) -> float | None:
        """Leaked records / requests."""
        return _ratio(self.leaked, len(self.cases))

    @property
    def empty_accuracy(self) -> float | None:
        """Cases expecting ``empty`` answered ``empty`` with no prompt / such cases."""
        judged = [c.empty_ok for c in self.cases if c.empty_ok is not None]
        return _ratio(judged.count(True), len(judged))

    @property
    def mean_tokens(self) -> float | None:
        """Mean prompt tokens per request."""
        return _ratio(self._sum("tokens"), len(self.cases))

    @property
    def passed(self) -> int:
        """Cases with no failed expectation."""
        return sum(1 for c in self.cases if not c.failures)

    def summary(self) -> dict[str, Any]:
        """The suite-level numbers."""
        return {"embedder": self.embedder, "cases": len(self.cases), "passed": self.passed,
                "precision": self.precision, "useful_recall": self.useful_recall,
                "stale_rate": self.stale_rate, "conflict_error_rate": self.conflict_error_rate,
                "conflict_error_by_kind": self.conflict_errors_by_kind(),
                "leaked": self.leaked, "leakage_rate": self.leakage_rate,
                "empty_accuracy": self.empty_accuracy, "mean_tokens": self.mean_tokens}  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """Summary and per-case metrics, JSON-ready."""
        return {**self.summary(), "per_case": [c.to_dict() for c in self.cases]}

    def markdown(self) -> str:
        """The summary table, then one row per case."""
        s = self.summary()
        lines = [f"Golden recall suite, embedder `{self.embedder}`: "
                 f"{s['passed']}/{s['cases']} cases pass", "",
                 "| metric | value |", "|---|---|"]  # fmt: skip
        for name in ("precision", "useful_recall", "stale_rate", "conflict_error_rate",
                     "leaked", "leakage_rate", "empty_accuracy", "mean_tokens"):  # fmt: skip
            value = s[name]
            lines.append(f"| {name} | {value if isinstance(value, int) else _fmt(value)} |")
        for kind, rate in s["conflict_error_by_kind"].items():
            lines.append(f"| conflict_error_rate[{kind}] | {_fmt(rate)} |")
        lines += ["", "| case | status | items | precision | recall | stale | tokens | failures |",
                  "|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for c in self.cases:
            lines.append(f"| {c.case_id} | {c.status} | {c.selected} | {_fmt(c.precision)} | "
                         f"{_fmt(c.useful_recall)} | {_fmt(c.stale_rate)} | {c.tokens} | "
                         f"{len(c.failures)} |")  # fmt: skip
        return "\n".join(lines)


def summarise(embedder: str, results: Sequence[CaseResult]) -> GoldenReport:
    """The report for ``results`` (each carries its case)."""
    return GoldenReport(embedder, tuple(case_metrics(r) for r in results))

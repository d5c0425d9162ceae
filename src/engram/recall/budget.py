"""Stage 8: budget. Pick what fits: max items, max tokens, per-type quotas, diversity.

Selection is greedy by maximal marginal relevance: each step takes the candidate
with the best ``lambda * score - (1 - lambda) * similarity to what is already
chosen``, skipping any that would break a quota or the token budget. Tokens are
counted on the exact rendered block (preamble, section headers and items), so
the rendered prompt never exceeds ``max_tokens``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Protocol

import numpy as np

from engram.config import Budget, Config
from engram.errors import InvalidArgument
from engram.kernels import pairwise_dots
from engram.recall.model import Candidate

__all__ = ["ApproxTokenCounter", "TokenCounter", "select", "validate_budget"]


class TokenCounter(Protocol):
    """Counts the tokens a text will take in a prompt."""

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        ...


class ApproxTokenCounter:
    """About four characters per token, rounded up: the usual rule for English BPE
    tokenizers, with no model and no network. Plug in a real tokenizer for exact counts."""

    def count(self, text: str) -> int:
        """``ceil(len(text) / 4)``."""
        return math.ceil(len(text) / 4)


MAX_BUDGET_ITEMS = 1_000
MAX_BUDGET_TOKENS = 1_000_000


def _count(value: object, name: str, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise InvalidArgument(f"{name} must be an integer between 0 and {limit}")
    return value


def validate_budget(budget: object) -> Budget:
    """Check a caller's budget; raise ``InvalidArgument`` on nonsense.

    Items are at most ``MAX_BUDGET_ITEMS`` and tokens ``MAX_BUDGET_TOKENS`` (no
    prompt holds more); ``per_type`` maps type names to such counts.
    """
    if not isinstance(budget, Budget):
        raise InvalidArgument("budget must be an engram.Budget")
    _count(budget.max_items, "budget.max_items", MAX_BUDGET_ITEMS)
    _count(budget.max_tokens, "budget.max_tokens", MAX_BUDGET_TOKENS)
    per_type = budget.per_type
    if per_type is not None and not isinstance(per_type, Mapping):
        raise InvalidArgument("budget.per_type must be a mapping of type name to a count")
    for name, quota in (per_type or {}).items():
        if not isinstance(name, str) or len(name) > 200:
            raise InvalidArgument("budget.per_type keys must be memory type names")
        _count(quota, f"budget.per_type[{name!r}]", MAX_BUDGET_ITEMS)
    return budget


def _quotas(config: Config, budget: Budget) -> Mapping[str, int]:
    quotas = {name: policy.quota for name, policy in config.types.items()}
    quotas.update(budget.per_type or {})
    return quotas


class _Diversity:
    """Maximal marginal relevance over a fixed pool, with one similarity matrix."""

    def __init__(self, pool: list[Candidate], lam: float) -> None:
        dim = next((c.vector.shape[0] for c in pool if c.vector is not None), 1)
        matrix = np.zeros((len(pool), dim), dtype=np.float32)
        for i, cand in enumerate(pool):
            if cand.vector is not None:
                matrix[i] = cand.vector
        self._sims = pairwise_dots(matrix, matrix)  # no BLAS threads (see ``kernels``)
        top = max((c.score for c in pool), default=1.0) or 1.0
        self._gain = lam * np.array([c.score for c in pool], dtype=np.float32) / top
        self._penalty = np.zeros(len(pool), dtype=np.float32)
        self._lam = lam
        self.open = np.ones(len(pool), dtype=bool)

    def pick(self) -> int:
        """Index of the best open candidate."""
        values = np.where(self.open, self._gain - (1.0 - self._lam) * self._penalty, -np.inf)
        return int(np.argmax(values))

    def chose(self, index: int) -> None:
        """Record a selection: later picks pay for resembling it."""
        self._penalty = np.maximum(self._penalty, self._sims[index])


def select(
    ranked: list[Candidate], config: Config, budget: Budget,
    render: Callable[[list[Candidate]], str], counter: TokenCounter,
) -> tuple[list[Candidate], int]:  # fmt: skip
    """Choose items within the budget; returns them best first and the tokens they use."""
    quotas, used = _quotas(config, budget), dict[str, int]()
    pool = [c for c in ranked if quotas.get(c.record.type, 0) > 0]
    mmr = _Diversity(pool, config.recall.mmr_lambda)
    chosen: list[Candidate] = []
    tokens = 0
    while mmr.open.any() and len(chosen) < budget.max_items:
        index = mmr.pick()
        mmr.open[index] = False
        pick = pool[index]
        trial = sorted([*chosen, pick], key=lambda c: -c.score)
        cost = counter.count(render(trial))
        if cost > budget.max_tokens:
            continue
        chosen, tokens = trial, cost
        mmr.chose(index)
        used[pick.record.type] = used.get(pick.record.type, 0) + 1
        if used[pick.record.type] >= quotas[pick.record.type]:
            mmr.open &= np.array([c.record.type != pick.record.type for c in pool], dtype=bool)
    return chosen, tokens

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


def validate_budget(budget: object) -> Budget:
    """Check a caller's budget; raise ``InvalidArgument`` on nonsense."""
    if not isinstance(budget, Budget):
        raise InvalidArgument("budget must be an engram.Budget")
    if not isinstance(budget.max_items, int) or budget.max_items < 0:
        raise InvalidArgument("budget.max_items must be a non-negative integer")
    if not isinstance(budget.max_tokens, int) or budget.max_tokens < 0:
        raise InvalidArgument("budget.max_tokens must be a non-negative integer")
    for name, quota in (budget.per_type or {}).items():
        if not isinstance(quota, int) or quota < 0:
            raise InvalidArgument(f"budget.per_type[{name!r}] must be a non-negative integer")
    return budget


def _quotas(config: Config, budget: Budget) -> Mapping[str, int]:
    quotas = {name: policy.quota for name, policy in config.types.items()}
    quotas.update(budget.per_type or {})
    return quotas


def _mmr_pick(pool: list[Candidate], chosen: list[Candidate], lam: float) -> Candidate:
    top = max(c.score for c in pool) or 1.0
    vectors = [c.vector for c in chosen if c.vector is not None]
    matrix = np.stack(vectors) if vectors else None

    def value(cand: Candidate) -> float:
        sim = 0.0
        if matrix is not None and cand.vector is not None:
            sim = float(np.max(matrix @ cand.vector))
        return lam * cand.score / top - (1.0 - lam) * sim

    return max(pool, key=value)


def select(
    ranked: list[Candidate], config: Config, budget: Budget,
    render: Callable[[list[Candidate]], str], counter: TokenCounter,
) -> tuple[list[Candidate], int]:  # fmt: skip
    """Choose items within the budget; returns them best first and the tokens they use."""
    quotas, used = _quotas(config, budget), dict[str, int]()
    pool = [c for c in ranked if quotas.get(c.record.type, 0) > 0]
    chosen: list[Candidate] = []
    tokens = 0
    while pool and len(chosen) < budget.max_items:
        pick = _mmr_pick(pool, chosen, config.recall.mmr_lambda)
        pool.remove(pick)
        trial = sorted([*chosen, pick], key=lambda c: -c.score)
        cost = counter.count(render(trial))
        if cost > budget.max_tokens:
            continue
        chosen, tokens = trial, cost
        used[pick.record.type] = used.get(pick.record.type, 0) + 1
        if used[pick.record.type] >= quotas[pick.record.type]:
            pool = [c for c in pool if c.record.type != pick.record.type]
    return chosen, tokens

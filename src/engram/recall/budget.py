"""Stage 8: budget. Pick what fits: max items, max tokens, per-type quotas, diversity.

Selection is greedy by maximal marginal relevance: each step takes the candidate
with the best ``lambda * score - (1 - lambda) * similarity to what is already
chosen``, skipping any that would break a quota or the token budget. Tokens are
counted on the exact rendered block (preamble, section headers and items), so
the rendered prompt never exceeds ``max_tokens``.

The per-type quotas of the configuration are work-conserving: they shape the
first pass, so that one type cannot crowd out the others while others compete,
and the slots they leave empty go to the next best items of any type in a
second pass. A store holding only episodes still fills ``max_items``. Quotas the
caller names in ``Budget.per_type`` are hard caps (0 excludes a type).

When relevant items exist but not even the best one fits ``max_tokens``, the
best one is shortened to fit (same id, content cut at a word with a visible
ellipsis) rather than dropped: an empty result must mean "nothing relevant", not
"the budget was small". A budget too small for any block at all is refused up
front (``minimum_tokens``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Protocol

import numpy as np

from engram.config import Budget, Config, TypePolicy
from engram.errors import InvalidArgument
from engram.kernels import pairwise_dots
from engram.recall.coverage import Coverage
from engram.recall.model import Candidate
from engram.recall.render import LAYOUTS, BlockLength, render
from engram.types import Authority, Record, Retention, Sensitivity, Source, Status, Tier

__all__ = [
    "ELLIPSIS",
    "SHORTENED",
    "ApproxTokenCounter",
    "Minimums",
    "TokenCounter",
    "minimum_tokens",
    "select",
    "validate_budget",
]

ELLIPSIS = " […]"
SHORTENED = "shortened to fit the token budget (get() returns it whole)"
MIN_KEPT_CHARS = 24  # a shortened memory keeps at least this much of its text


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


def validate_budget(budget: object, minimum: Callable[[str], int] | None = None) -> Budget:
    """Check a caller's budget; raise ``InvalidArgument`` on nonsense, and on a
    ``max_tokens`` below ``minimum(layout)`` (the smallest block) when items are
    allowed.

    Items are at most ``MAX_BUDGET_ITEMS`` and tokens ``MAX_BUDGET_TOKENS`` (no
    prompt holds more); ``per_type`` maps type names to such counts.
    """
    if not isinstance(budget, Budget):
        raise InvalidArgument("budget must be an engram.Budget")
    if budget.layout not in LAYOUTS:
        raise InvalidArgument(f"budget.layout must be one of {', '.join(LAYOUTS)}")
    _count(budget.max_items, "budget.max_items", MAX_BUDGET_ITEMS)
    _count(budget.max_tokens, "budget.max_tokens", MAX_BUDGET_TOKENS)
    per_type = budget.per_type
    if per_type is not None and not isinstance(per_type, Mapping):
        raise InvalidArgument("budget.per_type must be a mapping of type name to a count")
    for name, quota in (per_type or {}).items():
        if not isinstance(name, str) or len(name) > 200:
            raise InvalidArgument("budget.per_type keys must be memory type names")
        _count(quota, f"budget.per_type[{name!r}]", MAX_BUDGET_ITEMS)
    smallest = minimum(budget.layout) if minimum and budget.max_items > 0 else 0
    if budget.max_tokens < smallest:
        other = " use layout='compact'," if budget.layout == "full" else ""
        raise InvalidArgument(
            f"budget.max_tokens={budget.max_tokens} is below {smallest}, the smallest "
            f"{budget.layout} memory block (preamble and one shortened item); raise it,"
            f"{other} or ask for max_items=0"
        )
    return budget


def _probe_record(
    scope: str = "user", type_name: str = "fact", content: str = "x" * MIN_KEPT_CHARS + ELLIPSIS,
    authority: Authority = Authority.EXPLICIT_USER,
) -> Record:  # fmt: skip
    """A representative record for measuring a block's fixed cost."""
    now = datetime(2024, 1, 1, tzinfo=UTC)
    return Record(
        id="0" * 26, tenant_id="t", user_id="u", agent_id=None, scope=scope,
        tier=Tier.SEMANTIC, type=type_name, key=None, value=None,
        content=content, authority=authority,
        confidence=1.0, source=Source(), observed_at=now, valid_from=None, valid_to=None,
        created_at=now, updated_at=now, status=Status.ACTIVE, version=1, supersedes=None,
        superseded_by=None, sensitivity=Sensitivity.LOW, purpose=None, consent_basis=None,
        retention=Retention.PERMANENT, expires_at=None, importance=0.5, access_count=0,
        last_accessed_at=None, private=False, embedding_model=None, content_hash="",
        contested_with=None,
    )  # fmt: skip


def minimum_tokens(
    render: Callable[[list[Candidate]], str], counter: TokenCounter,
    types: Iterable[str] = (), scopes: Iterable[str] = (),
) -> int:  # fmt: skip
    """Tokens of the smallest useful block: one item shortened to ``MIN_KEPT_CHARS``;
    and at least the block of any item of ``types`` in ``scopes`` (the caller may be
    shown) cut to its ellipsis, so a budget this size always shows the best item."""
    smallest = counter.count(render([Candidate(_probe_record())]))
    authority = max(Authority, key=lambda a: len(a.value))
    worst = (counter.count(render([Candidate(_probe_record(scope, name, ELLIPSIS, authority))]))
             for name in types for scope in scopes)  # fmt: skip
    return max(smallest, *worst)


class Minimums:
    """``minimum_tokens`` per (layout, visible scopes), cached per token counter (the
    counter may be replaced; at most 1,024 entries are kept)."""

    def __init__(self, types: Mapping[str, TypePolicy]) -> None:
        self._types = types
        self._known: dict[tuple[str, tuple[str, ...]], tuple[TokenCounter, int]] = {}

    def of(self, layout: str, scopes: tuple[str, ...], counter: TokenCounter) -> int:
        """The smallest block of ``layout`` showing an item of any of ``scopes``."""
        key = (layout, scopes)
        known = self._known.get(key)
        if known is None or known[0] is not counter:
            if len(self._known) > 1024:
                self._known.clear()
            found = minimum_tokens(lambda c: render(c, self._types, layout=layout), counter,
                                   self._types, scopes)  # fmt: skip
            known = self._known[key] = (counter, found)
        return known[1]


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
    render_fresh: Callable[[list[Candidate]], str] | None = None,
    covered: dict[str, Candidate] | None = None, lengths: BlockLength | None = None,
) -> tuple[list[Candidate], int]:  # fmt: skip
    """Choose items within the budget; returns them best first and the tokens they use.

    ``render`` may memoise items by id; ``render_fresh`` (default ``render``) must
    not, since it renders shortened versions of a record under the same id.
    ``covered`` (filled when given) maps each candidate left out because a selected
    summary came from it, or because it is a summary of a selected episode, to that
    selected item (``coverage``). ``lengths`` (an empty ``BlockLength`` of the
    blocks ``render`` draws) prices each draft without rendering it, when the
    counter is ``ApproxTokenCounter`` (its count depends on the length alone)."""
    hard = dict(budget.per_type or {})
    pool = [c for c in ranked if hard.get(c.record.type, 1) > 0]
    mmr = _Diversity(pool, config.recall.mmr_lambda)
    sized = lengths if type(counter) is ApproxTokenCounter else None
    picker = _Picker(pool, mmr, budget, _Pricer(render, counter, sized), Coverage(pool))
    picker.fill(_quotas(config, budget))
    picker.reopen_quota_closed()
    picker.fill(hard)
    if covered is not None:
        covered.update({pool[i].id: pool[j] for i, j in picker.coverage.left_out.items()})
    if not picker.chosen and pool and budget.max_items > 0:
        best = max(pool, key=lambda c: c.score)
        fresh = render_fresh or render
        short = shorten(best, budget.max_tokens, fresh, counter)
        if short is not None:
            return [short], counter.count(fresh([short]))
    return picker.chosen, picker.tokens


def shorten(
    cand: Candidate, max_tokens: int, render: Callable[[list[Candidate]], str],
    counter: TokenCounter,
) -> Candidate | None:  # fmt: skip
    """``cand`` with its content cut (at a word, ellipsis shown) so that its block fits
    ``max_tokens``, keeping ``MIN_KEPT_CHARS`` characters or more where they fit, fewer
    (down to the ellipsis alone) where the item's type or scope takes more room than
    the probe of ``minimum_tokens``; None when not even that fits."""
    text = cand.record.content

    def version(chars: int) -> Candidate:
        cut = text[:chars]
        if " " in cut[MIN_KEPT_CHARS // 2 :]:
            cut = cut[: cut.rindex(" ")]
        record = cand.record.replace(content=cut.rstrip() + ELLIPSIS)
        return dataclasses.replace(cand, record=record, reason=SHORTENED)

    def fits(chars: int) -> bool:
        return counter.count(render([version(chars)])) <= max_tokens

    low, high = min(MIN_KEPT_CHARS, len(text) - 1), len(text) - 1
    if high < 0:
        return None
    if not fits(low):  # the item's own overhead (type, scope) is larger: cut deeper
        low, high = 0, low - 1
        if high < 0 or not fits(0):
            return None
    while low < high:  # the longest cut that fits
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return version(low)


def _with(chosen: list[Candidate], pick: Candidate) -> list[Candidate]:
    """``chosen`` with ``pick`` added, best first (a tie keeps the earlier first)."""
    return sorted([*chosen, pick], key=lambda c: -c.score)


class _Pricer:
    """Tokens of a draft selection: its rendered block counted, or, given the block's
    running ``BlockLength``, the approximate count of that length (the same number)."""

    def __init__(self, render: Callable[[list[Candidate]], str], counter: TokenCounter,
                 lengths: BlockLength | None) -> None:  # fmt: skip
        self._render, self._counter, self._lengths = render, counter, lengths

    def cost(self, chosen: list[Candidate], pick: Candidate) -> int:
        """Tokens of the block of ``chosen`` (best first) with ``pick`` added."""
        if self._lengths is None:
            return self._counter.count(self._render(_with(chosen, pick)))
        return math.ceil(self._lengths.with_item(pick) / 4)  # ApproxTokenCounter.count

    def took(self, pick: Candidate) -> None:
        """``pick`` joined the selection."""
        if self._lengths is not None:
            self._lengths.add(pick)


class _Picker:
    """Greedy MMR selection under item, token and per-type limits, in passes."""

    def __init__(
        self, pool: list[Candidate], mmr: _Diversity, budget: Budget, pricer: _Pricer,
        coverage: Coverage,
    ) -> None:  # fmt: skip
        self._pool, self._mmr, self._budget = pool, mmr, budget
        self.coverage = coverage
        self._pricer = pricer
        self._too_big = np.zeros(len(pool), dtype=bool)
        self.chosen: list[Candidate] = []
        self.tokens = 0

    def fill(self, quotas: Mapping[str, int]) -> None:
        """Take the best open candidates until the items run out or the budget is full;
        a type whose count reaches its quota in ``quotas`` is closed."""
        mmr, pool = self._mmr, self._pool
        used: dict[str, int] = {}
        for cand in self.chosen:
            used[cand.record.type] = used.get(cand.record.type, 0) + 1
        for type_name, count in used.items():
            self._close_if_full(type_name, count, quotas)
        while mmr.open.any() and len(self.chosen) < self._budget.max_items:
            index = mmr.pick()
            mmr.open[index] = False
            pick = pool[index]
            cost = self._pricer.cost(self.chosen, pick)
            if cost > self._budget.max_tokens:
                self._too_big[index] = True
                continue
            self.chosen, self.tokens = _with(self.chosen, pick), cost
            self._pricer.took(pick)
            mmr.chose(index)
            for other in self.coverage.chose(index):
                mmr.open[other] = False
            used[pick.record.type] = used.get(pick.record.type, 0) + 1
            self._close_if_full(pick.record.type, used[pick.record.type], quotas)

    def _close_if_full(self, type_name: str, count: int, quotas: Mapping[str, int]) -> None:
        if type_name in quotas and count >= quotas[type_name]:
            self._mmr.open &= np.array([c.record.type != type_name for c in self._pool],
                                       dtype=bool)  # fmt: skip

    def reopen_quota_closed(self) -> None:
        """Open again every candidate not chosen and not refused for its size."""
        chosen = {id(c) for c in self.chosen}
        self._mmr.open = np.array(
            [id(c) not in chosen and i not in self.coverage.left_out
             for i, c in enumerate(self._pool)], dtype=bool,
        ) & ~self._too_big  # fmt: skip

"""``BlockLength`` prices a draft selection without rendering it: its running length
is the length of the block ``render`` returns, for any items, types, sections
(named, unnamed, unknown types), contents that need escaping, and both layouts;
and the budget stage picks the same items and tokens with it as without it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from engram.config import Budget, Config
from engram.recall.budget import ApproxTokenCounter, _probe_record, select
from engram.recall.model import Candidate
from engram.recall.render import LAYOUTS, BlockLength, render
from engram.types import Authority, Status

CONFIG = Config()
TYPES = [*sorted(CONFIG.types), "no_such_type", "zeta custom"]
TEXT = st.text(alphabet=st.sampled_from(list("ab <>&\"'\n[]·⏎é")), max_size=40)


@st.composite
def _candidates(draw: st.DrawFn) -> list[Candidate]:
    count = draw(st.integers(min_value=1, max_value=8))
    out = []
    for n in range(count):
        record = _probe_record(
            scope=draw(st.sampled_from(["user", "repo:a<b", "task:t]1", "global"])),
            type_name=draw(st.sampled_from(TYPES)), content=draw(TEXT),
            authority=draw(st.sampled_from(list(Authority))),
        ).replace(id=f"01ID{n:03d}", status=draw(st.sampled_from(list(Status))),
                  observed_at=datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=n))  # fmt: skip
        out.append(Candidate(record, score=draw(st.floats(0, 1))))
    return out


@settings(max_examples=300, deadline=None)
@given(_candidates(), st.sampled_from(LAYOUTS))
def test_running_length_is_the_rendered_length(cands: list[Candidate], layout: str) -> None:
    memo: dict[str, str] = {}
    lengths = BlockLength(CONFIG.types, layout, memo)
    for i, cand in enumerate(cands):
        expected = len(render(cands[: i + 1], CONFIG.types, None, layout))
        assert lengths.with_item(cand) == expected
        lengths.add(cand)


@settings(max_examples=150, deadline=None)
@given(_candidates(), st.sampled_from(LAYOUTS), st.integers(min_value=60, max_value=400),
       st.integers(min_value=1, max_value=6))  # fmt: skip
def test_selection_is_the_same_with_and_without_lengths(
    cands: list[Candidate], layout: str, max_tokens: int, max_items: int
) -> None:
    budget = Budget(max_items=max_items, max_tokens=max_tokens, layout=layout)

    def draft(items: list[Candidate]) -> str:
        return render(items, CONFIG.types, None, layout)

    for counter in (ApproxTokenCounter(), _Words()):  # lengths serve the first only
        plain = select(list(cands), CONFIG, budget, draft, counter)
        sized = select(list(cands), CONFIG, budget, draft, counter,
                       lengths=BlockLength(CONFIG.types, layout, {}))  # fmt: skip
        assert [c.id for c in plain[0]] == [c.id for c in sized[0]]
        assert plain[1] == sized[1]


class _Words(ApproxTokenCounter):
    """A counter whose count is not the length rule (one token a word)."""

    def count(self, text: str) -> int:
        return len(text.split())

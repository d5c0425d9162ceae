"""Conversation signals of the rerank stage (SPEC section 4, multi-signal score).

A question names whose words it wants ("What did Melanie paint?") and often when
("on 7 July, 2023"); a conversation turn is relevant through the session it sits in.
Each test is a tiny hand-made conversation where that signal alone decides.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest

from engram import Budget, Config, Context, Engram, FrozenClock
from engram.config import RecallConfig, ScoreWeights
from engram.errors import ConfigError
from engram.recall.model import Intent, Mode
from engram.recall.plan import make_plan
from engram.scope import resolve

NOW = datetime(2023, 12, 1, 12, 0, tzinfo=UTC)
CTX = Context(tenant_id="acme", user_id="u42")
BUDGET = Budget(max_items=10, max_tokens=10_000, per_type={"episode": 10})


def _episodes(turns: list[tuple[str, datetime]], config: Config | None = None) -> Engram:
    mem = Engram.open("sqlite://:memory:", embedder="hashing", clock=FrozenClock(NOW),
                      config=config)  # fmt: skip
    for content, at in turns:
        result = mem.remember(CTX, content, type="episode", observed_at=at,
                              consent_basis="test", retention="permanent", now=at)  # fmt: skip
        assert result.record is not None, result.reason
    return mem


def _ranked(mem: Engram, query: str) -> list[tuple[str, Mapping[str, float]]]:
    result = mem.recall(CTX, query, budget=BUDGET, now=NOW)
    return [(item.record.content, item.components) for item in result.items]


SPEAKERS = [
    ("Caroline: Wow Melanie, that lake painting is lovely! Did Melanie paint it?",
     datetime(2023, 5, 8, 14, 0, tzinfo=UTC)),
    ("Melanie: Thanks! I paint lakes at sunrise.", datetime(2023, 6, 2, 10, 0, tzinfo=UTC)),
]  # fmt: skip


def test_turns_of_the_speaker_the_query_names_come_first() -> None:
    with _episodes(SPEAKERS) as mem:
        ranked = _ranked(mem, "What did Melanie paint?")
    assert ranked[0][0].startswith("Melanie:")
    speaker = {c.split(":")[0]: comps["speaker"] for c, comps in ranked}
    assert speaker == {"Melanie": 1.0, "Caroline": 0.0}


def test_without_the_speaker_signal_the_vocative_turn_wins() -> None:
    """The case above is decided by the speaker signal, not by wording."""
    config = Config(recall=RecallConfig(weights=ScoreWeights(speaker=0.0)))
    with _episodes(SPEAKERS, config) as mem:
        ranked = _ranked(mem, "What did Melanie paint?")
    assert ranked[0][0].startswith("Caroline:")


def test_a_query_that_names_no_speaker_changes_nothing() -> None:
    with _episodes(SPEAKERS) as mem:
        ranked = _ranked(mem, "Who paints lakes?")
    assert all(comps["speaker"] == 0.0 for _, comps in ranked)


def test_memories_observed_in_the_period_the_query_names_come_first() -> None:
    july, october = (datetime(2023, 7, 7, 18, 0, tzinfo=UTC),
                     datetime(2023, 10, 20, 18, 0, tzinfo=UTC))  # fmt: skip
    turns = [("Maria: I cooked dinner with my mom tonight.", july),
             ("Maria: I cooked dinner with friends from the gym.", october)]  # fmt: skip
    with _episodes(turns) as mem:
        dated = _ranked(mem, "What did Maria cook on 20 October, 2023?")
        undated = _ranked(mem, "What did Maria cook?")
    assert "mom" in undated[0][0]  # without a period, wording prefers the July turn
    assert "gym" in dated[0][0]
    assert dated[0][1]["period"] == 1.0
    assert dated[1][1]["period"] == 0.0


def test_the_period_a_query_names() -> None:
    scope = resolve(CTX)

    def period(query: str) -> tuple[datetime, datetime] | None:
        plan = make_plan(Config(), scope, query, Mode.HYBRID, Intent.GENERAL, NOW, None, 6)
        return plan.period

    day, slack = timedelta(days=1), timedelta(days=Config().recall.period_slack_days)
    july7 = datetime(2023, 7, 7, tzinfo=UTC)
    july = (july7 - slack, july7 + day + slack)
    assert period("What did Maria plan on the evening of 7 July, 2023?") == july
    assert period("What happened on July 7th, 2023?") == july
    dec, jan = datetime(2023, 12, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC)
    assert period("What class did Maria start in December 2023?") == (dec - slack, jan + slack)
    assert period("What may Maria do next?") is None
    feb, mar = datetime(2023, 2, 1, tzinfo=UTC), datetime(2023, 3, 1, tzinfo=UTC)
    assert period("What happened on 31 February, 2023?") == (feb - slack, mar + slack)
    # dates at the edge of the calendar are ignored, not an error
    assert period("Plans for December 31st, 9999?") is None
    assert period("What happened on January 1st, 0001?") is None


def test_a_turn_gains_from_the_relevant_turns_of_its_session() -> None:
    t0 = datetime(2023, 5, 1, 9, 0, tzinfo=UTC)
    turns = [
        ("Nate: I won my video game tournament last week!", t0),
        ("Joanna: Congrats Nate!", t0 + timedelta(seconds=1)),
        ("Nate: Thanks. The trophy sits on my shelf now.", t0 + timedelta(seconds=2)),
        ("Nate: My trophy shelf needs dusting.", t0 + timedelta(days=30)),
    ]
    with _episodes(turns) as mem:
        ranked = dict(_ranked(mem, "video game tournament trophy"))
    session = {content.split(":")[1].split()[0]: c["session"] for content, c in ranked.items()}
    assert session["Thanks."] > 0.0  # its session holds the best turn
    assert session["My"] == 0.0  # a lone episode gains nothing from its session


def test_coverage_uses_the_lexical_stems_of_the_whole_memory() -> None:
    """Coverage stems like the lexical engine (Porter2, diacritics folded), over every
    content word of a memory, not only its first 24."""
    filler = " ".join(f"word{i}" for i in range(30))
    turns = [(f"Caroline: {filler} and then Zoë finally studied ceramics.",
              datetime(2023, 5, 8, 14, 0, tzinfo=UTC))]  # fmt: skip
    with _episodes(turns) as mem:
        ranked = _ranked(mem, "Zoe studies ceramic")
    assert ranked
    assert ranked[0][1]["coverage"] == 1.0


STANDING = [
    ("Always use APA 7th edition citation style when I ask about formatting references.",
     datetime(2023, 5, 8, 14, 0, tzinfo=UTC)),
    ("My essay is due on Friday and the references are not done yet.",
     datetime(2023, 6, 2, 10, 0, tzinfo=UTC)),
]  # fmt: skip


def test_a_standing_instruction_outranks_a_turn_that_only_shares_words() -> None:
    query = "How should I format the references of my essay?"
    with _episodes(STANDING) as mem:
        ranked = _ranked(mem, query)
    assert ranked[0][0].startswith("Always use APA")
    assert [comps["standing"] for _, comps in ranked] == [1.0, 0.0]
    config = Config(recall=RecallConfig(weights=ScoreWeights(standing=0.0)))
    with _episodes(STANDING, config) as mem:  # decided by the signal, not by wording
        assert _ranked(mem, query)[0][0].startswith("My essay")


def test_the_standing_pattern() -> None:
    pattern = re.compile(RecallConfig().standing_pattern)
    for text in ("Always include version numbers when I ask about libraries.",
                 "Thanks. Never use tabs in my code.", "From now on, answer in French.",
                 "I prefer e-books for their portability.", "I'd prefer a morning slot.",
                 "As stated in my preference for pragmatic security, ..."):  # fmt: skip
        assert pattern.search(text), text
    for text in ("I have always wanted to visit Paris.", "She never called back.",
                 "Which libraries do you prefer?"):  # fmt: skip
        assert not pattern.search(text), text


def test_a_standing_pattern_that_does_not_compile_is_refused() -> None:
    with pytest.raises(ConfigError, match="standing_pattern"):
        RecallConfig(standing_pattern="(unclosed")


def test_a_memory_below_the_lexical_cut_keeps_part_of_the_weakest_hit() -> None:
    """The lexical channel returns one hit here; a memory another channel found that
    holds a query word scored below it (half of it by default), one holding none 0."""
    turns = [("The deploy script failed on the staging server.", NOW - timedelta(days=3)),
             ("Staging was slow all week.", NOW - timedelta(days=2)),
             ("We had lunch by the river.", NOW - timedelta(days=1))]  # fmt: skip

    def lexical(share: float) -> dict[str, float]:
        rc = RecallConfig(min_channel_limit=1, candidates_per_item=1, lexical_limit=1,
                          unseen_lexical_share=share, relevance_floor=0.0,
                          floors={})  # fmt: skip
        with _episodes(turns, Config(recall=rc)) as mem:
            found = mem.recall(CTX, "Why did the staging deploy fail?", budget=BUDGET, now=NOW)
        return {i.record.content.split()[0]: i.components["lexical"] for i in found.items}

    assert lexical(0.5) == {"The": 1.0, "Staging": 0.5, "We": 0.0}
    assert lexical(0.0) == {"The": 1.0, "Staging": 0.0, "We": 0.0}

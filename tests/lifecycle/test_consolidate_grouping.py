"""Grouping and the extractive summariser, as pure functions over records."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
from episode_records import episode
from tests.conftest import T0

from engram.config import ConsolidationConfig
from engram.lifecycle.consolidate import ExtractiveSummariser
from engram.lifecycle.consolidate.grouping import sessions_of, topic_groups
from engram.lifecycle.consolidate.outcomes import stated_outcome
from engram.lifecycle.consolidate.summarise import categories, date_phrase

GAP = timedelta(hours=1)


def _vector(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(32).astype(np.float32)
    return v / np.linalg.norm(v)


def test_sessions_split_on_gaps_and_slots_and_wait_at_the_cutoff() -> None:
    a = [episode(f"a{i}", T0 + timedelta(minutes=i)) for i in range(3)]
    b = [episode(f"b{i}", T0 + timedelta(hours=2, minutes=i)) for i in range(2)]
    other = [episode("o", T0 + timedelta(minutes=1), scope="repo:r1")]
    tail = [episode("t", T0 + timedelta(days=1))]
    stream = sorted([*a, *b, *other, *tail], key=lambda r: r.observed_at)
    found = sessions_of(stream, GAP, cutoff=T0 + timedelta(days=1, minutes=30))
    assert [[r.content for r in s] for s in found] == [
        ["a0", "a1", "a2"],
        ["o"],
        ["b0", "b1"],
    ]  # the tail session may still go on at the cutoff: it waits


def test_topics_split_on_a_shift_and_on_size() -> None:
    rules = ConsolidationConfig(min_topic_episodes=2, max_group_episodes=4, topic_similarity=0.5)
    same, other = _vector(1), _vector(2)
    records = [episode(f"e{i}", T0 + timedelta(minutes=i)) for i in range(7)]
    vectors = {r.id: (same if i < 3 else other) for i, r in enumerate(records)}
    groups = list(topic_groups(records, vectors, rules))
    assert [[r.content for r in g.episodes] for g in groups] == [
        ["e0", "e1", "e2"],
        ["e3", "e4", "e5", "e6"],
    ]
    full = list(topic_groups(records, {r.id: same for r in records}, rules))
    assert [len(g.episodes) for g in full] == [4, 3]


def test_a_suffix_is_grouped_as_the_whole_was() -> None:
    """What resuming relies on: the groups of what is left after the first groups
    are the remaining groups of the whole."""
    rules = ConsolidationConfig(min_topic_episodes=2, max_group_episodes=3)
    records = [episode(f"e{i} about topic {i // 4}", T0 + timedelta(minutes=i)) for i in range(10)]
    vectors = {r.id: _vector(i // 4) for i, r in enumerate(records)}
    whole = [g.ids for g in topic_groups(records, vectors, rules)]
    done = len(whole[0]) + len(whole[1])
    rest = [g.ids for g in topic_groups(records[done:], vectors, rules)]
    assert rest == whole[2:]


def test_the_extractive_summary_keeps_what_matters_first() -> None:
    texts = [
        "Melanie: Hi! How are you doing these days?",
        "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
        "Melanie: The weather was nice and sunny and warm and pleasant and bright.",
        "Caroline: We decided to start a painting class on Friday.",
        "Melanie: My pottery kiln crashed again with an error code.",
    ]
    group = [episode(t, T0 + timedelta(minutes=i)) for i, t in enumerate(texts)]
    text = ExtractiveSummariser().summarise(group, limit=260)
    assert len(text) <= 260
    assert text.splitlines()[0] == "1 May 2024, 9:00 am to 9:04 am (5 episodes):"
    assert "Caroline: I went to a LGBTQ support group yesterday" in text
    assert "We decided to start a painting class on Friday." in text
    assert "Melanie: My pottery kiln crashed again with an error code." in text
    assert "weather" not in text  # no category, and no room left for it
    assert ExtractiveSummariser().summarise(group, 260) == text  # deterministic


def test_a_sentence_too_long_for_the_summary_is_cut_at_a_word() -> None:
    long = episode("We decided " + "to keep going " * 100 + "today.", T0)
    text = ExtractiveSummariser().summarise([long], limit=200)
    assert len(text) <= 200
    assert text.endswith("…")


def test_categories_dates_and_stated_outcomes() -> None:
    assert categories("We decided to use Postgres.") == {"decision"}
    assert "date" in categories("See you on 8 May at 3 pm")
    assert "date" not in categories("I may come later")
    assert stated_outcome("The deploy succeeded.") is True
    assert stated_outcome("The deploy failed with an error.") is False
    assert stated_outcome("It worked, but an error was logged.") is None
    assert date_phrase(T0, T0 + timedelta(days=1)) == "1 May 2024, 9:00 am to 2 May 2024, 9:00 am"

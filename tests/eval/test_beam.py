"""BEAM: the loader on synthetic chats, the metric on hand-computed cases, one real run."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engram.errors import InvalidArgument
from engram.eval.beam import BeamChat, flatten_ids, load_beam, parse_time_anchor
from engram.eval.beam_metrics import OVERALL, beam_markdown, prefixes, score_beam
from engram.eval.beam_run import reason_code, run_beam
from engram.eval.metrics import RetrievalOutcome

REPO = Path(__file__).resolve().parents[2]
BEAM_DIR = Path(os.environ.get("ENGRAM_BEAM", REPO / "../shared/data/beam/100K"))
MARCH = datetime(2024, 3, 15, tzinfo=UTC)


def _msg(mid: int, role: str, text: str, anchor: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "id": mid, "content": text}
    if anchor is not None:
        message["time_anchor"] = anchor
    return message


def _chat() -> list[dict[str, Any]]:
    """Three batches: anchor on the first message, on the batch, and none at all."""
    first = [
        [_msg(0, "user", "I adopted a greyhound named Pixel", "March-15-2024"),
         _msg(1, "assistant", "Congratulations on Pixel")],
        [_msg(2, "user", "My sprint ends on March 29"), _msg(3, "assistant", "Noted")],
    ]  # fmt: skip
    second = [[_msg(4, "user", "I moved to Lisbon"), _msg(5, "assistant", "Nice")]]
    third = [[_msg(6, "user", "Pixel likes the beach"), _msg(7, "assistant", "Lovely")]]
    return [
        {"batch_number": 1, "turns": first, "time_anchor": None},
        {"batch_number": 2, "turns": second, "time_anchor": "April-02-2024"},
        {"batch_number": 3, "turns": third},
    ]


def _questions() -> dict[str, list[dict[str, Any]]]:
    """Every id format: list, dict of lists, nested lists, null, repeats, unknown ids."""
    return {
        "abstention": [{"question": "What is my cat's name?", "source_chat_ids": None}],
        "information_extraction": [
            {"question": "When does my sprint end?", "source_chat_ids": [2]},
            {"question": "Where do I live?", "source_chat_ids": [4, 4, 99]},
        ],
        "knowledge_update": [
            {
                "question": "Where am I now?",
                "source_chat_ids": {"original_info": [0], "updated_info": [4, 6]},
            }
        ],
        "event_ordering": [{"question": "Order?", "source_chat_ids": [0, [2, 4], 6]}],
        "preference_following": [{"question": "Suggest a walk", "source_chat_ids": []}],
    }


def _write_chat(folder: Path, *, truncated: bool = False) -> Path:
    """Write one BEAM-format chat folder; a truncated file drops the last batch."""
    folder.mkdir(parents=True)
    chat = _chat()
    (folder / "chat.json").write_text(json.dumps(chat), encoding="utf-8")
    if truncated:
        (folder / "chat_trunecated.json").write_text(json.dumps(chat[:2]), encoding="utf-8")
    (folder / "probing_questions.json").write_text(json.dumps(_questions()), encoding="utf-8")
    return folder


@pytest.fixture
def tier(tmp_path: Path) -> Path:
    """A tier folder: chats 2 (truncated) and 10 and a folder that is not a chat."""
    _write_chat(tmp_path / "10")
    _write_chat(tmp_path / "2", truncated=True)
    (tmp_path / "notes").mkdir()
    return tmp_path


def test_chats_in_numeric_order_and_truncated_file_preferred(tier: Path) -> None:
    chats = load_beam(tier)
    assert [(c.chat_id, c.source, len(c.messages)) for c in chats] == [
        ("2", "chat_trunecated.json", 6),
        ("10", "chat.json", 8),
    ]
    assert [c.chat_id for c in load_beam(tier, limit=1)] == ["2"]
    (single,) = load_beam(tier / "10")
    assert single.chat_id == "10"


def test_time_anchors_and_order(tier: Path) -> None:
    chat = load_beam(tier)[1]
    times = [m.time for m in chat.messages]
    assert times[:4] == [MARCH + timedelta(seconds=s) for s in range(4)]
    assert times[4:6] == [datetime(2024, 4, 2, tzinfo=UTC) + timedelta(seconds=s) for s in (0, 1)]
    # batch 3 has no anchor: it continues a second after batch 2
    assert times[6:] == [times[5] + timedelta(seconds=1), times[5] + timedelta(seconds=2)]
    assert times == sorted(times)
    assert len(set(times)) == len(times)
    assert [m.batch for m in chat.messages] == [1, 1, 1, 1, 2, 2, 3, 3]
    assert chat.end == times[-1]


def test_earlier_anchor_never_goes_back_in_time(tmp_path: Path) -> None:
    chat = _chat()
    chat[1]["time_anchor"] = "March-01-2024"  # before batch 1
    folder = _write_chat(tmp_path / "1")
    (folder / "chat.json").write_text(json.dumps(chat), encoding="utf-8")
    times = [m.time for m in load_beam(folder)[0].messages]
    assert times[4] == times[3] + timedelta(seconds=1)


def test_gold_ids_flattened_in_every_format(tier: Path) -> None:
    chat = load_beam(tier)[1]
    gold = {(q.type, q.index): q.gold for q in chat.questions}
    assert gold == {
        ("abstention", 0): (),
        ("information_extraction", 0): (2,),
        ("information_extraction", 1): (4, 99),  # repeat dropped, unknown id kept
        ("knowledge_update", 0): (0, 4, 6),
        ("event_ordering", 0): (0, 2, 4, 6),
        ("preference_following", 0): (),
    }
    assert chat.questions[1].key == ("10", "information_extraction", 0)


def test_flatten_ids_refuses_non_ids() -> None:
    assert flatten_ids({"a": [3, [1]], "b": None}, "here") == (3, 1)
    with pytest.raises(InvalidArgument, match="here: 'source_chat_ids' holds '5'"):
        flatten_ids(["5"], "here")
    with pytest.raises(InvalidArgument, match="holds True"):
        flatten_ids([True], "here")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("March-15-2024", MARCH),
        ("Sep-05-2023", datetime(2023, 9, 5, tzinfo=UTC)),
        ("February-30-2024", None),
        ("15 March 2024", None),
        ("Smarch-15-2024", None),
    ],
)
def test_parse_time_anchor(text: str, expected: datetime | None) -> None:
    if expected is None:
        with pytest.raises(InvalidArgument, match="time anchor"):
            parse_time_anchor(text)
    else:
        assert parse_time_anchor(text) == expected


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("no anchor", "the first batch has no time_anchor"),
        ("duplicate id", "message id 3 appears twice"),
        ("string id", r"turn \[0\] message \[1\]: 'id' must be an integer"),
        ("turns", "'turns' must be a list"),
    ],
)
def test_shape_errors_say_what_and_where(tmp_path: Path, change: str, message: str) -> None:
    chat = _chat()
    if change == "no anchor":
        del chat[0]["turns"][0][0]["time_anchor"]
    elif change == "duplicate id":
        chat[1]["turns"][0][0]["id"] = 3
    elif change == "string id":
        chat[0]["turns"][0][1]["id"] = "1"
    elif change == "turns":
        chat[2]["turns"] = {}
    folder = _write_chat(tmp_path / "1")
    (folder / "chat.json").write_text(json.dumps(chat), encoding="utf-8")
    with pytest.raises(InvalidArgument, match=message):
        load_beam(folder)


def test_missing_folder_and_empty_tier(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="BEAM folder not found"):
        load_beam(tmp_path / "absent")
    with pytest.raises(InvalidArgument, match="no BEAM chat folders"):
        load_beam(tmp_path)


# --- the metric --------------------------------------------------------------------


@pytest.fixture
def chat(tier: Path) -> BeamChat:
    """The full synthetic chat (8 messages, 6 questions)."""
    return load_beam(tier)[1]


def _answers(chat: BeamChat, ids: dict[str, list[str]]) -> dict[Any, Any]:
    """Outcomes at k = 1, 2, 4 from one ranked list per question type and index."""
    return {q.key: prefixes(ids.get(f"{q.type}{q.index}", []), (1, 2, 4)) for q in chat.questions}


def test_recall_per_type_by_hand(chat: BeamChat) -> None:
    ranked = {
        "information_extraction0": ["2"],  # 1 of 1 at every k
        "information_extraction1": ["4", "0"],  # 1 of 2 (99 is not a message: a miss)
        "knowledge_update0": ["1", "4", "5", "6"],  # 0, 1/3, 2/3 at k = 1, 2, 4
        "event_ordering0": ["7", "5", "3", "0"],  # 0, 0, 1/4
        "abstention0": ["1"],
    }
    scores = score_beam([chat], _answers(chat, ranked), ks=(1, 2, 4))
    assert scores.recall["information_extraction"] == {1: 0.75, 2: 0.75, 4: 0.75}
    assert scores.recall["knowledge_update"] == pytest.approx({1: 0, 2: 1 / 3, 4: 2 / 3})
    assert scores.recall["event_ordering"] == {1: 0.0, 2: 0.0, 4: 0.25}
    assert scores.recall["preference_following"] == {1: None, 2: None, 4: None}  # no gold
    assert scores.recall["summarization"] == {1: None, 2: None, 4: None}  # no question
    # overall: mean over the four questions with gold ids, not over types
    assert scores.recall[OVERALL][4] == pytest.approx((1 + 0.5 + 2 / 3 + 0.25) / 4)
    assert scores.recall[OVERALL][1] == pytest.approx((1 + 0.5 + 0 + 0) / 4)
    counts = scores.counts
    assert (counts["abstention"].questions, counts["abstention"].scored) == (1, 0)
    assert (counts["preference_following"].no_gold, counts[OVERALL].scored) == (1, 4)
    assert (counts["information_extraction"].unknown_gold, counts[OVERALL].gold_ids) == (1, 10)


def test_empty_answers_count_as_abstention(chat: BeamChat) -> None:
    outcomes = _answers(chat, {"information_extraction0": ["2"]})
    outcomes[chat.questions[0].key] = {k: RetrievalOutcome((), True) for k in (1, 2, 4)}
    scores = score_beam([chat], outcomes, ks=(1, 2, 4))
    assert scores.abstention == {1: 1.0, 2: 1.0, 4: 1.0}
    assert scores.answerable_abstention == {1: 0.75, 2: 0.75, 4: 0.75}  # 3 of 4 got nothing


def test_per_k_answers_are_scored_at_their_own_k(chat: BeamChat) -> None:
    outcomes = _answers(chat, {})
    key = ("10", "knowledge_update", 0)
    outcomes[key] = {1: RetrievalOutcome(("0",), False), 2: RetrievalOutcome(("6", "4"), False),
                     4: RetrievalOutcome(("5", "3", "2", "0", "4"), False)}  # fmt: skip
    scores = score_beam([chat], outcomes, ks=(1, 2, 4))
    assert scores.recall["knowledge_update"] == pytest.approx({1: 1 / 3, 2: 2 / 3, 4: 1 / 3})


def test_metric_refuses_missing_and_stray(chat: BeamChat) -> None:
    outcomes = _answers(chat, {})
    del outcomes[chat.questions[0].key]
    with pytest.raises(InvalidArgument, match="no retrieval outcome"):
        score_beam([chat], outcomes, ks=(1, 2, 4))
    with pytest.raises(InvalidArgument, match=r"at k=\[3\]"):
        score_beam([chat], _answers(chat, {}), ks=(1, 3))
    with pytest.raises(InvalidArgument, match="'42' is not a message"):
        score_beam([chat], _answers(chat, {"abstention0": ["42"]}), ks=(1, 2, 4))


def test_markdown_and_json(chat: BeamChat) -> None:
    scores = score_beam([chat], _answers(chat, {"information_extraction0": ["2"]}), ks=(1, 2))
    table = beam_markdown({"bm25": scores, "engram": scores})
    assert "| information_extraction | 50.0 | 50.0 | 50.0 | 50.0 |" in table
    assert "| preference_following | n/a |" in table
    assert "| abstention | 1 | 0 | 1 | 0 | 0 |" in table
    data = scores.to_dict()
    assert data["recall"]["overall"] == {"R@1": 0.25, "R@2": 0.25}
    json.dumps(data)
    with pytest.raises(InvalidArgument):
        beam_markdown({})


def test_reason_codes() -> None:
    assert reason_code("content is 9278 bytes; the limit is 8192") == "oversized"
    assert reason_code("content holds a secret (x); secrets are never stored") == "secret"
    assert reason_code("content is empty") == "content is empty"


# --- a real dev chat, end to end ---------------------------------------------------------


@pytest.fixture(scope="module")
def real_chat() -> BeamChat:
    """Chat 1 of the dev split; skipped when absent, but CI=true requires the data."""
    if not BEAM_DIR.is_dir():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but the BEAM dev split is not at {BEAM_DIR} (set ENGRAM_BEAM)")
        pytest.skip(f"BEAM data not found at {BEAM_DIR} (set ENGRAM_BEAM)")
    (chat,) = load_beam(BEAM_DIR, limit=1)
    return chat


def test_real_chat_shape(real_chat: BeamChat) -> None:
    assert (real_chat.chat_id, real_chat.source, len(real_chat.messages)) == ("1", "chat.json", 188)
    assert [m.id for m in real_chat.messages] == list(range(188))
    assert real_chat.messages[0].time == MARCH
    assert real_chat.end.date() == datetime(2024, 4, 25).date()
    assert len(real_chat.questions) == 20
    assert all(q.gold for q in real_chat.questions if q.type != "abstention")
    assert sum(len(m.content.encode()) > 8192 for m in real_chat.messages) == 6


def test_real_chat_end_to_end_with_hashing(real_chat: BeamChat) -> None:
    run = run_beam([real_chat], embedder="hashing")
    assert list(run.scores) == ["bm25", "dense", "hybrid", "engram"]
    assert run.messages == 188
    assert "oversized" not in run.rejected  # long messages are stored as passages
    assert run.baseline_missing == 0  # the baselines search every message
    for name, scores in run.scores.items():
        overall = scores.recall[OVERALL]
        assert scores.counts[OVERALL].scored == 18, name
        assert 0.0 < overall[5] <= overall[10] + 1e-9 <= overall[25] + 2e-9 <= 1.0 + 2e-9, name
    assert run.scores["bm25"].recall[OVERALL][25] > 0.3
    data = run.to_dict()
    assert "oversized" not in data["rejected_messages"]
    json.dumps(data)


def test_shared_embedder_embeds_each_text_once_then_passes_through() -> None:
    from engram.embed import HashingEmbedder
    from engram.eval.beam_run import _SharedEmbedder

    calls: list[list[str]] = []
    inner = HashingEmbedder()

    class Counting:
        model_id, dimension = inner.model_id, inner.dimension

        def embed(self, texts: Any) -> Any:
            calls.append(list(texts))
            return inner.embed(texts)

    shared = _SharedEmbedder(Counting())
    first = shared.embed(["a b", "c d", "a b"])
    again = shared.embed(["c d", "e f"])
    assert calls == [["a b", "c d"], ["e f"]]
    assert (first[1] == again[0]).all()
    assert (first[0] == inner.embed(["a b"])[0]).all()
    shared.stop_sharing()
    shared.embed(["a b"])
    assert calls[-1] == ["a b"]  # queries are embedded (and timed) by each system

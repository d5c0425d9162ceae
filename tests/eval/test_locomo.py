"""The LoCoMo loader: parsing, quirk handling, errors, and the real dev split."""

from __future__ import annotations

import json
import os
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engram.errors import InvalidArgument, NotFound
from engram.eval.locomo import (
    LocomoConversation,
    LocomoQuestion,
    LocomoTurn,
    canonical_dia_ids,
    load_locomo,
    parse_session_time,
    turn_text,
)

REPO = Path(__file__).resolve().parents[2]
DEV_FILE = Path(os.environ.get("ENGRAM_LOCOMO", REPO / "../shared/data/locomo/locomo10_dev.json"))

# Per-conversation counts from the data README (official file, all ten).
README_COUNTS = {
    "conv-26": (19, 419, 199),
    "conv-30": (19, 369, 105),
    "conv-41": (32, 663, 193),
    "conv-42": (29, 629, 260),
    "conv-43": (29, 680, 242),
    "conv-44": (28, 675, 158),
    "conv-47": (31, 689, 190),
    "conv-48": (30, 681, 239),
    "conv-49": (25, 509, 196),
    "conv-50": (30, 568, 204),
}
DEV_IDS = ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43"]


def _session(number: int, turns: int, speakers: tuple[str, str]) -> list[dict[str, Any]]:
    """Return ``turns`` plain turns of session ``number``, speakers alternating."""
    return [
        {
            "speaker": speakers[i % 2],
            "dia_id": f"D{number}:{i + 1}",
            "text": f"s{number}t{i + 1}",
        }
        for i in range(turns)
    ]


def _small_conversation() -> dict[str, Any]:
    """conv-a: two sessions, an image turn, orphan date keys, varied QA items."""
    first = _session(1, 3, ("Ann", "Bob"))
    first[1] |= {
        "img_url": ["https://example.invalid/dog.jpg"],
        "blip_caption": "a photo of a dog on a beach",
        "query": "dog beach",
    }
    first[2] |= {"blip_caption": "   "}
    conversation = {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        # session 2 listed first: sessions are ordered by number, not by key order
        "session_2_date_time": "12:19 am on 4 January, 2024",
        "session_2": _session(2, 2, ("Bob", "Ann")),
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": first,
        "session_3_date_time": "9:00 am on 5 January, 2024",  # no session_3
        "session_4_date_time": "10:00 am on 6 January, 2024",  # no session_4
    }
    qa = [
        {"question": "Where?", "answer": "beach", "evidence": ["D1:2"], "category": 4},
        {
            "question": "Year?",
            "answer": 2022,
            "evidence": ["D2:1", "D1:1"],
            "category": 2,
        },
        {"question": "Ally?", "answer": "Likely", "evidence": [], "category": 3},
        {
            "question": "Did Bob adopt a cat?",
            "evidence": ["D1:2"],
            "category": 5,
            "adversarial_answer": "yes, in May",
        },
        {
            "question": "Dup?",
            "answer": "x",
            "evidence": ["D1:1", "D1:1 ", "D9:9"],
            "category": 1,
        },
    ]
    return {"sample_id": "conv-a", "conversation": conversation, "qa": qa}


def _big_conversation() -> dict[str, Any]:
    """conv-b: thirty sessions of 26 turns each, for the README's malformed ids."""
    conversation: dict[str, Any] = {"speaker_a": "Cy", "speaker_b": "Di"}
    for number in range(1, 31):
        conversation[f"session_{number}_date_time"] = f"3:{number:02d} pm on {number} June, 2023"
        conversation[f"session_{number}"] = _session(number, 26, ("Cy", "Di"))
    raw = [
        ["D8:6; D9:17"],
        ["D:11:26"],
        ["D30:05"],
        ["D1:18", "D", "D1:20"],
        ["D10:27"],
    ]
    qa = [
        {"question": f"q{i}", "answer": "a", "evidence": evidence, "category": 1}
        for i, evidence in enumerate(raw)
    ]
    qa.append(
        {
            "question": "multi",
            "answer": "a",
            "evidence": ["D9:1 D4:4 D4:6"],
            "category": 1,
        }
    )
    return {"sample_id": "conv-b", "conversation": conversation, "qa": qa}


def _write(tmp_path: Path, data: object) -> Path:
    """Write ``data`` as JSON and return the file's path."""
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def synthetic(tmp_path: Path) -> list[LocomoConversation]:
    """The two synthetic conversations, loaded."""
    return load_locomo(_write(tmp_path, [_small_conversation(), _big_conversation()]))


def test_turns_are_in_session_order_and_skip_orphan_dates(
    synthetic: list[LocomoConversation],
) -> None:
    small = synthetic[0]
    assert small.sample_id == "conv-a"
    assert small.speakers == ("Ann", "Bob")
    assert [t.dia_id for t in small.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert [(t.session, t.index) for t in small.turns][2:4] == [(1, 3), (2, 1)]
    assert small.session_of("D2:2") == 2
    assert len(synthetic[1].turns) == 30 * 26


def test_turn_fields_caption_and_time(synthetic: list[LocomoConversation]) -> None:
    small = synthetic[0]
    image = small.turn("D1:2")
    assert image == LocomoTurn(
        conversation_id="conv-a",
        dia_id="D1:2",
        session=1,
        index=2,
        speaker="Bob",
        text="s1t2",
        caption="a photo of a dog on a beach",
        time=datetime(2023, 5, 8, 13, 56, tzinfo=UTC),
    )
    assert small.turn("D1:3").caption is None  # blank caption
    assert small.turn("D2:1").time == datetime(2024, 1, 4, 0, 19, tzinfo=UTC)


def test_turn_text_appends_the_caption(synthetic: list[LocomoConversation]) -> None:
    small = synthetic[0]
    assert turn_text(small.turn("D1:1")) == "Ann: s1t1"
    assert turn_text(small.turn("D1:2")) == (
        "Bob: s1t2 [shared a photo: a photo of a dog on a beach]"
    )


def test_unknown_turn_raises_not_found(synthetic: list[LocomoConversation]) -> None:
    with pytest.raises(NotFound, match="conv-a has no turn 'D3:1'"):
        synthetic[0].session_of("D3:1")


def test_question_fields(synthetic: list[LocomoConversation]) -> None:
    where, year, ally, trick, dup = synthetic[0].questions
    assert (where.conversation_id, where.index, where.answer) == ("conv-a", 0, "beach")
    assert year.answer == "2022"
    assert year.evidence == ("D2:1", "D1:1")  # file order kept
    assert (ally.evidence, ally.category) == ((), 3)
    assert (trick.answer, trick.adversarial_answer, trick.category) == (
        None,
        "yes, in May",
        5,
    )
    assert dup.evidence == ("D1:1",)  # duplicate merged, missing D9:9 dropped


def test_malformed_evidence_is_repaired_or_dropped(
    synthetic: list[LocomoConversation],
) -> None:
    evidence = [q.evidence for q in synthetic[1].questions]
    assert evidence == [
        ("D8:6", "D9:17"),
        ("D11:26",),
        ("D30:5",),
        ("D1:18", "D1:20"),
        (),  # D10:27 does not exist: sessions hold 26 turns
        ("D9:1", "D4:4", "D4:6"),
    ]


def test_canonical_dia_ids_does_not_check_existence() -> None:
    raw = ["D8:6; D9:17", "D:11:26", "D30:05", "D", "D10:19", "x D2:3,D2:4"]
    assert canonical_dia_ids(raw) == (
        "D8:6",
        "D9:17",
        "D11:26",
        "D30:5",
        "D10:19",
        "D2:3",
        "D2:4",
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:19 am on 4 January, 2024", datetime(2024, 1, 4, 0, 19, tzinfo=UTC)),
        ("12:05 pm on 30 Sept, 2022", None),
        ("12:05 PM on 30 Sep 2022", datetime(2022, 9, 30, 12, 5, tzinfo=UTC)),
        ("10:31 am on 13 October, 2023", datetime(2023, 10, 13, 10, 31, tzinfo=UTC)),
        ("13:00 pm on 1 May, 2023", None),
        ("1:00 pm on 31 June, 2023", None),
        ("8 May 2023", None),
    ],
)
def test_parse_session_time(text: str, expected: datetime | None) -> None:
    if expected is None:
        with pytest.raises(InvalidArgument, match="session time"):
            parse_session_time(text)
    else:
        assert parse_session_time(text) == expected


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="not found"):
        load_locomo(tmp_path / "absent.json")


def test_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("[{", encoding="utf-8")
    with pytest.raises(InvalidArgument, match="not valid UTF-8 JSON"):
        load_locomo(path)


def _broken(change: str) -> object:
    """Return the small conversation with one defect, named by ``change``."""
    data = _small_conversation()
    body = data["conversation"]
    if change == "top-level":
        return data
    if change == "sample_id":
        del data["sample_id"]
    elif change == "date":
        body["session_1_date_time"] = "sometime in May"
    elif change == "missing date":
        del body["session_2_date_time"]
    elif change == "dia_id":
        body["session_2"][1]["dia_id"] = "D2:7"
    elif change == "category":
        data["qa"][1]["category"] = 6
    elif change == "evidence":
        data["qa"][0]["evidence"] = "D1:2"
    elif change == "no sessions":
        data["conversation"] = {"speaker_a": "Ann", "speaker_b": "Bob"}
    return [data]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("top-level", "expected a non-empty JSON list of conversations"),
        ("sample_id", r"conversation \[0\]: 'sample_id' must be a string"),
        ("date", r"\(conv-a\) session_1_date_time: unparseable session time 'sometime"),
        ("missing date", r"\(conv-a\): 'session_2_date_time' must be a string"),
        ("dia_id", r"\(conv-a\) session_2\[1\]: dia_id 'D2:7' should be 'D2:2'"),
        ("category", r"\(conv-a\) qa\[1\]: 'category' must be an integer 1-5, got 6"),
        ("evidence", r"qa\[0\]: 'evidence' must be a list of strings"),
        ("no sessions", "no 'session_N' lists"),
    ],
)
def test_shape_errors_say_what_and_where(tmp_path: Path, change: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        load_locomo(_write(tmp_path, _broken(change)))


def test_duplicate_sample_ids(tmp_path: Path) -> None:
    path = _write(tmp_path, [_small_conversation(), _small_conversation()])
    with pytest.raises(InvalidArgument, match="sample_id 'conv-a' appears twice"):
        load_locomo(path)


@pytest.fixture(scope="module")
def real() -> list[LocomoConversation]:
    """The LoCoMo file named by ENGRAM_LOCOMO, else the dev split beside the repo."""
    if not DEV_FILE.is_file():
        pytest.skip(f"LoCoMo data not found at {DEV_FILE} (set ENGRAM_LOCOMO)")
    return load_locomo(DEV_FILE)


def test_real_counts_match_the_readme(real: list[LocomoConversation]) -> None:
    for conversation in real:
        sessions = len({t.session for t in conversation.turns})
        counts = (sessions, len(conversation.turns), len(conversation.questions))
        assert counts == README_COUNTS[conversation.sample_id], conversation.sample_id
    if len(real) == len(DEV_IDS):
        assert [c.sample_id for c in real] == DEV_IDS
        assert sum(len(c.turns) for c in real) == 419 + 369 + 663 + 629 + 680 == 2760
        assert sum(len(c.questions) for c in real) == 999
    else:
        assert sum(len(c.turns) for c in real) == 5882
        assert sum(len(c.questions) for c in real) == 1986


def test_real_evidence_ids_all_exist(real: list[LocomoConversation]) -> None:
    for conversation in real:
        known = {t.dia_id for t in conversation.turns}
        for question in conversation.questions:
            assert set(question.evidence) <= known
            assert len(set(question.evidence)) == len(question.evidence)


def _question(conversation: LocomoConversation, text: str) -> LocomoQuestion:
    """Return the one question of a conversation with this text."""
    (question,) = [q for q in conversation.questions if q.question == text]
    return question


def test_real_quirks(real: list[LocomoConversation]) -> None:
    by_id = {c.sample_id: c for c in real}
    conv26 = by_id["conv-26"]
    assert {t.session for t in conv26.turns} == set(range(1, 20))  # not 35
    assert conv26.turns[0].time == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert conv26.turns[-1].time.date() == datetime(2023, 10, 22).date()
    assert any(q.evidence == ("D8:6", "D9:17") for q in conv26.questions)
    assert sum(q.answer == "2022" for q in conv26.questions) == 4
    authors = _question(by_id["conv-43"], "What authors has Tim read books from?")
    assert authors.evidence[4] == "D11:26"  # raw "D:11:26"
    advice = _question(by_id["conv-42"], "What things has Nate reccomended to Joanna?")
    assert len(advice.evidence) == 6  # raw D10:19 dropped: session 10 has 16 turns
    assert "D10:19" not in advice.evidence


def test_real_dev_categories(real: list[LocomoConversation]) -> None:
    if len(real) != len(DEV_IDS):
        pytest.skip("category counts below are for the dev split")
    questions = [q for c in real for q in c.questions]
    assert Counter(q.category for q in questions) == {
        1: 142,
        2: 156,
        3: 46,
        4: 418,
        5: 237,
    }
    assert sum(1 for q in questions if q.category != 5 and not q.evidence) == 2
    adversarial = [q for q in questions if q.category == 5]
    assert all(q.adversarial_answer is not None for q in adversarial)
    assert sum(q.answer is not None for q in adversarial) == 2

"""Load the LoCoMo long-conversation benchmark into frozen values.

LoCoMo (Maharana et al., ACL 2024) ships one JSON list of conversations; each
holds numbered sessions of turns (``dia_id`` ``"D<session>:<turn>"``) and QA
items whose ``evidence`` names the turns that support the answer. The loader
accepts the official ``locomo10.json`` and the five-conversation dev split,
and settles the file's quirks in one place:

* sessions are the ``session_N`` keys that hold lists; ``session_N_date_time``
  keys without a session (conv-26 has sixteen) are ignored;
* session times are free text (``"1:56 pm on 8 May, 2023"``), read as UTC;
* evidence strings are split on ``[;,\\s]+``, repaired with
  ``D:?(\\d+):0*(\\d+)`` and ids of turns that do not exist are dropped;
* integer answers become strings;
* image captions are kept, because many answers live only in them.

Every shape problem raises ``InvalidArgument`` naming the file and the place.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, NamedTuple

from engram.errors import InvalidArgument, NotFound
from engram.eval.reading import as_object, check_unique, month_number, read_json, text_field

__all__ = [
    "LocomoConversation",
    "LocomoQuestion",
    "LocomoTurn",
    "canonical_dia_ids",
    "load_locomo",
    "parse_session_time",
    "turn_text",
]

_CATEGORIES: Final = frozenset({1, 2, 3, 4, 5})
_SESSION_KEY: Final = re.compile(r"session_(\d+)")
_EVIDENCE_SEPARATOR: Final = re.compile(r"[;,\s]+")
_EVIDENCE_ID: Final = re.compile(r"D:?(\d+):0*(\d+)")
_SESSION_TIME: Final = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([a-z]+)\.?,?\s+(\d{4})\s*",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class LocomoTurn:
    """One utterance; ``index`` is its 1-based position within its session."""

    conversation_id: str
    dia_id: str
    session: int
    index: int
    speaker: str
    text: str
    caption: str | None
    time: datetime


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    """One QA item; ``index`` is its 0-based position in the conversation's ``qa``.

    ``evidence`` holds canonical ids of turns that exist, in the file's order.
    Category ids follow the official scorer: 1 multi-hop, 2 temporal,
    3 open-domain, 4 single-hop, 5 adversarial (the right reply is to abstain).
    """

    conversation_id: str
    index: int
    question: str
    answer: str | None
    evidence: tuple[str, ...]
    category: int
    adversarial_answer: str | None


@dataclass(frozen=True, slots=True)
class LocomoConversation:
    """One conversation: two speakers, turns in session order, and its questions."""

    sample_id: str
    speakers: tuple[str, str]
    turns: tuple[LocomoTurn, ...]
    questions: tuple[LocomoQuestion, ...]
    _by_id: Mapping[str, LocomoTurn] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Index the turns by ``dia_id`` once, so lookups are constant time."""
        object.__setattr__(self, "_by_id", {turn.dia_id: turn for turn in self.turns})

    def turn(self, dia_id: str) -> LocomoTurn:
        """Return the turn with this canonical ``dia_id``; raises ``NotFound``."""
        try:
            return self._by_id[dia_id]
        except KeyError:
            raise NotFound(f"{self.sample_id} has no turn {dia_id!r}") from None

    def session_of(self, dia_id: str) -> int:
        """Return the session number of a turn; raises ``NotFound`` if absent."""
        return self.turn(dia_id).session


def turn_text(turn: LocomoTurn) -> str:
    """Return the text to index for a turn: speaker, words, and any image caption."""
    text = f"{turn.speaker}: {turn.text}"
    if turn.caption is not None:
        text += f" [shared a photo: {turn.caption}]"
    return text


def canonical_dia_ids(raw: Iterable[str]) -> tuple[str, ...]:
    """Split and repair raw evidence strings into unique ``"D<s>:<t>"`` ids.

    ``["D8:6; D9:17", "D:11:26", "D30:05", "D"]`` becomes
    ``("D8:6", "D9:17", "D11:26", "D30:5")``: pieces that match no id are
    dropped; whether the turns exist is not checked here.
    """
    ids: dict[str, None] = {}
    for text in raw:
        for piece in _EVIDENCE_SEPARATOR.split(text):
            match = _EVIDENCE_ID.fullmatch(piece)
            if match is not None:
                ids[f"D{int(match[1])}:{int(match[2])}"] = None
    return tuple(ids)


def parse_session_time(text: str) -> datetime:
    """Parse a LoCoMo session time such as ``"1:56 pm on 8 May, 2023"`` as UTC.

    Parsed by hand rather than with ``strptime`` so the result does not depend
    on the process locale. Raises ``InvalidArgument`` for any other shape.
    """
    match = _SESSION_TIME.fullmatch(text)
    month = month_number(match[5]) if match else 0
    if match is None or month == 0 or not 1 <= int(match[1]) <= 12:
        raise InvalidArgument(f"unparseable session time {text!r}")
    hour = int(match[1]) % 12 + (12 if match[3].lower() == "p" else 0)
    try:
        return datetime(int(match[6]), month, int(match[4]), hour, int(match[2]), tzinfo=UTC)
    except ValueError as exc:
        raise InvalidArgument(f"impossible session time {text!r}: {exc}") from None


def load_locomo(path: str | Path) -> list[LocomoConversation]:
    """Read a LoCoMo JSON file (the official ``locomo10.json`` or a subset of it).

    Raises ``InvalidArgument`` when the file is missing or unreadable, is not
    JSON, or departs from the expected shape; the message names the place.
    """
    source = Path(path)
    data = read_json(source, "LoCoMo")
    if not isinstance(data, list) or not data:
        raise InvalidArgument(f"{source}: expected a non-empty JSON list of conversations")
    conversations = [
        _parse_conversation(item, f"{source}: conversation [{position}]")
        for position, item in enumerate(data)
    ]
    check_unique((c.sample_id for c in conversations), f"{source}: sample_id")
    return conversations


def _parse_conversation(item: object, where: str) -> LocomoConversation:
    """Build one conversation from its JSON object."""
    obj = as_object(item, where)
    sample_id = text_field(obj, "sample_id", where)
    where = f"{where} ({sample_id})"
    body = as_object(obj.get("conversation"), f"{where} .conversation")
    speakers = (text_field(body, "speaker_a", where), text_field(body, "speaker_b", where))
    turns = _parse_turns(body, sample_id, where)
    check_unique((turn.dia_id for turn in turns), f"{where}: dia_id")
    known = frozenset(turn.dia_id for turn in turns)
    qa = obj.get("qa")
    if not isinstance(qa, list):
        raise InvalidArgument(f"{where}: 'qa' must be a list")
    questions = tuple(
        _parse_question(entry, index, sample_id, known, f"{where} qa[{index}]")
        for index, entry in enumerate(qa)
    )
    return LocomoConversation(sample_id, speakers, turns, questions)


def _parse_turns(body: Mapping[str, object], sample_id: str, where: str) -> tuple[LocomoTurn, ...]:
    """Return every turn of every ``session_N`` list, in session order."""
    sessions = sorted(
        (
            (int(match[1]), value)
            for key, value in body.items()
            if (match := _SESSION_KEY.fullmatch(key)) and isinstance(value, list)
        ),
        key=lambda pair: pair[0],
    )
    if not sessions:
        raise InvalidArgument(f"{where}: no 'session_N' lists in 'conversation'")
    return tuple(
        turn
        for number, entries in sessions
        for turn in _parse_session(body, number, entries, sample_id, where)
    )


class _Session(NamedTuple):
    """What every turn of one session shares."""

    conversation_id: str
    number: int
    time: datetime


def _parse_session(
    body: Mapping[str, object],
    number: int,
    entries: list[object],
    sample_id: str,
    where: str,
) -> list[LocomoTurn]:
    """Return the turns of session ``number``, each stamped with the session time."""
    key = f"session_{number}"
    when = text_field(body, f"{key}_date_time", where)
    try:
        session = _Session(sample_id, number, parse_session_time(when))
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where} {key}_date_time: {exc}") from None
    return [
        _parse_turn(entry, session, index, f"{where} {key}[{index - 1}]")
        for index, entry in enumerate(entries, start=1)
    ]


def _parse_turn(item: object, session: _Session, index: int, where: str) -> LocomoTurn:
    """Build one turn; its ``dia_id`` must match its place in the session."""
    obj = as_object(item, where)
    dia_id = text_field(obj, "dia_id", where)
    expected = f"D{session.number}:{index}"
    if dia_id != expected:
        raise InvalidArgument(f"{where}: dia_id {dia_id!r} should be {expected!r}")
    return LocomoTurn(
        conversation_id=session.conversation_id,
        dia_id=dia_id,
        session=session.number,
        index=index,
        speaker=text_field(obj, "speaker", where),
        text=text_field(obj, "text", where),
        caption=_caption(obj, where),
        time=session.time,
    )


def _parse_question(
    item: object, index: int, sample_id: str, known: Container[str], where: str
) -> LocomoQuestion:
    """Build one QA item, normalising its evidence against the existing turns."""
    obj = as_object(item, where)
    evidence = obj.get("evidence", [])
    if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
        raise InvalidArgument(f"{where}: 'evidence' must be a list of strings")
    category = obj.get("category")
    if not isinstance(category, int) or isinstance(category, bool) or category not in _CATEGORIES:
        raise InvalidArgument(f"{where}: 'category' must be an integer 1-5, got {category!r}")
    return LocomoQuestion(
        conversation_id=sample_id,
        index=index,
        question=text_field(obj, "question", where),
        answer=_optional_text(obj, "answer", where),
        evidence=tuple(i for i in canonical_dia_ids(evidence) if i in known),
        category=category,
        adversarial_answer=_optional_text(obj, "adversarial_answer", where),
    )


def _caption(obj: Mapping[str, object], where: str) -> str | None:
    """Return a turn's image caption; ``None`` when it has none or it is blank."""
    caption = obj.get("blip_caption")
    if caption is not None and not isinstance(caption, str):
        raise InvalidArgument(f"{where}: 'blip_caption' must be a string, got {caption!r}")
    return caption if caption and caption.strip() else None


def _optional_text(obj: Mapping[str, object], key: str, where: str) -> str | None:
    """Return an optional scalar field as a string (``2022`` becomes ``"2022"``)."""
    value = obj.get(key)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise InvalidArgument(f"{where}: {key!r} must be a string or number, got {value!r}")

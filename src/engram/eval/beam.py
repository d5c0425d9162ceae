"""Load BEAM chats (Tavakoli et al., ICLR 2026) into frozen values.

A BEAM tier folder (``100K/``) holds one folder per chat (``1/``, ``3/``, ...):

* ``chat.json``: a list of batches ``{"batch_number", "turns", "time_anchor"}``;
  each turn is a list of messages ``{"role", "id", "content", ...}`` whose
  integer ids are unique within the chat;
* ``chat_trunecated.json`` (so spelled in the source; ``chat_truncated.json``
  is accepted too): when present, the version BEAM's question generation
  used, so it is preferred;
* ``probing_questions.json``: question type -> list of questions, whose
  ``source_chat_ids`` hold the gold message ids as a list, a dict of lists,
  or nested lists (``[20, [70, 72], 232]``), or ``null`` (abstention).

The loader settles the file's quirks in one place:

* a batch's date is its own ``time_anchor`` when set, else the first one a
  message of the batch carries (the published files put it on the first
  message); a batch with none continues from the previous one;
* anchors read ``"March-15-2024"`` (month name, day, year), as UTC midnight;
  messages have no time of their own, so message ``i`` of a batch is observed
  ``i`` seconds after the anchor, and never before the message preceding it;
* gold ids are flattened, repeats dropped, file order kept; ids that are not
  messages of the chat are kept (a scorer counts them as misses).

Every shape problem raises ``InvalidArgument`` naming the file and the place.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from engram.errors import InvalidArgument
from engram.eval.reading import as_object, check_unique, month_number, read_json, text_field

__all__ = [
    "ABSTENTION",
    "BeamChat",
    "BeamMessage",
    "BeamQuestion",
    "chat_file",
    "flatten_ids",
    "load_beam",
    "parse_time_anchor",
]

ABSTENTION: Final = "abstention"
"""The question type whose right answer is that nothing in the chat supports one."""
_CHAT_FILES: Final = ("chat_trunecated.json", "chat_truncated.json", "chat.json")
_ANCHOR: Final = re.compile(r"\s*([A-Za-z]+)-(\d{1,2})-(\d{4})\s*")


@dataclass(frozen=True, slots=True)
class BeamMessage:
    """One message; ``time`` is its batch's anchor plus its position in seconds."""

    id: int
    role: str
    content: str
    batch: int
    time: datetime


@dataclass(frozen=True, slots=True)
class BeamQuestion:
    """One probing question; ``index`` is its position within its type's list."""

    chat_id: str
    type: str
    index: int
    question: str
    gold: tuple[int, ...]

    @property
    def key(self) -> tuple[str, str, int]:
        """The question's identity: chat, type and index."""
        return (self.chat_id, self.type, self.index)


@dataclass(frozen=True, slots=True)
class BeamChat:
    """One chat: its messages in file order, its questions, and the file it came from."""

    chat_id: str
    source: str
    messages: tuple[BeamMessage, ...]
    questions: tuple[BeamQuestion, ...]

    @property
    def end(self) -> datetime:
        """When the chat's last message was observed."""
        return self.messages[-1].time

    def message_ids(self) -> frozenset[int]:
        """The ids of every message of the chat."""
        return frozenset(m.id for m in self.messages)


def parse_time_anchor(text: str) -> datetime:
    """Parse a BEAM anchor such as ``"March-15-2024"`` as UTC midnight.

    Parsed by hand, like LoCoMo's session times, so the locale never matters.
    Raises ``InvalidArgument`` for any other shape or an impossible date.
    """
    match = _ANCHOR.fullmatch(text)
    month = month_number(match[1]) if match else 0
    if match is None or month == 0:
        raise InvalidArgument(f"unparseable time anchor {text!r}")
    try:
        return datetime(int(match[3]), month, int(match[2]), tzinfo=UTC)
    except ValueError as exc:
        raise InvalidArgument(f"impossible time anchor {text!r}: {exc}") from None


def flatten_ids(value: object, where: str) -> tuple[int, ...]:
    """Return the message ids in ``source_chat_ids``: unique, in file order.

    Accepts ``null``, an integer, and lists or objects of them at any depth.
    """
    ids: dict[int, None] = {}
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, int) and not isinstance(item, bool):
            ids[item] = None
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif item is not None:
            raise InvalidArgument(f"{where}: 'source_chat_ids' holds {item!r}, not an id")
    return tuple(ids)


def chat_file(folder: Path) -> Path:
    """Return the chat file to read: the truncated version when the folder has one."""
    for name in _CHAT_FILES:
        if (folder / name).is_file():
            return folder / name
    raise InvalidArgument(f"{folder}: no chat.json")


def load_beam(path: str | Path, limit: int | None = None) -> list[BeamChat]:
    """Read one BEAM chat folder, or a tier folder of numbered chat folders.

    Chats come in numeric order; ``limit`` keeps the first ``limit`` of them.
    Raises ``InvalidArgument`` when the folder is missing or holds no chat, or a
    file departs from the expected shape; the message names the place.
    """
    root = Path(path)
    if not root.is_dir():
        raise InvalidArgument(f"BEAM folder not found: {root}")
    if limit is not None and limit < 1:
        raise InvalidArgument(f"limit must be a positive number of chats, got {limit}")
    folders = [root] if (root / "chat.json").is_file() else _chat_folders(root)
    if not folders:
        raise InvalidArgument(f"{root}: no BEAM chat folders (numbered, holding chat.json)")
    return [_load_chat(folder) for folder in folders[:limit]]


def _chat_folders(root: Path) -> list[Path]:
    """Return the numbered sub-folders holding a ``chat.json``, in numeric order."""
    found = [p for p in root.iterdir() if p.name.isdigit() and (p / "chat.json").is_file()]
    return sorted(found, key=lambda p: int(p.name))


def _load_chat(folder: Path) -> BeamChat:
    """Read one chat folder: its preferred chat file and its questions."""
    source = chat_file(folder)
    messages = _parse_chat(read_json(source, "BEAM"), str(source))
    check_unique((m.id for m in messages), f"{source}: message id")
    questions_file = folder / "probing_questions.json"
    questions = _parse_questions(read_json(questions_file, "BEAM"), folder.name, questions_file)
    return BeamChat(folder.name, source.name, messages, questions)


def _parse_chat(data: object, where: str) -> tuple[BeamMessage, ...]:
    """Return every message of every batch, in file order, each with its time."""
    if not isinstance(data, list) or not data:
        raise InvalidArgument(f"{where}: expected a non-empty JSON list of batches")
    messages: list[BeamMessage] = []
    for position, item in enumerate(data):
        batch = as_object(item, f"{where} batch [{position}]")
        messages += _parse_batch(batch, messages, f"{where} batch [{position}]")
    if not messages:
        raise InvalidArgument(f"{where}: the chat has no messages")
    return tuple(messages)


def _parse_batch(
    batch: Mapping[str, object], before: list[BeamMessage], where: str
) -> list[BeamMessage]:
    """Return a batch's messages, timed from its anchor (or after ``before``)."""
    raw = list(_raw_messages(batch, where))
    number = batch.get("batch_number", len({m.batch for m in before}) + 1)
    if not isinstance(number, int) or isinstance(number, bool):
        raise InvalidArgument(f"{where}: 'batch_number' must be an integer, got {number!r}")
    anchor = _anchor(batch, raw, where)
    if anchor is None and not before:
        raise InvalidArgument(f"{where}: the first batch has no time_anchor")
    previous = before[-1].time if before else None
    messages = []
    for offset, (message, place) in enumerate(raw):
        time = _message_time(anchor, offset, previous)
        messages.append(_message(message, number, time, place))
        previous = time
    return messages


def _raw_messages(
    batch: Mapping[str, object], where: str
) -> Iterator[tuple[Mapping[str, object], str]]:
    """Yield each message object of a batch's turns with its place in the file."""
    turns = batch.get("turns")
    if not isinstance(turns, list):
        raise InvalidArgument(f"{where}: 'turns' must be a list")
    for t, turn in enumerate(turns):
        if not isinstance(turn, list):
            raise InvalidArgument(f"{where} turn [{t}]: expected a list of messages")
        for m, message in enumerate(turn):
            place = f"{where} turn [{t}] message [{m}]"
            yield as_object(message, place), place


def _anchor(
    batch: Mapping[str, object], raw: list[tuple[Mapping[str, object], str]], where: str
) -> datetime | None:
    """Return the batch's date: its own anchor, else the first a message carries."""
    candidates = [(batch.get("time_anchor"), where)]
    candidates += [(message.get("time_anchor"), place) for message, place in raw]
    for value, place in candidates:
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidArgument(f"{place}: 'time_anchor' must be a string, got {value!r}")
        try:
            return parse_time_anchor(value)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{place}: {exc}") from None
    return None


def _message_time(anchor: datetime | None, offset: int, previous: datetime | None) -> datetime:
    """Anchor plus ``offset`` seconds, but always a second after the previous message."""
    after = None if previous is None else previous + timedelta(seconds=1)
    if anchor is None:
        assert after is not None  # _parse_batch refuses a first batch without anchor
        return after
    time = anchor + timedelta(seconds=offset)
    return time if after is None or time >= after else after


def _message(obj: Mapping[str, object], batch: int, time: datetime, where: str) -> BeamMessage:
    """Build one message from its JSON object."""
    message_id = obj.get("id")
    if not isinstance(message_id, int) or isinstance(message_id, bool):
        raise InvalidArgument(f"{where}: 'id' must be an integer, got {message_id!r}")
    role = text_field(obj, "role", where)
    return BeamMessage(message_id, role, text_field(obj, "content", where), batch, time)


def _parse_questions(data: object, chat_id: str, source: Path) -> tuple[BeamQuestion, ...]:
    """Return every probing question, type by type in file order."""
    groups = as_object(data, str(source))
    questions: list[BeamQuestion] = []
    for kind, items in groups.items():
        if not isinstance(items, list):
            raise InvalidArgument(f"{source} {kind!r}: expected a list of questions")
        for index, item in enumerate(items):
            where = f"{source} {kind}[{index}]"
            obj = as_object(item, where)
            gold = flatten_ids(obj.get("source_chat_ids"), where)
            question = text_field(obj, "question", where)
            questions.append(BeamQuestion(chat_id, kind, index, question, gold))
    return tuple(questions)

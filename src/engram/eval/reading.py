"""Checked reading of benchmark JSON files, shared by the LoCoMo and BEAM loaders.

Every shape problem becomes ``InvalidArgument`` naming the file and the place,
never a ``KeyError`` or ``TypeError`` from deep inside a loader.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from engram.errors import InvalidArgument

__all__ = ["as_object", "check_unique", "month_number", "read_json", "text_field"]

_MONTHS: Final = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip


def read_json(source: Path, label: str) -> object:
    """Return the decoded JSON of a file, turning I/O and syntax errors into ours.

    ``label`` names the benchmark in the message (``"LoCoMo file not found: ..."``).
    """
    try:
        with source.open(encoding="utf-8") as handle:
            data: object = json.load(handle)
    except FileNotFoundError:
        raise InvalidArgument(f"{label} file not found: {source}") from None
    except OSError as exc:
        raise InvalidArgument(f"cannot read {label} file {source}: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"{source} is not valid UTF-8 JSON: {exc}") from None
    return data


def month_number(name: str) -> int:
    """Return 1-12 for a full or three-letter English month name, else 0."""
    name = name.lower()
    for number, month in enumerate(_MONTHS, start=1):
        if name == month or (len(name) == 3 and month.startswith(name)):
            return number
    return 0


def as_object(value: object, where: str) -> Mapping[str, object]:
    """Return ``value`` as a JSON object or raise naming the place."""
    if not isinstance(value, dict):
        raise InvalidArgument(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def text_field(obj: Mapping[str, object], key: str, where: str) -> str:
    """Return a required string field."""
    value = obj.get(key)
    if not isinstance(value, str):
        raise InvalidArgument(f"{where}: {key!r} must be a string, got {value!r}")
    return value


def check_unique(values: Iterable[object], where: str) -> None:
    """Raise if any value repeats; ids must be unique to key results by them."""
    seen: set[object] = set()
    for value in values:
        if value in seen:
            raise InvalidArgument(f"{where} {value!r} appears twice")
        seen.add(value)

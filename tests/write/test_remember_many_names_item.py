"""A refused ``remember_many`` item is named by its index, whichever check refused it.

Before, only the field-name and passage checks said which item; a bad scope, a bad
confidence or a reserved authority in item 3 of 50 came back without an index, so
a caller could not tell which of its items to fix. Nothing is stored either way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engram import Context, Engram
from engram.errors import InvalidArgument

_GOOD = {"content": "The staging database runs PostgreSQL 17."}
_BAD_ITEMS: list[tuple[dict[str, Any], str]] = [
    ({"content": "x", "scope": "galaxy"}, "scope"),
    ({"content": "x", "confidence": 7}, "confidence"),
    ({"content": "x", "authority": "explicit_admin"}, "explicit_admin"),
    ({"content": "x", "type": 12}, "type"),
    ({"content": "x", "valid_from": "yesterday"}, "valid_from"),
    ({"content": "x", "colour": "red"}, "unknown fields"),
    ({"text": "x"}, "mapping with 'content'"),
]


@pytest.mark.parametrize(("bad", "said"), _BAD_ITEMS, ids=[s for _, s in _BAD_ITEMS])
def test_refusal_names_the_item_and_stores_nothing(tmp_path: Path, bad: dict[str, Any],
                                                   said: str) -> None:  # fmt: skip
    mem = Engram.open(f"sqlite:///{tmp_path / 'm.db'}", embedder="hashing")
    ctx = Context(tenant_id="acme", user_id="u1")
    try:
        with pytest.raises(InvalidArgument) as caught:
            mem.remember_many(ctx, [_GOOD, _GOOD | {"content": "Deploys go out on Fridays."}, bad])
        message = str(caught.value)
        assert message.startswith("item 2"), message
        assert said in message, message
        assert message.count("item 2") == 1, message  # named once, not twice
        assert mem.list(ctx) == []
    finally:
        mem.close()


def test_a_single_remember_is_not_numbered(tmp_path: Path) -> None:
    """``remember`` takes one memory: its refusal names the field, not an item 0."""
    mem = Engram.open(f"sqlite:///{tmp_path / 'm.db'}", embedder="hashing")
    try:
        with pytest.raises(InvalidArgument) as caught:
            mem.remember(Context(tenant_id="acme", user_id="u1"), "x", confidence=7)
        assert str(caught.value).startswith("confidence"), str(caught.value)
    finally:
        mem.close()

"""The ids a stored trace names, read from its JSON text (``named_ids_in``), are
exactly those the walk over the value finds (``named_ids``): strings that are an
id, never an id inside a longer string, quoted or escaped, anywhere in the body."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engram.ids import new_id
from engram.store.traces import named_ids, named_ids_in

IDS = [new_id() for _ in range(4)]
PIECES = st.sampled_from([*IDS, '"', "\\", "\\\\", '\\"', "x", " ", "é", ":", "0", "Z" * 25, "\n"])
STRINGS = st.one_of(st.sampled_from(IDS), st.lists(PIECES, max_size=6).map("".join))
SCALARS = st.one_of(STRINGS, st.integers(), st.floats(allow_nan=False), st.none(), st.booleans())
BODIES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(STRINGS, inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=500, deadline=None)
@given(BODIES)
def test_ids_from_the_text_are_the_ids_of_the_value(body: Any) -> None:
    assert named_ids_in(json.dumps(body)) == named_ids(body)


def test_an_id_inside_a_longer_string_is_not_named() -> None:
    body = {"a": f'say "{IDS[0]}', "b": [f"{IDS[1]}\\", f'"{IDS[2]}"'], IDS[3]: 1}
    assert named_ids_in(json.dumps(body)) == named_ids(body) == {IDS[3]}

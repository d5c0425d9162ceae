"""Request and content caps: each is enforced with a clear error and stores nothing.

What ``tests/surfaces/rest/test_rest_bad_input.py`` already proves (a declared
``Content-Length`` over the limit on every route, wrong types, unknown fields) is
not repeated; here: a body that declares no length (chunked) and passes the
limit while it streams, the write policy's content cap (a REJECT decision, not
an error), the SDK's field caps (query, value, text) on the SDK and on REST, and
a bulk write whose body is under the limit but whose items are not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from limits_support import Rest, is_problem, rest

from backends import table_rows
from engram import Context, Engram, InvalidArgument
from engram.limits import MAX_QUERY_CHARS, MAX_TEXT_CHARS, MAX_VALUE_BYTES
from engram.surfaces.rest.settings import RestSettings

CTX = Context(tenant_id="acme", user_id="u1", agent_id="coder")
ME = {"user_id": "u1", "agent_id": "coder"}
LIMIT = 64 * 1024  # the body limit of these tests' server


def _state(mem: Engram) -> tuple[list[str], int]:
    """Every record id of the tenant's user, and the audit log's size."""
    mem.flush()
    ids = sorted(r.id for r in mem.list(CTX, status=None, limit=10_000))
    return ids, len(table_rows(mem.store, "audit"))


@pytest.fixture
def api(sqlite_file_url: str, tmp_path: Path) -> Iterator[Rest]:
    mem = Engram.open(sqlite_file_url, embedder="hashing")
    mem.remember(CTX, "The build uses Ant.", key="build.tool", value="ant")
    settings = RestSettings(max_body_bytes=LIMIT, mcp_path=None, rate_limit=0)
    try:
        with rest(mem, tmp_path, settings) as made:
            yield made
    finally:
        mem.close()


def test_a_chunked_body_past_the_limit_is_413_while_it_streams(api: Rest) -> None:
    before = _state(api.mem)
    sent: list[int] = []

    def chunks() -> Iterator[bytes]:  # no Content-Length: the server counts as it reads
        yield b'{"user_id": "u1", "agent_id": "coder", "content": "'
        for _ in range(40):
            sent.append(1)
            yield b"x" * 4096
        yield b'"}'

    response = api.call("POST", "/v1/memories", content=chunks(),
                        headers={"Content-Type": "application/json"})  # fmt: skip
    assert f"exceeds {LIMIT} bytes" in is_problem(response, 413)["detail"]
    assert _state(api.mem) == before


def test_keyed_content_over_the_policy_cap_is_rejected_as_a_decision(api: Rest) -> None:
    """Long plain content becomes passages; one keyed value is never split: REJECT."""
    before = _state(api.mem)
    cap = api.mem.config.write.max_content_bytes
    body = {**ME, "content": "é" * (cap // 2 + 1), "key": "build.notes", "value": "long"}
    answer = api.call("POST", "/v1/memories", json=body)
    assert answer.status_code == 200
    assert answer.json()["operation"] == "REJECT"
    assert f"the limit is {cap}" in answer.json()["reason"]
    ids, audit = _state(api.mem)
    assert ids == before[0]  # a REJECT stores no record
    assert audit == before[1] + 1  # only its audit entry, which says why


@pytest.mark.parametrize(
    ("path", "body", "words"),
    [
        ("/v1/recall", {**ME, "query": "q" * (MAX_QUERY_CHARS + 1)}, "query"),
        ("/v1/memories", {**ME, "content": "x", "value": {"k": "v" * MAX_VALUE_BYTES}}, "value"),
        ("/v1/memories:batch", {**ME, "items": [{"content": "The CI runs on Linux."},
                                                {"content": "x", "value": [[1] * 9000]}]},
         "value"),
    ],
    ids=["query", "value", "batch-item"],
)  # fmt: skip
def test_field_caps_are_422_naming_the_field(
    api: Rest, path: str, body: dict[str, object], words: str
) -> None:
    before = _state(api.mem)
    problem = is_problem(api.call("POST", path, json=body), 422)
    assert words in problem["detail"]
    assert _state(api.mem) == before


def test_the_sdk_caps_refuse_before_anything_is_written(
    store_url: str, open_mem: Callable[..., Engram]
) -> None:
    mem = open_mem(store_url)
    mem.remember(CTX, "The build uses Ant.")
    before = _state(mem)
    with pytest.raises(InvalidArgument, match="content"):
        mem.remember(CTX, "x" * (MAX_TEXT_CHARS + 1))
    with pytest.raises(InvalidArgument, match="query"):
        mem.recall(CTX, "q" * (MAX_QUERY_CHARS + 1))
    with pytest.raises(InvalidArgument, match="value"):
        mem.remember(CTX, "The limits hold.", value="v" * (MAX_VALUE_BYTES + 1))
    items = [{"content": f"Queue {i} drains hourly."} for i in range(5)]
    items.append({"content": "x", "value": "v" * (MAX_VALUE_BYTES + 1)})
    with pytest.raises(InvalidArgument, match=r"item 5|items\[5\]|value"):
        mem.remember_many(CTX, items)
    assert _state(mem) == before

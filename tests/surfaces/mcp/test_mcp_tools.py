"""The MCP tools through the SDK's own client, in process, on a real SQLite file: typed
results with output schemas, no identity in any tool's arguments, clear tool errors
for bad arguments, and one identity never seeing another's memories."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_support import INVALID_PARAMS, Client, MCPError, structured

from engram import Context, Engram
from engram.surfaces.mcp import build_server

U1 = Context(tenant_id="acme", user_id="u1", agent_id="coder", repository_id="lunest-ios")
U2 = Context(tenant_id="acme", user_id="u2", agent_id="coder", repository_id="lunest-ios")


@pytest.fixture
def mem(tmp_path: Path) -> Engram:
    engine = Engram.open(f"sqlite:///{tmp_path / 'mcp.db'}", embedder="hashing")
    yield engine  # type: ignore[misc]
    engine.close()


def _with(mem: Engram, ctx: Context, body: Callable[[Client], Awaitable[Any]]) -> Any:
    """Run ``body`` with a client of an in-process server for ``ctx``."""

    async def main() -> Any:
        async with Client(build_server(mem, ctx)) as client:
            return await body(client)

    return anyio.run(main)


def test_tools_publish_schemas_and_take_no_identity(mem: Engram) -> None:
    async def body(client: Client) -> None:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {
            "remember",
            "recall",
            "list",
            "get",
            "history",
            "correct",
            "retract",
            "forget",
        }
        for tool in tools.values():
            names = set(tool.input_schema.get("properties", {}))
            assert not names & {"tenant_id", "user_id", "agent_id", "tenant", "user", "agent"}
            assert tool.input_schema["additionalProperties"] is False
            assert tool.output_schema is not None, tool.name
            assert tool.description
        assert tools["recall"].annotations.read_only_hint is True
        assert tools["forget"].annotations.destructive_hint is True
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["memory://{memory_id}"]

    _with(mem, U1, body)


def test_remember_recall_correct_retract_forget(mem: Engram) -> None:
    async def body(client: Client) -> None:
        added = structured(
            await client.call_tool(
                "remember",
                {
                    "content": "Use Objective-C for iOS implementation.",
                    "type": "constraint",
                    "scope": "repo:lunest-ios",
                    "key": "ios.language",
                    "value": "Objective-C",
                },
            )
        )
        assert added["operation"] == "ADD"
        assert added["memory"]["key"] == "ios.language"
        memory_id = added["id"]
        recalled = structured(
            await client.call_tool(
                "recall", {"query": "Add network-state handling to the iOS application."}
            )
        )
        assert recalled["status"] == "ok"
        assert [i["id"] for i in recalled["items"]] == [memory_id]
        assert recalled["items"][0]["components"]["task_fit"] > 0
        assert "Use Objective-C" in recalled["prompt"]
        corrected = structured(
            await client.call_tool(
                "correct",
                {
                    "memory_id": memory_id,
                    "content": "Use Swift for iOS implementation.",
                    "value": "Swift",
                },
            )
        )
        assert corrected["operation"] == "SUPERSEDE"
        history = structured(await client.call_tool("history", {"memory_id": corrected["id"]}))
        assert [m["status"] for m in history["memories"]] == ["superseded", "active"]
        note = structured(await client.call_tool("remember", {"content": "Office is in Lyon."}))
        retracted = structured(
            await client.call_tool("retract", {"memory_id": note["id"], "reason": "it is Paris"})
        )
        assert retracted["memory"]["status"] == "retracted"
        listed = structured(await client.call_tool("list", {"status": ["active", "retracted"]}))
        assert {m["content"] for m in listed["memories"]} == {
            "Use Swift for iOS implementation.",
            "Office is in Lyon.",
        }
        gone = structured(await client.call_tool("forget", {"memory_id": corrected["id"]}))
        assert set(gone["deleted"]) == {memory_id, corrected["id"]}
        assert gone["verified"] is True
        read = await client.read_resource(f"memory://{note['id']}")
        assert '"status": "retracted"' in read.contents[0].text

    _with(mem, U1, body)
    assert [r.content for r in mem.list(U1, status=None)] == ["Office is in Lyon."]


def test_a_second_identity_cannot_see_or_touch_the_first_ones_memories(mem: Engram) -> None:
    async def write(client: Client) -> str:
        added = structured(
            await client.call_tool(
                "remember", {"content": "Prefers Python for data scripts.", "type": "preference"}
            )
        )
        memory_id: str = added["id"]
        return memory_id

    memory_id = _with(mem, U1, write)

    async def snoop(client: Client) -> None:
        assert structured(await client.call_tool("list", {}))["memories"] == []
        recalled = structured(await client.call_tool("recall", {"query": "data scripts"}))
        assert recalled["items"] == []
        for tool in ("get", "history", "forget", "retract"):
            failed = await client.call_tool(tool, {"memory_id": memory_id})
            assert failed.is_error, tool
            assert "not-found:" in failed.content[0].text
        with pytest.raises(Exception, match="not-found"):
            await client.read_resource(f"memory://{memory_id}")
        sneaky = await client.call_tool("list", {"user_id": "u1"})
        assert sneaky.is_error
        assert "user_id" in sneaky.content[0].text

    _with(mem, U2, snoop)
    assert [r.id for r in mem.list(U1)] == [memory_id]


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("remember", {}, "content"),
        ("remember", {"content": 42}, "valid string"),
        ("remember", {"content": "Prefers tea.", "tenant_id": "globex"}, "Extra inputs"),
        ("remember", {"content": "Prefers tea.", "confidence": 7}, "less than or equal"),
        ("remember", {"content": "Prefers tea.", "authority": "explicit_admin"}, "authority"),
        (
            "remember",
            {"content": "Prefers tea.", "valid_from": "2026-01-01T00:00:00"},
            "invalid-argument: valid_from must be timezone-aware",
        ),
        ("remember", {"content": "Prefers tea.", "scope": "galaxy:far"}, "invalid-argument"),
        ("remember", {"content": "Prefers tea.", "type": "nonsense"}, "config-error"),
        ("recall", {"query": "x" * 100_000}, "invalid-argument"),
        ("recall", {"query": "tea", "max_items": 0}, "greater than or equal"),
        ("list", {"limit": "many"}, "valid integer"),
        ("get", {"memory_id": ""}, "at least 1 character"),
        ("get", {"memory_id": "01NOSUCHMEMORY"}, "not-found:"),
        ("correct", {"memory_id": "01NOSUCHMEMORY"}, "content"),
        ("no_such_tool", {}, "Unknown tool"),
    ],
)
def test_bad_arguments_are_clear_tool_errors_and_store_nothing(
    mem: Engram, tool: str, arguments: dict[str, Any], says: str
) -> None:
    async def body(client: Client) -> Any:
        return await client.call_tool(tool, arguments)

    result = _with(mem, U1, body)
    assert result.is_error
    assert says in result.content[0].text
    assert mem.list(U1, status=None) == []


def test_a_refused_write_is_a_result_with_its_reason(mem: Engram) -> None:
    async def body(client: Client) -> Any:
        return await client.call_tool("remember", {"content": "The password=hunter2 for prod."})

    refused = structured(_with(mem, U1, body))
    assert refused["operation"] == "REJECT"
    assert refused["id"] is None
    assert "secret" in refused["reason"]


@pytest.mark.parametrize(
    ("memory_id", "says"),
    [
        ("", "invalid-argument: memory_id must be 1-200 characters long"),
        (" padded ", "invalid-argument: memory_id must be printable"),
        ("zero\u200bwidth", "invalid-argument: memory_id must be printable"),
        ("x" * 201, "invalid-argument: memory_id must be 1-200 characters long"),
        ("01NOSUCHMEMORY", "not-found:"),
    ],
)
def test_an_unreadable_resource_id_is_an_invalid_params_error(
    mem: Engram, memory_id: str, says: str
) -> None:
    """An id the SDK refuses is the caller's mistake: JSON-RPC ``invalid params``
    (-32602) naming the problem, like an unknown memory; it used to be an internal
    error (-32603), which a client reads as a crash of the server (found by
    tests/reliability/test_fuzz_mcp.py)."""

    async def body(client: Client) -> Any:
        with pytest.raises(MCPError) as raised:
            await client.read_resource(f"memory://{memory_id}")
        return raised.value.error

    error = _with(mem, U1, body)
    assert error.code == INVALID_PARAMS, error
    assert error.message.startswith(says), error.message

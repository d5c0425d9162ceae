"""MCP fuzzing (issue 15, item 3): every tool of the MCP server is called, in process
through the SDK's own client, with arguments generated from its published input
schema and, half the time, made hostile (``fuzz_mcp_support``); the ``memory://``
resource is read with real, generated and hostile ids. The server never crashes:
an invalid argument is a tool error with a clear message (``isError`` true), a
resource that cannot be read is a JSON-RPC ``invalid params`` error, never an
internal one; a result matches the tool's output schema and carries nothing of
tenant ``globex``, whose rows and working memory digest as before.

``ENGRAM_FUZZ_MCP_CALLS`` (default 60) sets the tool calls per backend and
``ENGRAM_FUZZ_MCP_READS`` (default 20) the resource reads; ``ENGRAM_FUZZ_RESULTS``
keeps the counts in a JSON file (the large run in docs/reliability/fuzz.md)."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

try:
    from anyio.from_thread import BlockingPortal, start_blocking_portal
    from mcp import Client
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS
except ImportError as exc:  # pragma: no cover - the extra is in the test environment
    if os.environ.get("CI", "").lower() == "true":
        raise
    pytest.skip(f"the MCP SDK is not installed ({exc.name}): pip install "
                "'engram-governed[mcp]'", allow_module_level=True)  # fmt: skip

from fuzz_api_support import OTHER, TENANT, ctx, keep_run, seeded_and_digested, tenant_digest
from fuzz_mcp_support import hostile, judge, resource_ids
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from engram import Engram
from engram.surfaces.mcp import build_server

CALLS = int(os.environ.get("ENGRAM_FUZZ_MCP_CALLS", "60"))
READS = int(os.environ.get("ENGRAM_FUZZ_MCP_READS", "20"))
# No shrinking: later calls name the ids earlier ones wrote, so a replay meets other
# data; a failure is reported as it was found (and every one is collected).
SETTINGS = settings(deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck),
                    phases=(Phase.explicit, Phase.reuse, Phase.generate))  # fmt: skip


def call_tools(portal: BlockingPortal, client: Client, ids: list[str], foreign: list[str],
               counts: Counter[str], failed: list[str]) -> None:  # fmt: skip
    """``CALLS`` generated calls of random tools; what ``judge`` finds goes to ``failed``."""
    tools = portal.call(client.list_tools).tools
    assert len(tools) == 8

    @given(data=st.data())
    @settings(SETTINGS, max_examples=CALLS)
    def run(data: st.DataObject) -> None:
        tool = data.draw(st.sampled_from(tools), label="tool")
        args, how = data.draw(hostile(tool.input_schema, ids), label="arguments")
        try:
            result = portal.call(client.call_tool, tool.name, args)
        except MCPError as exc:
            failed.append(f"{tool.name} {how} {str(args)[:300]}: protocol error {exc}")
            return
        counts[f"{tool.name} {how} {'error' if result.is_error else 'ok'}"] += 1
        problem = judge(tool, result, foreign)
        if problem is not None:
            failed.append(f"{tool.name} {how} {str(args)[:300]}: {problem}")
        elif not result.is_error and tool.name in ("remember", "correct"):
            written = result.structured_content.get("id")
            if written:  # later calls name it: correct, retract, forget what was written
                ids.append(written)

    run()


def read_resources(portal: BlockingPortal, client: Client, ids: list[str], foreign: list[str],
                   counts: Counter[str], failed: list[str]) -> None:  # fmt: skip
    """``READS`` reads of ``memory://{id}``: contents, or an invalid-params error."""

    @given(memory_id=resource_ids(ids))
    @settings(SETTINGS, max_examples=READS)
    def run(memory_id: str) -> None:
        uri = f"memory://{memory_id}"
        try:
            read = portal.call(client.read_resource, uri)
        except MCPError as exc:
            counts[f"resource error {exc.error.code}"] += 1
            if exc.error.code != INVALID_PARAMS or not exc.error.message:
                failed.append(f"read {uri[:80]!r}: error {exc.error.code} {exc.error.message!r}")
            return
        counts["resource ok"] += 1
        text = read.contents[0].text
        if json.loads(text)["id"] != memory_id or any(f in text for f in foreign):
            failed.append(f"read {uri[:80]!r}: another memory or globex data: {text[:200]}")

    run()


def test_fuzzed_tool_calls_are_refused_clearly_and_never_touch_another_tenant(
    shared_url: str, open_mem: Callable[..., Engram], tmp_path: Path
) -> None:
    mem = open_mem(shared_url)
    seeded, before = seeded_and_digested(mem, tmp_path / "keys.json")
    own, theirs = seeded.ids[:3], seeded.ids[4:7]  # memories of acme (u1, u2) and of globex
    ids, foreign = own + theirs, [*theirs, f"{OTHER}: "]  # globex's contents start so
    counts, failed = Counter[str](), list[str]()
    started = time.perf_counter()
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(build_server(mem, ctx(TENANT)))) as client,
    ):
        call_tools(portal, client, ids, foreign, counts, failed)
        read_resources(portal, client, ids, foreign, counts, failed)
    after = tenant_digest(mem, OTHER)[0]
    record(shared_url, counts, failed, before == after, time.perf_counter() - started)
    assert failed == [], "\n".join(failed)
    assert after == before
    assert mem.audit_verify().ok


def record(url: str, counts: Counter[str], failed: list[str], untouched: bool,
           seconds: float) -> None:  # fmt: skip
    """Print what the run sent and got; with ``ENGRAM_FUZZ_RESULTS`` set, also keep it
    in that JSON file under ``mcp-<backend>``."""
    run: dict[str, Any] = {
        "backend": url.split(":", 1)[0], "calls": CALLS, "reads": READS,
        "answers": dict(sorted(counts.items())), "failures": failed,
        "other_tenant_untouched": untouched, "seconds": round(seconds, 1)}  # fmt: skip
    keep_run(run, f"mcp-{run['backend']}")


def test_the_judge_reports_a_crash_an_off_schema_result_and_a_leak(
    sqlite_file_url: str, open_mem: Callable[..., Engram], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge is not blind: a tool whose SDK call raises an unexpected exception,
    a result off the output schema and one naming ``globex`` are each reported."""
    mem = open_mem(sqlite_file_url)
    written = mem.remember(ctx(TENANT), "acme: I prefer tabs.").record
    assert written is not None
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(Client(build_server(mem, ctx(TENANT)))) as client,
    ):
        tools = {t.name: t for t in portal.call(client.list_tools).tools}
        fine = portal.call(client.call_tool, "get", {"memory_id": written.id})
        assert judge(tools["get"], fine, [f"{OTHER}: "]) is None
        assert "globex data" in str(judge(tools["get"], fine, ["acme: "]))
        fine.structured_content["version"] = "one"
        assert "output schema" in str(judge(tools["get"], fine, []))
        monkeypatch.setattr(mem, "get", lambda *_: 1 / 0)
        crashed = portal.call(client.call_tool, "get", {"memory_id": written.id})
        assert crashed.is_error
        assert "unexpected exception" in str(judge(tools["get"], crashed, []))

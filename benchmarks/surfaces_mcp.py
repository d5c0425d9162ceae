"""The MCP server's and the command line's own cost, against the SDK in the same run.

Not a test. Each figure is a p50 / p95 over calls made in this process, next to a
baseline measured in the same run:

1. ``recall`` on a store of ``--records`` memories (hashing embedder, one user):
   baseline ``Engram.recall``; then the MCP ``recall`` tool in process (the SDK's
   client straight to the server: argument validation, the worker thread, the
   structured result) and over streamable HTTP on loopback (uvicorn, a bearer key
   checked per request, JSON-RPC over HTTP, one connection reused);
2. ``remember`` of new memories the same three ways;
3. the command line's start: ``python -m engram --help`` in a fresh process;
   baseline ``python -c "import engram"`` (what every command pays anyway).

Usage: ``PYTHONPATH=src python benchmarks/surfaces_mcp.py [--records 2000]
[--calls 200]``; writes ``benchmarks/results/surfaces_mcp.json``.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx2
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from common import (
    REPO,
    context,
    fill,
    machine,
    print_table,
    ratio,
    summarize,
    temp_dir,
    write_results,
)
from corpus import Corpus
from engram import Engram
from engram.surfaces.mcp import build_server, create_http_app
from engram.surfaces.principal import Principal

USER = "u1"


class _OneKey:
    """An ``Authenticator`` with one key, as cheap as a hashed-key lookup."""

    def authenticate(self, credential: str) -> Principal:
        """The benchmark user's principal."""
        return Principal("acme", "bench", users=frozenset({USER}))


def _timed(calls: Sequence[Callable[[], object]], warmup: int = 5) -> list[float]:
    for call in calls[:warmup]:
        call()
    out = []
    for call in calls:
        tick = time.perf_counter()
        call()
        out.append((time.perf_counter() - tick) * 1000)
    return out


async def _timed_async(
    calls: Sequence[Callable[[], Awaitable[object]]], warmup: int = 5
) -> list[float]:
    for call in calls[:warmup]:
        await call()
    out = []
    for call in calls:
        tick = time.perf_counter()
        await call()
        out.append((time.perf_counter() - tick) * 1000)
    return out


def _serve(app: Any) -> tuple[uvicorn.Server, threading.Thread, int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    return server, thread, port


def _tool_calls(
    client: Client, name: str, args: Sequence[dict[str, Any]]
) -> list[Callable[[], Awaitable[object]]]:
    async def call(arguments: dict[str, Any]) -> object:
        result = await client.call_tool(name, arguments)
        assert not result.is_error, result.content
        return result

    return [lambda a=a: call(a) for a in args]  # type: ignore[misc]


def _surfaces(mem: Engram, queries: list[str], writes: list[str]) -> dict[str, Any]:
    ctx = context(USER)
    half = len(writes) // 3
    out: dict[str, Any] = {
        "recall": {"sdk": summarize(_timed([lambda q=q: mem.recall(ctx, q) for q in queries]))},
        "remember": {
            "sdk": summarize(_timed([lambda t=t: mem.remember(ctx, t) for t in writes[:half]]))
        },
    }

    async def in_process() -> None:
        async with Client(build_server(mem, ctx)) as client:
            recall = [{"query": q} for q in queries]
            out["recall"]["mcp_in_process"] = summarize(
                await _timed_async(_tool_calls(client, "recall", recall))
            )
            remember = [{"content": t} for t in writes[half : 2 * half]]
            out["remember"]["mcp_in_process"] = summarize(
                await _timed_async(_tool_calls(client, "remember", remember))
            )

    anyio.run(in_process)
    server, thread, port = _serve(create_http_app(mem, _OneKey()))

    async def over_http() -> None:
        url = f"http://127.0.0.1:{port}/mcp"
        headers = {"Authorization": "Bearer k"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            recall = [{"query": q} for q in queries]
            out["recall"]["mcp_http"] = summarize(
                await _timed_async(_tool_calls(client, "recall", recall))
            )
            remember = [{"content": t} for t in writes[2 * half :]]
            out["remember"]["mcp_http"] = summarize(
                await _timed_async(_tool_calls(client, "remember", remember))
            )

    try:
        anyio.run(over_http)
    finally:
        server.should_exit = True
        thread.join()
    return out


def _starts(runs: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}

    def run(*args: str) -> Callable[[], object]:
        return lambda: subprocess.run(
            [sys.executable, *args], env=env, check=True, capture_output=True
        )

    return {
        "import_engram": summarize(_timed([run("-c", "import engram")] * runs, 1)),
        "engram_help": summarize(_timed([run("-m", "engram", "--help")] * runs, 1)),
    }


def main(argv: Sequence[str]) -> None:
    """Build the store, time each surface, print the table, write the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=2000, help="memories in the store")
    parser.add_argument("--calls", type=int, default=200, help="timed calls per surface")
    parser.add_argument("--starts", type=int, default=7, help="timed process starts")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/surfaces_mcp.json")
    args = parser.parse_args(argv)
    corpus = Corpus()
    queries = [q.text for q in corpus.queries(args.calls, range(args.records))]
    writes = [
        f"Benchmark note {n}: prefers option {n % 7} for task {n}." for n in range(3 * args.calls)
    ]
    with (
        temp_dir("engram-bench-mcp") as tmp,
        Engram.open(f"sqlite:///{tmp / 'mcp.db'}", embedder="hashing") as mem,
    ):
        fill(mem, USER, corpus, 0, args.records, 500)
        timings = _surfaces(mem, queries, writes)
        ctx = context(USER)  # the baseline again: drift on a shared machine shows here
        timings["recall"]["sdk_after"] = summarize(
            _timed([lambda q=q: mem.recall(ctx, q) for q in queries])
        )
    starts = _starts(args.starts)
    rows = []
    for op, by_surface in timings.items():
        base = by_surface["sdk"]["p50_ms"]
        for surface, stats in by_surface.items():
            rows.append(
                (op, surface, stats["p50_ms"], stats["p95_ms"], ratio(stats["p50_ms"], base))
            )
    print_table(
        f"MCP tools vs the SDK ({args.records} records, hashing, {args.calls} calls)",
        ("op", "surface", "p50 ms", "p95 ms", "p50 / sdk"),
        rows,
    )
    base = starts["import_engram"]["p50_ms"]
    print_table(
        "process start",
        ("what", "p50 ms", "p95 ms", "p50 / import"),
        [(k, v["p50_ms"], v["p95_ms"], ratio(v["p50_ms"], base)) for k, v in starts.items()],
    )
    write_results(
        args.out,
        {
            "machine": machine(sys.argv),
            "records": args.records,
            "calls": args.calls,
            "surfaces": timings,
            "starts": starts,
        },
    )


if __name__ == "__main__":
    main(sys.argv[1:])

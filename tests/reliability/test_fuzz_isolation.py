"""Isolation at scale (issue 15, item 4), the CI size: >= 50 tenants with adversarial
identities written through the SDK, then random get / list / history / recall /
export / trace calls from random identities, each checked against an oracle built
from what was written: zero foreign records, and list, export, get and history
exactly as the oracle says. Through the SDK on a SQLite file and on PostgreSQL,
through the REST API (one key per tenant) in process, and a smoke over a real
socket. ``benchmarks/fuzz_isolation.py`` runs the same harness at >= 100K calls.

``ENGRAM_FUZZ_CALLS`` sets the calls per SDK run (default 600; REST runs make 60%)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_calls_support import OPS, Answer, AsgiClient, Report, RestSurface, SdkSurface, run_calls
from fuzz_support import Caller, World, build_world

from engram import Engram

CALLS = int(os.environ.get("ENGRAM_FUZZ_CALLS", "600"))


def assert_isolated(world: World, report: Report) -> None:
    """No foreign record, no wrong answer, and every kind of call answered at least
    once (a run that only met refusals would prove nothing)."""
    assert len(world.tenants) >= 50
    assert report.foreign == 0, report.failures
    assert report.failures == []
    for op in OPS:
        assert report.calls.get(f"{op}:ok", 0) > 0, (op, report.calls)
        if op in ("get", "history", "trace"):
            assert report.calls.get(f"{op}:missing", 0) > 0, (op, report.calls)


def test_sdk_calls_from_adversarial_identities_see_only_their_own(
    shared_url: str, open_mem: Callable[..., Engram]
) -> None:
    mem = open_mem(shared_url)
    world = build_world(mem, seed=15)
    assert_isolated(world, run_calls(SdkSurface(mem), world, CALLS, seed=16))
    assert "tenant_id ':acme'" in world.rejected  # the refused ids are recorded, with why
    assert "user_id ''" in world.rejected


def rest_keys(root: Path, tenants: list[str]) -> dict[str, str]:
    """One unrestricted key per tenant in a new key file under ``root``."""
    from engram.surfaces.rest import KeyFile

    file = KeyFile(root / "keys.json")
    return {tenant: file.create(tenant)[1] for tenant in tenants}


def rest_app(mem: Engram, root: Path) -> Any:
    """The REST app over ``mem`` with the keys of ``root``."""
    from engram.surfaces.rest import KeyRing, create_app

    return create_app(mem, KeyRing(path=root / "keys.json"))


def test_rest_calls_with_per_tenant_keys_see_only_their_own(
    shared_url: str, open_mem: Callable[..., Engram], tmp_path: Path
) -> None:
    pytest.importorskip("fastapi", reason="the REST API needs the server extra")
    mem = open_mem(shared_url)
    world = build_world(mem, seed=25)
    keys = rest_keys(tmp_path, world.tenants)
    client = AsgiClient(rest_app(mem, tmp_path))
    try:
        report = run_calls(RestSurface(client, keys), world, CALLS * 3 // 5, seed=26)
    finally:
        client.close()
    assert_isolated(world, report)


def serve(app: Any) -> Iterator[str]:
    """``app`` on uvicorn on a free loopback port; yields the base URL, stops after."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="fuzz-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(20)


def test_rest_over_a_real_socket_smoke(
    sqlite_file_url: str, open_mem: Callable[..., Engram], tmp_path: Path
) -> None:
    pytest.importorskip("fastapi", reason="the REST API needs the server extra")
    import httpx

    mem = open_mem(sqlite_file_url)
    world = build_world(mem, seed=35, users=2, per_user=1)
    keys = rest_keys(tmp_path, world.tenants)
    for base in serve(rest_app(mem, tmp_path)):
        with httpx.Client(base_url=base, timeout=30) as client:
            report = run_calls(RestSurface(client, keys), world, 300, seed=36)
    assert report.foreign == 0, report.failures
    assert report.failures == []
    assert report.calls.get("list:ok", 0) > 0


class Leaky:
    """A surface that plants one foreign record in every list answer: the harness
    must report it (proof that the judge can fail)."""

    def __init__(self, inner: SdkSurface, world: World) -> None:
        self.inner = inner
        self.world = world

    def call(self, op: str, caller: Caller, arg: str | None) -> Answer:
        answer = self.inner.call(op, caller, arg)
        if op != "list" or answer.kind != "ok":
            return answer
        stranger = next(r for r in self.world.oracle.records.values()
                        if not self.world.oracle.sees(caller, r))  # fmt: skip
        return Answer("ok", [*answer.body, {"id": stranger.id}])


def test_the_judge_reports_a_planted_foreign_record(
    sqlite_file_url: str, open_mem: Callable[..., Engram]
) -> None:
    mem = open_mem(sqlite_file_url)
    world = build_world(mem, seed=45, users=1, per_user=1)
    report = run_calls(Leaky(SdkSurface(mem), world), world, 200, seed=46)
    lists = sum(n for name, n in report.calls.items() if name == "list:ok")
    assert lists > 0
    assert report.foreign == lists
    assert all("FOREIGN" in line for line in report.failures if line.startswith("list"))

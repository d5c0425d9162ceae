"""The recall gate: at most N recalls at once per process, the rest in arrival order.

The gate is what keeps a loaded server's recall tail a queue's rather than a
crowd's (``surfaces.gate``). These tests pin what it promises: the bound,
first come first served with no barging, a refusal after ``patience`` that leaves
no trace in the queue, and the REST mapping of that refusal (503, Retry-After).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from rest_support import build_app, make_keys
from tests.surfaces.gate_support import hold_recalls, wait_until_full

from engram import Context, Engram
from engram.errors import ConfigError, Unavailable
from engram.surfaces.gate import RecallGate
from engram.surfaces.rest.settings import RestSettings
from engram.surfaces.rest.workers import WorkerSpec


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(5000):
        if check():
            return
        await asyncio.sleep(0.001)
    pytest.fail("timed out")


def test_waiters_enter_in_arrival_order() -> None:
    async def scenario() -> list[int]:
        gate = RecallGate(1, patience=10)
        entered: list[int] = []

        async def recall(n: int) -> None:
            async with gate.turn():
                entered.append(n)

        tasks = []
        async with gate.turn():  # the one running recall
            for n in range(8):
                tasks.append(asyncio.create_task(recall(n)))
                await _until(lambda n=n: gate.waiting == n + 1)  # queued before the next
        await asyncio.gather(*tasks)
        return entered

    assert asyncio.run(scenario()) == list(range(8))


def test_no_more_than_the_slots_run_at_once() -> None:
    async def scenario() -> tuple[int, int]:
        gate = RecallGate(3, patience=10)
        inside = peak = 0

        async def recall() -> None:
            nonlocal inside, peak
            async with gate.turn():
                inside += 1
                peak = max(peak, inside)
                await asyncio.sleep(0.005)
                inside -= 1

        await asyncio.gather(*(recall() for _ in range(24)))
        return peak, gate.waiting

    assert asyncio.run(scenario()) == (3, 0)


def test_a_newcomer_does_not_take_a_slot_promised_to_a_waiter() -> None:
    async def scenario() -> list[str]:
        gate = RecallGate(1, patience=10)
        order: list[str] = []

        async def waiter() -> None:
            async with gate.turn():
                order.append("waiter")

        async with gate.turn():
            task = asyncio.create_task(waiter())
            await _until(lambda: gate.waiting == 1)
        # released: the slot went to the waiter, which has not run yet
        async with gate.turn():
            order.append("newcomer")
        await task
        return order

    assert asyncio.run(scenario()) == ["waiter", "newcomer"]


def test_a_recall_that_waits_too_long_is_refused_and_leaves_the_queue() -> None:
    async def scenario() -> None:
        gate = RecallGate(1, patience=0.1)
        async with gate.turn():
            started = time.monotonic()
            with pytest.raises(Unavailable, match="busy"):
                async with gate.turn():
                    pytest.fail("entered a full gate")
            assert time.monotonic() - started >= 0.1
            assert gate.waiting == 0
        async with asyncio.timeout(1):
            async with gate.turn():  # the refused request kept no slot
                pass

    asyncio.run(scenario())


@pytest.mark.parametrize("handed", [False, True], ids=["waiting", "just-handed"])
def test_a_cancelled_waiter_leaks_no_slot(handed: bool) -> None:
    """A waiter cancelled in the queue leaves it; one cancelled right after a release
    handed it the slot passes the slot on. Neither runs, and the gate still admits
    (``asyncio.timeout``: 3.11's ``wait_for`` could swallow the cancellation)."""

    async def scenario() -> None:
        gate = RecallGate(1, patience=10)
        ran: list[bool] = []

        async def waiter() -> None:
            async with gate.turn():
                ran.append(True)

        async with gate.turn():
            task = asyncio.create_task(waiter())
            await _until(lambda: gate.waiting == 1)
            if not handed:
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert gate.waiting == 0
                assert ran == []
        if handed:  # the release above handed the slot over; cancel before it runs
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert ran == []
        async with asyncio.timeout(1):
            async with gate.turn():
                pass
        assert gate.waiting == 0

    asyncio.run(scenario())


def test_an_idle_gate_follows_a_new_event_loop() -> None:
    """Test tooling may run each request on a loop of its own; an idle gate rebinds."""
    gate = RecallGate(1, patience=1)

    async def twice() -> None:
        async with gate.turn():
            pass
        async with gate.turn():
            pass

    for _ in range(3):
        asyncio.run(twice())
    assert gate.waiting == 0


@pytest.mark.parametrize("slots", [-1, True, 1.5, 10_001])
def test_bad_concurrency_is_a_config_error(slots: object) -> None:
    with pytest.raises(ConfigError, match="recall_concurrency"):
        RestSettings(recall_concurrency=slots)  # type: ignore[arg-type]


@pytest.mark.parametrize("wait", [0, -1, 3601, True])
def test_bad_queue_seconds_is_a_config_error(wait: object) -> None:
    with pytest.raises(ConfigError, match="recall_queue_seconds"):
        RestSettings(recall_queue_seconds=wait)  # type: ignore[arg-type]


def test_workers_carry_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = WorkerSpec("sqlite:///x.db", None, "hashing", None, 1 << 20, recall_concurrency=4,
                      recall_queue_seconds=2.5)  # fmt: skip
    for name in WorkerSpec.__dataclass_fields__:
        monkeypatch.setenv(f"ENGRAM_SERVE_{name.upper()}", "")  # restored after the test
    spec.export()
    read = WorkerSpec.imported()
    assert (read.recall_concurrency, read.recall_queue_seconds) == (4, 2.5)


def _blocked_app(tmp_path: Path, patience: float) -> tuple[Any, Engram, dict[str, str],
                                                                 threading.Event]:  # fmt: skip
    """An app whose recalls block until the returned event is set."""
    keys_path = tmp_path / "keys.json"
    keys = make_keys(keys_path)
    mem = Engram.open(f"sqlite:///{tmp_path / 'm.db'}", embedder="hashing")
    mem.remember(Context(tenant_id="acme", user_id="u1"), "The deploy target is Fly.io.")
    go = hold_recalls(mem)
    settings = RestSettings(recall_concurrency=1, recall_queue_seconds=patience, mcp_path=None)
    return build_app(mem, keys_path, settings), mem, keys, go


_BODY = {"user_id": "u1", "query": "where do we deploy?"}


def test_rest_answers_503_with_retry_after_when_the_queue_is_too_long(tmp_path: Path) -> None:
    app, mem, keys, go = _blocked_app(tmp_path, patience=0.3)
    headers = {"Authorization": f"Bearer {keys['user']}"}
    try:
        with TestClient(app) as client, ThreadPoolExecutor(1) as pool:
            running = pool.submit(client.post, "/v1/recall", json=_BODY, headers=headers)
            wait_until_full(app.state.recall_gate)  # the first recall holds the only slot
            busy = client.post("/v1/recall", json=_BODY, headers=headers)
            go.set()
            assert busy.status_code == 503
            assert busy.headers["Retry-After"] == "1"
            assert busy.headers["content-type"].startswith("application/problem+json")
            assert "busy" in busy.json()["detail"]
            first = running.result(10)
            assert first.status_code == 200
            assert "Fly.io" in first.json()["prompt"]
    finally:
        mem.close()


def test_queued_recalls_hold_no_worker_thread(tmp_path: Path) -> None:
    """More recalls wait than the thread pool has threads (40), and a listing is still
    answered at once: the queue is on the event loop."""
    app, mem, keys, go = _blocked_app(tmp_path, patience=20)
    headers = {"Authorization": f"Bearer {keys['user']}"}
    try:
        with TestClient(app) as client, ThreadPoolExecutor(48) as pool:
            recalls = [pool.submit(client.post, "/v1/recall", json=_BODY, headers=headers)
                       for _ in range(45)]  # fmt: skip
            gate = app.state.recall_gate
            deadline = time.monotonic() + 10
            while gate.waiting < 44 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert gate.waiting == 44  # one runs (blocked), the rest queue
            started = time.monotonic()
            listing = client.get("/v1/memories", params={"user_id": "u1"}, headers=headers)
            assert listing.status_code == 200
            assert time.monotonic() - started < 2.0
            go.set()
            assert all(r.result(30).status_code == 200 for r in recalls)
    finally:
        mem.close()


def test_zero_slots_means_no_gate(tmp_path: Path) -> None:
    keys_path = tmp_path / "keys.json"
    make_keys(keys_path)
    with Engram.open("sqlite://:memory:", embedder="hashing") as mem:
        app = build_app(mem, keys_path, RestSettings(recall_concurrency=0, mcp_path=None))
        assert app.state.recall_gate is None
        assert build_app(mem, keys_path, RestSettings(mcp_path=None)).state.recall_gate.slots == 1

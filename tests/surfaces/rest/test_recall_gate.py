"""The recall gate: at most N recalls at once per process, the rest in arrival order.

The gate is what keeps a loaded server's recall tail a queue's rather than a
crowd's (``surfaces.rest.gate``). These tests pin what it promises: the bound,
first come first served with no barging, a refusal after ``patience`` that leaves
no trace in the queue, and the REST mapping of that refusal (503, Retry-After).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from rest_support import build_app, make_keys

from engram import Context, Engram
from engram.errors import ConfigError, Unavailable
from engram.surfaces.rest.gate import RecallGate
from engram.surfaces.rest.settings import RestSettings
from engram.surfaces.rest.workers import WorkerSpec


def _wait_for(check: object, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


def test_waiters_enter_in_arrival_order() -> None:
    gate = RecallGate(1, patience=10)
    entered: list[int] = []

    def recall(n: int) -> None:
        with gate.held():
            entered.append(n)

    threads = []
    with gate.held():  # the one running recall
        for n in range(8):
            thread = threading.Thread(target=recall, args=(n,))
            thread.start()
            threads.append(thread)
            _wait_for(lambda n=n: gate.waiting == n + 1)  # n queued before the next arrives
    for thread in threads:
        thread.join(5)
    assert entered == list(range(8))


def test_no_more_than_the_slots_run_at_once() -> None:
    gate = RecallGate(3, patience=10)
    inside = peak = 0
    lock = threading.Lock()

    def recall() -> None:
        nonlocal inside, peak
        with gate.held():
            with lock:
                inside += 1
                peak = max(peak, inside)
            time.sleep(0.01)
            with lock:
                inside -= 1

    threads = [threading.Thread(target=recall) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert peak == 3
    assert gate.waiting == 0


def test_a_newcomer_does_not_take_a_slot_promised_to_a_waiter() -> None:
    gate = RecallGate(1, patience=10)
    order: list[str] = []
    holding = threading.Event()
    release = threading.Event()

    def first() -> None:
        with gate.held():
            holding.set()
            release.wait(5)

    def waiter() -> None:
        with gate.held():
            order.append("waiter")

    a = threading.Thread(target=first)
    a.start()
    holding.wait(5)
    b = threading.Thread(target=waiter)
    b.start()
    _wait_for(lambda: gate.waiting == 1)
    release.set()
    a.join(5)
    with gate.held():  # arrives after the release: the slot already passed to the waiter
        order.append("newcomer")
    b.join(5)
    assert order == ["waiter", "newcomer"]


def test_a_recall_that_waits_too_long_is_refused_and_leaves_the_queue() -> None:
    gate = RecallGate(1, patience=0.1)
    with gate.held():
        started = time.monotonic()
        with pytest.raises(Unavailable, match="busy"), gate.held():
            pytest.fail("entered a full gate")
        assert time.monotonic() - started >= 0.1
        assert gate.waiting == 0
    with gate.held():  # the refused request kept no slot
        pass


@pytest.mark.parametrize("slots", [-1, True, 1.5, 10_001])
def test_bad_concurrency_is_a_config_error(slots: object) -> None:
    with pytest.raises(ConfigError, match="recall_concurrency"):
        RestSettings(recall_concurrency=slots)  # type: ignore[arg-type]


@pytest.mark.parametrize("wait", [0, -1, 3601, True])
def test_bad_queue_seconds_is_a_config_error(wait: object) -> None:
    with pytest.raises(ConfigError, match="recall_queue_seconds"):
        RestSettings(recall_queue_seconds=wait)  # type: ignore[arg-type]


def test_workers_carry_the_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = WorkerSpec("sqlite:///x.db", None, "hashing", None, 1 << 20, recall_concurrency=4)
    for name in ("DB", "WORKING", "EMBEDDER", "KEYS", "MAX_BODY_BYTES", "HOST", "RATE_LIMIT",
                 "RATE_BURST", "RATE_LIMIT_REDIS", "RECALL_CONCURRENCY"):  # fmt: skip
        monkeypatch.delenv(f"ENGRAM_SERVE_{name}", raising=False)
    spec.export()
    assert WorkerSpec.imported().recall_concurrency == 4


def test_rest_answers_503_with_retry_after_when_the_queue_is_too_long(tmp_path: Path) -> None:
    keys_path = tmp_path / "keys.json"
    keys = make_keys(keys_path)
    mem = Engram.open(f"sqlite:///{tmp_path / 'm.db'}", embedder="hashing")
    mem.remember(Context(tenant_id="acme", user_id="u1"), "The deploy target is Fly.io.")
    settings = RestSettings(recall_concurrency=1, recall_queue_seconds=0.2, mcp_path=None)
    app = build_app(mem, keys_path, settings)
    headers = {"Authorization": f"Bearer {keys['user']}"}
    body = {"user_id": "u1", "query": "where do we deploy?"}
    try:
        with TestClient(app) as client:
            gate = app.state.recall_gate
            with gate.held():  # a recall already running, the only slot
                busy = client.post("/v1/recall", json=body, headers=headers)
            assert busy.status_code == 503
            assert busy.headers["Retry-After"] == "1"
            assert busy.headers["content-type"].startswith("application/problem+json")
            assert "busy" in busy.json()["detail"]
            free = client.post("/v1/recall", json=body, headers=headers)
            assert free.status_code == 200
            assert "Fly.io" in free.json()["prompt"]
    finally:
        mem.close()


def test_zero_slots_means_no_gate(tmp_path: Path) -> None:
    keys_path = tmp_path / "keys.json"
    make_keys(keys_path)
    with Engram.open("sqlite://:memory:", embedder="hashing") as mem:
        app = build_app(mem, keys_path, RestSettings(recall_concurrency=0, mcp_path=None))
        assert app.state.recall_gate is None
        assert build_app(mem, keys_path, RestSettings(mcp_path=None)).state.recall_gate.slots == 1

"""The server's garbage-collection policy (``engram.surfaces.collector``).

Each test runs with automatic collection off (only its own ``gc.collect`` calls
run, so the sequence is exact) and leaves the interpreter's collector as it found
it: no policy among ``gc.callbacks``, nothing frozen. On Python 3.14 and later the
policy is never installed (an incremental collector), so the module is skipped there.
"""

from __future__ import annotations

import gc
import json
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from engram.errors import ConfigError
from engram.surfaces import collector
from engram.surfaces.collector import GROWTH_CHECK_SECONDS, FreezePolicy

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 14), reason="Python 3.14's incremental collector gets no policy"
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Node:
    """A container the collector tracks, able to sit in a reference cycle."""

    def __init__(self) -> None:
        self.other: Any = None


@pytest.fixture(autouse=True)
def clean_collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(collector, "_FREE_THREADED", False)  # the mechanism, on any build
    before, enabled, frozen = list(gc.callbacks), gc.isenabled(), gc.get_freeze_count()
    gc.unfreeze()
    gc.disable()
    yield
    gc.callbacks[:] = before
    gc.unfreeze()
    if frozen:  # something froze before the test: freeze again (a superset of it)
        gc.freeze()
    if enabled:
        gc.enable()


def _cycle() -> weakref.ref[Node]:
    """A two-node reference cycle nothing else refers to, and a weak reference to it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def _policy(rescan: float = 60.0) -> tuple[FreezePolicy, Clock]:
    clock = Clock()
    policy = FreezePolicy(rescan, clock=clock)
    gc.callbacks.append(policy)
    return policy, clock


def test_a_full_collection_freezes_its_survivors() -> None:
    policy, _ = _policy()
    kept = Node()
    gc.collect()
    assert policy.freezes == 1
    assert gc.get_freeze_count() > 0
    assert not any(obj is kept for obj in gc.get_objects())  # frozen: out of every scan


def test_younger_collections_and_start_phases_freeze_nothing() -> None:
    policy, _ = _policy()
    policy("start", {"generation": 2})
    policy("stop", {"generation": 0, "collected": 0, "uncollectable": 0})
    policy("stop", {"generation": 1, "collected": 0, "uncollectable": 0})
    assert policy.freezes == 0
    assert gc.get_freeze_count() == 0


def test_frozen_objects_are_still_freed_by_reference_counting() -> None:
    _policy()
    node = Node()
    gone = weakref.ref(node)
    gc.collect()  # node is frozen now
    del node
    assert gone() is None


def test_a_frozen_cycle_waits_for_the_rescan_and_is_collected_then() -> None:
    cycle = _cycle()
    gc.freeze()  # as the last full collection would have: the cycle was alive then
    policy, clock = _policy(rescan=60.0)
    gc.collect()
    assert cycle() is not None  # frozen: no full collection sees it
    clock.now += 61
    gc.collect()  # the rescan is due: this collection unfreezes
    assert gc.get_freeze_count() == 0
    gc.collect()  # and this one scans everything
    assert cycle() is None
    assert policy.rescans == 1
    assert gc.get_freeze_count() > 0  # frozen again after the rescan


def test_a_quarter_more_frozen_objects_brings_the_rescan_forward() -> None:
    """Garbage that waits in the frozen set stays under a quarter of what is alive:
    past that growth the next full collection scans everything, hours early."""
    gc.freeze()
    policy, clock = _policy(rescan=3600.0)  # its baseline: what is frozen now
    baseline = gc.get_freeze_count()
    cycles = [_cycle() for _ in range(baseline)]  # twice as many objects again: due
    gc.freeze()  # as if they had survived a full collection, then become garbage
    gc.collect()
    assert gc.get_freeze_count() > 0  # counted at most every GROWTH_CHECK_SECONDS
    clock.now += GROWTH_CHECK_SECONDS
    gc.collect()
    assert gc.get_freeze_count() == 0  # unfrozen for the rescan
    gc.collect()
    assert all(ref() is None for ref in cycles)
    assert policy.rescans == 1


def _grow_frozen_by(share: float) -> list[Node]:
    """New live objects, ``share`` of what is frozen now in number, frozen too."""
    kept = [Node() for _ in range(int(gc.get_freeze_count() * share))]
    gc.freeze()
    return kept


def test_growth_under_a_quarter_is_not_due_and_over_it_is() -> None:
    gc.freeze()
    _, clock = _policy(rescan=3600.0)
    kept = _grow_frozen_by(0.2)
    clock.now += GROWTH_CHECK_SECONDS
    gc.collect()
    assert gc.get_freeze_count() > 0  # 20 %: frozen again, no rescan
    kept += _grow_frozen_by(0.15)  # 1.2 x 1.15 = 1.38 of the baseline
    clock.now += GROWTH_CHECK_SECONDS
    gc.collect()
    assert gc.get_freeze_count() == 0  # due: unfrozen for the full scan
    assert kept


def test_after_a_full_scan_the_next_collections_freeze_again() -> None:
    """The rescan resets both triggers: no full scan every other collection."""
    gc.freeze()
    policy, clock = _policy(rescan=60.0)
    kept = _grow_frozen_by(0.5)  # alive: part of the new baseline
    clock.now += 61
    gc.collect()  # due (time and growth): unfreezes
    gc.collect()  # the full scan; the new baseline is everything alive
    assert policy.rescans == 1
    for _ in range(3):
        clock.now += GROWTH_CHECK_SECONDS
        gc.collect()
        assert gc.get_freeze_count() > 0
    assert (policy.rescans, policy.freezes) == (1, 4)
    assert kept


def test_install_freezes_at_once_and_uninstall_undoes_it() -> None:
    uninstall = collector.install(600.0)
    assert gc.get_freeze_count() > 0
    assert any(isinstance(cb, FreezePolicy) for cb in gc.callbacks)
    uninstall()
    assert gc.get_freeze_count() == 0
    assert not any(isinstance(cb, FreezePolicy) for cb in gc.callbacks)


def test_a_second_install_in_one_process_does_nothing() -> None:
    first = collector.install(600.0)
    collector.install(30.0)()  # its uninstall must not undo the first
    policies = [cb for cb in gc.callbacks if isinstance(cb, FreezePolicy)]
    assert [p.rescan_seconds for p in policies] == [600.0]
    assert gc.get_freeze_count() > 0
    first()


def test_pythons_incremental_collector_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collector, "_INCREMENTAL", True)  # Python 3.14 and later
    collector.install(600.0)
    assert gc.get_freeze_count() == 0
    assert not any(isinstance(cb, FreezePolicy) for cb in gc.callbacks)


@pytest.mark.parametrize("seconds", [-1.0, float("nan"), float("inf"), 10**400, True, "600"])
def test_a_bad_rescan_interval_is_a_config_error(seconds: object) -> None:
    with pytest.raises(ConfigError, match="gc rescan seconds"):
        collector.install(seconds)  # type: ignore[arg-type]


def test_serve_refuses_a_bad_rescan_interval_before_opening_the_store(tmp_path: Any) -> None:
    from engram.cli import main

    db = tmp_path / "never.db"
    status = main(["serve", "--db", f"sqlite:///{db}", "--gc-rescan-seconds", "nan"])
    assert status != 0
    assert not db.exists()


def test_zero_seconds_leaves_pythons_own_collection() -> None:
    collector.install(0)()
    gc.collect()
    assert gc.get_freeze_count() == 0
    assert not any(isinstance(cb, FreezePolicy) for cb in gc.callbacks)


def test_one_process_serve_collects_with_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_server`` serves with the policy installed and removes it when it returns."""
    import uvicorn
    from fastapi import FastAPI

    from engram.surfaces.rest.serve import run_server

    seen: list[bool] = []

    async def serve(self: uvicorn.Server, sockets: object = None) -> None:
        seen.append(any(isinstance(cb, FreezePolicy) for cb in gc.callbacks))

    monkeypatch.setattr(uvicorn.Server, "serve", serve)
    run_server(FastAPI(), "127.0.0.1", 0, False, lambda url: None)
    assert seen == [True]
    assert gc.get_freeze_count() == 0
    seen.clear()
    run_server(FastAPI(), "127.0.0.1", 0, False, lambda url: None, gc_rescan_seconds=0)
    assert seen == [False]


def test_workers_carry_the_policy_and_install_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engram.surfaces.rest.workers import WorkerSpec, worker_app

    monkeypatch.setenv("ENGRAM_API_KEYS", json.dumps({"version": 1, "keys": []}))
    for rescan, installed in ((0.0, False), (5.0, True)):
        for name in WorkerSpec.__dataclass_fields__:
            monkeypatch.setenv(f"ENGRAM_SERVE_{name.upper()}", "")  # restored after the test
        spec = WorkerSpec(f"sqlite:///{tmp_path / 'w.db'}", None, "hashing", None, 1 << 20,
                          gc_rescan_seconds=rescan)  # fmt: skip
        spec.export()
        assert WorkerSpec.imported().gc_rescan_seconds == rescan
        app = worker_app()
        app.state.engram.close()
        policies = [cb for cb in gc.callbacks if isinstance(cb, FreezePolicy)]
        assert [p.rescan_seconds for p in policies] == ([5.0] if installed else [])


def test_mcp_refuses_a_bad_rescan_interval_before_opening_the_store(tmp_path: Any) -> None:
    from engram.cli import main

    db = tmp_path / "never.db"
    status = main(["--db", f"sqlite:///{db}", "mcp", "--tenant", "t", "--user", "u",
                   "--gc-rescan-seconds", "-1"])  # fmt: skip
    assert status != 0
    assert not db.exists()


@pytest.mark.parametrize(("flag", "installed"), [([], True), (["--gc-rescan-seconds", "0"], False)])
def test_mcp_over_stdio_serves_with_the_policy(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, flag: list[str], installed: bool
) -> None:
    """``engram mcp`` serves with the policy installed (unless 0) and removes it after."""
    pytest.importorskip("mcp")
    from engram.cli import main
    from engram.surfaces.mcp import server as mcp_server

    seen: list[bool] = []

    class Served:
        def run(self, transport: str) -> None:
            seen.append(any(isinstance(cb, FreezePolicy) for cb in gc.callbacks))

    monkeypatch.setattr(mcp_server, "build_server", lambda mem, ctx: Served())
    db = tmp_path / "mcp.db"
    status = main(["--db", f"sqlite:///{db}", "--embedder", "hashing", "mcp",
                   "--tenant", "t", "--user", "u", *flag])  # fmt: skip
    assert status == 0
    assert seen == [installed]
    assert not any(isinstance(cb, FreezePolicy) for cb in gc.callbacks)
    assert gc.get_freeze_count() == 0

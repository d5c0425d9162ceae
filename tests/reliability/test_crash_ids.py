"""Ids stay unique across ``fork()`` and across processes.

``engram.ids`` keeps its last millisecond and counter in module state. A child
made by ``os.fork()`` starts with a copy of it; without the reset registered with
``os.register_at_fork`` the child and its parent would count up from the same
value inside the same millisecond and mint the same ids. The first test freezes
the millisecond (the clock is the one thing a test may fake) so that case is
certain, not a matter of timing; the others run on the real clock: forked and
spawned processes minting while the parent does, and a pre-fork server (a parent
that opened a store and wrote, then forked workers that write to the same file,
as ``gunicorn --preload`` does; uvicorn's ``--workers`` spawn fresh interpreters).
"""

from __future__ import annotations

import multiprocessing
import os
import types
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engram import Context, Engram, ids
from engram.ids import new_id

PER_PROCESS = 2000
CHILDREN = 4


def _mint(count: int) -> list[str]:
    return [new_id() for _ in range(count)]


def _forked(work: Callable[[], list[str]]) -> Iterator[int]:
    """Fork one child running ``work``; yield the read end of a pipe that carries
    the ids it minted, one per line."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: mint, send, leave without running pytest's teardown
        code = 0
        try:
            with os.fdopen(write, "w") as out:
                out.write("\n".join(work()))
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write)
    yield read
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def _fork_and_mint(children: int, work: Callable[[], list[str]]) -> list[str]:
    """Ids minted by ``children`` forked children and by this process meanwhile."""
    pipes = [_forked(work) for _ in range(children)]
    fds = [next(pipe) for pipe in pipes]
    minted = work()  # the parent mints while its children do
    for fd, pipe in zip(fds, pipes, strict=True):
        with os.fdopen(fd) as lines:
            minted += lines.read().split()
        next(pipe, None)  # reap the child
    return minted


def _assert_unique(minted: list[str], expected: int) -> None:
    assert len(minted) == expected
    duplicates = len(minted) - len(set(minted))
    assert duplicates == 0, f"{duplicates} duplicate ids across processes"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_forked_children_never_repeat_the_parents_ids_within_one_millisecond(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frozen = 1_700_000_000_000 * 1_000_000  # every id below is minted in this millisecond
    monkeypatch.setattr(ids, "time", types.SimpleNamespace(time_ns=lambda: frozen))
    new_id()  # the parent's state now holds this millisecond and a counter
    minted = _fork_and_mint(CHILDREN, lambda: _mint(PER_PROCESS))
    _assert_unique(minted, (CHILDREN + 1) * PER_PROCESS)


def _spawned_ids(count: int, queue: multiprocessing.Queue[list[str]]) -> None:
    queue.put(_mint(count))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_forked_and_spawned_processes_minting_concurrently_never_collide() -> None:
    context = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[list[str]] = context.Queue()
    spawned = [context.Process(target=_spawned_ids, args=(PER_PROCESS, queue))
               for _ in range(2)]  # fmt: skip
    for process in spawned:
        process.start()
    try:
        minted = _fork_and_mint(CHILDREN, lambda: _mint(PER_PROCESS))
        for _ in spawned:
            minted += queue.get(timeout=60)
    finally:
        for process in spawned:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    assert all(process.exitcode == 0 for process in spawned)
    _assert_unique(minted, (CHILDREN + 1 + len(spawned)) * PER_PROCESS)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_pre_fork_server_s_workers_write_records_with_unique_ids(tmp_path: Path) -> None:
    """The parent opens the store and writes (minting ids), then forks workers; each
    worker opens its own instance (a connection must not cross a fork) and writes
    while the parent goes on writing. Every record lands, under an id of its own."""
    url = f"sqlite:///{tmp_path}/prefork.db"
    ctx = Context(tenant_id="acme", user_id="u1")
    parent = Engram.open(url, embedder="hashing")
    try:
        parent.remember(ctx, "The pre-fork parent wrote this note first.")

        def serve(worker: str) -> Callable[[], list[str]]:
            def work() -> list[str]:
                with Engram.open(url, embedder="hashing") as mem:
                    items = [{"content": f"Worker {worker} stored note number {n}."}
                             for n in range(40)]  # fmt: skip
                    return [r.record.id for r in mem.remember_many(ctx, items) if r.record]

            return work

        workers = [_forked(serve(f"w{n}")) for n in range(3)]
        fds = [next(worker) for worker in workers]
        minted = [r.record.id for r in parent.remember_many(
            ctx, [{"content": f"The parent stored note number {n}."} for n in range(40)])
            if r.record]  # fmt: skip
        for fd, worker in zip(fds, workers, strict=True):
            with os.fdopen(fd) as lines:
                minted += lines.read().split()
            next(worker, None)
        _assert_unique(minted, 4 * 40)
        stored = {record.id for record in parent.list(ctx, limit=1000)}
        assert set(minted) <= stored
    finally:
        parent.close()

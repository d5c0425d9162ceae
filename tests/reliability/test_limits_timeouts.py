"""Embedder deadlines: a hung model makes recall ``partial``, never slow or failed, and
makes a write fail clearly with nothing stored.

Two hung models: a local one (``SlowEmbedder``: sleeps in ``embed``) and a remote
one (an OpenAI-compatible server on loopback that waits before answering). A
recall past ``RecallConfig.embed_timeout_seconds`` answers from its key and
lexical channels, with the vector channel naming ``EmbeddingTimeout``; a write
past ``WritePolicy.embed_timeout_seconds`` raises ``EmbeddingTimeout`` (503 on
REST) and the store holds what it held. When the model answers again, so does
Engram, without being reopened.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from limits_support import SlowEmbedder, episode, fake_model_server, is_problem, rest
from numpy.typing import NDArray

from backends import table_rows
from engram import Config, Context, Engram, EngramError
from engram.config import RecallConfig, WritePolicy
from engram.embed import OpenAIEmbedder
from engram.embed.base import Wrapped
from engram.embed.deadline import MAX_PENDING, embed_within, pending
from engram.embed.hashing import HashingEmbedder
from engram.errors import EmbeddingTimeout
from engram.lifecycle.consolidate import LLMSummariser
from engram.surfaces.rest.settings import RestSettings
from engram.types import Turn
from engram.write.propose import LLMProposer

CTX = Context(tenant_id="acme", user_id="u1", agent_id="coder")
BODY = {"user_id": "u1", "agent_id": "coder"}
IMPATIENT = Config(recall=RecallConfig(embed_timeout_seconds=0.3),
                   write=WritePolicy(embed_timeout_seconds=0.3))  # fmt: skip


def _seed(mem: Engram) -> None:
    mem.remember(CTX, "The build tool is Gradle.", type="preference", key="build.tool",
                 value="gradle")  # fmt: skip
    mem.remember(CTX, "The staging database is restored every Sunday night.")


def _degraded(mem: Engram) -> None:
    """A recall while the model hangs: partial, quick, key and lexical still answering."""
    started = time.monotonic()
    result = mem.recall(CTX, "when is the staging database restored?")
    assert time.monotonic() - started < 2.0
    assert result.status.value == "partial"
    channels = result.trace.channels
    assert channels["vector"].error == "EmbeddingTimeout"
    assert channels["key"].error is None
    assert channels["key"].count >= 1
    assert channels["lexical"].error is None
    assert channels["lexical"].count >= 1
    assert "Sunday night" in result.prompt


def _audit(mem: Engram) -> int:
    mem.flush()
    return len(table_rows(mem.store, "audit"))


def _settled() -> None:
    deadline = time.monotonic() + 10
    while pending() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pending() == 0


def test_abandoned_calls_are_bounded() -> None:
    """A model that never answers holds at most MAX_PENDING threads; later calls fail
    at once instead of starting more."""
    _settled()  # first in this file: no call of another test is still running
    model = SlowEmbedder(delay=1.0)
    model.slow.set()
    for _ in range(MAX_PENDING):
        with pytest.raises(EmbeddingTimeout):
            embed_within(model, ["x"], 0.001)
    started = time.monotonic()
    with pytest.raises(EmbeddingTimeout) as caught:
        embed_within(model, ["x"], 5.0)
    assert time.monotonic() - started < 0.5
    assert str(caught.value).startswith(f"not called: {MAX_PENDING} earlier calls are still")
    assert pending() == MAX_PENDING
    _settled()  # every abandoned call ended: none leaks
    model.slow.clear()
    assert embed_within(model, ["x"], 5.0).shape == (1, model.dimension)


def test_healthy_calls_in_flight_are_never_refused() -> None:
    """Only abandoned calls count against the bound: more concurrent calls than
    MAX_PENDING, each answering well within its deadline, all succeed."""
    _settled()
    model = SlowEmbedder(delay=0.3)
    model.slow.set()
    answers: list[object] = []

    def call() -> None:
        try:
            answers.append(embed_within(model, ["x"], 10.0).shape)
        except EngramError as exc:
            answers.append(exc)

    threads = [threading.Thread(target=call) for _ in range(MAX_PENDING + 8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert answers == [(1, model.dimension)] * (MAX_PENDING + 8)
    assert pending() == 0


def test_a_forked_child_starts_with_no_abandoned_calls() -> None:
    """The parent's abandoned calls have no threads in a forked child: the child is
    not refused for them."""
    _settled()
    model = SlowEmbedder(delay=2.0)
    model.slow.set()
    for _ in range(MAX_PENDING):
        with pytest.raises(EmbeddingTimeout):
            embed_within(model, ["x"], 0.001)
    assert pending() == MAX_PENDING
    model.slow.clear()
    child = os.fork()
    if child == 0:  # the child: exit 0 only when a call runs and answers
        code = 1
        try:
            if pending() == 0 and embed_within(model, ["x"], 5.0).shape == (1, model.dimension):
                code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    _settled()


def test_a_hung_local_model_degrades_recall_and_refuses_writes(
    store_url: str, open_mem: Callable[..., Engram]
) -> None:
    model = SlowEmbedder(delay=3.0)
    mem = open_mem(store_url, embedder=model, config=IMPATIENT)
    _seed(mem)
    before, audit = mem.list(CTX, limit=100), _audit(mem)
    model.slow.set()
    _degraded(mem)
    with pytest.raises(EmbeddingTimeout, match=r"did not answer within 0\.3 s"):
        mem.remember(CTX, "The deploy window is Tuesday.")
    with pytest.raises(EmbeddingTimeout):
        mem.remember_many(CTX, [{"content": f"Queue {i} drains hourly."} for i in range(3)])
    assert mem.list(CTX, limit=100) == before
    assert _audit(mem) == audit
    model.slow.clear()  # the model answers again: so does Engram, not reopened
    assert mem.remember(CTX, "The deploy window is Tuesday.").operation.value == "ADD"
    assert mem.recall(CTX, "when is the deploy window?").status.value == "ok"


def test_a_hung_remote_model_degrades_recall_on_rest(tmp_path: Path) -> None:
    dimension = HashingEmbedder().dimension
    with fake_model_server() as server:
        model = OpenAIEmbedder(server.url, "fake", dimension=dimension, timeout=30)
        mem = Engram.open(f"sqlite:///{tmp_path / 'remote.db'}", embedder=model,
                          config=IMPATIENT)  # fmt: skip
        try:
            _seed(mem)
            with rest(mem, tmp_path, RestSettings(mcp_path=None)) as api:
                server.delay = 3.0
                _degraded(mem)
                answer = api.call(
                    "POST",
                    "/v1/recall",
                    json={**BODY, "query": "when is the staging database restored?"},
                )
                assert answer.status_code == 200
                assert answer.json()["status"] == "partial"
                assert "Sunday night" in answer.json()["prompt"]
                refused = api.call(
                    "POST",
                    "/v1/memories",
                    json={**BODY, "content": "The deploy window is Tuesday."},
                )
                problem = is_problem(refused, 503)
                assert problem["type"] == "/problems/embedding-error"
                assert "0.3 s" in problem["detail"]
                assert len(mem.list(CTX, limit=100)) == 2
                server.delay = 0.0
                again = api.call(
                    "POST",
                    "/v1/memories",
                    json={**BODY, "content": "The deploy window is Tuesday."},
                )
                assert again.status_code == 200
                assert len(mem.list(CTX, limit=100)) == 3
        finally:
            mem.close()


def test_no_deadline_calls_the_model_directly_and_errors_pass_through() -> None:
    model = HashingEmbedder()
    assert embed_within(model, ["x"], None).shape == (1, model.dimension)
    with pytest.raises(Exception, match="str"):
        embed_within(model, "not a list", 1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["hang", "trickle"])
def test_llm_calls_are_bounded_for_the_whole_answer(mode: str) -> None:
    """A socket timeout bounds each read; a server that trickles its answer one byte at
    a time never trips it. The LLM proposer and summariser bound the whole answer."""
    turns = [Turn(role="user", text="I moved the build to Gradle last week.")]
    episodes = [episode("We moved the build to Gradle.")]
    with fake_model_server() as server:
        said = r"within 0\.5 s"  # the deadline: a trickle never trips the socket timeout
        if mode == "hang":
            server.delay = 3.0
            said = r"(within 0\.5 s|timed out)"  # whichever of the two fires first
        else:
            server.trickle = 0.1  # each byte well inside the timeout
        for call, words in (
            (lambda: LLMProposer(server.url, "fake", timeout=0.5).propose(turns), "proposer"),
            (lambda: LLMSummariser(server.url, "fake", timeout=0.5).summarise(episodes, 500),
             "summariser"),
        ):  # fmt: skip
            started = time.monotonic()
            with pytest.raises(EngramError, match=rf"LLM {words}: .*{said}"):
                call()
            assert time.monotonic() - started < 1.5


def test_an_in_process_model_is_called_without_the_thread() -> None:
    """The built-in models compute in process (``may_block = False``): no thread, no
    deadline; a wrapper of one says the same unless it declares otherwise."""
    hashing = HashingEmbedder()
    assert not hashing.may_block
    assert not Wrapped(hashing).may_block
    assert SlowEmbedder(0.0).may_block
    seen: list[str] = []

    class Spy(Wrapped):
        def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
            seen.append(threading.current_thread().name)
            return self.inner.embed(texts)

    class BlockingSpy(Spy):
        may_block = True  # type: ignore[assignment]

    embed_within(Spy(hashing), ["x"], 5.0)
    embed_within(BlockingSpy(hashing), ["x"], 5.0)
    assert seen == [threading.current_thread().name, "engram-deadline"]

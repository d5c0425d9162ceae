"""The LLM summariser against a small OpenAI-compatible server on loopback.

The server is started by the test (``http.server`` on 127.0.0.1, port 0) and
answers ``/v1/chat/completions`` as the test tells it: a summary, a summary
holding a secret, an answer too slow for the timeout, or no JSON. The
summariser's text is a proposal like any other: the write policy refuses a
secret in it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from consolidation_kit import LATER, summaries, write_sessions

from backends import table_rows
from engram import ConfigError, Context, Engram, EngramError
from engram.lifecycle.consolidate import LLMSummariser

SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"


@dataclass
class FakeChat:
    """What the fake endpoint answers, and every request it received."""

    reply: str = "The team moved billing to Postgres 16 and fixed a lock timeout."
    mode: str = "ok"  # ok | slow | garbage
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def chat() -> Iterator[FakeChat]:
    """A fake OpenAI-compatible chat server on loopback, for one test."""
    state = FakeChat()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.requests.append(body)
            state.headers.append(dict(self.headers))
            if state.mode == "slow":
                time.sleep(1.0)
            payload = (b"not json" if state.mode == "garbage" else json.dumps(
                {"choices": [{"message": {"role": "assistant", "content": state.reply}}]}
            ).encode())  # fmt: skip
            self.send_response(200 if self.path == "/v1/chat/completions" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield state
    server.shutdown()
    server.server_close()
    thread.join(5)


def test_the_models_summary_is_stored_after_the_write_policy(
    mem: Engram, ctx: Context, chat: FakeChat
) -> None:
    sessions = write_sessions(
        mem,
        ctx,
        [
            [
                "We decided to move billing to Postgres 16.",
                "The migration hit a lock timeout; an index fixed it.",
            ]
        ],
    )
    llm = LLMSummariser(chat.url, "tiny-model", api_key="test-key", timeout=5)
    report = mem.consolidate("acme", "u1", now=LATER, summariser=llm)
    [summary] = summaries(mem, ctx)
    assert report.summaries == 1
    assert summary.content.endswith(chat.reply)
    assert summary.content.startswith("1 May 2024, ")
    assert summary.source.derived_from == tuple(sessions[0])
    assert summary.confidence == pytest.approx(0.8)
    [request] = chat.requests
    assert request["model"] == "tiny-model"
    assert request["temperature"] == 0
    data = request["messages"][1]["content"]
    assert "lock timeout" in data
    assert data.startswith("Episodes (JSON):")
    assert chat.headers[0]["Authorization"] == "Bearer test-key"


def test_a_summary_holding_a_secret_is_refused(mem: Engram, ctx: Context, chat: FakeChat) -> None:
    write_sessions(mem, ctx, [["We rotated the deploy credentials today."]])
    chat.reply = f"They rotated credentials; the new key is {SECRET}."
    report = mem.consolidate("acme", "u1", now=LATER,
                             summariser=LLMSummariser(chat.url, "tiny-model"))  # fmt: skip
    assert (report.summaries, report.summaries_rejected) == (0, 1)
    assert report.rejected_reasons == {"secret": 1}
    assert summaries(mem, ctx) == []
    assert not any(SECRET in str(row) for row in table_rows(mem.store, "records"))
    again = mem.consolidate("acme", "u1", now=LATER, summariser=LLMSummariser(chat.url, "m"))
    assert again.groups == 0  # the episodes were read once; a refused summary is not retried


# A slow endpoint trips the deadline or the socket timeout, whichever fires first.
SLOW = "did not answer within|could not be reached"


@pytest.mark.parametrize(("mode", "message"), [("slow", SLOW), ("garbage", "not JSON")])
def test_a_failing_endpoint_stops_the_run_and_writes_nothing(
    mem: Engram, ctx: Context, chat: FakeChat, mode: str, message: str
) -> None:
    write_sessions(mem, ctx, [["We decided to move billing to Postgres 16."]])
    chat.mode = mode
    with pytest.raises(EngramError, match=message):
        mem.consolidate("acme", "u1", now=LATER,
                        summariser=LLMSummariser(chat.url, "tiny-model", timeout=0.2))  # fmt: skip
    assert summaries(mem, ctx) == []
    assert table_rows(mem.store, "consolidated") == []
    assert mem.consolidate("acme", "u1", now=LATER).summaries == 1  # the default, offline


def test_a_group_with_sensitive_episodes_is_never_sent(
    mem: Engram, ctx: Context, chat: FakeChat
) -> None:
    write_sessions(mem, ctx, [["We moved the standup to 10 am."]])
    mem.remember(ctx, "My therapist suggested I take Fridays off.", type="episode",
                 consent_basis="explicit_consent", sensitivity="high",
                 now=LATER - timedelta(days=8, hours=-1))  # fmt: skip
    report = mem.consolidate("acme", "u1", now=LATER,
                             summariser=LLMSummariser(chat.url, "tiny-model"))  # fmt: skip
    assert report.summaries == 2
    assert len(chat.requests) == 1  # the low-sensitivity group only
    assert "therapist" not in json.dumps(chat.requests)


def test_the_summariser_is_configured_explicitly() -> None:
    with pytest.raises(ConfigError):
        LLMSummariser("ftp://host/v1", "m")
    with pytest.raises(ConfigError):
        LLMSummariser("http://127.0.0.1:9/v1", "")
    with pytest.raises(ConfigError):
        LLMSummariser("http://127.0.0.1:9/v1", "m", timeout=0)
    with pytest.raises(ConfigError, match="ENGRAM_LLM_BASE_URL"):
        LLMSummariser.from_env({})
    made = LLMSummariser.from_env({"ENGRAM_LLM_BASE_URL": "http://127.0.0.1:9/v1",
                                   "ENGRAM_LLM_MODEL": "m", "ENGRAM_LLM_TIMEOUT": "3"})  # fmt: skip
    assert isinstance(made, LLMSummariser)


def test_a_summary_holding_a_nul_is_stored_without_it(
    mem: Engram, ctx: Context, chat: FakeChat
) -> None:
    """No store takes a NUL (U+0000) in content: a model answering one would fail the
    run every time (and a sweep, which consolidates decayed episodes before pruning
    them, would keep those run after run), so the summariser drops it from the text."""
    write_sessions(mem, ctx, [["We decided to move billing to Postgres 16."]])
    chat.reply = "The team moved\x00billing to Postgres 16.\x00"
    report = mem.consolidate("acme", "u1", now=LATER,
                             summariser=LLMSummariser(chat.url, "tiny-model"))  # fmt: skip
    [summary] = summaries(mem, ctx)
    assert report.summaries == 1
    assert summary.content.endswith("The team moved billing to Postgres 16.")

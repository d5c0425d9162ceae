"""Redis failures: a clear error naming host and port, never the password.

A private ``redis-server`` on a free port is started and killed here, so a
server that goes away mid-run is tested for real.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from tests.working.conftest import missing

from engram import Budget, Config, ConfigError, Context, Engram, Unavailable
from engram.working import RedisTarget, RedisWorking, WorkingConfig

SECRET = "hunter2-Sup3r"
CTX = Context(tenant_id="acme", user_id="u1", session_id="s1")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def private_redis(redis_py: None) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A redis-server of this test's own, with a password, on a free loopback port."""
    binary = shutil.which("redis-server")
    if binary is None:
        missing("redis-server is not installed (apt-get install redis-server)")
    port = _free_port()
    proc = subprocess.Popen([str(binary), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                             "--appendonly", "no", "--requirepass", SECRET],
                            stdout=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.02)
    yield proc, port
    proc.kill()
    proc.wait()


def test_an_unreachable_server_is_unavailable_naming_host_not_password(redis_py: None) -> None:
    port = _free_port()  # nothing listens there
    url = f"redis://user:{SECRET}@127.0.0.1:{port}/0"
    with pytest.raises(Unavailable) as caught:
        Engram.open("sqlite://:memory:", embedder="hashing", working=url)
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message
    assert SECRET not in message
    assert caught.value.__cause__ is None  # the driver's error (and its URL) is not chained
    assert caught.value.__suppress_context__


def test_a_wrong_password_is_unavailable_without_either_password(
    private_redis: tuple[subprocess.Popen[bytes], int],
) -> None:
    _, port = private_redis
    wrong = "not-the-Right-one"
    with pytest.raises(Unavailable, match="credentials") as caught:
        RedisWorking(RedisTarget.parse(f"redis://:{wrong}@127.0.0.1:{port}/0"))
    assert wrong not in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [f"redis://:{SECRET}@127.0.0.1:notaport/0", f"redis://:{SECRET}@127.0.0.1:6379/db",
     f"redis://:{SECRET}@/0", f"redis://:{SECRET}@127.0.0.1:6379/0?timeout=1",
     f"redis://:{SECRET}@127.0.0.1:99999/0"],
)  # fmt: skip
def test_a_misconfigured_url_is_a_config_error_without_password(url: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Engram.open("sqlite://:memory:", embedder="hashing", working=url)
    assert SECRET not in str(caught.value)


def test_the_target_repr_hides_the_password() -> None:
    target = RedisTarget.parse(f"redis://bob:{SECRET}@10.0.0.1:6380/3")
    assert (target.host, target.port, target.db, target.where) == ("10.0.0.1", 6380, 3,
                                                                   "10.0.0.1:6380")  # fmt: skip
    assert SECRET not in repr(target)
    assert target.redact(f"failed for {SECRET}") == "failed for ***"


def test_a_server_that_goes_away_mid_run(
    private_redis: tuple[subprocess.Popen[bytes], int],
) -> None:
    """Calls raise Unavailable; recall still answers from the store, status partial."""
    proc, port = private_redis
    config = WorkingConfig(redis_timeout_seconds=0.5)
    mem = Engram.open("sqlite://:memory:", embedder="hashing", config=Config(working=config),
                      working=f"redis://:{SECRET}@127.0.0.1:{port}/0")  # fmt: skip
    try:
        mem.remember(CTX, "The user prefers concise answers", type="preference")
        mem.working(CTX).set("next_step", "summarise the report")
        assert "summarise the report" in mem.recall(CTX, "how should I answer?").prompt
        proc.kill()
        proc.wait()
        with pytest.raises(Unavailable) as caught:
            mem.working(CTX).set("next_step", "x")
        assert f"127.0.0.1:{port}" in str(caught.value)
        assert SECRET not in str(caught.value)
        result = mem.recall(CTX, "how should I answer?", budget=Budget(max_tokens=2000))
        assert result.status.value == "partial"
        assert result.trace.channels["working"].error == "Unavailable"
        assert "concise answers" in result.prompt
        with pytest.raises(Unavailable):
            mem.erase_subject("acme", "u1")
    finally:
        mem.close()

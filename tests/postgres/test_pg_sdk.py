"""PostgreSQL through the SDK and the CLI: ``Engram.open`` with working memory on
Redis, driver-qualified URLs, ``engram migrate`` on both backends, clear errors
that never show the password, and a recall whose probes time out answering
``partial`` or ``unavailable`` instead of hanging."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from engram import Config, Context, Engram
from engram.cli import main
from engram.errors import ConfigError
from engram.recall.model import RecallResult, RecallStatus
from engram.store.config import PostgresConfig, StoreConfig
from engram.store.postgres.schema import migrations
from engram.store.sqlite.schema import MIGRATIONS

CTX = Context(tenant_id="acme", user_id="u1", agent_id="coder", session_id="s1")
SECRET = "Pw-4b1e-never-shown"
OpenMem = Callable[..., Engram]


def _driver_url(url: str) -> str:
    """The same server and database as a SQLAlchemy-style ``postgresql+psycopg://`` URL."""
    assert url.startswith("postgresql://")
    return "postgresql+psycopg://" + url[len("postgresql://") :]


def test_engram_opens_a_driver_qualified_url_with_working_memory_on_redis(
    pg_url: str, open_mem: OpenMem
) -> None:
    mem = open_mem(_driver_url(pg_url))
    written = mem.remember(CTX, "The staging cluster is named pelican.")
    assert written.record is not None
    mem.working(CTX).set("step", 3)
    result = mem.recall(CTX, "what is the staging cluster called?")
    assert written.record.id in {item.record.id for item in result.items}
    assert mem.working(CTX).get("step").value == 3  # type: ignore[union-attr]
    again = open_mem(pg_url)  # the plain URL names the same database and working memory
    assert again.get(CTX, written.record.id).content == written.record.content
    assert again.working(CTX).get("step").value == 3  # type: ignore[union-attr]


def test_a_server_store_without_working_memory_asks_for_a_redis_url(pg_url: str) -> None:
    with pytest.raises(ConfigError, match="redis"):
        Engram.open(pg_url, embedder="hashing")


def test_another_scheme_with_a_driver_is_refused_clearly() -> None:
    from engram.store.postgres import PostgresStore

    with pytest.raises(ConfigError, match="not a PostgreSQL URL"):
        PostgresStore.open("mysql+psycopg://u@h/db")


def test_engram_migrate_applies_the_postgres_migrations_once(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migrate", pg_url]) == 0
    names = [name for name, _ in migrations("english")]
    assert capsys.readouterr().out.split() == [w for n in names for w in ("applied", n)]
    assert main(["--db", _driver_url(pg_url), "migrate"]) == 0
    assert capsys.readouterr().out.strip() == "up to date"
    with psycopg.connect(pg_url) as conn:
        done = [row[0] for row in conn.execute("SELECT name FROM engram_migrations ORDER BY 1")]
    assert done == names


def test_engram_migrate_on_sqlite_reports_what_opening_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/fresh.db"
    assert main(["migrate", url]) == 0
    out = capsys.readouterr().out.split()
    assert out == [w for name, _ in MIGRATIONS for w in ("applied", name)]
    assert main(["migrate", url]) == 0
    assert capsys.readouterr().out.strip() == "up to date"


def test_engram_migrate_names_host_and_database_never_the_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"postgresql+psycopg://engram:{SECRET}@127.0.0.1:1/memories?connect_timeout=2"
    started = time.monotonic()
    assert main(["migrate", url]) == 9  # Unavailable: its row in surfaces.errors
    err = capsys.readouterr().err
    assert "127.0.0.1:1" in err
    assert "'memories'" in err
    assert SECRET not in err
    assert time.monotonic() - started < 10


def test_admin_commands_need_no_working_memory_on_a_server_store(
    pg_url: str, open_mem: OpenMem, capsys: pytest.CaptureFixture[str]
) -> None:
    open_mem(pg_url).remember(CTX, "Deploys are frozen during the holidays.")
    assert main(["--db", pg_url, "audit", "verify"]) == 0
    assert "audit chain intact: 1 entries" in capsys.readouterr().out
    assert main(["--db", pg_url, "--embedder", "hashing", "index", "rebuild"]) == 0
    assert "1 records, 1 vectors" in capsys.readouterr().out


# -- a statement timeout on recall -------------------------------------------------

TIMEOUT_MS = 300


@contextmanager
def _locked(url: str, table: str) -> Iterator[None]:
    """Another session holds ``table`` exclusively (every read of it waits) for the block."""
    with psycopg.connect(url) as conn:
        conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


@pytest.fixture
def impatient(pg_url: str, open_mem: OpenMem) -> Engram:
    """Engram on PostgreSQL whose statements are cancelled after ``TIMEOUT_MS``, with
    a few memories to find."""
    config = Config(store=StoreConfig(postgres=PostgresConfig(statement_timeout_ms=TIMEOUT_MS)))
    mem = open_mem(pg_url, config=config)
    for text in ("The staging cluster is named pelican.", "Staging deploys run at noon."):
        assert mem.remember(CTX, text).record is not None
    return mem


def _timed_recall(mem: Engram) -> tuple[RecallResult, float]:
    started = time.monotonic()
    result = mem.recall(CTX, "what is the staging cluster called?")
    return result, time.monotonic() - started


def _recall_while_locked(mem: Engram, url: str, table: str) -> tuple[RecallResult, float]:
    """A recall while ``table`` is locked, in a thread: one that hangs fails the test
    (the lock is released after 10 s, so the thread ends either way)."""
    out: list[tuple[RecallResult, float]] = []
    worker = threading.Thread(target=lambda: out.append(_timed_recall(mem)))
    with _locked(url, table):
        worker.start()
        worker.join(10)
        hung = worker.is_alive()
    worker.join()
    assert not hung, "the recall waited on the lock instead of timing out"
    return out[0]


def test_a_recall_whose_vector_probe_times_out_is_partial(impatient: Engram, pg_url: str) -> None:
    # the vector probe reads the model first, from the locked table
    result, took = _recall_while_locked(impatient, pg_url, "engram_meta")
    assert result.status == RecallStatus.PARTIAL
    failed = {name: c.error for name, c in result.trace.channels.items() if c.error}
    assert failed == {"vector": "StatementTimeout"}
    assert result.items  # the other channels answered
    assert took < 5


def test_a_recall_whose_every_probe_times_out_is_unavailable(
    impatient: Engram, pg_url: str
) -> None:
    result, took = _recall_while_locked(impatient, pg_url, "records")
    assert result.status == RecallStatus.UNAVAILABLE
    assert result.items == []
    assert took < 5
    after, _ = _timed_recall(impatient)  # the lock is gone: the store answers again
    assert after.status == RecallStatus.OK


def test_a_malformed_url_never_echoes_its_password() -> None:
    from engram.errors import ConfigError
    from engram.store.postgres.errors import Server

    assert "topsecret" not in repr(Server.of("postgresql://u:topsecret@h/db"))
    with pytest.raises(ConfigError) as caught:
        Engram.open("postgres://u:top secret@h/db", embedder="hashing",
                    working="redis://127.0.0.1:6379/0")  # fmt: skip
    assert "secret" not in str(caught.value)
    assert "malformed PostgreSQL URL" in str(caught.value)

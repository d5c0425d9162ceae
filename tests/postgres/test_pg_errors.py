"""Failures on PostgreSQL: clear errors naming host and database but never the
password, statement timeouts that answer instead of hanging, and the schema's
migrations and tenant-first keys."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest
from pg_records import make_record

from engram.errors import ConfigError
from engram.store import contract
from engram.store.postgres import PostgresConfig, PostgresStore, StatementTimeout, Unavailable
from engram.store.postgres.schema import migrations
from engram.store.predicate import Visibility
from pg_server import PgServer, with_database

VIS = Visibility("acme", "u1", "", (None, None, None, None))
ACTIVE = ("active",)
SECRET = "Pw-9f2c-never-shown"


def test_an_unreachable_server_names_host_and_database_not_the_password() -> None:
    url = f"postgresql://engram:{SECRET}@127.0.0.1:1/memories"
    started = time.monotonic()
    with pytest.raises(Unavailable) as caught:
        PostgresStore.open(url, PostgresConfig(connect_timeout_s=2))
    message = str(caught.value)
    assert "127.0.0.1:1" in message
    assert "'memories'" in message
    assert SECRET not in message
    assert caught.value.__cause__ is None  # the driver's text is not chained along
    assert time.monotonic() - started < 10


def test_a_missing_database_is_named(pg_server: PgServer) -> None:
    url = with_database(pg_server.admin_url, "no_such_database_here")
    with pytest.raises(Unavailable, match="no_such_database_here"):
        PostgresStore.open(url)


def test_a_malformed_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        PostgresStore.open(f"postgresql://u:{SECRET}@host:notaport/db?bogus_option=1")


def _password_role(pg_server: PgServer) -> str:
    """A role that must log in with a password; the URL of the admin database for it."""
    with psycopg.connect(pg_server.admin_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS engram_pw")
        conn.execute("CREATE ROLE engram_pw LOGIN PASSWORD 'the-right-one'")
        if pg_server.data_dir is not None:  # embedded: trust by default, so ask for scram
            hba = pg_server.data_dir / "pg_hba.conf"
            rules = hba.read_text()
            line = "local all engram_pw scram-sha-256\nhost all engram_pw all scram-sha-256\n"
            if line not in rules:
                hba.write_text(line + rules)
            conn.execute("SELECT pg_reload_conf()")
    admin = psycopg.conninfo.conninfo_to_dict(pg_server.admin_url)
    admin.update(user="engram_pw", password=SECRET)
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in admin.items()})


def test_a_wrong_password_is_refused_without_showing_it(pg_server: PgServer) -> None:
    url = _password_role(pg_server)
    try:
        psycopg.connect(url).close()
    except psycopg.OperationalError:
        pass
    else:
        pytest.skip("this server accepts any password for the role (trust authentication)")
    with pytest.raises(Unavailable) as caught:
        PostgresStore.open(url)
    message = str(caught.value)
    assert "password authentication failed" in message
    assert SECRET not in message
    assert "database" in message


def _hold_table_lock(pg_url: str, locked: threading.Event, release: threading.Event) -> None:
    with psycopg.connect(pg_url) as conn:
        conn.execute("LOCK TABLE records IN ACCESS EXCLUSIVE MODE")
        locked.set()
        release.wait(30)
        conn.rollback()


def test_a_statement_timeout_yields_errors_per_probe_never_a_hang(pg_url: str) -> None:
    store = PostgresStore.open(pg_url, PostgresConfig(statement_timeout_ms=300))
    record = make_record("green tea")
    store.apply([contract.Insert(record)])
    locked, release = threading.Event(), threading.Event()
    holder = threading.Thread(target=_hold_table_lock, args=(pg_url, locked, release))
    holder.start()
    try:
        assert locked.wait(10)
        probes = [contract.RecentProbe(ACTIVE, 5), contract.LexicalProbe("tea", ACTIVE, 5)]
        started = time.monotonic()
        answers = store.candidates(VIS, probes)
        assert time.monotonic() - started < 5
        assert all(isinstance(a, StatementTimeout) for a in answers), answers
        assert "cancelled" in str(answers[0])
        with store.transaction():  # inside a transaction too, and it stays usable
            (answer,) = store.candidates(VIS, probes[:1])
            assert isinstance(answer, StatementTimeout)
            release.set()
            holder.join()
            (hits,) = store.candidates(VIS, probes[:1])
            store.apply([contract.Insert(make_record("after the timeout"))])
        assert [r.id for r, _ in hits] == [record.id]
    finally:
        release.set()
        holder.join()
        store.close()


def test_migrations_are_named_recorded_and_applied_once(pg_url: str) -> None:
    opened: list[PostgresStore] = []
    errors: list[BaseException] = []

    def open_one() -> None:
        try:
            opened.append(PostgresStore.open(pg_url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    names = [name for name, _ in migrations("english")]
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT name FROM engram_migrations ORDER BY name").fetchall()
    assert [row[0] for row in rows] == names
    for store in opened:
        store.close()


def test_a_database_that_ran_the_vector_owner_index_as_0008_opens(pg_url: str) -> None:
    """The index's migration was ``0008_vector_owner_counts`` on its branch before main's
    0008-0012; a database made then holds the index, and its renamed migration
    (``0013_vector_owner_counts``) runs over it without failing."""
    PostgresStore.open(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        conn.execute("UPDATE engram_migrations SET name = '0008_vector_owner_counts'"
                     " WHERE name = '0013_vector_owner_counts'")  # fmt: skip
    PostgresStore.open(pg_url).close()
    with psycopg.connect(pg_url) as conn:
        done = {row[0] for row in conn.execute("SELECT name FROM engram_migrations")}
        index = conn.execute("SELECT count(*) FROM pg_indexes"
                             " WHERE indexname = 'records_vector_owners'").fetchone()  # fmt: skip
    assert "0013_vector_owner_counts" in done
    assert index == (1,)


def test_every_key_and_btree_index_leads_with_tenant_id(store: Any, pg_url: str) -> None:
    store.apply([contract.Insert(make_record("claims the vector column"), _unit())])
    global_tables = {"engram_meta", "engram_migrations"}
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute(
            "SELECT t.relname, i.relname, am.amname, a.attname FROM pg_index x"
            " JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid"
            " JOIN pg_am am ON am.oid = i.relam JOIN pg_namespace n ON n.oid = t.relnamespace"
            " LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = x.indkey[0]"
            " WHERE n.nspname = 'public'"
        ).fetchall()
    checked = 0
    for table, index, method, first in rows:
        if table in global_tables or method in ("gin", "hnsw"):
            continue
        assert first == "tenant_id", (table, index)
        checked += 1
    assert checked >= 15
    assert {m for _, _, m, _ in rows} >= {"btree", "gin", "hnsw"}


def _unit() -> Any:
    import numpy as np

    v = np.ones(384, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_the_migrate_command_applies_then_reports_up_to_date(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from engram.store.postgres.__main__ import main

    assert main(["migrate", pg_url]) == 0
    assert "applied 0003_records" in capsys.readouterr().out
    assert main(["migrate", pg_url]) == 0
    assert capsys.readouterr().out.strip() == "up to date"
    assert main(["migrate", f"postgresql://x:{SECRET}@127.0.0.1:1/db"]) == 2
    assert SECRET not in capsys.readouterr().err

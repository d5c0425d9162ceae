"""``engram working`` on the SQLite file beside the store, the upkeep commands with
``--json``, and the progress line (drawn on a terminal only)."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

from cli_support import ID, Engram

from engram.cli.progress import Progress

TASK = (*ID, "--session", "s1", "--task", "net-state")


def test_working_set_get_list_delete_clear(engram: Engram) -> None:
    put = engram("working", "set", "step", '{"done": 3}', *TASK, "--ttl", "600", "--json")
    assert put.code == 0, put.err
    assert put.json()["scope"] == "task:net-state"
    assert put.json()["value"] == {"done": 3}
    assert engram("working", "set", "note", "look at the reachability API", *TASK).code == 0
    got = engram("working", "get", "step", *TASK, "--json").json()
    assert got["value"] == {"done": 3}
    session = engram("working", "list", *TASK, "--kind", "session", "--json").json()
    assert session == []  # the items went to the task, not the session
    listed = engram("working", "list", *TASK)
    assert "step" in listed.out
    assert "reachability" in listed.out
    assert engram("working", "delete", "step", *TASK).out.strip() == "deleted step"
    assert engram("working", "delete", "step", *TASK).out.strip() == "no live item step"
    missing = engram("working", "get", "step", *TASK)
    assert missing.code == 5
    assert "no live working item 'step'" in missing.err
    assert engram("working", "clear", *TASK, "--json").json() == {"removed": 1}
    assert engram("working", "list", *TASK).out.strip() == "(none)"


def test_working_memory_needs_a_session_or_task_and_a_sane_ttl(engram: Engram) -> None:
    no_scope = engram("working", "set", "step", "1", *ID)
    assert no_scope.code == 2
    assert "invalid-argument" in no_scope.err
    assert engram("working", "set", "step", "1", *TASK, "--ttl", "-5").code == 2
    assert engram("working", "list", *TASK, "--json").json() == []


def test_migrate_rebuild_and_verify_print_json(
    engram: Engram, remembered: Callable[..., str]
) -> None:
    remembered("Works from Lisbon.", "--type", "profile")
    assert engram("migrate", "--json").json() == {"applied": []}
    rebuilt = engram("index", "rebuild", "--json").json()
    assert rebuilt == {"records": 1, "vectors": 1, "model": "hashing-v2-384"}
    verified = engram("audit", "verify", "--json")
    assert verified.code == 0
    assert verified.json() == {"ok": True, "entries": 1, "first_bad_seq": None, "problem": None}


def test_an_unusable_store_url_is_a_clear_error(engram: Engram) -> None:
    ran = engram("list", *ID, db="mysql://somewhere/db")
    assert ran.code == 3, ran.err
    assert ran.err.startswith("engram: config-error: unsupported store URL scheme 'mysql'")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_draws_on_a_terminal_and_erases_itself() -> None:
    screen = _Terminal()
    with Progress("re-embedding", unit="records", stream=screen, interval=0.01) as bar:
        bar.advance(256)
        time.sleep(0.05)
    drawn = screen.getvalue()
    assert "re-embedding" in drawn
    assert "256 records" in drawn
    assert " s" in drawn
    assert drawn.endswith("\r\033[K")
    bounded = Progress("importing", total=4, stream=_Terminal())
    bounded.advance(2)
    assert "[############............] 2/4" in bounded.line()


def test_no_progress_line_off_a_terminal() -> None:
    quiet = io.StringIO()
    with Progress("importing 3 rows", stream=quiet, interval=0.01) as bar:
        bar.advance(3)
        time.sleep(0.03)
    assert quiet.getvalue() == ""
    assert not bar.enabled

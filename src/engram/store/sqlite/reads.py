"""The SQLite store's reads: records by id, candidates for probes, chains, listings.

Every statement splices a predicate rendered by ``engram.store.predicate``
(through the builders in ``statements``). Vector and lexical probes rank in the
in-memory engines (``engram.store.engines``), and the store checks the ranked
ids against the records (``ranking.alive_top``).

``candidates`` answers a batch of probes in one call so that it can overlap
them: the bulk phase of the ``overlapped_probes`` (the vector scan is SIMD work
that releases the GIL; SQLite releases it while it steps) runs on a worker
thread while the other probes run on the caller's, which then finishes them
(ranks, checks status, decodes records: Python that would hold the GIL against
it). The probes share the records they have read (``known``), so a record two
probes found is decoded once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from functools import partial

import numpy as np
from numpy.typing import NDArray

from engram.errors import EngramError, IndexMismatch, InvalidArgument
from engram.store.contract import (
    Hits,
    KeyProbe,
    LexicalProbe,
    Listing,
    NeighbourProbe,
    Probe,
    RecentProbe,
    SlotProbe,
    VectorProbe,
)
from engram.store.engines import Counters, LexicalEngine, VectorEngine
from engram.store.lexicon import LexicalRow
from engram.store.predicate import NO_AGENT, NO_USER, Subject, Visibility
from engram.store.ranking import Ranking, alive_top
from engram.store.rows import to_micros
from engram.store.sqlite import statements, statements_admin
from engram.store.sqlite.connection import Connection
from engram.store.vectors import VectorRow
from engram.types import Record, Status

__all__ = ["Reads"]

_EVERY_STATUS = tuple(status.value for status in Status)
_VECTOR_MODEL_KEY = "vector_model"
_MICROSECOND = timedelta(microseconds=1)
Known = dict[str, Record]  # the records this call has read, by id


class Reads(Connection):
    """Scoped reads (``Store``) and the rows the in-memory engines load (``RowSource``)."""

    _vector_engine: VectorEngine
    _lexical_engine: LexicalEngine

    # -- Store reads --------------------------------------------------------------

    def read(self, vis: Visibility, ids: Sequence[str]) -> list[Record]:
        """Visible records among ``ids``, in the order of ``ids``."""
        if not ids:
            return []
        by_id = {r.id: r for r in self._records(statements.by_ids(vis, ids))}
        return [by_id[i] for i in ids if i in by_id]

    def history(self, vis: Visibility, record_id: str) -> list[Record]:
        """The visible version chain through ``record_id``, oldest first."""
        return self._records(statements.history(vis, record_id))

    def listing(self, vis: Visibility, page: Listing) -> list[Record]:
        """Visible records newest first; with ``page.at``, filtered by the status they
        have then (an active record past its retention is expired)."""
        query = statements.listing(vis, page.type_name, page.statuses or _EVERY_STATUS,
                                   page.limit, page.offset, to_micros(page.at))  # fmt: skip
        return self._records(query)

    def vectors(
        self, vis: Visibility, ids: Sequence[str], model: str
    ) -> dict[str, NDArray[np.float32]]:
        """Stored vectors of visible records among ``ids`` (for dedup, MMR, semantic):
        from the in-memory partitions when they are current, else from SQLite."""
        if not ids:
            return {}
        cached = self._vector_engine.cached(vis, ids, model)
        if cached is not None:
            return cached
        rows = self._rows(statements.vectors_of(vis, ids, model))
        return {row[0]: np.frombuffer(row[1], dtype=np.float32) for row in rows}

    def candidates(self, vis: Visibility, probes: Sequence[Probe]) -> list[Hits | EngramError]:
        """One result per probe, in order (a failed probe yields its error); see the
        module notes for the overlap."""
        overlapped = self._overlapped(probes)
        pending = None
        if overlapped:
            chosen = [probes[i] for i in overlapped]
            pending = _worker().submit(lambda: [self._bulk(vis, probe) for probe in chosen])
        known: Known = {}
        out: dict[int, Hits | EngramError] = {}
        for index, probe in enumerate(probes):
            if index not in overlapped:
                out[index] = self._answer(vis, probe, known, None)
        if pending is not None:
            for index, bulk in zip(overlapped, pending.result(), strict=True):
                out[index] = self._answer(vis, probes[index], known, bulk)
        return [out[index] for index in range(len(probes))]

    # -- probes -------------------------------------------------------------------

    def _overlapped(self, probes: Sequence[Probe]) -> list[int]:
        """Positions of the probes whose bulk phase runs on the worker. None inside an
        open transaction: the worker would not see its writes (and on a
        single-connection store it would wait for the lock the caller holds). One
        worker, never every probe: on two cores a third busy thread only slows the
        other two."""
        if self.in_transaction or len(probes) < 2:
            return []
        kinds = self.settings.overlapped_probes
        chosen = [i for i, probe in enumerate(probes) if _kind(probe) in kinds]
        return chosen if len(chosen) < len(probes) else chosen[1:]

    def _bulk(self, vis: Visibility, probe: Probe) -> Ranking | EngramError:
        """The ranking of a vector or lexical probe, status unchecked (or its error)."""
        try:
            if isinstance(probe, VectorProbe):
                self.check_vector_model(probe.model)
                return self._vector_engine.scan(vis, probe.query, probe.model)
            if isinstance(probe, LexicalProbe):
                return self._lexical_engine.scan(vis, probe.text)
        except EngramError as exc:
            return exc
        raise AssertionError(f"no bulk phase for {type(probe).__name__}")

    def _answer(
        self, vis: Visibility, probe: Probe, known: Known, bulk: Ranking | EngramError | None
    ) -> Hits | EngramError:
        """One probe's hits, recorded in ``known``; an error is returned, not raised."""
        try:
            if isinstance(bulk, EngramError):
                raise bulk
            hits = self._hits_of(vis, probe, known, bulk)
        except EngramError as exc:
            return exc
        known.update((record.id, record) for record, _ in hits)
        return hits

    def _hits_of(self, vis: Visibility, probe: Probe, known: Known, bulk: Ranking | None) -> Hits:
        if isinstance(probe, (VectorProbe, LexicalProbe)):
            ranking = bulk if bulk is not None else self._bulk(vis, probe)
            if isinstance(ranking, EngramError):
                raise ranking
            return self._ranked(vis, probe.statuses, probe.limit, ranking, known)
        return [(record, 1.0) for record in self._records_of(vis, probe)]

    def _records_of(self, vis: Visibility, probe: Probe) -> list[Record]:
        """The records of a probe that scores every hit 1.0."""
        if isinstance(probe, KeyProbe):
            if probe.keys is not None:
                keys = probe.keys
                return self._records(statements.by_key(vis, keys, probe.statuses, probe.limit)
                                     ) if keys else []  # fmt: skip
            types = probe.types or ()
            return self._records(statements.keyed(vis, types, probe.statuses, probe.limit)
                                 ) if types else []  # fmt: skip
        if isinstance(probe, RecentProbe):
            if probe.types is None:
                return self._records(statements.recent(vis, probe.statuses, probe.limit))
            query = statements.recent_of_types(vis, probe.statuses, probe.types, probe.limit)
            return self._records(query)
        if isinstance(probe, NeighbourProbe):
            return self._neighbours(vis, probe)
        if isinstance(probe, SlotProbe):
            return self._slot(vis, probe)
        raise InvalidArgument(f"unknown probe {type(probe).__name__}")

    def _neighbours(self, vis: Visibility, probe: NeighbourProbe) -> list[Record]:
        """Records observed just before and after each anchor in its scope (one
        statement for all anchors), oldest first."""
        if not probe.anchors or probe.per_side <= 0:
            return []
        points = [(a.scope, to_micros(a.observed_at) or 0) for a in probe.anchors]
        gap = probe.gap // _MICROSECOND
        query = statements.neighbors(vis, points, probe.types, probe.statuses, gap,
                                     probe.per_side)  # fmt: skip
        return self._records(query)

    def _slot(self, vis: Visibility, probe: SlotProbe) -> list[Record]:
        """Versions a write to the probe's slot meets (the slot's own predicate,
        ``OwnerSlot.key_sql``), for a caller of that slot's tenant and user only."""
        if (probe.slot.tenant_id, probe.slot.user_id) != (vis.tenant_id, vis.user_id):
            raise InvalidArgument("a slot probe reads only the caller's own tenant and user")
        if (probe.key is None) == (probe.content_hash is None):
            raise InvalidArgument("a slot probe takes exactly one of key and content_hash")
        if probe.key is not None:
            return self._records(statements.slot_by_key(probe.slot, probe.key, probe.statuses))
        assert probe.content_hash is not None
        query = statements.slot_by_hash(probe.slot, probe.content_hash, probe.statuses)
        return self._records(query)

    def _ranked(
        self, vis: Visibility, statuses: Sequence[str], limit: int, ranking: Ranking,
        known: Mapping[str, Record] | None,
    ) -> Hits:  # fmt: skip
        """The best ``limit`` records of ``ranking`` in ``statuses`` (``alive_top``)."""
        return alive_top(
            limit, ranking, partial(self._alive_records, vis, statuses, known),
            partial(self._alive_ids, vis, statuses),
        )  # fmt: skip

    def _alive_ids(
        self, vis: Visibility, statuses: Sequence[str], ids: Sequence[str]
    ) -> dict[str, str]:
        """The visible ids among ``ids`` whose status is in ``statuses``."""
        query = statements.status_of(vis, ids, statuses)
        return {row[0]: row[0] for row in self._rows(query)}

    def _alive_records(
        self, vis: Visibility, statuses: Sequence[str], known: Mapping[str, Record] | None,
        ids: Sequence[str],
    ) -> dict[str, Record]:  # fmt: skip
        """The visible records among ``ids`` whose status is in ``statuses``. Records
        in ``known`` (already read by this call) are not read again; their
        visibility (``Visibility.admits``) and status are checked here."""
        found: dict[str, Record] = {}
        missing = []
        for record_id in ids:
            record = known.get(record_id) if known else None
            if record is None:
                missing.append(record_id)
            elif record.status in statuses and vis.admits(
                record.tenant_id, record.user_id or NO_USER, record.scope,
                record.agent_id or NO_AGENT,
            ):  # fmt: skip
                found[record_id] = record
        if missing:
            query = statements.by_ids(vis, missing, statuses)
            found.update((record.id, record) for record in self._records(query))
        return found

    # -- vector model and meta (read side) -------------------------------------------

    def meta_get(self, key: str) -> str | None:
        """A value from the meta table."""
        rows = self._rows((statements_admin.META_GET, {"key": key}))
        return str(rows[0][0]) if rows else None

    def vector_model(self) -> str | None:
        """The embedding model the stored vectors come from, if any."""
        return self.meta_get(_VECTOR_MODEL_KEY)

    def check_vector_model(self, model: str) -> None:
        """Raise ``IndexMismatch`` if stored vectors are from another model."""
        current = self.vector_model()
        if current is not None and current != model:
            raise IndexMismatch.between(current, model)

    # -- RowSource (what the in-memory engines load) -----------------------------------

    def vector_counters(self, vis: Visibility) -> Counters:
        """Vector change counters of the caller's two partitions."""
        return self._counters(vis, "partition_state")

    def lexical_counters(self, vis: Visibility) -> Counters:
        """Record change counters of the caller's two partitions."""
        return self._counters(vis, "lexical_state")

    def _counters(self, vis: Visibility, table: str) -> Counters:
        rows = self._rows(statements.counters(vis, table))
        return {row[0]: (row[1], row[2]) for row in rows}

    def vector_rows(self, subject: Subject, model: str, after: int) -> list[VectorRow]:
        """A partition's vectors of ``model`` after sequence ``after``."""
        rows = self._rows(statements.vector_rows(subject, model, after))
        return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def lexical_rows(self, subject: Subject, after: int) -> list[LexicalRow]:
        """A partition's records after row ``after``."""
        rows = self._rows(statements.lexical_rows(subject, after))
        return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def private(self) -> bool:
        """Whether this thread reads inside its own transaction."""
        return self._in_own_transaction()


def _kind(probe: Probe) -> str:
    """The name ``SQLiteConfig.overlapped_probes`` gives a probe kind."""
    if isinstance(probe, VectorProbe):
        return "vector"
    if isinstance(probe, LexicalProbe):
        return "lexical"
    return ""


_WORKERS: list[ThreadPoolExecutor] = []
_WORKERS_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """A forked child inherits the pool but not its threads, and the lock in whatever
    state the forking thread saw: it gets a fresh lock and builds its own pool."""
    global _WORKERS_LOCK
    _WORKERS_LOCK = threading.Lock()
    _WORKERS.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _worker() -> ThreadPoolExecutor:
    """The process-wide pool that runs overlapped probes beside the others."""
    with _WORKERS_LOCK:
        if not _WORKERS:
            cores = os.cpu_count() or 1
            _WORKERS.append(ThreadPoolExecutor(max(2, cores), thread_name_prefix="engram-vector"))
        return _WORKERS[0]

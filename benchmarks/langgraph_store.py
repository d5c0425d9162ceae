"""The LangGraph store on Engram: what each BaseStore call costs, against baselines.

Not a test. One SQLite file store with the hashing embedder, ``--items`` items in
``--users`` users' namespaces, then ``--ops`` timed calls of each kind:

1. ``EngramStore``: put (a new key; through the write path, one transaction),
   put with a TTL, get, search with a query (Engram recall), search with a
   filter (a listing scan), list_namespaces;
2. baseline, same run: the SDK calls the adapter is built on (``remember`` with a
   key, ``recall``) on the same store, so the ratio is the adapter's own cost;
3. baseline, same run: LangGraph's ``InMemoryStore`` with the same hashing
   embedder as its index (no governance, no persistence).

Usage: ``PYTHONPATH=src python benchmarks/langgraph_store.py [--items 2000]
[--ops 200]``; writes ``benchmarks/results/langgraph-store.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from common import machine, print_table, ratio, summarize, temp_dir, write_results
from engram import Budget, Context, Engram
from engram.embed import create_embedder
from engram.surfaces.langgraph import EngramStore

RESULTS = Path(__file__).resolve().parent / "results" / "langgraph-store.json"
TOPICS = ("tea", "flights", "music", "food", "travel", "books", "sport", "work")


def _note(n: int) -> dict[str, Any]:
    topic = TOPICS[n % len(TOPICS)]
    return {"memory": f"Note {n}: the user talked about {topic} and item {n * 7 % 101}",
            "topic": topic, "n": n}  # fmt: skip


def _timed(call: Callable[[int], object], ops: int) -> list[float]:
    """Milliseconds of ``call(i)`` for i in 0..ops-1 after 5 untimed warm-up calls."""
    for i in range(5):
        call(i)
    times = []
    for i in range(ops):
        start = time.perf_counter()
        call(i)
        times.append((time.perf_counter() - start) * 1000)
    return times


def _fill(store: BaseStore, items: int, users: int) -> None:
    for n in range(items):
        store.put(("memories", f"u{n % users}"), f"k{n}", _note(n))


def _store_calls(store: BaseStore, items: int, users: int) -> dict[str, Callable[[int], object]]:
    """The timed calls; ``put_ttl`` only where the store supports TTLs (InMemoryStore
    does not)."""

    def ns(i: int) -> tuple[str, ...]:
        return ("memories", f"u{i % users}")

    calls: dict[str, Callable[[int], object]] = {
        "put": lambda i: store.put(ns(i), f"new{i}", _note(items + i)),
        "put_ttl": lambda i: store.put(ns(i), f"ttl{i}", _note(items + i), ttl=60),
        "get": lambda i: store.get(ns(i), f"k{(i * 13) % items}"),
        "search_query": lambda i: store.search(ns(i), query=f"what about {TOPICS[i % 8]}", limit=5),
        "search_filter": lambda i: store.search(ns(i), filter={"topic": TOPICS[i % 8]}, limit=5),
        "list_namespaces": lambda i: store.list_namespaces(prefix=("memories",), limit=50),
    }
    if not store.supports_ttl:
        del calls["put_ttl"]
    return calls


def _sdk_calls(mem: Engram, items: int, users: int) -> dict[str, Callable[[int], object]]:
    def ctx(i: int) -> Context:
        return Context(tenant_id="acme", user_id=f"u{i % users}")

    budget = Budget(max_items=20, max_tokens=1_000_000, layout="compact")
    return {
        "put": lambda i: mem.remember(
            ctx(i), _note(items + i)["memory"], key=f"sdk.k{i}", retention="permanent"
        ),
        "search_query": lambda i: mem.recall(ctx(i), f"what about {TOPICS[i % 8]}", budget=budget),
    }


def _hashing_index() -> dict[str, Any]:
    embedder = create_embedder("hashing")

    def embed(texts: list[str]) -> list[list[float]]:
        return [list(map(float, row)) for row in embedder.embed(list(texts))]

    return {"dims": embedder.dimension, "embed": embed, "fields": ["memory"]}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--ops", type=int, default=200)
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"machine": machine(sys.argv), "items": args.items,
                               "users": args.users, "ops": args.ops}  # fmt: skip
    with temp_dir("engram-lg-") as tmp:
        mem = Engram.open(f"sqlite:///{tmp / 'lg.db'}", embedder="hashing")
        users = {f"u{n}" for n in range(args.users)}
        ours = EngramStore(mem, "acme", users=users, user_at=1)
        reference = InMemoryStore(index=_hashing_index())  # type: ignore[arg-type]
        start = time.perf_counter()
        _fill(ours, args.items, args.users)
        results["fill_s"] = round(time.perf_counter() - start, 2)
        _fill(reference, args.items, args.users)
        timings = {
            "engram_store": {k: summarize(_timed(c, args.ops))
                             for k, c in _store_calls(ours, args.items, args.users).items()},
            "engram_sdk": {k: summarize(_timed(c, args.ops))
                           for k, c in _sdk_calls(mem, args.items, args.users).items()},
            "in_memory_store": {k: summarize(_timed(c, args.ops))
                                for k, c in _store_calls(reference, args.items,
                                                         args.users).items()},
        }  # fmt: skip
        mem.close()
    results["timings"] = timings
    rows = []
    for name, ours_t in timings["engram_store"].items():
        sdk = timings["engram_sdk"].get(name)
        ref = timings["in_memory_store"].get(name, {}).get("p50_ms")
        mine = ours_t["p50_ms"]
        rows.append([name, mine, ours_t["p95_ms"], sdk["p50_ms"] if sdk else None,
                     ratio(mine, sdk["p50_ms"]) if sdk else None, ref,
                     ratio(mine, ref) if ref else None])  # fmt: skip
    print_table(f"EngramStore on SQLite, {args.items} items, {args.ops} ops each (ms)",
                ["call", "p50", "p95", "sdk p50", "x sdk", "in-memory p50", "x in-memory"],
                rows)  # fmt: skip
    write_results(RESULTS, results)


if __name__ == "__main__":
    main(sys.argv[1:])

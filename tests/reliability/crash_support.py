"""The crash harness: start a writer process, SIGKILL it at a random moment, check.

``run_trial`` starts ``crash_writer.py`` (a fresh interpreter running the
workload), waits until the writer begins the operation kind chosen for this
trial (its ``k``-th time, ``k`` in 1..2), sleeps a random time up to 1.2 times
that operation's median duration so far (so the kill lands anywhere in the call,
commit included, or just after it), and sends SIGKILL. The kill moment is read
back from the log: the operation begun and not acknowledged, or ``between`` when
the last line was an acknowledgement. ``Harness`` runs trials on one store and
checks it after each (``crash_checks.check``) against every log so far.

Used by ``tests/reliability/test_crash_kills.py`` (a few trials per backend) and
``benchmarks/crash.py`` (100 or more).
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crash_checks import Findings, check
from crash_writer import KINDS, config

from engram import Engram

__all__ = ["KINDS", "Harness", "Kill", "WriterFailed", "read_log", "run_trials"]

WRITER = Path(__file__).resolve().with_name("crash_writer.py")
SRC = Path(__file__).resolve().parents[2] / "src"
_DEFAULT_SECONDS = 0.05  # an operation's duration before one was measured


class WriterFailed(RuntimeError):
    """The writer exited or stalled on its own: the harness, not a kill, ended it."""


@dataclass(frozen=True)
class Kill:
    """One trial: what was aimed at, when the kill came, what was in flight."""

    trial: int
    target: str
    delay_s: float
    moment: str  # the operation in flight, or "between" (after an acknowledgement)
    after: str  # the last operation acknowledged before the kill
    acknowledged: int  # acknowledgements in this trial's log


def read_log(path: Path) -> list[dict[str, Any]]:
    """Every complete line of a writer's log (a line cut by the kill is left out)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    return [json.loads(line) for line in lines[:-1] if line]


@dataclass
class Harness:
    """Trials on one store: ``url``, logs under ``folder``, working memory on Redis
    (``redis_url`` with ``redis_prefix``) for a server store."""

    url: str
    folder: Path
    redis_url: str | None = None
    redis_prefix: str | None = None
    seed: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    durations: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    timeout_s: float = 120.0

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def open(self) -> Engram:
        """An instance on the store with the writer's configuration (the checker's)."""
        return Engram.open(self.url, embedder="hashing", config=config(self.redis_prefix),
                           working=self.redis_url)  # fmt: skip

    def command(self, trial: int, log: Path, cycles: int | None = None) -> list[str]:
        out = [sys.executable, str(WRITER), "--url", self.url, "--log", str(log),
               "--trial", str(trial)]  # fmt: skip
        if self.redis_url is not None:
            out += ["--redis-url", self.redis_url]
        if self.redis_prefix is not None:
            out += ["--redis-prefix", self.redis_prefix]
        return out + ([] if cycles is None else ["--cycles", str(cycles)])

    def _start(self, trial: int, cycles: int | None = None) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.folder / f"trial-{trial:04d}.jsonl"
        errors = open(self.folder / f"trial-{trial:04d}.stderr", "wb")  # noqa: SIM115
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(SRC), str(WRITER.parent), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
        try:
            child = subprocess.Popen(self.command(trial, log, cycles), env=env,
                                     stdout=subprocess.DEVNULL, stderr=errors)  # fmt: skip
        finally:
            errors.close()
        return child, log

    def _failed(self, trial: int, why: str) -> WriterFailed:
        tail = (self.folder / f"trial-{trial:04d}.stderr").read_text(errors="replace")[-2000:]
        return WriterFailed(f"trial {trial}: {why}\n{tail}")

    def clean_run(self, trial: int, cycles: int) -> None:
        """A writer that runs ``cycles`` cycles and exits (no kill); its log is kept."""
        child, log = self._start(trial, cycles)
        if child.wait(timeout=self.timeout_s) != 0:
            raise self._failed(trial, f"exited {child.returncode}")
        self._take(read_log(log))

    def kill_trial(self, trial: int, target: str) -> Kill:
        """Start a writer, kill it during (or just after) ``target``; the kill moment."""
        child, log = self._start(trial)
        occurrence = self.rng.randint(1, 2)
        known = self.durations.get(target)
        delay = self.rng.uniform(0, 1.2 * (statistics.median(known) if known else
                                           _DEFAULT_SECONDS))  # fmt: skip
        deadline = time.monotonic() + self.timeout_s
        try:
            while self._begun(log, target) < occurrence:
                if child.poll() is not None:
                    raise self._failed(trial, f"the writer exited {child.returncode} early")
                if time.monotonic() > deadline:
                    raise self._failed(trial, f"no {target} within {self.timeout_s} s")
                time.sleep(0.001)
            time.sleep(delay)
        finally:
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        events = read_log(log)
        if child.returncode != -signal.SIGKILL:
            raise self._failed(trial, f"exited {child.returncode} before the kill")
        self._take(events)
        return self._killed(trial, target, delay, events)

    def _killed(self, trial: int, target: str, delay: float,
                events: list[dict[str, Any]]) -> Kill:  # fmt: skip
        """Record the kill of ``trial``: where the log says it landed, after how many
        acknowledgements."""
        last = events[-1] if events else {"ev": "none", "op": "open"}
        acks = [e for e in events if e["ev"] == "ack"]
        kill = Kill(trial, target, round(delay, 4), last["op"] if last["ev"] == "begin"
                    else "between", acks[-1]["op"] if acks else "-", len(acks))  # fmt: skip
        self.kills.append(kill)
        return kill

    @staticmethod
    def _begun(log: Path, target: str) -> int:
        """How many ``begin`` lines of ``target`` the log holds so far."""
        try:
            text = log.read_text(encoding="utf-8")
        except FileNotFoundError:
            return 0
        return text.count(f'"ev": "begin", "op": "{target}"')

    def _take(self, events: list[dict[str, Any]]) -> None:
        self.events += events
        for event in events:
            if event["ev"] == "ack":
                self.durations[event["op"]].append(float(event["seconds"]))

    def check(self) -> Findings:
        """Every check of the store against every log so far."""
        return check(self.open, self.events)

    def moments(self) -> dict[str, int]:
        """How many kills landed in each operation (or between two)."""
        return dict(Counter(kill.moment for kill in self.kills).most_common())


def run_trials(harness: Harness, targets: Sequence[str], first: int = 0,
               on_trial: Callable[[Kill, Findings], None] | None = None) -> Findings:  # fmt: skip
    """One kill trial per target, each followed by the checks; the findings of the
    last check (which covers every trial on the store)."""
    findings = Findings()
    for n, target in enumerate(targets, start=first):
        kill = harness.kill_trial(n, target)
        findings = harness.check()
        if on_trial is not None:
            on_trial(kill, findings)
    return findings

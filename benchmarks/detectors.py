"""Measure the write-policy detectors: labelled sets, and false positives on real chats.

Not a test. Two measurements:

1. the labelled sets in ``tests/data/detectors`` (instructions from a document source,
   secrets in every stored field, special-category disclosures), scored through the
   whole write policy: recall on the positives, false-positive rate on the negatives;
2. every message of the BEAM and LoCoMo development splits, each proposed as
   ``remember`` would (type ``episode``, ``source.ref`` its message id, no consent
   basis), once from a ``conversation`` source (secrets and personal data) and once
   from a ``document`` source (instruction quarantine). Rates are by reason code over
   the messages the size limit admits; oversized messages (over 8192 bytes, rejected
   by design) are counted apart and are not detector false positives.

Usage: ``PYTHONPATH=src python benchmarks/detectors.py [--data ../shared/data]
[--show 20]``; writes ``benchmarks/results/detectors.json`` (``--out`` to change).
``--show N`` prints up to N rejected or quarantined messages per reason, to inspect.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import REPO, machine, print_table, write_results
from engram.config import Config
from engram.eval import detectors as sets
from engram.eval.locomo import load_locomo, turn_text
from engram.write.policy import Verdict, evaluate
from engram.write.proposal import build_proposal

DATA = REPO / "tests" / "data" / "detectors"
SOURCES = ("conversation", "document")
# Reasons that count against the detectors (code "secret", "needs_consent": personal data).
DETECTOR_REJECTIONS = ("secret", "needs_consent")


def beam_messages(root: Path) -> Iterator[tuple[str, str, str]]:
    """``(set, ref, text)`` of every message of every BEAM chat (``chat.json``, all of it)."""
    for chat_dir in sorted((root / "beam" / "100K").iterdir(), key=lambda p: int(p.name)):
        for batch in json.loads((chat_dir / "chat.json").read_text()):
            for turn in batch["turns"]:
                for message in turn:
                    ref = f"beam{chat_dir.name}:{message['id']}"
                    yield f"beam/{message['role']}", ref, message["content"]


def locomo_messages(root: Path) -> Iterator[tuple[str, str, str]]:
    """``(set, ref, text)`` of every LoCoMo turn, as the LoCoMo evaluation indexes it."""
    for conversation in load_locomo(root / "locomo" / "locomo10_dev.json"):
        for turn in conversation.turns:
            yield "locomo", f"{conversation.sample_id}:{turn.dia_id}", turn_text(turn)


def verdict(config: Config, text: str, ref: str, source: str) -> Verdict:
    """The policy's verdict on one message proposed as an episode from ``source``."""
    proposal = build_proposal(config, text, type="episode", source={"kind": source, "ref": ref})
    return evaluate(proposal, config.write)


def run_chats(config: Config, data: Path, show: int) -> dict[str, Any]:
    """Verdict codes per set and source, rates over the admitted messages, examples."""
    counts: dict[str, Counter[str]] = {}
    examples: dict[str, list[str]] = {}
    messages = [*beam_messages(data), *locomo_messages(data)]
    for name, ref, text in messages:
        for source in SOURCES:
            result = verdict(config, text.strip(), ref, source)
            counts.setdefault(f"{name}|{source}", Counter())[result.code] += 1
            if show and result.code not in {"accepted", "oversized", "transient"}:
                shown = examples.setdefault(f"{source}|{result.code}", [])
                if len(shown) < show:
                    shown.append(f"{ref} [{result.reason}] {text[:160]!r}")
    summary = {key: _rates(counter) for key, counter in sorted(counts.items())}
    return {"by_set": summary, "total": _totals(counts), "examples": examples}


def _rates(counter: Counter[str]) -> dict[str, Any]:
    """Counts by reason, and rates over the messages under the size limit."""
    admitted = sum(counter.values()) - counter["oversized"]
    rates = {code: round(n / admitted, 4) for code, n in counter.items() if code != "oversized"}
    detector = sum(counter[code] for code in DETECTOR_REJECTIONS)
    return {
        "messages": sum(counter.values()),
        "oversized": counter["oversized"],
        "admitted": admitted,
        "counts": dict(counter.most_common()),
        "rates": rates,
        "rejected_for_secret_or_personal": round(detector / admitted, 4) if admitted else 0.0,
    }


def _totals(counts: dict[str, Counter[str]]) -> dict[str, Any]:
    """The rates over all sets, per source."""
    totals: dict[str, Any] = {}
    for source in SOURCES:
        merged: Counter[str] = Counter()
        for key, counter in counts.items():
            if key.endswith(f"|{source}"):
                merged.update(counter)
        totals[source] = _rates(merged)
    return totals


def run_labelled(config: Config) -> dict[str, Any]:
    """Recall and false-positive rate of each labelled set through the policy."""
    return {
        "instructions (source document)": sets.score(
            sets.load(DATA / "instructions.jsonl"), sets.instruction_flagged(config)
        ),
        "secrets (every stored field)": sets.score(
            sets.load(DATA / "secrets.jsonl"), sets.secret_flagged(config)
        ),
        "special_category": sets.score(
            sets.load(DATA / "special_category.jsonl"), sets.special_flagged(config)
        ),
    }


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/detectors.json")
    parser.add_argument("--show", type=int, default=0, help="examples to print per reason")
    args = parser.parse_args(argv)
    config = Config()
    labelled = run_labelled(config)
    print_table(
        "labelled sets (whole write policy)",
        ["set", "pos", "neg", "recall", "fp rate"],
        [[name, r["positives"], r["negatives"], r["recall"], r["false_positive_rate"]]
         for name, r in labelled.items()],
    )  # fmt: skip
    chats = run_chats(config, args.data, args.show)
    rows = []
    for key, r in chats["by_set"].items():
        top = ", ".join(f"{c} {n}" for c, n in r["counts"].items() if c != "accepted")
        rows.append([key, r["messages"], r["oversized"], r["rejected_for_secret_or_personal"], top])
    print_table(
        "BEAM + LoCoMo dev messages",
        ["set|source", "messages", "oversized", "secret/personal rate", "non-accepted by reason"],
        rows,
    )
    for source, r in chats["total"].items():
        print(f"total {source}: {r['admitted']} admitted, rates {r['rates']}")
    for reason, shown in chats["examples"].items():
        print(f"\n{reason}:")
        for line in shown:
            print("  " + line)
    payload = {"machine": machine(["benchmarks/detectors.py", *argv]), "labelled": labelled,
               "chats": {k: v for k, v in chats.items() if k != "examples"}}  # fmt: skip
    write_results(args.out, payload)


if __name__ == "__main__":
    main(sys.argv[1:])

"""Old against new write-policy detectors: identical answers, and time per call, paired.

Not a test. Loads ``engram/write/detectors`` from two source trees (``--base``: an old
checkout, e.g. ``git worktree add --detach ../base main``; ``--new``: this one) side by
side in one process, each as its own package, then:

1. identity: over every text of the set below, compares the findings of ``find_secrets``,
   ``find_personal_data`` and ``find_special_category`` (kind and span), the redacted
   text a share stores, ``looks_like_instruction`` and ``is_transient_chatter``, byte for
   byte; any difference is printed and the exit status is 1;
2. speed: microseconds per call of each detector, old and new alternating in rounds over
   a sample of the texts (the machine's load moves both alike), medians and ratios.

Texts: the share benchmark's contents, benchmark corpus memories, every string of the
LoCoMo and BEAM development files and of the labelled detector sets, the multilingual
set, every string literal of the test suite, and of each text up to ``--disguise-max``
characters three disguised forms
(upper case, the letters ``re.IGNORECASE`` equates with i/s/k swapped in, a zero-width
space after every third character).

Usage: ``PYTHONPATH=src python benchmarks/detectors_ab.py --base ../wt-base/src
[--rounds 5] [--sample 3000]``; writes ``benchmarks/results/detectors_ab.json``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from common import REPO, machine, print_table, write_results
from corpus import Corpus

DETECTORS = ("secrets", "personal", "special", "instruction", "chatter", "redacted")


def load(src: Path, name: str, into: Path) -> ModuleType:
    """The detectors package of the tree ``src``, imported under the package name ``name``."""
    target = into / name
    target.mkdir()
    for module in (src / "engram" / "write" / "detectors").glob("*.py"):
        text = module.read_text().replace("engram.write.detectors", name)
        (target / module.name).write_text(text)
    return importlib.import_module(name)


def _strings(node: Any) -> Iterator[str]:
    """Every string inside a parsed JSON value."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, dict):
        for key, item in node.items():
            yield key
            yield from _strings(item)


def texts(data: Path, corpus_size: int) -> list[str]:
    """The text set of the module docstring, distinct, in a fixed order."""
    found = [f"Round {r} procedure {i}: deploy service {i} with the blue-green script, then "
             f"check dashboard {i % 17}." for r in range(3) for i in range(100)]  # fmt: skip
    found += [memory.text for memory in Corpus(seed=7).memories(0, corpus_size)]
    files = [data / "locomo" / "locomo10_dev.json", *sorted(data.glob("beam/100K/*/chat*.json"))]
    for path in files:
        found += _strings(json.loads(path.read_text()))
    for path in sorted((REPO / "tests" / "data" / "detectors").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            found += _strings(json.loads(line)) if line.strip() else []
    for line in (REPO / "benchmarks" / "multilingual_set.tsv").read_text().splitlines():
        found += line.split("\t")
    for path in sorted((REPO / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text())
        found += [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                  and isinstance(n.value, str)]  # fmt: skip
    return list(dict.fromkeys(text for text in found if text.strip()))


def disguised(text: str) -> list[str]:
    """Forms that test case folding and invisible characters: upper, look-alike case, ZWSP."""
    swapped = text.replace("i", "\u0131").replace("I", "\u0130").replace("s", "\u017f")
    swapped = swapped.replace("k", "\u212a")
    spaced = "".join(c + "\u200b" if n % 3 == 2 else c for n, c in enumerate(text))
    return [text.upper(), swapped, spaced]


def answers(det: ModuleType, text: str) -> dict[str, Any]:
    """Every answer the write policy and a share take from the detectors for ``text``."""
    secrets, personal = det.find_secrets(text), det.find_personal_data(text)

    def spans(found: list[Any]) -> list[tuple[str, str, int, int]]:
        return [(f.category, f.kind, f.start, f.end) for f in found]

    return {
        "secrets": spans(secrets),
        "personal": spans(personal),
        "special": spans(det.find_special_category(text)),
        "instruction": det.looks_like_instruction(text),
        "chatter": det.is_transient_chatter(text),
        "redacted": det.redact(text, secrets + personal),
    }


def compare(old: ModuleType, new: ModuleType, items: list[str]) -> list[str]:
    """Descriptions of every answer that differs between ``old`` and ``new``."""
    differences = []
    for text in items:
        was, now = answers(old, text), answers(new, text)
        differences += [f"{name}: {text[:120]!r}: {was[name]!r} != {now[name]!r}"
                        for name in DETECTORS if was[name] != now[name]]  # fmt: skip
    return differences


def _calls(det: ModuleType) -> dict[str, Callable[[str], Any]]:
    return {
        "secrets": det.find_secrets,
        "personal": det.find_personal_data,
        "instruction": det.looks_like_instruction,
        "chatter": det.is_transient_chatter,
    }


def timings(old: ModuleType, new: ModuleType, sample: list[str], rounds: int) -> dict[str, Any]:
    """Microseconds per call of each detector, old and new alternating round by round."""
    took: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for _ in range(rounds):
        for side, det in (("old", old), ("new", new)):
            for name, call in _calls(det).items():
                start = time.perf_counter()
                for text in sample:
                    call(text)
                per_call = (time.perf_counter() - start) * 1e6 / len(sample)
                took[side].setdefault(name, []).append(per_call)
    result = {}
    for name in took["old"]:
        was, now = statistics.median(took["old"][name]), statistics.median(took["new"][name])
        result[name] = {"old_us": round(was, 1), "new_us": round(now, 1),
                        "speedup": round(was / now, 2)}  # fmt: skip
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="src folder of the old tree")
    parser.add_argument("--new", type=Path, default=REPO / "src")
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--corpus", type=int, default=5000, help="corpus memories in the set")
    parser.add_argument("--sample", type=int, default=3000, help="texts timed per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--disguise-max", type=int, default=600, help="longest text disguised")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/results/detectors_ab.json")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="detectors-ab-"))
    sys.path.insert(0, str(folder))
    try:
        old, new = load(args.base, "detectors_old", folder), load(args.new, "detectors_new", folder)
        items = texts(args.data, args.corpus)
        short = [text for text in items if len(text) <= args.disguise_max]
        every = items + [form for text in short for form in disguised(text)]
        differences = compare(old, new, every)
        step = max(1, len(items) // args.sample)
        speed = timings(old, new, items[::step][: args.sample], args.rounds)
    finally:
        shutil.rmtree(folder)
    for line in differences[:50]:
        print(line)
    print(f"{len(every)} texts ({len(items)} distinct + disguised forms), "
          f"{len(differences)} differences")  # fmt: skip
    rows = [[n, r["old_us"], r["new_us"], r["speedup"]] for n, r in speed.items()]
    print_table("us per call, median of rounds (old and new alternating)",
                ["detector", "old us", "new us", "speedup"], rows)  # fmt: skip
    write_results(args.out, {"machine": machine(["benchmarks/detectors_ab.py", *argv]),
                             "texts": len(every), "differences": len(differences),
                             "sample": min(args.sample, len(items)), "rounds": args.rounds,
                             "us_per_call": speed})  # fmt: skip
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""``engram eval``: the governance golden suite and LoCoMo retrieval, from the shell.

    engram eval golden [--embedder hashing|local] [--json]
    engram eval locomo [--data PATH] [--embedder local] [--out DIR] [--systems ...]
                       [--consolidate]
    engram eval beam [--data DIR] [--embedder local] [--out DIR] [--systems ...]
                     [--chats N] [--write-at observed|end]

``locomo`` writes ``locomo.md`` (tables), ``locomo.json`` and ``locomo.png`` (turn
level R@10 per category and system) into ``--out``; with ``--consolidate`` it
scores the full pipeline before consolidation, after it and after the episodes
are swept (``locomo_consolidated``) into ``locomo-consolidated[-EMBEDDER].md`` and
``.json``; ``beam`` writes ``beam.md``
and ``beam.json`` (named ``beam-hashing``, ``beam-end``, ``beam-hashing-end``
for another embedder or ``--write-at end``).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from engram.eval.beam import load_beam
from engram.eval.beam_metrics import beam_markdown
from engram.eval.beam_run import SYSTEMS as BEAM_SYSTEMS
from engram.eval.beam_run import run_beam
from engram.eval.golden import run_golden
from engram.eval.locomo import LocomoConversation, load_locomo
from engram.eval.locomo_consolidated import run_consolidated
from engram.eval.locomo_run import SYSTEMS, run_locomo
from engram.eval.metrics import markdown_table, write_chart

__all__ = ["add_eval_command"]

_DEFAULT_DATA = "../shared/data/locomo/locomo10_dev.json"
_DEFAULT_BEAM = "../shared/data/beam/100K"


def _golden(args: argparse.Namespace) -> int:
    report = run_golden(args.embedder_name)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.markdown())
    return 0 if report.passed == len(report.cases) else 1


def _locomo_consolidated(args: argparse.Namespace, conversations: list[LocomoConversation]) -> int:
    run = run_consolidated(conversations, embedder=args.embedder_name)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "locomo-consolidated" + ("" if args.embedder_name == "local" else
                                    f"-{args.embedder_name}")  # fmt: skip
    table = markdown_table(run.scores)
    tokens = "\n".join(f"| {name} | {value:.0f} |" for name, value in run.tokens.items())
    table += f"\n### Mean tokens per recall\n\n| stage | tokens |\n| --- | ---: |\n{tokens}\n"
    payload = {"data": os.path.basename(args.data), "embedder": args.embedder_name,
               "conversations": [c.sample_id for c in conversations], **run.to_dict()}  # fmt: skip
    (out / f"{stem}.md").write_text(table)
    (out / f"{stem}.json").write_text(json.dumps(payload, indent=2) + "\n")
    print(table)
    print(f"consolidation: {run.consolidation}; seconds: {run.seconds}")
    print(f"\nwrote {out / (stem + '.md')}, {out / (stem + '.json')}")
    return 0


def _locomo(args: argparse.Namespace) -> int:
    conversations = load_locomo(args.data)
    if args.consolidate:
        return _locomo_consolidated(args, list(conversations))
    run = run_locomo(conversations, embedder=args.embedder_name, systems=args.systems)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = markdown_table(run.scores)
    payload = {"data": os.path.basename(args.data), "embedder": args.embedder_name,
               "conversations": [c.sample_id for c in conversations], **run.to_dict()}  # fmt: skip
    (out / "locomo.md").write_text(table + "\n")
    (out / "locomo.json").write_text(json.dumps(payload, indent=2) + "\n")
    write_chart(run.scores, out / "locomo.png")
    print(table)
    print(f"\nwrote {out / 'locomo.md'}, {out / 'locomo.json'}, {out / 'locomo.png'}")
    return 0


def _beam_stem(embedder: str, write_at: str) -> str:
    """``beam`` for the local model and observed writes, else ``beam-hashing-end`` etc."""
    parts = ["beam", *([embedder] if embedder != "local" else []),
             *([write_at] if write_at != "observed" else [])]  # fmt: skip
    return "-".join(parts)


def _beam(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    chats = load_beam(args.data, limit=args.chats)
    run = run_beam(chats, embedder=args.embedder_name, systems=args.systems,
                   write_at=args.write_at)  # fmt: skip
    seconds = round(time.perf_counter() - started, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = _beam_stem(args.embedder_name, args.write_at)
    table = beam_markdown(run.scores)
    payload = {"data": Path(args.data).name, "embedder": args.embedder_name,
               "chats": {c.chat_id: c.source for c in chats}, "seconds": seconds,
               **run.to_dict()}  # fmt: skip
    (out / f"{stem}.md").write_text(table + "\n")
    (out / f"{stem}.json").write_text(json.dumps(payload, indent=2) + "\n")
    print(table)
    print(f"\nwrote {out / (stem + '.md')}, {out / (stem + '.json')} in {seconds} s")
    return 0


def add_eval_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``engram eval golden``, ``engram eval locomo`` and ``engram eval beam``."""
    evaluate = commands.add_parser("eval", help="evaluation suites")
    suites = evaluate.add_subparsers(dest="suite", required=True)
    golden = suites.add_parser("golden", help="the governance golden suite of recall")
    golden.add_argument("--embedder", dest="embedder_name", default="hashing",
                        help="the embedder the cases run with (default: hashing)")  # fmt: skip
    golden.add_argument("--json", action="store_true", help="print JSON, not markdown")
    golden.set_defaults(func=_golden)
    locomo = suites.add_parser("locomo", help="LoCoMo evidence retrieval against baselines")
    _add_retrieval_options(
        locomo,
        os.environ.get("ENGRAM_LOCOMO", _DEFAULT_DATA),
        "a LoCoMo-format JSON file (the dev split or the full locomo10.json)",
        SYSTEMS,
    )
    locomo.add_argument(
        "--consolidate", action="store_true",
        help="score recall before consolidation, after it and after the episodes are swept",
    )  # fmt: skip
    locomo.set_defaults(func=_locomo)
    _add_beam(suites)


def _add_retrieval_options(
    parser: argparse.ArgumentParser, data: str, data_help: str, systems: tuple[str, ...]
) -> None:
    """The options every retrieval benchmark takes: data, embedder, output, systems."""
    parser.add_argument("--data", default=data, help=data_help)
    parser.add_argument("--embedder", dest="embedder_name", default="local",
                        help="the embedder Engram runs with (default: local)")  # fmt: skip
    parser.add_argument("--out", default="eval-results", help="output folder")
    parser.add_argument("--systems", nargs="+", default=list(systems), choices=systems,
                        help="the systems to compare (default: all)")  # fmt: skip


def _add_beam(suites: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    beam = suites.add_parser("beam", help="BEAM evidence retrieval against baselines")
    _add_retrieval_options(
        beam,
        os.environ.get("ENGRAM_BEAM", _DEFAULT_BEAM),
        "a BEAM tier folder of numbered chats (or one chat folder)",
        BEAM_SYSTEMS,
    )
    beam.add_argument("--chats", type=int, default=None, help="only the first N chats")
    beam.add_argument(
        "--write-at",
        choices=("observed", "end"),
        default="observed",
        help="when Engram's memories are written: as each batch is observed (default), "
        "or all at the chat's end (nothing expires)",
    )
    beam.set_defaults(func=_beam)

"""``engram eval``: the governance golden suite and LoCoMo retrieval, from the shell.

    engram eval golden [--embedder hashing|local] [--json]
    engram eval locomo [--data PATH] [--embedder local] [--out DIR] [--systems ...]

``locomo`` writes ``locomo.md`` (tables), ``locomo.json`` and ``locomo.png`` (turn
level R@10 per category and system) into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from engram.eval.golden import run_golden
from engram.eval.locomo import load_locomo
from engram.eval.locomo_run import SYSTEMS, run_locomo
from engram.eval.metrics import markdown_table, write_chart

__all__ = ["add_eval_command"]

_DEFAULT_DATA = "../shared/data/locomo/locomo10_dev.json"


def _golden(args: argparse.Namespace) -> int:
    report = run_golden(args.embedder_name)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.markdown())
    return 0 if report.passed == len(report.cases) else 1


def _locomo(args: argparse.Namespace) -> int:
    conversations = load_locomo(args.data)
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


def add_eval_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``engram eval golden`` and ``engram eval locomo``."""
    evaluate = commands.add_parser("eval", help="evaluation suites")
    suites = evaluate.add_subparsers(dest="suite", required=True)
    golden = suites.add_parser("golden", help="the governance golden suite of recall")
    golden.add_argument("--embedder", dest="embedder_name", default="hashing")
    golden.add_argument("--json", action="store_true", help="print JSON, not markdown")
    golden.set_defaults(func=_golden)
    locomo = suites.add_parser("locomo", help="LoCoMo evidence retrieval against baselines")
    locomo.add_argument(
        "--data",
        default=os.environ.get("ENGRAM_LOCOMO", _DEFAULT_DATA),
        help="a LoCoMo-format JSON file (the dev split or the full locomo10.json)",
    )
    locomo.add_argument("--embedder", dest="embedder_name", default="local")
    locomo.add_argument("--out", default="eval-results", help="output folder")
    locomo.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    locomo.set_defaults(func=_locomo)

"""``python -m engram.eval.golden [--embedder hashing|local] [--json]``: run and report."""

from __future__ import annotations

import argparse
import json

from engram.eval.golden import run_golden


def main(argv: list[str] | None = None) -> int:
    """Run the golden suite; exit status 1 when any case fails an expectation."""
    parser = argparse.ArgumentParser(prog="python -m engram.eval.golden", description=__doc__)
    parser.add_argument("--embedder", default="hashing", help="hashing (default) or local")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args(argv)
    report = run_golden(args.embedder)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.markdown())
    return 0 if report.passed == len(report.cases) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""``python -m engram.surfaces.rest serve|keys ...``: the REST commands on their own
(the same as ``engram serve`` and ``engram keys`` where the main command line
registers ``engram.surfaces.rest.cli.add_command``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from engram.surfaces.rest.cli import add_command


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command; the exit status."""
    parser = argparse.ArgumentParser(prog="engram", description="The Engram REST API.")
    add_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())

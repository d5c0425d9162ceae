"""The ``engram`` command line: a thin surface that parses, calls the SDK, maps errors.

    engram [--db URL] [--embedder NAME] [--working URL] COMMAND ...

Commands come from the modules in ``engram.cli.registry`` (``engram --help`` lists
them; docs/cli.md describes each). A command returns its exit status; an Engram
error becomes the exit code of its row in ``engram.surfaces.errors.TABLE``, with
``engram: <problem>: <message>`` on stderr, so scripts can tell a missing memory
(5) from a refused argument (2) or an unreachable server (9). The other codes:

    0    done
    1    the command ran and answered no: a broken audit chain, a failing
         golden suite, an erasure that was not confirmed
    2    bad input, nothing was done: a usage error (argparse) or an argument
         the SDK refused (InvalidArgument, IncompleteIdentity)
    70   an internal error (a bug): the traceback is printed
    130  interrupted (Ctrl-C)
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence

from engram.cli.registry import build_parser
from engram.errors import EngramError
from engram.surfaces.errors import outcome_for

__all__ = ["EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_NO", "EXIT_OK", "EXIT_USAGE", "main"]

EXIT_OK = 0
EXIT_NO = 1
EXIT_USAGE = 2  # argparse's own status for a usage error
EXIT_INTERNAL = 70  # EX_SOFTWARE of sysexits.h
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default: ``sys.argv[1:]``); returns the exit status.

    A usage error exits 2 from argparse itself (``SystemExit``), as does ``--help``
    with 0."""
    args = build_parser().parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except EngramError as exc:
        print(f"engram: {outcome_for(exc).problem}: {exc}", file=sys.stderr)
        return outcome_for(exc).exit_code
    except KeyboardInterrupt:
        print("engram: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: say so, with the traceback
        traceback.print_exc()
        print(f"engram: internal error ({type(exc).__name__}); please report it", file=sys.stderr)
        return EXIT_INTERNAL

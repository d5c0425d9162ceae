"""``python -m engram.cli`` runs the CLI (as ``python -m engram`` does)."""

import sys

from engram.cli import main

sys.exit(main())

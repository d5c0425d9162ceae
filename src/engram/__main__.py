"""``python -m engram`` runs the CLI."""

import sys

from engram.cli import main

sys.exit(main())

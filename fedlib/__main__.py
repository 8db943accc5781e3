"""``python -m fedlib`` is the command line (see :mod:`fedlib.commands.cli`)."""

import sys

from fedlib.commands.cli import main

sys.exit(main())

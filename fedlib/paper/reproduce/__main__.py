"""``python -m fedlib.paper.reproduce``: the runner's command line (:mod:`.command_line`)."""

import sys

from fedlib.paper.reproduce.command_line import main

if __name__ == "__main__":
    sys.exit(main())

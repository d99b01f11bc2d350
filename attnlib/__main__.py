"""`python -m attnlib`: the command line lives in `attnlib.lab.cli` (its names stay importable from here)."""

import sys

from attnlib.lab.cli import *  # noqa: F403 -- moved (issue 32): the old names until the shims go
from attnlib.lab.cli import main

if __name__ == "__main__":
    sys.exit(main())

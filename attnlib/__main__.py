"""`python -m attnlib`: the command line lives in `attnlib.lab.cli`."""

import sys

from attnlib.lab.cli import main

if __name__ == "__main__":
    sys.exit(main())

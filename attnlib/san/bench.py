"""Moved to `attnlib.lab.kernels` (issue 32); the command line is `python -m attnlib san-bench`. Until the shims
go, this name is that same module (so that a test's monkeypatch reaches the code that runs)."""

import sys

if __name__ == "__main__":  # python -m attnlib.san.bench ARGS: python -m attnlib san-bench ARGS
    from attnlib.lab.cli import main

    sys.exit(main(["san-bench", *sys.argv[1:]]))
else:
    from attnlib.lab import kernels

    sys.modules[__name__] = kernels

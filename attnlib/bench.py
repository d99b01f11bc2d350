"""Moved (issue 32): the model benchmark to `attnlib.lab.bench`, the matmul peak to `attnlib.lab.kernels`, the
timer and peak memory to `attnlib.lab.measure`, the machine facts to `attnlib.lab.machine`; the command line is
`python -m attnlib bench`. Kept for its callers while the package is restructured: a `Shim` over those modules
(a test's monkeypatch of a name here patches every home that holds it)."""

import sys

if __name__ == "__main__":  # python -m attnlib.bench ARGS: python -m attnlib bench ARGS
    from attnlib.lab.cli import main

    sys.exit(main(["bench", *sys.argv[1:]]))
else:
    from attnlib.results.shim import Shim

    homes = ("attnlib.lab.bench", "attnlib.lab.kernels", "attnlib.lab.measure", "attnlib.lab.machine")
    sys.modules[__name__] = Shim(__name__, __doc__, __file__, homes)

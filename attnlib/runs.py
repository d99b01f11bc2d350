"""Runs on disk, read and written: moved to attnlib.results.load / attnlib.results.config (reading a run) and attnlib.lab.run (train-or-resume).

Kept for its callers while the package is restructured (issue 32): a `Shim` over the module(s) the code moved to.
"""

import sys

from attnlib.results.shim import Shim

sys.modules[__name__] = Shim(__name__, __doc__, __file__, ("attnlib.results.load", "attnlib.results.config", "attnlib.lab.run"))

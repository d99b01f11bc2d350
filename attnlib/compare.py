"""Welch, Holm, the paired test: moved to attnlib.analysis.stats.

Kept for its callers while the package is restructured (issue 32): a `Shim` over the module(s) the code moved to.
"""

import sys

from attnlib.results.shim import Shim

sys.modules[__name__] = Shim(__name__, __doc__, __file__, ("attnlib.analysis.stats",))

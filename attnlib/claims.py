"""The claims ledger: moved to attnlib.analysis.claims (the ledger), attnlib.analysis.rules (the rules) and attnlib.lab.plan (LONG_PLAN, seeds_asked).

Kept for its callers while the package is restructured (issue 32): a `Shim` over the module(s) the code moved to.
"""

import sys

from attnlib.results.shim import Shim

sys.modules[__name__] = Shim(__name__, __doc__, __file__, ("attnlib.analysis.claims", "attnlib.analysis.rules", "attnlib.lab.plan"))

"""Re-export shim (issue 32): the book's figures moved to ``book/_lib/attnbook/viz`` (``attnbook.viz``). For this
session ``attnlib.viz`` is that very module; new code imports ``attnbook.viz``. Removed with the other shims."""

import sys

from attnbook import viz

sys.modules[__name__] = viz

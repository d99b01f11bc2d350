"""Re-export shim (issue 32): what only the book uses moved beside the chapters, to ``book/_lib/attnbook/``,
imported as ``attnbook``. For this session ``attnlib.book`` and ``attnlib.book.<module>`` are the very
module objects of ``attnbook`` (a monkeypatch through either name reaches both); new code imports
``attnbook``. Removed with the other shims."""

import sys

import attnbook
from attnbook import benchmarks, display, params, phrases, runs, sphinx, tables

for _module in (benchmarks, display, params, phrases, runs, sphinx, tables):
    sys.modules[f"{__name__}.{_module.__name__.rpartition('.')[2]}"] = _module
sys.modules[__name__] = attnbook

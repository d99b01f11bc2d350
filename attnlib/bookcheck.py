"""Re-export shim (issue 32): the real-browser check of the built book moved out of the package, to
``tools/bookcheck.py`` (``make check-book`` runs ``python tools/bookcheck.py``). For this session
``attnlib.bookcheck`` is that very module, loaded from the checkout. Removed with the other shims."""

import importlib.util
import sys
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "tools" / "bookcheck.py"
_SPEC = importlib.util.spec_from_file_location("bookcheck", _PATH)
_MODULE = sys.modules.get("bookcheck") or importlib.util.module_from_spec(_SPEC)
if "bookcheck" not in sys.modules:
    sys.modules["bookcheck"] = _MODULE
    _SPEC.loader.exec_module(_MODULE)
sys.modules[__name__] = _MODULE

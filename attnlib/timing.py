"""Moved to `attnlib.lab.timing` (issue 32). Until the shims go, this name is that same module (so that a
test's monkeypatch reaches the code that runs)."""

import sys

from attnlib.lab import timing as _moved

if __name__ == "__main__":  # python -m attnlib.timing
    import runpy

    runpy.run_module("attnlib.lab.timing", run_name="__main__")
else:
    sys.modules[__name__] = _moved

"""Old import paths kept while the package is restructured (issue 32): a module that moved leaves a `Shim`.

``attnlib/runs.py`` ends with ``sys.modules[__name__] = Shim(__name__, __doc__, __file__, ("attnlib.results.load",
"attnlib.lab.run"))``: ``from attnlib.runs import load_run`` finds the name in the first of its new homes that
defines it. Setting a name on the shim (``monkeypatch.setattr(runs, "git_state", ...)`` in a test) sets it in
every home that holds it, so the moved code sees the patch as it did before the move. The homes are imported
on first use, so importing a shim costs nothing and pulls in no ring its callers did not ask for."""

from __future__ import annotations

import importlib
import types


class Shim(types.ModuleType):
    """A module whose names are those of `sources` (module names, first match wins)."""

    def __init__(self, name: str, doc: str | None, file: str, sources: tuple[str, ...]):
        super().__init__(name, doc)
        object.__setattr__(self, "__file__", file)
        object.__setattr__(self, "_saved", {})
        object.__setattr__(self, "_sources", (sources,) if isinstance(sources, str) else tuple(sources))

    def _homes(self) -> list[types.ModuleType]:
        return [importlib.import_module(s) for s in object.__getattribute__(self, "_sources")]

    def __getattr__(self, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        for home in self._homes():
            if attr in vars(home):
                return vars(home)[attr]
        raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")

    def __setattr__(self, attr: str, value) -> None:
        homes = [home for home in self._homes() if attr in vars(home)]
        saved = object.__getattribute__(self, "_saved")
        for home in homes:
            saved.setdefault(attr, []).append((home, vars(home)[attr]))
            setattr(home, attr, value)
        if not homes:
            object.__setattr__(self, attr, value)

    def __delattr__(self, attr: str) -> None:
        """Undo (what pytest's monkeypatch does for a name it did not find in the shim's own __dict__): each
        home gets back the value it held before the first setattr."""
        saved = object.__getattribute__(self, "_saved")
        if attr in saved:
            for home, value in reversed(saved.pop(attr)):
                setattr(home, attr, value)
        elif attr in vars(self):
            object.__delattr__(self, attr)
        # else: already restored (a name patched twice is undone twice)

    def __dir__(self) -> list[str]:
        return sorted({n for home in self._homes() for n in vars(home) if not n.startswith("__")})

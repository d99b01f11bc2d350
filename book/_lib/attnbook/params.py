"""The parameters of a chapter: their checks (``check_params``, the one place bad values are caught, each
refused in one line naming the parameter and its allowed values), their defaults (data and results
folders), and the refusal of a papermill parameter the chapter does not have.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from attnlib.checks import MAX_SEED, is_synthetic, resolve_device
from attnlib.env import DATA_ENV, RESULTS_ENV, TRAIN_MISSING_ENV
from attnlib.errors import ConfigError

HEADS = (9, 16)
#: The default of a chapter's ``long_preset``: the registry's preset of 60-epoch runs, which log the per-layer
#: attention measures every epoch (the claims ledger's evidence). A chapter shows runs of ``preset`` and, where
#: it says so, of ``long_preset``; never of a preset that no parameter names.
LONG_PRESET = "long"


class ParameterError(ConfigError):
    """A bad chapter parameter. In a notebook it prints as one line, without a traceback. ``message``
    replaces the usual "NAME: got VALUE; allowed: ALLOWED"."""

    def __init__(self, parameter: str, value, allowed, message: str | None = None):
        super().__init__(parameter, value, allowed)
        if message is not None:
            self.args = (message,)

    def _render_traceback_(self) -> list[str]:  # IPython hook: the lines shown instead of a traceback
        return [f"ParameterError: {self}"]


def repo_root() -> Path:
    """The repository root: the nearest folder above the working directory holding ``_config.yml`` and
    ``book/``; else the checkout this package lies in (``book/_lib/attnbook/``); else the working directory."""
    for folder in (Path.cwd(), *Path.cwd().parents):
        if (folder / "_config.yml").is_file() and (folder / "book").is_dir():
            return folder
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "_config.yml").is_file():
        return checkout
    return Path.cwd()


def default_data() -> str | None:
    """The CIFAR-10 folder of a chapter that passes no ``data``: the library's one default, ``$ATTNLIB_DATA``
    (``attnlib.data.load_cifar10`` reads the same variable), resolved; None where it is not set. Reading
    saved runs needs no folder (a fingerprint records "cifar10" for any copy); training without one stops
    with the library's message naming ``$ATTNLIB_DATA``."""
    folder = os.environ.get(DATA_ENV)
    return str(Path(folder).expanduser().resolve()) if folder else None


def default_results_dir() -> Path:
    """``$ATTNLIB_RESULTS`` if set, else ``results/`` at the repository root."""
    return Path(os.environ.get(RESULTS_ENV) or repo_root() / "results")


def _env_flag(name: str) -> bool | None:
    value = os.environ.get(name)
    if value is None or value == "":
        return None
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise ParameterError(name, value, "0 or 1")


@dataclass(frozen=True)
class Params:
    """The validated, resolved parameters of a chapter (``None`` where the chapter has no such parameter).

    ``data`` is what ``run_or_load`` gets: ``None`` for the preset's own data (synthetic at ``smoke``),
    ``"synthetic[:N:M]"`` or an absolute folder. ``device`` is resolved ("auto" -> cuda or cpu).
    ``long_preset``: the preset of the longer runs a chapter shows beside those of ``preset`` (the ledger's
    evidence, the measures per epoch); equal to ``preset``, the chapter shows no other runs.
    """

    heads: int | None
    preset: str | None
    data: str | None
    device: str | None
    seed: int | None
    train_missing: bool
    results_dir: Path
    long_preset: str = LONG_PRESET

    def run_kwargs(self) -> dict:
        """Keyword arguments for the lab's ``run_or_load`` (besides the experiment; ``runs.train_missing``). A
        chapter that may train replaces a saved result of another configuration (``replace=True``): it shows
        the preset's current protocol, so a result trained before the preset changed is retrained."""
        return dict(
            preset=self.preset,
            data=self.data,
            results_dir=self.results_dir,
            device=self.device,
            seed=self.seed or 0,
            train_missing=self.train_missing,
            replace=True,
        )


_UNSET = object()


def _presets() -> tuple[str, ...]:
    from attnlib.experiments import PRESETS

    return tuple(PRESETS)


def _preset_has_own_data(preset: str) -> bool:
    """True when every protocol of the preset names its own dataset (``smoke``: synthetic images)."""
    from attnlib.experiments import PRESET_TABLE

    return all(p.data is not None for p in PRESET_TABLE[preset].values())


def _check_device(device) -> str:
    if not isinstance(device, str):
        raise ParameterError("device", device, "auto, cpu, cuda, cuda:N")
    try:
        return str(resolve_device(device))
    except ConfigError as err:
        raise ParameterError(err.parameter, err.value, err.allowed) from None


def _check_data(data, preset, train_missing: bool) -> str | None:
    allowed = "None (the preset's data), 'synthetic', 'synthetic:N_TRAIN:N_TEST' or a CIFAR-10 folder"
    if data is None:
        if preset is not None and _preset_has_own_data(preset):
            return None
        folder = default_data()
        if folder is not None and train_missing and not Path(folder).is_dir():
            raise ParameterError(
                "data", None, f"{allowed} (the default {folder} does not exist: set {DATA_ENV} or pass data)"
            )
        return folder
    if not isinstance(data, str):
        raise ParameterError("data", data, allowed)
    from attnlib.data import check_data  # the one check of a data spec (sizes, folder, CIFAR-10 layout)

    try:
        return check_data(data)
    except ConfigError:  # said in the chapter's words: one line, why in brackets
        if is_synthetic(data):
            reason = ""
        elif not Path(data).expanduser().is_dir():
            reason = " (no such folder)"
        else:  # /etc: refused here, not by a traceback later
            reason = " (no CIFAR-10 there: no pickles, no train/ and test/)"
        raise ParameterError("data", data, allowed + reason) from None


def check_params(
    *,
    heads=_UNSET,
    preset=_UNSET,
    data=_UNSET,
    device=_UNSET,
    seed=_UNSET,
    train_missing=None,
    results_dir=None,
    counts: dict | None = None,
    long_preset=LONG_PRESET,
) -> Params:
    """Validate a chapter's parameters and resolve defaults; raise ``ParameterError`` (shown as one line)
    on the first bad value, naming the parameter and its allowed values.

    ``data=None`` -> the preset's own data (``smoke``) or ``default_data()`` ($ATTNLIB_DATA, else None);
    ``results_dir=None`` -> ``default_results_dir()``; ``train_missing=None`` -> ``$ATTNLIB_TRAIN_MISSING``
    if set (the book build sets 0), else True. ``counts``: other parameters that must be integers >= 1, by name. ``long_preset``:
    the preset of the longer runs the chapter shows (``LONG_PRESET`` unless the chapter has the parameter).
    """
    check_no_unknown_parameters()
    for name, value in (counts or {}).items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ParameterError(name, value, "an integer >= 1")
    if heads is not _UNSET and not (_is_int(heads) and heads in HEADS):  # 16.0 is not an integer
        raise ParameterError("heads", heads, ", ".join(map(str, HEADS)))
    if preset is not _UNSET and preset not in _presets():
        raise ParameterError("preset", preset, ", ".join(_presets()))
    if long_preset not in _presets():
        raise ParameterError("long_preset", long_preset, ", ".join(_presets()))
    if seed is not _UNSET and (
        isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED
    ):
        raise ParameterError("seed", seed, f"an integer in [0, {MAX_SEED}]")
    if train_missing is not None and not isinstance(train_missing, bool):
        raise ParameterError("train_missing", train_missing, "None (automatic), True, False")
    if train_missing is None:
        env = _env_flag(TRAIN_MISSING_ENV)
        train_missing = True if env is None else env
    if results_dir is not None and (
        not isinstance(results_dir, (str, os.PathLike))
        or not str(results_dir).strip()
        or Path(results_dir).expanduser().is_file()
    ):  # a file, or "" (the current folder): refused here, not by a traceback later
        raise ParameterError("results_dir", results_dir, "None (results/ at the repository root) or a folder")
    if device is not _UNSET:
        device = _check_device(device)
    if data is not _UNSET:
        data = _check_data(data, None if preset is _UNSET else preset, train_missing)
    results_dir = Path(results_dir).expanduser() if results_dir is not None else default_results_dir()

    def value(v):
        return None if v is _UNSET else v

    return Params(
        heads=value(heads),
        preset=value(preset),
        data=value(data),
        device=value(device),
        seed=value(seed),
        train_missing=train_missing,
        results_dir=results_dir.resolve(),
        long_preset=long_preset,
    )


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# papermill's comment at the top of the cell it injects after the ``parameters`` cell
INJECTED_HEADER = "# Parameters"


def assigned_names(source: str) -> list[str]:
    """The names a cell assigns at its top level (``x = 1``, ``x: int = 1``), in order."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id not in names]
    return names


def unknown_parameters(history: list[str]) -> tuple[list[str], list[str]]:
    """``(unknown, declared)`` from the sources of the cells run so far (IPython's ``In``): the names
    that papermill injected (the newest cell starting with INJECTED_HEADER) but that the chapter's
    ``parameters`` cell (the cell run just before it) does not assign, and the names that cell assigns."""
    for i in range(len(history) - 1, 0, -1):
        if history[i].lstrip().startswith(INJECTED_HEADER):
            declared = assigned_names(history[i - 1])
            return [n for n in assigned_names(history[i]) if n not in declared], declared
    return [], []


def check_no_unknown_parameters() -> None:
    """Under papermill, refuse a parameter that the chapter does not have (papermill itself only warns
    "Passed unknown parameter" and runs on), with one line listing the chapter's parameters. Outside a
    kernel, or in a kernel that papermill did not parameterise, it checks nothing."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    history = getattr(shell, "user_ns", {}).get("In") if shell is not None else None
    if not isinstance(history, list):
        return
    unknown, declared = unknown_parameters(history)
    if unknown:
        value = shell.user_ns.get(unknown[0])
        raise ParameterError(
            unknown[0],
            value,
            ", ".join(declared),
            f"{unknown[0]}: not a parameter of this chapter (got {value!r}); its parameters are "
            f"{', '.join(declared) or 'none'}",
        )

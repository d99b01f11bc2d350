"""Small helpers for the book's chapters: parameter checks, paths, glue, and the published numbers.

The chapters (``book/*.py``, jupytext percent format) stay thin: a ``parameters`` cell, then
``params = check_params(...)`` (the one place bad values are caught), then calls into attnlib.

Rule for training inside a chapter (parameter ``train_missing``):
    ``None`` (the default) means "train what results/ lacks" -- *except* during the book build, where
    this module, loaded by Sphinx as an extension (``_config.yml: sphinx.extra_extensions``), sets the
    environment variable ``ATTNLIB_TRAIN_MISSING=0`` for every kernel the build starts, so the build
    only reads saved results and shows missing ones as "not yet trained". ``True`` / ``False`` force
    either behaviour (``papermill ... -p train_missing False``). The environment variable can be set by
    hand too (``ATTNLIB_TRAIN_MISSING=1 jupyter-book build book`` trains during the build).

Published and [Re] figures live in ``REFERENCES`` as data, each with its source, and ``NOT_FOUND``
lists what the research notes could not recover, so the book can say so plainly.
"""

from __future__ import annotations

import functools
import math
import os
from dataclasses import dataclass
from pathlib import Path

from attnlib.checks import is_synthetic, synthetic_sizes
from attnlib.env import DATA_ENV, RESULTS_ENV, TRAIN_MISSING_ENV
from attnlib.errors import ConfigError

HEADS = (9, 16)
MISSING = "not yet trained"
#: How tables name a saved result that is not used: damaged files, or another configuration's result.
NOT_USED = {"damaged": "damaged (not used)", "stale": "other configuration (not used)"}


# ----------------------------------------------------------------------------- errors and paths
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
    ``book/``; else the folder above the installed ``attnlib`` package; else the working directory."""
    for folder in (Path.cwd(), *Path.cwd().parents):
        if (folder / "_config.yml").is_file() and (folder / "book").is_dir():
            return folder
    package_parent = Path(__file__).resolve().parent.parent
    if (package_parent / "_config.yml").is_file():
        return package_parent
    return Path.cwd()


def default_data() -> str:
    """``$ATTNLIB_DATA`` if set, else the shared CIFAR-10 copy ``../shared/data/cifar10`` beside the repo."""
    return os.environ.get(DATA_ENV) or str((repo_root().parent / "shared" / "data" / "cifar10").resolve())


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


# ----------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class Params:
    """The validated, resolved parameters of a chapter (``None`` where the chapter has no such parameter).

    ``data`` is what ``run_or_load`` gets: ``None`` for the preset's own data (synthetic at ``smoke``),
    ``"synthetic[:N:M]"`` or an absolute folder. ``device`` is resolved ("auto" -> cuda or cpu).
    """

    heads: int | None
    preset: str | None
    data: str | None
    device: str | None
    seed: int | None
    train_missing: bool
    results_dir: Path

    def run_kwargs(self) -> dict:
        """Keyword arguments for ``attnlib.results.run_or_load`` (besides the experiment). A chapter that
        may train replaces a saved result of another configuration (``replace=True``): it shows the
        preset's current protocol, so a result trained before the preset changed is retrained."""
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
    from attnlib.train import resolve_device

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
        if train_missing and not Path(folder).is_dir():
            raise ParameterError(
                "data", None, f"{allowed} (the default {folder} does not exist: set {DATA_ENV} or pass data)"
            )
        return folder
    if not isinstance(data, str):
        raise ParameterError("data", data, allowed)
    if is_synthetic(data):
        try:
            synthetic_sizes(data)
        except ConfigError:
            raise ParameterError("data", data, allowed) from None
        return data
    if not Path(data).expanduser().is_dir():
        raise ParameterError("data", data, allowed + " (no such folder)")
    return str(Path(data).expanduser().resolve())


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
) -> Params:
    """Validate a chapter's parameters and resolve defaults; raise ``ParameterError`` (shown as one line)
    on the first bad value, naming the parameter and its allowed values.

    ``data=None`` -> the preset's own data (``smoke``) or ``default_data()``; ``results_dir=None`` ->
    ``default_results_dir()``; ``train_missing=None`` -> ``$ATTNLIB_TRAIN_MISSING`` if set (the book build
    sets 0), else True. ``counts``: other parameters that must be integers >= 1, by name.
    """
    check_no_unknown_parameters()
    for name, value in (counts or {}).items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ParameterError(name, value, "an integer >= 1")
    if heads is not _UNSET and not (_is_int(heads) and heads in HEADS):  # 16.0 is not an integer
        raise ParameterError("heads", heads, ", ".join(map(str, HEADS)))
    if preset is not _UNSET and preset not in _presets():
        raise ParameterError("preset", preset, ", ".join(_presets()))
    if seed is not _UNSET and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise ParameterError("seed", seed, "an integer >= 0")
    if train_missing is not None and not isinstance(train_missing, bool):
        raise ParameterError("train_missing", train_missing, "None (automatic), True, False")
    if train_missing is None:
        env = _env_flag(TRAIN_MISSING_ENV)
        train_missing = True if env is None else env
    if results_dir is not None and not isinstance(results_dir, (str, os.PathLike)):
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


# ----------------------------------------------------------------------------- results
class Runs(dict):
    """``{experiment: RunResult or None}`` (what ``load_all`` returns), plus ``status``:
    ``{experiment: (status, detail)}`` with status "complete", "missing", "damaged" or "stale" (a saved
    result of another configuration), as ``attnlib.results.collect`` reports them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.status: dict[str, tuple[str, str]] = {}


_LAST_STATUS: dict[tuple[str, str | None], tuple[str, str]] = {}  # (experiment, preset) -> status of load


def load_status(experiment: str, params: Params):
    """``(RunResult or None, status, detail)``: ``run_or_load`` with the chapter's parameters; None with
    status "missing", "damaged" or "stale" when there is no usable result and training is not allowed
    (the book build). Trains (or retrains a damaged or stale result) when ``params.train_missing``."""
    from attnlib.results import MissingResult, run_or_load

    try:
        run, status, detail = run_or_load(experiment, **params.run_kwargs()), "complete", ""
    except MissingResult as err:
        run, status, detail = None, err.status, err.detail
    _LAST_STATUS[(experiment, params.preset)] = (status, detail)
    return run, status, detail


def load(experiment: str, params: Params):
    """The ``RunResult`` of ``load_status``, or None (missing, damaged or stale, and not trained)."""
    return load_status(experiment, params)[0]


def seed_accuracies(experiment: str, params: Params, seeds=range(10)) -> list[float]:
    """Test accuracies of every saved run of ``experiment`` at ``params.preset`` among ``seeds`` whose result
    is complete for the current configuration (``attnlib.results.seed_accuracies``; never trains): what the
    run-to-run spread is computed from."""
    from attnlib.results import seed_accuracies as saved

    found, _ = saved(params.results_dir, params.preset, experiment, data=params.data)
    return [acc for seed, acc in found.items() if seed in seeds]


#: How the book words a verdict of ``attnlib.compare.Welch`` for an HA variant against its model.
VERDICT_SHORT = {  # for tables; VERDICTS says why
    "higher": "HA ahead",
    "lower": "HA behind",
    "inconclusive": "inconclusive",
    "no interval": "no interval",
}
VERDICTS = {
    "higher": "HA ahead (the 95% interval excludes 0)",
    "lower": "HA behind (the 95% interval excludes 0)",
    "inconclusive": "inconclusive (the 95% interval holds 0)",
    "no interval": "no interval (fewer than 2 seeds on a side)",
}


def welch_phrase(w) -> str:
    """ "95% Welch interval −2.3 to +5.1 points, ν = 1.1, p = 0.14: inconclusive, as the interval holds 0"
    for a ``compare.Welch`` of an HA variant against its model, or why there is no interval."""
    if w.interval is None:
        return "no interval: fewer than 2 seeds on a side"
    low, high = w.interval
    verdict = VERDICTS[w.verdict].split(" (")[0]
    why = "holds 0" if w.verdict == "inconclusive" else "excludes 0"
    return (
        f"95% Welch interval {low:+.1f} to {high:+.1f} points, ν = {w.df:.1f}, p = {w.p:.2f}: "
        f"{verdict}, as the interval {why}"
    )


def compare_phrase(base: str, variant: str, runs: dict, params: Params) -> str:
    """A sentence fragment comparing ``variant`` with ``base`` from saved results: the difference of their
    mean test accuracies over every saved seed, its Welch interval and verdict (``attnlib.compare``), and
    the parameter ratio."""
    from attnlib import compare

    a, b = runs.get(base), runs.get(variant)
    if a is None or b is None:
        return MISSING
    size = b.metrics["params"] / a.metrics["params"]
    acc_a = seed_accuracies(base, params) or [a.test_accuracy]
    acc_b = seed_accuracies(variant, params) or [b.test_accuracy]
    w = compare.welch(acc_a, acc_b)
    rounded = round(w.points, 1)
    where = (
        "level with" if rounded == 0 else f"{abs(rounded):.1f} points {'above' if rounded > 0 else 'below'}"
    )
    return (
        f"{where} its model on average over {len(acc_b)} and {len(acc_a)} seeds, with {size:.0%} of its "
        f"parameters{_time_phrase(variant, params)} ({welch_phrase(w)})"
    )


def _time_phrase(variant: str, params: Params) -> str:
    """ " and 0.92× its inference time" from the timing file (``python -m attnlib time``), or ""."""
    from attnlib.results import timing_columns
    from attnlib.timing import load

    row = timing_columns(params.results_dir, params.preset, [variant]).iloc[0]
    if is_missing(row["time_ratio"]):
        return ""
    shared = (load(params.results_dir, params.preset) or {}).get("load", {}).get("shared")
    where = ", timed on shared cores" if shared else ""
    return f" and {row['time_ratio']:.2f}× its inference time{where}"


def ha_effects(bases, params: Params, seeds=range(10)):
    """One row per model of ``bases``: the seeds saved of the model and of its HA variant, their test
    accuracy (mean ± sd), HA − model in points with its 95% Welch interval, degrees of freedom ν and p, the
    verdict of ``attnlib.compare`` ("inconclusive" whenever the interval holds 0), the seeds per side the
    project's standard asks for, and the [Re] run-log difference where known (never trains)."""
    import pandas as pd

    from attnlib import compare

    rows = []
    for base in bases:
        acc_a, acc_b = seed_accuracies(base, params, seeds), seed_accuracies(base + "_ha", params, seeds)
        re_gain = (
            reference_value(base + "_ha", RE, "test_accuracy") - reference_value(base, RE, "test_accuracy")
        ) * 100
        row = {
            "model": title(base),
            "seeds (model / HA)": f"{len(acc_a)} / {len(acc_b)}",
            "model acc.": compare.mean_sd(acc_a) if acc_a else fmt(None),
            "HA acc.": compare.mean_sd(acc_b) if acc_b else fmt(None),
        }
        w = compare.welch(acc_a, acc_b) if acc_a and acc_b else None
        if w is None:
            row.update({"HA − model [95% CI]": "—", "ν": "—", "p": "—", "verdict": MISSING})
            row["seeds asked"] = f"{compare.MIN_SEEDS} per side"
        else:
            ci = w.interval
            interval = "" if ci is None else f" [{ci[0]:+.1f}, {ci[1]:+.1f}]"
            row.update(
                {
                    "HA − model [95% CI]": f"{w.points:+.1f}{interval}",
                    "ν": "—" if w.df is None else f"{w.df:.1f}",
                    "p": "—" if w.p is None else f"{w.p:.2f}",
                    "verdict": VERDICT_SHORT[w.verdict],
                    "seeds asked": "met" if w.seeds_wanted == 0 else f"{w.seeds_wanted} per side",
                }
            )
        row["[Re] log"] = "—" if math.isnan(re_gain) else f"{re_gain:+.1f}"
        if w is None or math.isnan(re_gain):
            row["same sign as [Re]"] = "—"
        else:
            row["same sign as [Re]"] = "yes" if (w.points > 0) == (re_gain > 0) else "no"
        rows.append(row)
    return pd.DataFrame(rows)


def ha_pairs(frame):
    """One row per model whose HA variant is in ``frame`` (rows of ``results_frame``) with both saved:
    ``experiment`` (the model), ``model`` (its title), ``gain`` (HA − model, accuracy points) and ``size``
    (HA parameters / model parameters), at the seed of the frame."""
    import pandas as pd

    from attnlib.experiments import get

    done = frame[frame["status"] == "complete"].set_index("experiment")
    rows = []
    for name in done.index:
        base = get(name).baseline
        if base is not None and base in done.index:
            rows.append(
                {
                    "experiment": base,
                    "model": title(base),
                    "gain": (done.loc[name, "accuracy"] - done.loc[base, "accuracy"]) * 100,
                    "size": done.loc[name, "params"] / done.loc[base, "params"],
                }
            )
    return pd.DataFrame(rows, columns=["experiment", "model", "gain", "size"])


def ha_sentence(pairs) -> str:
    """What ``ha_pairs`` says in one sentence: the share of parameters HA keeps and how many pairs it ends
    above or below (one seed each; chapter 4 weighs the differences against the spread over seeds)."""
    if pairs.empty:
        return f"No model is saved together with its HA variant yet ({MISSING})."
    above, below = int((pairs["gain"].round(1) > 0).sum()), int((pairs["gain"].round(1) < 0).sum())
    level = len(pairs) - above - below
    low, high = f"{pairs['size'].min():.0%}", f"{pairs['size'].max():.0%}"
    size = low if low == high else f"{low}–{high}"
    if len(pairs) == 1:  # one pair saved: its difference, not a count
        gain = pairs["gain"].iloc[0]
        where = (
            "level with"
            if round(gain, 1) == 0
            else f"{abs(gain):.1f} points {'above' if gain > 0 else 'below'}"
        )
        return (
            f"HA keeps {size} of its model's parameters; in the one pair saved ({pairs['model'].iloc[0]}) "
            f"its seed-0 run ends {where} its model."
        )
    text = (
        f"HA keeps {size} of its model's parameters; in the seed-0 runs it ends above its model in {above} of "
        f"the {len(pairs)} pairs and below in {below}"
    )
    if level:
        text += f", level in {level}"
    return text + f" (from {pairs['gain'].min():+.1f} to {pairs['gain'].max():+.1f} points)."


def verdict_summary(effects) -> str:
    """One sentence per verdict of an ``ha_effects`` table: which models it applies to."""
    groups = {}
    for model, verdict in zip(effects["model"], effects["verdict"], strict=True):
        groups.setdefault(verdict, []).append(model)
    return " ".join(
        f"{verdict[0].upper()}{verdict[1:]}: {'; '.join(models)}." for verdict, models in groups.items()
    )


def below_target(frame, preset: str) -> list[tuple[str, float]]:
    """(experiment, accuracy) of every saved attention model under the budget target (empty off budget)."""
    from attnlib import experiments

    if preset != "budget" or "accuracy" not in frame:
        return []
    attention = frame["experiment"].map(lambda n: experiments.get(n).family != "resnet")
    done = frame[(frame["status"] == "complete") & attention]
    low = done[done["accuracy"] < experiments.BUDGET_TARGET]
    return list(zip(low["experiment"], low["accuracy"], strict=True))


def note_below_target(frame, preset: str) -> None:
    """At the budget preset, a warning naming every saved attention model below its accuracy target."""
    from attnlib import experiments

    low = below_target(frame, preset)
    if low:
        names = "; ".join(f"{title(n)} {a:.1%}" for n, a in low)
        note(
            f"Below the budget preset's target of {experiments.BUDGET_TARGET:.0%} test accuracy: {names}. "
            "Their protocol is still being tuned (appendix A gives its history); read their rows as "
            "measured, not as what the preset is meant to deliver.",
            "warning",
        )


def learned_protocol_phrase(frame, preset: str) -> str:
    """How many epochs the learned-2D protocols need against the other paper models at ``preset`` and
    whether their saved runs reach the budget target, as one clause for chapter 2."""
    from attnlib import experiments

    def train(name):
        return experiments.preset_for(name, preset).train

    def learned(name):
        return experiments.get(name).protocol in ("learned", "learned_content")

    base, pos, content = train("quadratic_iso_9h"), train("learned_9h"), train("learned_content_9h")
    if pos.epochs == base.epochs == content.epochs:
        phrase = "train as long as the other models at this preset"
    else:
        phrase = (
            f"needed {pos.epochs} epochs instead of {base.epochs} without content, and with content "
            f"{content.epochs} epochs at lr {content.lr:g}"
            + (f" with the gradient norm clipped to {content.grad_clip:g}" if content.grad_clip else "")
        )
    if preset != "budget":
        return phrase
    family = frame["experiment"].map(learned)
    saved = frame[family & (frame["status"] == "complete")]
    low = [title(n) for n, _ in below_target(frame, preset) if learned(n)]
    target = f"{experiments.BUDGET_TARGET:.0%}"
    if low:
        verb = "is" if len(low) == 1 else "are"
        return f"{phrase}; {', '.join(low)} {verb} still below {target} at this budget"
    if len(saved) < int(family.sum()):
        return f"{phrase}; every saved one passes {target}, not all are saved yet"
    return f"{phrase} to pass {target}"


def rank_counts(runs: dict, source: str | None = None) -> tuple[int, int]:
    """(same, total): of the pairs of models saved in ``runs`` that ``source`` (default [Re]) also reports,
    how many our accuracies order the same way."""
    same, total, _ = _orders(runs, source or RE)[2]
    return same, total


def flat_models(runs: dict) -> list[str]:
    """Titles of the runs whose token attention stayed near-uniform (below ``NEAR_UNIFORM`` × uniform) in
    every layer (runs without token attention maps are left out)."""
    found = []
    for name, run in runs.items():
        peaks = attention_peaks(run)
        if peaks is not None and peaks.max() < NEAR_UNIFORM:
            found.append(title(name))
    return found


def _orders(runs: dict, source: str):
    from attnlib import compare

    ours = {n: r.test_accuracy for n, r in runs.items() if r is not None}
    theirs = {n: reference_value(n, source, "test_accuracy") for n in ours}
    theirs = {n: v for n, v in theirs.items() if not math.isnan(v)}
    return ours, theirs, compare.concordance(ours, theirs)


def rank_agreement(runs: dict, source: str | None = None) -> str:
    """A sentence: over the pairs of models saved in ``runs`` that ``source`` (default: the [Re] report) also
    reports, how many our accuracies order the same way, how many the other way round (``rank_flips``
    lists them) and how many are tied."""
    source = source or RE
    _, _, (same, total, flipped) = _orders(runs, source)
    if total == 0:
        return f"No two saved models have a {source} accuracy to compare their order with."
    text = (
        f"Our runs order {same} of the {total} pairs of models that {short(source)} also reports the same way"
    )
    ties = total - same - len(flipped)
    parts = []
    if flipped:
        parts.append(f"{len(flipped)} the other way round (the table below)")
    if ties:
        parts.append(f"{ties} {'is' if ties == 1 else 'are'} tied in {short(source)} or in ours")
    if parts:
        text += "; " + " and ".join(parts)
    return text + "."


def rank_flips(runs: dict, source: str | None = None):
    """One row per pair of models that ``source`` (default [Re]) and our runs order differently: the model
    ``source`` puts higher, the other one, and the accuracy difference of the two (points) in both."""
    import pandas as pd

    source = source or RE
    ours, theirs, (_, _, flipped) = _orders(runs, source)
    rows = [
        {
            f"{short(source)} ranks higher": title(a),
            "than": title(b),
            short(source): f"{(theirs[a] - theirs[b]) * 100:+.1f}",
            "ours": f"{(ours[a] - ours[b]) * 100:+.1f}",
        }
        for a, b in flipped
    ]
    return pd.DataFrame(rows)


def group(experiment: str) -> str:
    """The family an experiment belongs to in the introduction's figure (one colour each): its model's
    title without heads, variant or HA ("SA quadratic", "SA learned 2D + content", "SAN pairwise"...)."""
    import re

    from attnlib.experiments import get

    base = get(experiment).baseline or experiment
    return re.sub(r" \(.*?\)", "", title(base).split(", ")[0])


def short_label(experiment: str) -> str:
    """What tells an experiment apart within its ``group`` in a figure: "iso 9h", "16h HA", "HA", ""."""
    words = {"(isotropic)": "iso", "(non-isotropic)": "aniso"}
    name = title(experiment)
    found = [words[w] for w in words if w in name]
    for part in name.split(", ")[1:]:
        found.append(part.replace(" heads", "h"))
    return " ".join(found)


def glance_points(frame):
    """The points of the introduction's figure (``viz.accuracy_vs_params``): one row per saved result of
    ours (rows of ``results_frame``) and per literature accuracy that has a parameter count of the same
    source, with ``experiment``, ``group``, ``label``, ``source`` ("ours", ``RE`` or ``PAPER``), ``kind``,
    ``params``, ``accuracy`` and ``baseline`` (the normal model of an HA variant, else None)."""
    import pandas as pd

    from attnlib.experiments import get

    rows = []
    for _, r in frame[frame["status"] == "complete"].iterrows():
        rows.append(
            {
                "experiment": r["experiment"],
                "source": "ours",
                "kind": "measured",
                "params": float(r["params"]),
                "accuracy": float(r["accuracy"]),
            }
        )
    for ref in references(quantity="test_accuracy"):
        size = reference_value(ref.experiment, ref.source, "params")
        if not math.isnan(size):
            rows.append(
                {
                    "experiment": ref.experiment,
                    "source": ref.source,
                    "kind": ref.kind,
                    "params": size,
                    "accuracy": ref.value,
                }
            )
    points = pd.DataFrame(rows, columns=["experiment", "source", "kind", "params", "accuracy"])
    points.insert(1, "group", [group(n) for n in points["experiment"]])
    points.insert(2, "label", [short_label(n) for n in points["experiment"]])
    points["baseline"] = [get(n).baseline for n in points["experiment"]]
    return points


def load_all(experiments, params: Params) -> Runs:
    """``Runs``: ``{name: RunResult or None}`` for several experiments, with their status (see ``load_status``)."""
    runs = Runs()
    for name in experiments:
        run, status, detail = load_status(name, params)
        runs[name], runs.status[name] = run, (status, detail)
    return runs


def results_frame(runs: dict):
    """One row per experiment of ``runs`` ({name: RunResult or None}, e.g. ``Runs``): ``experiment``,
    ``model`` (title), ``pair`` (the normal model's title, for Table 3), ``variant`` (normal / HA),
    ``status`` ("complete", MISSING, "damaged" or "stale"; the last two from ``Runs.status``), ``detail``,
    ``accuracy``, ``params``, ``wall_time_ms``, ``wall_time_device``, ``epochs``, ``train_seconds``,
    ``dataset``, ``test_images``. Built from the fingerprint-checked results only: a damaged or stale
    result carries no numbers."""
    import pandas as pd

    from attnlib.experiments import get

    statuses = getattr(runs, "status", {})
    rows = []
    for name, run in runs.items():
        exp = get(name)
        status, detail = ("complete", "") if run is not None else statuses.get(name, ("missing", ""))
        row = {
            "experiment": name,
            "model": exp.title,
            "pair": get(exp.baseline).title if exp.baseline else exp.title,
            "variant": "HA" if exp.baseline else "normal",
            "status": MISSING if status == "missing" else status,
            "detail": detail,
        }
        if run is not None:
            m, prov = run.metrics, run.metrics.get("provenance", {})
            row.update(
                accuracy=m["test_accuracy"],
                params=m["params"],
                wall_time_ms=m.get("wall_time_ms"),
                wall_time_device=m.get("wall_time_device"),
                epochs=prov.get("epochs"),
                train_seconds=prov.get("train_seconds"),
                dataset=prov.get("dataset"),
                test_images=prov.get("test_images"),
            )
        rows.append(row)
    frame = pd.DataFrame(rows)
    for column in (
        "accuracy",
        "params",
        "wall_time_ms",
        "wall_time_device",
        "epochs",
        "train_seconds",
        "dataset",
    ):
        if column not in frame:
            frame[column] = None
    return frame


def table3_frame(runs: dict, params: Params):
    """``results_frame(runs)`` with Table 3's figures: ``accuracy`` is the mean over every saved seed of the
    current configuration (``seeds``: n, ``accuracy_sd``: standard deviation, None below 2 seeds), and
    ``wall_time_ms`` the median single-image forward pass measured for all models together by
    ``python -m attnlib time`` (``wall_time_measured``; ``time_ratio``: HA / model), not the training
    runs' own timing; see ``attnlib.results.seed_columns`` and ``timing_columns``. Never trains."""
    from attnlib import results

    frame = results_frame(runs)
    names = list(frame["experiment"])
    seeds = results.seed_columns(params.results_dir, params.preset, names, data=params.data)
    times = results.timing_columns(params.results_dir, params.preset, names)
    frame = frame.drop(columns=["wall_time_ms", "wall_time_device"])
    frame = frame.merge(seeds, on="experiment").merge(times, on="experiment")
    done = frame["status"] == "complete"
    frame["accuracy"] = frame["accuracy_mean"].where(done & (frame["seeds"] > 0), frame["accuracy"])
    frame["accuracy_sd"] = frame["accuracy_sd"].where(done)
    frame["wall_time_device"] = None
    return frame.drop(columns=["accuracy_mean"])


def timing_markdown(params: Params) -> str:
    """Where Table 3's wall times come from (``attnlib.timing.machine_line``), or how to measure them."""
    from attnlib import timing

    report = timing.load(params.results_dir, params.preset)
    if report is None:
        return (
            f"**Wall time: {NOT_MEASURED}** at preset `{params.preset}`: run "
            f"`python -m attnlib time --preset {params.preset}` on an idle machine (it writes "
            f"`results/timing/{params.preset}.json`)."
        )
    stale = [n for n in report.get("models", {}) if n not in timing.wall_times(report, params.preset)]
    note_stale = (
        f" Measured with another configuration than the current one, hence not shown: {', '.join(stale)}."
        if stale
        else ""
    )
    return timing.machine_line(report) + note_stale


def provenance_markdown(frame) -> str:
    """One sentence on where our numbers come from: datasets, test images, devices, epochs; and one per
    saved result that is not used (damaged, or of another configuration), saying why."""
    done = frame[frame["status"] == "complete"]
    unused = _unused_markdown(frame)
    if done.empty:
        return "No result of this table is saved at this preset yet." + unused
    parts = [
        f"{len(done)} of {len(frame)} runs are saved",
        "data: " + "; ".join(sorted({str(d) for d in done["dataset"].dropna()})),
        "test images: " + ", ".join(sorted({f"{int(n):,}" for n in done["test_images"].dropna()})),
        "epochs: " + ", ".join(sorted({str(int(e)) for e in done["epochs"].dropna()})),
    ]
    if done["wall_time_device"].notna().any():
        parts.append("device: " + "; ".join(sorted({str(d) for d in done["wall_time_device"].dropna()})))
    return "Our runs: " + "; ".join(parts) + "." + unused


def _unused_markdown(frame) -> str:
    """' **Not used:** `x` is damaged (...).' for the rows whose saved result is damaged or stale."""
    if "status" not in frame:
        return ""
    rows = frame[frame["status"].isin(list(NOT_USED))]
    if rows.empty:
        return ""
    what = {"damaged": "is damaged", "stale": "was trained with another configuration"}
    items = [f"`{r['experiment']}` {what[r['status']]} ({r.get('detail', '')})" for _, r in rows.iterrows()]
    return (
        " **Not used:** "
        + "; ".join(items)
        + ". Retrain with `python -m attnlib train EXPERIMENT --preset PRESET` (or run this chapter with "
        "`train_missing=True`)."
    )


def title(experiment: str) -> str:
    """How tables and figures name an experiment (the registry's title)."""
    from attnlib.experiments import get

    return get(experiment).title


# ----------------------------------------------------------------------------- glue and notes
def is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def fmt(value, spec: str = "{:.1%}", missing: str = MISSING) -> str:
    """Format a number for prose; a missing value (None or NaN) becomes ``missing``."""
    return missing if is_missing(value) else spec.format(value)


def glue_text(name: str, value, spec: str = "{:.1%}", missing: str = MISSING) -> None:
    """Glue a number, formatted, for ``{glue:text}`name``` in the prose (missing -> ``missing``)."""
    from myst_nb import glue

    glue(name, fmt(value, spec, missing), display=False)


def glue_str(name: str, text: str) -> None:
    """Glue a piece of text (a phrase computed from results) for ``{glue:text}`name```."""
    from myst_nb import glue

    glue(name, text, display=False)


def png(figure):
    """The figure as an IPython PNG image (at the style's ``savefig.dpi``), closed afterwards. Independent
    of the matplotlib backend (``MPLBACKEND=Agg`` would otherwise show figures as text)."""
    import io

    import matplotlib.pyplot as plt
    from IPython.display import Image

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return Image(data=buffer.getvalue(), format="png")


def glue_figure(name: str, figure) -> None:
    """Glue a matplotlib figure for ``{glue:figure}`` (and close it)."""
    from myst_nb import glue

    glue(name, png(figure), display=False)


def note(text: str, kind: str = "note") -> None:
    """Show a MyST admonition (``note``, ``warning``, ``important``) in the cell output."""
    from IPython.display import Markdown, display

    display(Markdown(f":::{{{kind}}}\n{text}\n:::"))


def note_missing(what: str, preset: str, experiments=()) -> None:
    """Say plainly that a figure or table cannot be drawn because results are missing at this preset
    (naming those whose saved result was found damaged or of another configuration by ``load_status``)."""

    def name(e: str) -> str:
        status = _LAST_STATUS.get((e, preset), ("missing", ""))[0]
        return f"`{e}`" + (f" ({NOT_USED[status]})" if status in NOT_USED else "")

    names = ", ".join(name(e) for e in experiments)
    note(
        f"**{what}: {MISSING} at preset `{preset}`**{' (' + names + ')' if names else ''}. "
        "The book build only reads saved results; train them with "
        f"`python -m attnlib train EXPERIMENT --preset {preset}`, or run this chapter with papermill "
        "(which trains what `results/` lacks).",
        "warning",
    )


# ----------------------------------------------------------------------------- published numbers
PAPER = "Cordonnier et al. (2020)"
RE = "[Re] Varma & Prabhu (2021)"


def short(source: str) -> str:
    """How prose and table headers name a source once its full name has been given: "[Re]", "Cordonnier
    et al."."""
    return {PAPER: "Cordonnier et al.", RE: "[Re]"}.get(source, source)


@dataclass(frozen=True)
class Reference:
    """One number from the literature beside ours.

    ``quantity`` is ``test_accuracy`` (a fraction) or ``params``; ``kind`` says what sort of figure it
    is: ``printed`` (read in the paper), ``claimed`` (a benchmark page quoting the paper),
    ``run-log`` (a run folder name / W&B export of the [Re] authors, not their printed table) or
    ``derived`` (counted from the authors' code, not printed anywhere)."""

    experiment: str
    source: str
    quantity: str
    value: float
    kind: str
    where: str
    note: str = ""


_S1 = "epfml/attention-cnn code, layer shapes of runs/*/run.sh (derived in the research notes, A.3)"
_S6 = "sotaverified.org benchmark entry for the paper (CIFAR-10, 'SA quadratic embedding', listed as claimed)"
_S8_LOG = "NishantPrabhu/Self-Attention-and-Convolutions, temp/log_extract.ipynb run-folder name `{}`"
_S8_CODE = (
    "NishantPrabhu/Self-Attention-and-Convolutions code and configs (derived in the research notes, B.1-B.2)"
)


def _acc(experiment, source, value, kind, where, note=""):
    return Reference(experiment, source, "test_accuracy", value, kind, where, note)


def _par(experiment, source, value, where, note=""):
    return Reference(experiment, source, "params", value, "derived", where, note)


REFERENCES: tuple[Reference, ...] = (
    # Cordonnier et al. (2020), Table 1: only one accuracy could be read, on a benchmark page.
    _acc(
        "quadratic_iso_9h",
        PAPER,
        0.938,
        "claimed",
        _S6,
        "Table 1 row 'SA quadratic embedding'; which quadratic variant the row is was not read",
    ),
    _par("quadratic_iso_9h", PAPER, 12_086_844, _S1),
    _par("quadratic_aniso_9h", PAPER, 12_087_006, _S1),
    _par("learned_9h", PAPER, 12_278_682, _S1),
    _par("learned_content_9h", PAPER, 29_601_882, _S1, "no run script for this model in the official code"),
    # [Re] (Varma & Prabhu): run-log values; the printed tables were not retrievable.
    _acc("resnet18", RE, 0.9463, "run-log", _S8_LOG.format("resnet18_9463")),
    # One run, one row: the [Re] Gaussian runs were non-isotropic (their configs/gaussian.yaml as committed on
    # the day of each run has attention_isotropic_gaussian: False, also the code's default), so no isotropic row.
    _acc(
        "quadratic_aniso_9h",
        RE,
        0.9365,
        "run-log",
        _S8_LOG.format("g_2020-12-31_22-09_normal_9365"),
        "non-isotropic: configs/gaussian.yaml committed at 21:23 that day (4698a66) and the hyperparameters.txt "
        "of that day's earlier runs say attention_isotropic_gaussian: false, 9 heads; W&B CSV max 0.9341",
    ),
    _acc(
        "quadratic_aniso_16h",
        RE,
        0.9311,
        "run-log",
        _S8_LOG.format("g_2021-01-18_21-00_normal_16heads_9311"),
        "non-isotropic: main/configs/gaussian.yaml committed the next day (10fce8b) has 16 heads and "
        "attention_isotropic_gaussian: False",
    ),
    _acc(
        "learned_9h", RE, 0.9036, "run-log", _S8_LOG.format("l2d_..._normal_nqc_9036"), "W&B CSV max 0.9036"
    ),
    _acc("learned_16h", RE, 0.9115, "run-log", _S8_LOG.format("l2d_..._normal_nqc_16heads_9115")),
    _acc(
        "learned_content_9h",
        RE,
        0.8636,
        "run-log",
        _S8_LOG.format("l2d_..._normal_qc_8636"),
        "W&B CSV max 0.8636",
    ),
    _acc("learned_content_16h", RE, 0.8556, "run-log", _S8_LOG.format("l2d_..._qc_normal_16heads_8556")),
    _acc(
        "learned_content_9h_ha",
        RE,
        0.9100,
        "run-log",
        _S8_LOG.format("l2d_..._hier_qc_9100"),
        "W&B CSV max 0.9074 (possibly an earlier run)",
    ),
    _acc("learned_content_16h_ha", RE, 0.8768, "run-log", _S8_LOG.format("l2d_..._hier_qc_16heads_8768")),
    _par("quadratic_iso_9h", RE, 11_124_444, _S8_CODE),
    _par("quadratic_aniso_9h", RE, 11_124_606, _S8_CODE),
    _par("learned_9h", RE, 11_316_390, _S8_CODE),
    _par("learned_16h", RE, 13_973_802, _S8_CODE, "the [Re] 16-head configs use hidden 256, MLP 400"),
    _par("learned_content_9h", RE, 28_478_682, _S8_CODE),
    _par("learned_content_16h", RE, 26_459_754, _S8_CODE, "the [Re] 16-head configs use hidden 256, MLP 400"),
    _par("learned_content_9h_ha", RE, 4_754_122, _S8_CODE),
    _par("learned_content_16h_ha", RE, 4_414_874, _S8_CODE),
    _par(
        "san_pairwise_ha",
        RE,
        352_750,
        _S8_CODE,
        "SAN/models/networks.py Encoder, sa_type pair_hier: the modules its hierarchical forward uses "
        "(691,582 with the four stages it builds but never calls)",
    ),
    _par(
        "san_patchwise_ha",
        RE,
        356_282,
        _S8_CODE,
        "as pairwise, sa_type patch_hier (709,242 with the unused stages)",
    ),
    _par(
        "vit",
        RE,
        37_394_506,
        _S8_CODE,
        "ours has 400 more: a final LayerNorm (800) that theirs lacks, and no position-embedding row for "
        "their per-call noise 'cls' slot (400)",
    ),
    _par("vit_ha", RE, 6_531_946, _S8_CODE, "ours has 400 more, as for ViT"),
)

#: What the research notes could not find (the book states these plainly).
NOT_FOUND: tuple[str, ...] = (
    f"{PAPER}, Table 1: the accuracies of ResNet18, 'SA learned embedding' and 'SA learned embedding + "
    "content', and every printed #params and #FLOPs value (only 'SA quadratic embedding 93.8 %' was read, "
    "on a benchmark page).",
    f"{PAPER}: the printed hyper-parameter table (the official code's defaults are used instead).",
    f"{RE}: the printed reproduction table and Table 3 (accuracy, #params, wall time of every model and its "
    "HA variant); the report PDF was not retrievable. The accuracies shown are the authors' run-log values.",
    f"{RE}: any accuracy or wall time of SAN pairwise / patchwise, ViT and their HA variants.",
    f"{RE}: any inference wall time (only the protocol, 10 warm-up + 300 timed single-image passes, is known "
    "from their code).",
)

#: [Re] run-log accuracy of a model that is not in our registry (the book mentions it in the text): the
#: hierarchical version of their non-isotropic quadratic 9-head model, below the model without HA (93.65%).
RE_QUADRATIC_9H_HA = _acc(
    "quadratic_9h_ha",
    RE,
    0.9282,
    "run-log",
    _S8_LOG.format("g_2021-01-03_09-36_hier_9282"),
    "not an experiment of ours; configs/gaussian.yaml as committed from 2021-01-01 to 01-07 (686aaae, "
    "e0850fe, 658b8b6): 9 heads, hierarchical_weight_sharing: True, attention_isotropic_gaussian: False",
)


def references(experiment: str | None = None, source: str | None = None, quantity: str | None = None):
    """The references matching the given fields, in ``REFERENCES`` order."""
    return [
        r
        for r in REFERENCES
        if (experiment is None or r.experiment == experiment)
        and (source is None or r.source == source)
        and (quantity is None or r.quantity == quantity)
    ]


def reference_value(experiment: str, source: str, quantity: str) -> float:
    """The one reference value for (experiment, source, quantity), or NaN when none is known."""
    found = references(experiment, source, quantity)
    return found[0].value if found else math.nan


def references_frame():
    """All references as a table (experiment, source, quantity, value, kind, where, note)."""
    import pandas as pd

    return pd.DataFrame([r.__dict__ for r in REFERENCES])


# ----------------------------------------------------------------------------- tables
NOT_FOUND_CELL = "—"
#: The mark of each kind of literature figure in a table cell (explained by ``literature_caption``).
KIND_MARKS = {"printed": "", "claimed": "*", "run-log": "†", "derived": "‡"}
KIND_MEANING = {
    "printed": "printed in the paper",
    "claimed": "a benchmark page quoting the paper",
    "run-log": "the best test accuracy in a run-folder name of the [Re] authors' logs, not their printed table",
    "derived": "a parameter count derived from the authors' code, not printed",
}


def split_title(experiment: str) -> tuple[str, str]:
    """(model, heads) of an experiment's title for a table: ("SA learned 2D", "9") from "SA learned 2D,
    9 heads"; heads is "—" for a model without heads (ResNet18, SAN) or whose title does not give them."""
    model, *parts = title(experiment).split(", ")
    heads = next((p.split(" ")[0] for p in parts if p.endswith(" heads")), "—")
    return model + (", HA" if "HA" in parts else ""), heads


def results_table(frame, preset: str, *, pairs: bool = False, paper_params: dict | None = None):
    """Our results laid out as the report's tables, as strings ready to show.

    frame: rows of ``results_frame`` (``experiment``, ``status``, ``accuracy``, ``params``,
    ``wall_time_ms``...). ``pairs=False`` (Table 1): model, heads, accuracy, params, wall time.
    ``pairs=True`` (Table 3): model (the normal model's title), variant (normal / HA), accuracy, params,
    params at the paper's settings (``paper_params``: {experiment: count}, when given), wall time.
    A missing result reads "not yet trained"; a damaged or stale one says so (``NOT_USED``).
    """
    import pandas as pd

    rows = []
    for _, r in frame.iterrows():
        done = r.get("status") == "complete"
        absent = NOT_USED.get(r.get("status"), MISSING)  # damaged / stale rows say so
        if pairs:
            row = {"model": r["pair"], "variant": r["variant"]}
        else:
            model, heads = split_title(r["experiment"])
            row = {"model": model, "heads": heads}
        row[f"accuracy ({preset})"] = _accuracy_cell(r, done, absent)
        params = r.get("params") if done else None
        row[f"params ({preset})"] = absent if is_missing(params) else f"{params / 1e6:.2f} M"
        if paper_params is not None:
            row["params (paper settings)"] = f"{paper_params[r['experiment']] / 1e6:.2f} M"
        if "wall_time_measured" in r:  # measured together (``table3_frame``), trained or not
            row["wall time"] = fmt(r["wall_time_ms"], "{:.2f} ms", NOT_MEASURED)
            if "time_ratio" in r:
                row["HA / model time"] = fmt(r["time_ratio"], "{:.2f}×", "")
        else:
            row["wall time"] = fmt(r.get("wall_time_ms") if done else None, "{:.2f} ms", absent)
        rows.append(row)
    return pd.DataFrame(rows)


NOT_MEASURED = "not measured"


def _accuracy_cell(r, done: bool, absent: str) -> str:
    """ "47.9 ± 0.1 % (n = 2)" for a row with seed statistics (``table3_frame``), else "47.8%"."""
    accuracy = r.get("accuracy") if done else None
    if is_missing(accuracy) or "seeds" not in r:
        return fmt(accuracy, "{:.1%}", absent)
    sd = r.get("accuracy_sd")
    spread = "" if is_missing(sd) else f" ± {sd * 100:.1f}"
    return f"{accuracy * 100:.1f}{spread} % (n = {int(r['seeds'])})"


def _literature_cell(experiment: str, source: str, quantity: str) -> str:
    found = references(experiment, source, quantity)
    if not found:
        return NOT_FOUND_CELL
    r = found[0]
    value = f"{r.value:.1%}" if quantity == "test_accuracy" else f"{r.value / 1e6:.2f} M"
    return value + KIND_MARKS[r.kind]


def literature_table(experiments, *, pairs: bool = False, paper: bool = True):
    """The published and [Re] figures of ``experiments``, a companion to ``results_table``: one row per
    experiment with at least one figure, one column per (source, quantity) with at least one figure.
    Cells carry the mark of their kind (``KIND_MARKS``); "—" where none was found."""
    import pandas as pd

    from attnlib.experiments import get

    columns = [("[Re] accuracy", RE, "test_accuracy"), ("[Re] params", RE, "params")]
    if paper:
        columns += [
            ("Cordonnier et al. accuracy", PAPER, "test_accuracy"),
            ("official code params", PAPER, "params"),
        ]
    rows = []
    for name in experiments:
        cells = {column: _literature_cell(name, source, quantity) for column, source, quantity in columns}
        if all(c == NOT_FOUND_CELL for c in cells.values()):
            continue
        exp = get(name)
        if pairs:
            key = {"model": title(exp.baseline or name), "variant": "HA" if exp.baseline else "normal"}
        else:
            model, heads = split_title(name)
            key = {"model": model, "heads": heads}
        rows.append({**key, **cells})
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    keep = [
        c for c in table.columns if c in ("model", "heads", "variant") or (table[c] != NOT_FOUND_CELL).any()
    ]
    return table[keep]


def literature_caption(experiments, what: str) -> str:
    """The caption of a ``literature_table``: what it holds and what each mark means (only the kinds used)."""
    kinds = [k for k in KIND_MARKS if any(r.kind == k for r in REFERENCES if r.experiment in experiments)]
    marks = "; ".join(
        f"{KIND_MARKS[k] + ' ' if KIND_MARKS[k] else 'unmarked: '}{k}, {KIND_MEANING[k]}" for k in kinds
    )
    return f"{what}. {marks}; — not found. Sources below."


def sources_markdown(experiments) -> str:
    """A Markdown list of the sources of every literature figure used for these experiments."""
    lines = []
    for r in REFERENCES:
        if r.experiment in experiments:
            value = f"{r.value:.2%}" if r.quantity == "test_accuracy" else f"{int(r.value):,} parameters"
            note = f"; {r.note}" if r.note else ""
            lines.append(f"- `{r.experiment}`, {r.source}, {r.kind}: {value}. Source: {r.where}{note}.")
    return "\n".join(lines)


def show_sources(experiments) -> None:
    """Display ``sources_markdown`` under a table, folded (a reader opens it to check a figure)."""
    from IPython.display import Markdown, display

    display(
        Markdown(
            ":::{dropdown} Where the literature figures come from\n" + sources_markdown(experiments) + "\n:::"
        )
    )


# ----------------------------------------------------------------------------- registry tables
def training_table(preset: str):
    """One row per training protocol at ``preset`` (from the registry): the optimiser and schedule."""
    import pandas as pd

    from attnlib import experiments

    rows = []
    for protocol, p in experiments.PRESET_TABLE[preset].items():
        t = p.train
        users = [e.name for e in experiments.EXPERIMENTS.values() if e.protocol == protocol]
        rows.append(
            {
                "protocol": protocol,
                "experiments": ", ".join(users),
                "epochs": t.epochs,
                "batch": t.batch_size,
                "lr": t.lr,
                "schedule": t.schedule
                + (
                    f" (÷10 at {', '.join(f'{m:.0%}' for m in t.milestones)} of training)"
                    if t.milestones
                    else ""
                ),
                "warm-up": f"{t.warmup:.1%} of steps",
                "gradient clipping": f"norm {t.grad_clip:g}" if t.grad_clip else "none",
                "momentum": f"{t.momentum}" + (" (Nesterov)" if t.nesterov else ""),
                "weight decay": t.weight_decay,
                "label smoothing": t.label_smoothing,
                "data": p.data or "CIFAR-10",
                "why": p.reason,
            }
        )
    return pd.DataFrame(rows).set_index("protocol")


def epoch_range(preset: str) -> str:
    """The epochs a preset trains for, as "4–12" (or "300" when every experiment shares one count)."""
    from attnlib import experiments

    epochs = sorted({p.train.epochs for p in experiments.PRESET_TABLE[preset].values()})
    return "–".join(dict.fromkeys(str(e) for e in (epochs[0], epochs[-1])))


def training_time(params: Params):
    """(table, total seconds): one row per experiment with the epochs and training time of its saved run at
    ``params`` (from its provenance; never trains), and the sum over the complete runs."""
    from attnlib.results import collect

    frame = collect(params.results_dir, params.preset, seed=params.seed or 0, data=params.data)
    for column in ("epochs", "train_seconds"):
        if column not in frame:
            frame[column] = None
    done = frame["status"] == "complete"
    table = frame[["experiment", "status"]].copy()
    table["epochs"] = [f"{int(e)}" if ok else "—" for ok, e in zip(done, frame["epochs"], strict=True)]
    table["train time"] = [
        f"{t / 60:.1f} min" if ok else "—" for ok, t in zip(done, frame["train_seconds"], strict=True)
    ]
    return table, float(frame.loc[done, "train_seconds"].sum())


def model_table(preset: str, family: str):
    """One row per experiment of ``family`` at ``preset``: every field of its model config (registry)."""
    import dataclasses

    import pandas as pd

    from attnlib import experiments
    from attnlib.models import make_config

    rows = {}
    for e in experiments.EXPERIMENTS.values():
        if e.family == family:
            rc = experiments.resolve(e.name, preset)
            rows[e.name] = dataclasses.asdict(make_config(rc.family, **rc.model))
    return pd.DataFrame.from_dict(rows, orient="index")


# ----------------------------------------------------------------------------- figures from results
def show(figure, name: str | None = None, caption: str | None = None) -> None:
    """Display a matplotlib figure in the cell output as a PNG, and close it.

    With ``name`` (e.g. ``"fig-alpha"``) the figure is numbered, with ``caption`` (MyST Markdown) under it,
    and the prose refers to it as ``{numref}`fig-alpha```: the PNG is glued under ``name`` and shown by a
    ``glue:figure`` directive in the cell's Markdown output. Names are labels of the whole book: unique.
    """
    from IPython.display import Markdown, display

    if name is None:
        display(png(figure))
        return
    from myst_nb import glue

    glue(name, png(figure), display=False)
    display(Markdown(f"```{{glue:figure}} {name}\n:name: {name}\n\n{caption or ''}\n```"))


def show_table(frame, caption: str | None = None, compact: bool = False) -> None:
    """Display a table without its row index (and with a caption). ``compact``: a table of short cells
    (names and numbers), kept on one line each (CSS class ``results`` of ``book/_static/attnlib.css``)."""
    from IPython.display import display

    styler = frame.style.hide(axis="index")
    if compact:
        styler = styler.set_table_attributes('class="results"')
    if caption:
        styler = styler.set_caption(caption)
    display(styler)


def bench_reports(params: Params) -> dict:
    """Saved speed benchmarks ``<results_dir>/bench/<device>.json`` (``python -m attnlib bench``), by device.

    A report whose matmul peak was measured while the load said the cores were shared (``peak_shared``) is
    read against the idle peak of the same machine (CPU model, instruction sets and threads) when
    ``<results_dir>/bench/peak/<device>.json`` (``python -m attnlib bench --peak-only``) holds one measured
    with the cores otherwise idle: its rows' ``peak_gflops``, ``utilisation`` and ``model_utilisation`` are
    recomputed from their measured FLOP/s, and ``report["peak_source"]`` says so."""
    import json

    folder = Path(params.results_dir) / "bench"
    reports = {f.stem: json.loads(f.read_text()) for f in sorted(folder.glob("*.json"))}
    for device, report in reports.items():
        idle = folder / "peak" / f"{device}.json"
        if idle.is_file() and peak_shared(report):
            _use_idle_peak(report, json.loads(idle.read_text()), idle)
    return reports


def peak_shared(report: dict) -> bool | None:
    """Whether a benchmark's matmul peak was measured on shared cores: its own flag, or for a report older
    than that flag, ``attnlib.bench.core_sharing`` of the load average it recorded at the start."""
    from attnlib.bench import core_sharing

    if "peak_shared" in report.get("load", {}):
        return report["load"]["peak_shared"]
    m = report["machine"]
    if m.get("device") != "cpu":
        return False
    return core_sharing(m["torch_threads"], m.get("load_average_start"), usable=m["usable_cores"])["shared"]


def _same_machine(a: dict, b: dict) -> bool:
    keys = ("cpu", "cpu_flags", "torch_threads", "usable_cores")
    return all(a.get(k) == b.get(k) for k in keys)


def _use_idle_peak(report: dict, idle: dict, path: Path) -> None:
    if idle.get("load", {}).get("shared") is not False or not _same_machine(
        report["machine"], idle["machine"]
    ):
        return
    peaks = {dt: p["best"] for dt, p in idle["matmul_peak"].items()}
    if not all(r["dtype"] in peaks for r in report["rows"]):
        return
    for r in report["rows"]:
        r["peak_gflops"] = peaks[r["dtype"]]
        r["utilisation"] = r["achieved_gflops"] / r["peak_gflops"]
        r["model_utilisation"] = r["model_gflop_per_image"] * r["images_per_s"] / r["peak_gflops"]
    report["peak_source"] = dict(
        path=f"results/bench/peak/{path.name}",
        peaks=peaks,
        finished=idle.get("finished"),
        load=idle["load"],
        torch=idle["machine"].get("torch"),
    )


def bench_machine_markdown(report: dict) -> str:
    """Which machine, instruction sets, threads and load a benchmark ran on, and which matmul peak its
    utilisations divide by: its own (flagged when the load said the cores were shared) or the idle peak
    of the same machine (``bench_reports``)."""
    m = report["machine"]
    load = m.get("load_average_start")
    flags = ", ".join(m.get("cpu_flags") or []) or "none of avx2 / avx512 / amx reported"
    text = (
        f"Measured on {m.get('cpu') or m.get('device')} (instruction sets: {flags}; {m.get('usable_cores')} "
        f"cores, {m.get('torch_threads')} torch thread(s), torch {m.get('torch')}, CPU capability "
        f"{m.get('cpu_capability')})"
        + (f", 1-minute load average {load[0]:.1f} at the start." if load else ".")
    )
    shared, source = peak_shared(report), report.get("peak_source")
    if shared:
        text += (
            " The load says the cores were shared with other work during this run: its throughputs are lower "
            "than an idle machine's"
        )
    if source:
        listed = ", ".join(f"{dt} {g:.0f} GFLOP/s" for dt, g in source["peaks"].items())
        text += (
            f", and the utilisations divide by the peak of an idle core of the same machine type ({listed}; "
            f"best of several sizes and repetitions, `{source['path']}`, {source['finished']}, load "
            f"{source['load']['load_before']} before), so they are lower bounds."
        )
    elif report.get("matmul_peak"):
        peaks = report["matmul_peak"]
        best = {dt: p.get("best", p.get("start", {}).get("gflops")) for dt, p in peaks.items()}
        listed = ", ".join(f"{dt} {g:.0f} GFLOP/s" for dt, g in best.items() if g is not None)
        if shared:
            text += (
                f", and its matmul peak ({listed}) was measured on the shared cores too: too low, which "
                "inflates the utilisations. `python -m attnlib bench --peak-only` measures the peak of an "
                "idle core."
            )
        else:
            text += (
                f". Matmul peak ({listed}): best of several sizes and repetitions on otherwise idle cores."
            )
    elif shared:
        text += "."
    bf16 = {"avx512_bf16", "amx_bf16"} & set(m.get("cpu_flags") or [])
    if m.get("device") == "cpu" and not bf16:
        text += (
            " This CPU has no bf16 matrix instructions (AVX512-BF16 or AMX): bf16 matmuls run far slower "
            "than fp32 here, and the engine trains in fp32."
        )
    return text


#: A map whose strongest probability is below this multiple of uniform (1/N over N keys) attends to every
#: key almost alike: the model averages its features over the image, whatever colours its panels show.
NEAR_UNIFORM = 1.1


def attention_peaks(run):
    """Strongest attention probability of each layer of a saved run (over heads, the saved query pixels and
    the saved test images) as a multiple of uniform attention 1/N over its N keys: a numpy array (layers,),
    or None for a run without token attention maps (SAN, or nothing saved)."""
    import numpy as np

    att = None if run is None else run.attention
    if not att or "rows" not in att:
        return None
    rows = np.asarray(att["rows"])  # (images, layers, heads, queries, N)
    return rows.max(axis=(0, 2, 3, 4)) * rows.shape[-1]


def _times(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.0f}"


def _peak_range(peaks) -> str:
    low, high = _times(float(peaks.min())), _times(float(peaks.max()))
    return f"{low}×" if low == high else f"{low}–{high}×"


def uniform_attention_phrase(runs: dict) -> str:
    """Each run's strongest attention per layer as a multiple of uniform, and which runs kept near-uniform
    attention (below ``NEAR_UNIFORM``) in every layer, as sentences for the book."""
    peaks = {name: attention_peaks(run) for name, run in runs.items()}
    peaks = {name: p for name, p in peaks.items() if p is not None}
    if not peaks:
        return f"No attention maps of these models are saved at this preset ({MISSING})."
    listed = "; ".join(f"{title(n)}: {_peak_range(p)}" for n, p in peaks.items())
    flat = flat_models(runs)
    if flat:
        verdict = (
            f"{' and '.join(flat)} kept near-uniform attention (below {NEAR_UNIFORM:g}× uniform) in every "
            "layer: at this budget they did not learn where to look."
        )
    else:
        verdict = f"Every one of them moved beyond {NEAR_UNIFORM:g}× uniform in at least one layer."
    return f"Strongest attention probability per layer, as a multiple of uniform ({listed}). {verdict}"


def show_attention(run, experiment: str, params: Params, query: int = 0, name: str | None = None) -> None:
    """The saved attention maps of one run as two numbered figures, ``{name}-one`` (a fixed query pixel,
    first saved test image) and ``{name}-mean`` (the same query pixel, averaged over the saved test images);
    ``name`` defaults to ``fig-<experiment>`` (``-q<query>`` added for another query). A missing run still
    gets both figure numbers, with a placeholder saying it is not yet trained, so references resolve.

    Token models (paper models, ViT): layers × heads grids over the key grid. SAN: each layer's K×K
    window around the query pixel, and the weights averaged over pixels and images per weight group.
    """
    from attnlib import viz
    from attnlib.results import QUERY_FRACTIONS

    label = name or f"fig-{experiment}" + (f"-q{query}" if query else "")
    model = title(experiment)
    if run is None:
        note_missing(f"Attention maps of {model}", params.preset, [experiment])
        for part in ("one", "mean"):
            show(viz.placeholder(f"{model}: {MISSING}"), f"{label}-{part}", f"{model}: {MISSING}.")
        return
    images = run.config.get("attention_mean_images", "the saved")
    hierarchical = run.config.get("model", {}).get("hierarchical", False)
    unit = "application of the shared block" if hierarchical else "layer"
    att = run.attention
    if "rows" in att:
        grid = tuple(int(g) for g in att["grid"])
        pixel = divmod(int(att["queries"][query]), grid[1])
        layout = (
            f"One row per {unit}, one column per head, the mean over heads last; one colour scale for every "
            f"panel, its bar marking uniform attention 1/{grid[0] * grid[1]}."
        )
        for image, part, what in (
            (0, "one", "one test image"),
            (None, "mean", f"mean over {images} test images"),
        ):
            figure = viz.token_attention(att, query=query, image=image, layer_label=unit.split(" ")[0])
            show(
                figure,
                f"{label}-{part}",
                f"{model}: attention of query pixel {pixel} (outlined), {what}. {layout}",
            )
        peaks = attention_peaks(run)
        listed = ", ".join(f"{_times(p)}×" for p in peaks)
        flat = (
            " (near-uniform: on the figures' shared colour scale every panel is flat)"
            if peaks.max() < NEAR_UNIFORM
            else ""
        )
        note(
            f"Strongest attention probability per {unit}, over heads, the saved query pixels and "
            f"{len(att['rows'])} test images: {listed} the uniform 1/{att['rows'].shape[-1]}{flat}."
        )
        return
    weights, means = viz.san_layers(att)
    fraction = QUERY_FRACTIONS[query]
    unit = "application" if hierarchical else "layer"
    names = [f"{unit} {i + 1}" for i in range(len(weights))]
    show(
        viz.window_maps([w[0] for w in weights], fraction, layer_names=names),
        f"{label}-one",
        f"{model}: aggregation weights of the query pixel at {fraction} of the image over its K×K window "
        f"(centre outlined), one test image, one panel per {unit}, averaged over weight groups; one colour "
        "scale for every panel.",
    )
    show(
        viz.window_means(means, layer_names=names),
        f"{label}-mean",
        f"{model}: aggregation weights averaged over pixels and {images} test images, one row per weight "
        f"group (the mean of all groups last), one column per {unit}; one colour scale for every panel.",
    )


# ----------------------------------------------------------------------------- Sphinx extension
def _unique_scripts(app, pagename, templatename, context, doctree) -> None:
    """Drop repeated ``<script>`` entries from a page. Jupyter Book 1.x registers some inline scripts
    twice (sphinx-thebe's ``const THEBE_JS_URL = ...``), and a second ``const`` of one name is a
    JavaScript error in every page."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        # an inline script is registered once with filename None and once with "" (same body)
        key = (getattr(js, "filename", js) or "", tuple(sorted(getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique


def setup(app):
    """Sphinx extension hook (listed in ``_config.yml``): chapters executed by the book build read saved
    results and never train, unless ``ATTNLIB_TRAIN_MISSING`` was set explicitly; and every page carries
    each of its scripts once (see ``_unique_scripts``)."""
    os.environ.setdefault(TRAIN_MISSING_ENV, "0")
    app.connect("html-page-context", _unique_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


# ------------------------------------------------------------------------------------------ claims ledger
@functools.lru_cache(maxsize=4)
def _evidence(results_dir: str, preset: str, data):
    from attnlib import claims

    return claims.gather(results_dir, preset, data=data)


def claims_ledger(params: Params, keys=None):
    """The claims ledger (``attnlib.claims.ledger``) at the chapter's preset, computed once per build from
    ``results/`` (never trains); only the claims of ``keys`` when given, in ledger order."""
    from attnlib import claims

    frame = claims.ledger(_evidence(str(params.results_dir), params.preset, params.data))
    return frame if keys is None else frame[frame["claim"].isin(list(keys))]


def ledger_table(frame):
    """The ledger at a glance: each claim's short title, whose claim it is, and the verdict
    (``ledger_markdown`` gives the words, measure, value and rule of each)."""
    return frame.assign(source=frame["source"].map(short))[["title", "source", "verdict"]].rename(
        columns={"title": "claim"}
    )


def ledger_markdown(frame) -> str:
    """Each claim of the ledger as a paragraph: its words and source, the measure, our value, the verdict
    and the rule that gives it."""
    return "\n".join(
        f"- **{r.title}** ({short(r.source)}, {r.where}): {r.words} *Measured by* {r.measure}. "
        f"*Ours:* {r.value}. *Verdict:* {r.verdict}; the rule: {r.rule}."
        for r in frame.itertuples()
    )


def show_ledger(frame, caption: str) -> None:
    """The ledger table, then its claims in full (words, measure, value, rule) in a fold-out."""
    from IPython.display import Markdown, display

    show_table(ledger_table(frame), caption=caption, compact=True)
    display(
        Markdown(
            f":::{{dropdown}} The claims in full: words, measure, our value, rule\n{ledger_markdown(frame)}\n:::"
        )
    )


def verdict_phrase(frame) -> str:
    """ "Of the 11 claims, 2 are reproduced, 4 not reproduced, 3 inconclusive and 2 not measured" """
    from attnlib import claims

    counts = claims.verdict_counts(frame)
    parts = [f"{n} {v}" for v, n in counts.items()]
    listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"Of the {len(frame)} claims, {listed}"

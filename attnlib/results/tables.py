"""Tables of saved results: one builder (`frame`) that the command line (`python -m attnlib table1 / table3`)
and the book both use, the seed statistics and measured wall times Table 3 adds to it, and the rows each
table holds. Never trains.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import numpy as np

from attnlib import experiments
from attnlib.results.config import portable_path
from attnlib.results.load import read, read_runs, read_seeds

#: The columns of `frame`, the one results table; those after `detail` from a complete result's metrics.
COLUMNS = (
    "experiment",
    "model",  # its title
    "pair",  # the normal model's title, for Table 3
    "variant",  # normal / HA
    "status",  # "complete", "missing", "damaged" or "stale"
    "detail",  # what is wrong with a result that is not complete
    "accuracy",  # test accuracy (fraction)
    "params",
    "wall_time_ms",
    "wall_time_std_ms",
    "wall_time_device",
    "epochs",  # trained
    "train_seconds",  # wall time of the training, evaluation included
    "cpu_seconds",  # that times the CPU threads and processes it used; None for a GPU run
    "precision",  # its training precision in words (`precision_words`)
    "dataset",
    "test_images",
)


def frame(runs: dict):
    """The results table: one row per experiment of `runs` ({name: RunResult or None}; a `Runs` carries the
    status of each None), in `COLUMNS` (what each holds: there). Built from fingerprint-checked results only:
    a damaged or stale result carries no numbers."""
    import pandas as pd

    statuses = getattr(runs, "status", {})
    rows = []
    for name, run in runs.items():
        exp = experiments.get(name)
        status, detail = ("complete", "") if run is not None else statuses.get(name, ("missing", ""))
        row = {
            "experiment": name,
            "model": exp.title,
            "pair": experiments.get(exp.baseline).title if exp.baseline else exp.title,
            "variant": "HA" if exp.baseline else "normal",
            "status": status,
            "detail": detail,
        }
        if run is not None:
            m, prov = run.metrics, run.metrics.get("provenance", {})
            row.update(
                accuracy=m["test_accuracy"],
                params=m["params"],
                wall_time_ms=m.get("wall_time_ms"),
                wall_time_std_ms=m.get("wall_time_std_ms"),
                wall_time_device=m.get("wall_time_device"),
                epochs=prov.get("epochs_trained", prov.get("epochs")),  # epochs run (a former plateau stop)
                train_seconds=prov.get("train_seconds"),
                cpu_seconds=_cpu_seconds(prov),
                precision=precision_words(prov),
                dataset=portable_path(prov.get("dataset")),  # older results recorded absolute paths
                test_images=prov.get("test_images"),
            )
        rows.append(row)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def precision_of(history) -> str:
    """A run's training precision in words, from its history rows' ``bf16`` column (1: bf16 autocast, 0:
    float32; one per epoch, so that a run resumed on another machine says so): "bf16", "float32", or each
    stretch of epochs, "bf16 for epochs 1–20, float32 for epochs 21–60"; "" without the column."""
    marks = [row.get("bf16") for row in history]
    if not marks or any(m is None or m != m for m in marks):  # missing, or NaN in a csv read
        return ""
    stretches = []  # [precision, first epoch, last epoch]
    for epoch, mark in enumerate(marks, 1):
        words = "bf16" if int(mark) else "float32"
        if stretches and stretches[-1][0] == words:
            stretches[-1][2] = epoch
        else:
            stretches.append([words, epoch, epoch])
    if len(stretches) == 1:
        return stretches[0][0]
    spans = [(w, f"epochs {a}–{b}" if b > a else f"epoch {a}") for w, a, b in stretches]
    return ", ".join(f"{w} for {span}" for w, span in spans)


def precision_words(provenance: dict) -> str:
    """A saved run's training precision in words: the provenance's ``precision`` (`precision_of` its history),
    else, for runs saved before it was recorded, its ``bf16`` flag, which holds for its last stretch only when
    it resumed from a checkpoint ("float32 from epoch 47 on; earlier epochs not recorded")."""
    if provenance.get("precision"):
        return str(provenance["precision"])
    if provenance.get("bf16") is None:
        return ""
    words = "bf16" if provenance["bf16"] else "float32"
    found = re.search(r"\(epoch (\d+)(?:, step (\d+))?", str(provenance.get("resumed_from") or ""))
    if not found:
        return words
    within = "within " if found[2] and int(found[2]) else ""  # a mid-epoch checkpoint: that epoch's rest
    return f"{words} from {within}epoch {int(found[1]) + 1} on; earlier epochs not recorded"


def _cpu_seconds(provenance: dict) -> float | None:
    """CPU time of a run's training, times its processes under torchrun: the process's own CPU time where it
    was recorded (``train_cpu_seconds``: what it used, not the time it waited for a busy core), else its wall
    time times its CPU threads (provenance's ``threads``, else the count in its device name, "AMD EPYC
    (1 threads)", as runs saved before ``threads`` was recorded say); None for a GPU run, or where neither
    says. Reads validated metrics (``attnlib.results.validate`` checks ``threads``)."""
    threads = provenance.get("threads")
    if threads is None and (found := re.search(r"\((\d+) threads?\)$", str(provenance.get("device", "")))):
        threads = int(found[1])
    seconds, processes = provenance.get("train_seconds"), provenance.get("world_size") or 1
    if threads is None or seconds is None:
        return None
    if (cpu := provenance.get("train_cpu_seconds")) is not None:
        return cpu * processes
    return seconds * threads * processes


def collect(
    results_dir: str | Path = "results", preset: str = "paper", names=None, seed: int = 0, *, data=None
):
    """`frame` of what is saved at `preset`, `seed` and `data` for `names` (default: every experiment), one
    row per experiment with its status (`attnlib.results.load.read`): only complete rows carry numbers, and
    `detail` says what is wrong with the others ("stale": a result of another configuration, e.g. trained
    before the preset changed). Never trains."""
    return frame(
        read_runs(names or experiments.names(), preset, seed=seed, results_dir=results_dir, data=data)
    )


def complete(table):
    """The rows of a `frame` (or of a table built on it) whose result is complete."""
    return table[table["status"] == "complete"]


def attention_rows(table):
    """The complete rows of attention models (every model but ResNet18)."""
    done = complete(table)
    # astype(bool): an empty mask would be of dtype object, which pandas takes for a list of columns
    return done[done["experiment"].map(lambda n: experiments.get(n).family != "resnet").astype(bool)]


def table1_names() -> list[str]:
    """The experiments of Table 1 of Cordonnier et al.: ResNet18 and the paper's attention models (no HA)."""
    return [
        n
        for n, e in experiments.EXPERIMENTS.items()
        if e.family in ("resnet", "paper") and not e.baseline and not e.variant_of
    ]


def table3_names(heads: int | None = None) -> list[str]:
    """The experiments of Table 3 of the [Re] report, each model before its HA variant; `heads`: only the
    learned-2D pair with that many heads (SAN and ViT have one configuration each)."""
    names = [n for e in experiments.EXPERIMENTS.values() if e.baseline for n in (e.baseline, e.name)]
    if heads is None:
        return names
    return [n for n in names if experiments.get(n).model.get("heads", heads) == heads]


def seed_accuracies(
    results_dir: str | Path, preset: str, experiment: str, *, data=None
) -> tuple[dict[int, float], list[str]]:
    """({seed: test accuracy}, problems) over every saved seed of `experiment` at `preset`
    (`<preset>/` is seed 0, `<preset>-seed<N>/` seed N) whose result is complete for the current
    configuration; `problems` says why any other seed folder is not used ("seed 1: stale (...)"). Never trains."""
    found, problems = {}, []
    for seed, saved in read_seeds(experiment, preset, results_dir=results_dir, data=data).items():
        if saved.complete:
            found[seed] = saved.run.test_accuracy
        elif saved.status != "missing" or seed > 0:
            problems.append(f"seed {seed}: {saved.status}" + (f" ({saved.detail})" if saved.detail else ""))
    return found, problems


def timing_columns(results_dir: str | Path, preset: str, names):
    """One row per experiment: `wall_time_ms` (median), `wall_time_p25_ms`, `wall_time_p75_ms` and, for an HA
    variant, `time_ratio` (HA / model, paired by round: `attnlib.lab.timing.ratios`) with `time_ratio_p25` /
    `time_ratio_p75` (quartiles of the per-round ratios), from `results/timing/<preset>.json`
    (`python -m attnlib time`); None where the file lacks the model or measured another configuration of it
    (`wall_time_measured` False)."""
    import pandas as pd

    from attnlib.results import timing

    report = timing.load(results_dir, preset)
    measured = timing.wall_times(report, preset)
    ratios = (report or {}).get("ratios", {})
    rows = []
    for name in names:
        m = measured.get(name, {})
        r = ratios.get(name, {}) if m and ratios.get(name, {}).get("baseline") in measured else {}
        rows.append(
            {
                "experiment": name,
                "wall_time_measured": bool(m),
                "wall_time_ms": m.get("median_ms"),
                "wall_time_p25_ms": m.get("p25_ms"),
                "wall_time_p75_ms": m.get("p75_ms"),
                "time_ratio": r.get("ratio"),
                "time_ratio_p25": r.get("round_ratio_p25"),
                "time_ratio_p75": r.get("round_ratio_p75"),
            }
        )
    return pd.DataFrame(rows)


def with_seeds(table, results_dir: str | Path, preset: str, *, data=None):
    """`table` (rows of `frame`, seed 0) with Table 3's figures: `seeds` (how many saved seeds of the current
    configuration), `accuracy` their mean, `accuracy_sd` their standard deviation (n − 1; None below 2),
    `seed_list`, `seed_problems`, and the wall times measured for every model together by
    ``python -m attnlib time`` (`timing_columns`: `wall_time_ms` the median single-image forward pass,
    `wall_time_measured`, `time_ratio` HA / model...) in place of the training runs' own timing.

    status: "complete" when at least one seed is (its `params` from that seed when seed 0 is not);
    otherwise seed 0's status, with no numbers. A row with a saved seed has the seeds not used, and why,
    as its `detail`. Never trains."""
    names = list(table["experiment"])
    times = timing_columns(results_dir, preset, names)
    table = table.drop(columns=["wall_time_ms", "wall_time_std_ms", "wall_time_device"]).reset_index(
        drop=True
    )
    table = table.astype({"status": object, "detail": object, "params": object})
    columns: dict[str, list] = defaultdict(list)  # accuracy, seeds, accuracy_sd, seed_list, seed_problems
    for i, name in enumerate(names):
        acc, problems = seed_accuracies(results_dir, preset, name, data=data)
        values = list(acc.values())
        if values:  # at least one usable seed; detail names the seed folders that are not used
            if table.at[i, "status"] != "complete":  # seed 0 is not, another seed is: its params
                first = read(name, preset, seed=min(acc), results_dir=results_dir, data=data)
                table.at[i, "status"], table.at[i, "params"] = "complete", first.run.metrics["params"]
            table.at[i, "detail"] = "; ".join(problems)
        columns["accuracy"].append(float(np.mean(values)) if values else None)
        columns["seeds"].append(len(values))
        columns["accuracy_sd"].append(float(np.std(values, ddof=1)) if len(values) > 1 else None)
        columns["seed_list"].append(sorted(acc))
        columns["seed_problems"].append("; ".join(problems))
    for column, values in columns.items():  # accuracy keeps its place; the others come after
        table[column] = values
    table["wall_time_device"] = None
    return table.merge(times, on="experiment")


#: The columns `table3` shows.
TABLE3_COLUMNS = (
    "pair",  # the normal model's title
    "variant",  # normal / HA
    "seeds",
    "accuracy",  # the mean over the seeds
    "accuracy_sd",
    "params",
    "wall_time_ms",  # None: not measured
    "time_ratio",  # HA / model, paired by round: `attnlib.lab.timing.ratios`
    "status",
    "experiment",
    "detail",
)


def table3(results_dir: str | Path = "results", preset: str = "paper", *, data=None):
    """Table 3 of the [Re] report: each model beside its HA variant (`table3_names`), as `with_seeds` of the
    saved results' `frame`, in `TABLE3_COLUMNS`."""
    names = table3_names()
    table = with_seeds(collect(results_dir, preset, names, 0, data=data), results_dir, preset, data=data)
    return table[list(TABLE3_COLUMNS)]


#: The columns `table1` shows: no `pair` / `variant` (no HA model in Table 1), no data provenance.
TABLE1_COLUMNS = tuple(c for c in COLUMNS if c not in ("pair", "variant", "dataset", "test_images"))


def table1(results_dir: str | Path = "results", preset: str = "paper", seed: int = 0, *, data=None):
    """Table 1 of Cordonnier et al. (`table1_names`): the saved results' `frame` in `TABLE1_COLUMNS`."""
    return collect(results_dir, preset, table1_names(), seed, data=data)[list(TABLE1_COLUMNS)]

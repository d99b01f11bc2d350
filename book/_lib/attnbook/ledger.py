"""The claims ledger and the longer runs, as the chapters show them: the ledger at a chapter's preset and its
table, the compute plan of the `long` runs it reads, the numbers of one long run (per-layer peaks, centre
displacement) and the first and last epoch of each layer's measures."""

from __future__ import annotations

from attnbook.params import Params
from attnbook.phrases import NOT_FOUND_CELL, fmt, is_missing, title, word_list
from attnlib import experiments
from attnlib.analysis import plan
from attnlib.analysis.literature import short
from attnlib.results.tables import collect


def training_time(params: Params):
    """(table, total CPU seconds): one row per experiment with the epochs and training wall time of its saved
    run at ``params`` (from its provenance; never trains), and the CPU time of the complete runs
    (`attnlib.results.tables` ``cpu_seconds``: the process's own where recorded, else wall time x threads)."""
    frame = collect(params.results_dir, params.preset, seed=params.seed or 0, data=params.data)
    done = frame["status"] == "complete"
    table = frame[["experiment", "status"]].copy()
    table["epochs"] = [f"{int(e)}" if ok else "—" for ok, e in zip(done, frame["epochs"], strict=True)]
    table["train time"] = [
        f"{t / 60:.1f} min" if ok else "—" for ok, t in zip(done, frame["train_seconds"], strict=True)
    ]
    return table, float(frame.loc[done, "cpu_seconds"].sum())


def claims_evidence(params: Params):
    """What the claims ledger judges (``attnlib.analysis.claims.gather``) at the chapter's preset, with the runs
    at its ``long_preset`` where they are saved (``gather``'s ``prefer``), read from ``results/`` (never
    trains)."""
    from attnlib.analysis import claims

    return claims.gather(params.results_dir, params.preset, data=params.data, prefer=params.long_preset)


def claims_ledger(params: Params, keys=None, evidence=None):
    """The claims ledger (``attnlib.analysis.claims.ledger``) of ``evidence`` (None: ``claims_evidence(params)``);
    only the claims of ``keys`` when given, in ledger order."""
    from attnlib.analysis import claims

    frame = claims.ledger(claims_evidence(params) if evidence is None else evidence)
    return frame if keys is None else frame[frame["claim"].isin(list(keys))]


def measure_endpoints(histories: dict, measures=("peak", "distance")):
    """The numbers behind a figure of measures against the epoch: per run (``{name: history}``) and measure,
    each layer's value after the first and after the last epoch (a pandas DataFrame, one row per run and
    measure, columns "layer 1"... as "first → last")."""
    import pandas as pd

    from attnbook import viz

    spec = {"peak": ("peak (× uniform)", "{:.2f}"), "distance": ("distance (px)", "{:.1f}")}
    rows = []
    for name, history in histories.items():
        for measure in measures:
            series = viz.layer_series(history, measure)
            if not series:
                continue
            label, number = spec[measure]  # (not `fmt`: that is the module's prose formatter)
            row = {"model": name, "measure": label}
            row |= {
                f"layer {i + 1}": f"{number.format(v[0])} → {number.format(v[-1])}" for i, v in series.items()
            }
            rows.append(row)
    return pd.DataFrame(rows).fillna("")


#: The presets of the compute record (``long_plan``): the budget grid's seeds and the ledger's `long` runs.
PLAN_PRESETS = ("budget", "long")


def long_plan(params: Params):
    """(table, numbers): the `long` runs the ledger reads (``plan.LONG_PLAN``), one row each: the claims it
    informs now, those it will inform once the long preset holds as many seeds a side as the comparison
    needs (judged over seeds or Table 3's timing at budget until then), when complete its CPU-hours (the
    process's CPU time where recorded, else wall time times threads: `tables.collect`) and precision
    (`tables.precision_words`: a run resumed on another machine may have changed it; else "—"), the
    machine it trained on and its estimated CPU-hours on an idle core; and the numbers the appendix's compute
    section quotes: ``done`` / ``runs`` (long runs saved / listed), ``hours`` (their CPU-hours), ``seed_runs``
    and ``seed_hours`` (the budget grid's further seeds, 1 and up), ``variant_runs`` and ``variant_hours``
    (the registry's claim variants at the budget preset, every seed). Never trains."""
    import pandas as pd

    from attnlib.analysis import claims
    from attnlib.results import tables
    from attnlib.results.timing import device_words

    budget_preset, long_preset = PLAN_PRESETS
    saved = tables.collect(params.results_dir, long_preset, list(plan.LONG_PLAN), data=params.data)
    saved = saved.set_index("experiment")
    keys = {c.key: c.title for c in claims.CLAIMS}
    rows, spent, done = [], 0.0, 0
    for name, informs in plan.LONG_PLAN.items():
        complete = saved.at[name, "status"] == "complete"
        done += complete
        hours = saved.at[name, "cpu_seconds"] / 3600 if complete else 0.0  # CPU time, else wall time x threads
        spent += hours
        device = str(saved.at[name, "wall_time_device"]) if complete else ""
        precision = saved.at[name, "precision"]
        over_seeds = [k for k in informs if claims.EVIDENCE.get(k, ((), ""))[1] in ("seeds", "timed")]
        rows.append(
            {
                "run": title(name),  # the display name, as every table names a model
                "claims it informs": "; ".join(keys[k] for k in informs if k not in over_seeds) or "—",
                "at budget until 3 seeds a side": "; ".join(keys[k] for k in over_seeds) or "—",
                "trained": f"{hours:.1f} CPU-hours, "  # all 60 epochs (the caption says so), else "—"
                f"{'precision not recorded' if is_missing(precision) or not precision else precision}"
                if complete
                else "—",
                "machine": device_words(device),
                "estimate (CPU-hours)": f"{plan.estimate_seconds(name, long_preset) / 3600:.1f}",
            }
        )
    def saved(names, seeds):
        found = pd.concat(
            [tables.collect(params.results_dir, budget_preset, names, seed=s, data=params.data) for s in seeds]
        )
        return found[found["status"] == "complete"]

    seeds = saved(None, range(1, 10))
    variants = [n for n in experiments.names(variants=True) if n not in experiments.names()]
    variant_runs = saved(variants, range(10))
    numbers = {
        "done": f"{done}",
        "runs": f"{len(rows)}",
        "hours": f"{spent:.1f}",
        "seed_runs": f"{len(seeds)}",
        "seed_hours": f"{float(seeds['cpu_seconds'].sum()) / 3600:.1f}",
        "variant_runs": f"{len(variant_runs)}",
        "variant_hours": f"{float(variant_runs['cpu_seconds'].sum()) / 3600:.1f}",
    }
    return pd.DataFrame(rows), numbers


def long_run_numbers(run) -> dict[str, str]:
    """The numbers the prose quotes of a 60-epoch run (its history logs the per-layer measures every epoch):
    ``epochs``, ``accuracy``, ``peaks`` (each layer's mean peak after the last epoch, "1.01, 1.02 and
    1.69"), ``flat`` (how many layers stayed below ``NEAR_UNIFORM`` times uniform in every epoch) and
    ``layers``; "—" for each when the run is not saved."""
    from attnbook import viz
    from attnlib.measures import NEAR_UNIFORM

    keys = ("epochs", "accuracy", "peaks", "flat", "layers")
    series = {} if run is None else viz.layer_series(run.history, "peak")
    if not series:
        return dict.fromkeys(keys, NOT_FOUND_CELL)
    return {
        "epochs": f"{len(run.history)}",
        "accuracy": fmt(run.test_accuracy),
        "peaks": word_list(f"{v[-1]:.2f}" for v in series.values()),
        "flat": f"{sum(v.max() < NEAR_UNIFORM for v in series.values())}",
        "layers": f"{len(series)}",
    }


def seed_numbers(name: str, preset: str, params: Params) -> dict[str, str]:
    """Each saved seed's test accuracy and first-layer mean peak (× uniform) from initialisation to the end, at
    `preset`: {"accuracy": "67.5% (seed 0); …", "peak": "6.2× → 41.8× (seed 0); …"} ("not saved")."""
    from attnlib.analysis.rules import probe_layers
    from attnlib.results.load import read_seeds

    found = read_seeds(name, preset, results_dir=params.results_dir, data=params.data, seeds=range(5))
    runs = {s: saved.run for s, saved in found.items() if saved.complete}
    peaks = {s: probe_layers(run, "peak")[:2] for s, run in runs.items()}
    accuracy = [f"{fmt(run.test_accuracy)} (seed {s})" for s, run in runs.items()]
    peak = [f"{i[0]:.1f}× → {e[0]:.1f}× (seed {s})" for s, (e, i) in peaks.items() if e and i]
    return {"accuracy": "; ".join(accuracy) or "not saved", "peak": "; ".join(peak) or "not saved"}


def centre_numbers(run, shorter=None) -> dict[str, str]:
    """The numbers the prose quotes of a quadratic model's centres (``measures.logged_centres``), in input
    pixels (``rules.key_pixels``: a key position spans 32 / grid-width of them): ``epochs``, ``accuracy``, ``moved`` (each layer's mean
    displacement from initialisation at the end), ``short_moved`` / ``short_epochs`` (the same of the
    ``shorter`` run) and ``spread_start`` / ``spread_end`` (each layer's RMS distance of its centres from
    their mean, at initialisation and at the end); "—" where a run or its attention grid is not saved."""
    from attnlib.analysis.rules import key_pixels
    from attnlib.measures import centre_displacement, centre_spread, logged_centres

    out = dict.fromkeys(
        ("epochs", "accuracy", "moved", "short_moved", "short_epochs", "spread_start", "spread_end"),
        NOT_FOUND_CELL,
    )
    ours, scale = logged_centres(run), key_pixels(run)
    if ours is not None and scale is not None:
        out |= {
            "epochs": f"{len(ours) - 1}",
            "accuracy": fmt(run.test_accuracy),
            "moved": word_list(f"{v * scale:.1f}" for v in centre_displacement(ours)[-1].tolist()),
            "spread_start": word_list(f"{v * scale:.1f}" for v in centre_spread(ours[0]).tolist()),
            "spread_end": word_list(f"{v * scale:.1f}" for v in centre_spread(ours[-1]).tolist()),
        }
    before, scale = logged_centres(shorter), key_pixels(shorter)
    if before is not None and scale is not None:
        out["short_epochs"] = f"{len(before) - 1}"
        out["short_moved"] = word_list(f"{v * scale:.1f}" for v in centre_displacement(before)[-1].tolist())
    return out


def ledger_table(frame):
    """The ledger at a glance: each claim's short title, whose claim it is, the models it is judged on
    (``models``; "—" for the live check) and the verdict with the evidence and scale it rests on (``label``:
    "not reproduced — at 60 epochs (long), 1 seed each"; ``ledger_markdown`` gives the words, measure, value
    and rule of each). Claims of one source leave the source out: the caption names it."""
    label = frame["label"] if "label" in frame else frame["verdict"]
    models = frame["models"].replace("", "—") if "models" in frame else "—"
    shown = frame.assign(source=frame["source"].map(short), verdict=label, models=models)
    sources = ["source"] if frame["source"].nunique() > 1 else []
    columns = ["title", *sources, "models", "verdict"]
    return shown[columns].rename(columns={"title": "claim", "models": "judged on"})

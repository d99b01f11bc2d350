"""The plan of the runs the analysis reads, and their CPU time: the per-core throughput of each model
(THROUGHPUT, measured: protocol_history.yaml) and the estimates built on it (estimate_seconds, grid_seconds:
`python -m attnlib list`, the appendix's compute table), the `long` runs the ledger needs most (LONG_PLAN,
within 30 CPU hours), the runs of the other presets (PLANS: what `queue` trains by default) and the seeds the
HA comparisons still lack (seeds_asked: `make seeds`). Data and reading only: the lab trains what it names.
"""

from __future__ import annotations

from attnlib import experiments
from attnlib.analysis.rules import HA_PAIRS
from attnlib.experiments import CIFAR10_TEST, CIFAR10_TRAIN, EXPERIMENTS, PRESETS, preset_for

# Per-core throughput (train, eval) in images/s of each budget model, measured (how and when:
# protocol_history.yaml).
THROUGHPUT: dict[str, dict[str, tuple[float, float]]] = {
    preset: {name: tuple(ips) for name, ips in table.items()}
    for preset, table in experiments._data("protocol_history.yaml")["throughput"].items()
    if preset in PRESETS
}


def _grid_model(name: str) -> str:
    """The model of the tables' grid that `name` is a variant of (through variants of variants), or itself."""
    base = EXPERIMENTS[name].variant_of
    return name if base is None else _grid_model(base)


for _table in THROUGHPUT.values():  # a variant is its base's network (another init): the base's throughput
    _table.update({n: _table[_grid_model(n)] for n in EXPERIMENTS if _grid_model(n) in _table})
THROUGHPUT["long"] = THROUGHPUT["budget30"] = THROUGHPUT["budget"]  # these presets train the budget models
REFERENCE_CORES = 2
RUN_OVERHEAD_S = 15.0  # per run: building the model, attention maps of 100 images, 310 timed passes

#: The `long` runs (60 epochs on CPUs) the ledger needs most (issue 16 §2), in the order to train them, with
#: the claims of `attnlib.analysis.claims.CLAIMS` each informs (what the run buys: its maps, centres or
#: accuracy at 60 epochs; a claim over seeds moves to `long` only with MIN_SEEDS seeds a side, so one seed
#: adds its 60-epoch accuracy beside the budget interval); their CPU time is kept within 30 CPU hours (runs
#: resume from their checkpoints).
LONG_PLAN = {  # the learned pair first: at budget the paper init stayed flat, the variant did not
    "learned_9h": ("learned_shifts", "quadratic_vs_learned", "near_resnet"),
    "learned_9h_pos_init": ("learned_shifts",),
    "quadratic_aniso_9h": (
        "centres_move",
        "centres_grid",
        "centres_depth",
        "quadratic_vs_learned",
        "near_resnet",
    ),
    "resnet18": ("near_resnet",),
    "resnet18_narrow": ("near_resnet",),  # the width comparable with the attention models
    # the Fig. 8 model's control: content maps, fixed-shift heads, HA's layers and depth against its model
    "learned_content_9h": (
        "content_maps",
        "content_shift_heads",
        "near_resnet",
        "ha_gain",
        "ha_layers_differ",
        "ha_depth",
        "ha_not_sparse",
        "ha_inference_time",
    ),
    # the Fig. 8 model
    "learned_content_9h_ha": (
        "ha_gain",
        "ha_layers_differ",
        "ha_depth",
        "ha_not_sparse",
        "ha_inference_time",
    ),
}


def seeds_asked(results_dir, preset: str = "budget", data=None) -> list[tuple[str, int]]:
    """The runs (experiment, seed) that the HA comparisons at `preset` still lack by the project's standard
    (`compare.Tested.seeds_wanted` per side: MIN_SEEDS, then MORE_SEEDS while the pair is inconclusive
    within the family of `HA_PAIRS`, i.e. after Holm's adjustment, as the book judges it), each side's
    lowest unused seeds, in `HA_PAIRS` order. A run cut off before it finished counts as missing, so
    training it resumes it. Never trains."""
    import itertools

    from attnlib.analysis import stats as compare
    from attnlib.results import tables

    saved = {
        base: {n: tables.seed_accuracies(results_dir, preset, n, data=data)[0] for n in (base, base + "_ha")}
        for base in HA_PAIRS
    }
    family = compare.family({base: tuple(found.values()) for base, found in saved.items()})
    jobs = []
    for base, found in saved.items():
        wanted = family[base].seeds_wanted
        for name, seeds in found.items():
            free = (s for s in itertools.count() if s not in seeds)
            jobs += [(name, next(free)) for _ in range(max(0, wanted - len(seeds)))]
    return jobs


def estimate_seconds(name: str, preset: str = "budget") -> float | None:
    """Estimated wall time (s) of one single-thread run on full CIFAR-10 on an otherwise idle machine, or None
    when its throughput was never measured:
    epochs · (50 000 / train + 10 000 / eval images/s) + RUN_OVERHEAD_S, with the per-core images/s of
    `THROUGHPUT`."""
    per_core = THROUGHPUT.get(preset, {}).get(name)
    if per_core is None:
        return None
    train_ips, eval_ips = per_core
    epochs = preset_for(name, preset).train.epochs
    return epochs * (CIFAR10_TRAIN / train_ips + CIFAR10_TEST / eval_ips) + RUN_OVERHEAD_S


def grid_seconds(per_run: list[float], cores: int = REFERENCE_CORES) -> float:
    """Wall time of a grid run as `cores` single-thread trainings side by side (the fastest way on a small
    machine: no threads waiting for each other): the longer of total / cores and the longest run."""
    return max(sum(per_run) / cores, max(per_run))


#: The runs of the two presets of issue 48, in the order to train them (each with seeds 0-1 before any seed 2):
#: HA − model of the [Re] Fig. 8 pair at 30 epochs, and the map claims at the papers' 16x16 tokens on the
#: quadratic model and the learned-2D model without content in both initialisations.
BUDGET30_PLAN = {name: ("ha_gain",) for name in ("learned_content_9h", "learned_content_9h_ha")}
TOKENS16_PLAN = {
    "quadratic_aniso_9h": ("centres_move", "centres_grid", "centres_depth"),
    "learned_9h": ("learned_shifts",),
    "learned_9h_init_re": ("learned_shifts",),
}
PLANS = {"long": LONG_PLAN, "budget30": BUDGET30_PLAN, "tokens16": TOKENS16_PLAN}

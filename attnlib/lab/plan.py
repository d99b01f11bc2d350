"""Planning the lab's CPU time: the `long` runs the ledger needs most (LONG_PLAN, within LONG_CPU_HOURS) and the
seeds the HA comparisons still lack (seeds_asked). Moved verbatim from attnlib.claims (issue 32).
"""

from __future__ import annotations

from attnlib.analysis.rules import HA_PAIRS

#: The `long` runs (60 epochs on CPUs) the ledger needs most (issue 16 §2), in the order to train them, with
#: the claims each informs; their CPU time is kept within LONG_CPU_HOURS (runs resume from their checkpoints).
LONG_PLAN = {  # the learned pair first: at budget the paper init stayed flat, the variant did not
    "learned_9h": ("learned_shifts",),
    "learned_9h_pos_init": ("learned_shifts",),
    "quadratic_aniso_9h": ("centres_move", "centres_depth"),
    "resnet18": ("near_resnet",),
    "resnet18_narrow": ("near_resnet",),
    "learned_content_9h": ("content_maps", "near_resnet", "ha_gain"),
    "learned_content_9h_ha": ("ha_gain", "ha_layers_differ", "ha_depth", "ha_not_sparse"),
}
LONG_CPU_HOURS = 30.0


def seeds_asked(results_dir, preset: str = "budget", data=None) -> list[tuple[str, int]]:
    """The runs (experiment, seed) that the HA comparisons at `preset` still lack by the project's standard
    (`compare.Welch.seeds_wanted` per side: MIN_SEEDS, then MORE_SEEDS while the interval holds 0), each
    side's lowest unused seeds, in `HA_PAIRS` order. A run cut off before it finished counts as missing, so
    training it resumes it. Never trains."""
    import itertools

    from attnlib.analysis import stats as compare
    from attnlib.results import tables

    jobs = []
    for base in HA_PAIRS:
        found = {
            n: tables.seed_accuracies(results_dir, preset, n, data=data)[0] for n in (base, base + "_ha")
        }
        accuracies = [list(seeds.values()) for seeds in found.values()]
        wanted = compare.welch(*accuracies).seeds_wanted if all(accuracies) else compare.MIN_SEEDS
        for name, seeds in found.items():
            free = (s for s in itertools.count() if s not in seeds)
            jobs += [(name, next(free)) for _ in range(max(0, wanted - len(seeds)))]
    return jobs

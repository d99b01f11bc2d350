"""The claims' rules: the `Evidence` a verdict is computed from, the families of experiments the claims are
judged on (claims.yaml's ``families``), the measures of saved runs (per-layer profile, probes, centres) and the
rule functions of the claims judged on them and on accuracies against ResNet18, each taking its parameters as
claims.yaml gives them; `attnlib.analysis.claims` judges the claims of claims.yaml and builds the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from attnlib import experiments, measures
from attnlib.analysis.claims_file import FAMILY_NAMES, Experiments, document, families

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_MEASURED, UNTESTABLE = (
    "reproduced",
    "not reproduced",
    "inconclusive",
    "not measured",
    "untestable here",  # our scale cannot reach the conditions the claim is about
)
VERDICTS = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_MEASURED, UNTESTABLE)

IMAGE_SIDE = 32  # input pixels along a CIFAR-10 image's side: distances are in these (px)

# claims.yaml's families: HA_FAMILY, every experiment of the HA pairs, each model before its HA variant
QUADRATIC, LEARNED_POSITIONAL, LEARNED_CONTENT, RESNETS, HA_PAIRS, HA_FAMILY = map(
    families(document()).get, (*FAMILY_NAMES, "ha_family")
)


def display(experiment: str) -> str:
    """How the ledger's strings name an experiment: its display name, the registry's title ("learned_9h" ->
    "SA learned 2D, 9 heads"); a name the registry does not know as it is."""
    found = experiments.EXPERIMENTS.get(experiment)
    return experiment if found is None else found.title


@dataclass
class Evidence:
    """What the verdicts are computed from.

    runs: {experiment: RunResult or None}, seed 0, at `presets[experiment]` where given, else at `preset`;
    accuracies: {experiment: [test accuracy of every saved seed]}, at `seed_presets[experiment]` where
    given, else at `preset` (a comparison over seeds may come from another preset than the maps: see
    `gather`); params_paper: {experiment:
    parameters at the paper preset}; theorem_error: relative error of `attention_from_conv` against
    `F.conv2d` (None: not checked)."""

    preset: str
    runs: dict = field(default_factory=dict)
    accuracies: dict[str, list[float]] = field(default_factory=dict)
    params_paper: dict[str, int] = field(default_factory=dict)
    theorem_error: float | None = None
    presets: dict[str, str] = field(default_factory=dict)
    seed_presets: dict[str, str] = field(default_factory=dict)
    # {experiment: {seed: (inference wall time ms, device)}} of the runs behind `accuracies`
    wall_times: dict[str, dict] = field(default_factory=dict)
    train_cost: dict | None = None  # the train-cost report of the ledger's preset (attnlib.analysis.costs)
    timing: dict = field(default_factory=dict)  # {HA model: Table 3's timed ratio} (costs.table3_timing)
    # {experiment: {seed: RunResult}}: every saved seed at the ledger's own `preset` (never the longer one), on
    # which the map claims are judged again seed by seed (`attnlib.analysis.claims.seed_verdicts`)
    own_seed_runs: dict[str, dict] = field(default_factory=dict)
    # the preset at the papers' geometry (16x16 tokens: `claims.GEOMETRY`) and {experiment: {seed: RunResult}}
    # of its saved runs, on which the map claims are judged where each model they read there has 2 seeds
    geometry: str | None = None
    geometry_runs: dict[str, dict] = field(default_factory=dict)

    def preset_of(self, experiment: str) -> str:
        """The preset the evidence of `experiment` comes from."""
        return self.presets.get(experiment, self.preset)

    def name(self, experiment: str) -> str:
        """`experiment` as a value names it (its display name): with its preset in brackets when that is not the
        ledger's."""
        return self._labelled(experiment, self.preset_of(experiment))

    def seeds_name(self, experiment: str) -> str:
        """`experiment` as a comparison over its seeds names it (its accuracies' preset in brackets)."""
        return self._labelled(experiment, self.seed_presets.get(experiment, self.preset))

    def _labelled(self, experiment: str, preset: str) -> str:
        return display(experiment) + ("" if preset == self.preset else f" ({preset})")


# ------------------------------------------------------------------------------------ per-layer profile
def layer_profile(run) -> list[dict[str, float]] | None:
    """Per layer of a saved run's token attention: mean attended distance (input pixels), peak (multiple of
    uniform), image dependence (TV from the mean map) and, from the second layer on, `similarity` σ with the
    previous layer. From the last history row when the run logged measures every epoch (`long`), else
    from `attention.npz` (the saved query pixels of the first test images). None without token maps."""
    if run is None:
        return None
    hist = run.history
    if hist is not None and "distance_0" in getattr(hist, "columns", ()):
        last = hist.iloc[-1]
        layers = sorted(int(c.rsplit("_", 1)[1]) for c in hist.columns if c.startswith("distance_"))
        keys = ("distance", "peak", "image_dependence", "similarity")
        return [{k: float(last[f"{k}_{i}"]) for k in keys if f"{k}_{i}" in last} for i in layers]
    att = run.attention or {}
    if "rows" not in att:
        return None
    import torch

    rows, mean = (torch.as_tensor(np.asarray(att[k], np.float64)) for k in ("rows", "rows_mean"))
    queries, scale = np.asarray(att["queries"]), key_pixels(run)
    out = []
    for layer in range(rows.shape[1]):
        out.append(
            {
                "distance": float(measures.mean_distance(mean[layer][None], queries).mean()) * scale,
                "peak": float(measures.peak(rows[:, layer]).mean()),
                "image_dependence": float(measures.image_dependence(rows[:, layer], mean[layer]).mean()),
            }
        )
        if layer:  # σ over the saved images and query pixels, as the probe takes it over all of them
            out[-1]["similarity"] = float(measures.layer_similarity(rows[:, layer], rows[:, layer - 1]))
    return out


def key_pixels(run) -> float | None:
    """Input pixels one key position of a saved run's attention grid spans, 32 / grid width (4 on the budget's
    8 × 8 grid): the factor that turns the model's key positions (grid cells, the quadratic centres' unit)
    into input pixels, the book's one unit of distance. From attention.npz, else the standard probe; None
    when the run saved neither."""
    att = getattr(run, "attention", None) or {}
    if "grid" in att:
        return IMAGE_SIDE / float(np.asarray(att["grid"])[-1])
    probe = getattr(run, "probe", None) or {}
    return float(probe["pixels_per_token"]) if "pixels_per_token" in probe else None


def centre_moves(run) -> list[float] | None:
    """Mean displacement of the quadratic centres Δ from their initialisation per layer, in input pixels
    (key positions × `key_pixels`), at the end of a saved run; None without a centres log or an attention
    grid to convert it."""
    centres, scale = measures.logged_centres(run), key_pixels(run)
    if centres is None or scale is None:
        return None
    return [float(v) * scale for v in measures.centre_displacement(centres)[-1]]


# ------------------------------------------------------------------------------------------------ rules
def verdict_of(passes: list[bool | None]) -> str:
    """reproduced when every model passes, not reproduced when every one fails, inconclusive otherwise (a
    None: a model not judged, e.g. not measured against initialisation)."""
    if all(p is True for p in passes):
        return REPRODUCED
    return NOT_REPRODUCED if all(p is False for p in passes) else INCONCLUSIVE


def _fmt_layers(values, spec="{:.2f}") -> str:
    return " / ".join(spec.format(v) for v in values)


def below_tolerance(ev: Evidence, tolerance: float):
    if ev.theorem_error is None:
        return "not checked", NOT_MEASURED
    verdict = REPRODUCED if ev.theorem_error < tolerance else NOT_REPRODUCED
    return f"relative error {ev.theorem_error:.1e}", verdict


def centres_leave_init(ev: Evidence, models: Experiments, moved_px: float):
    found = {n: centre_moves(ev.runs.get(n)) for n in models}
    found = {n: m for n, m in found.items() if m is not None}
    if not found:
        return "no quadratic run saved", NOT_MEASURED
    moved = [v >= moved_px for m in found.values() for v in m]
    text = "; ".join(f"{ev.name(n)}: {_fmt_layers(m, '{:.1f}')} px per layer" for n, m in found.items())
    verdict = REPRODUCED if all(moved) else NOT_REPRODUCED if not any(moved) else INCONCLUSIVE
    return text, verdict


def probe_layers(run, key: str) -> tuple[list[float] | None, list[float] | None, float | None]:
    """(end, init, uniform) of one measure (``distance`` in input pixels or ``peak``), per layer averaged over
    heads: from the run's standard probe (probe.npz: the same images and every query at initialisation, at
    the end, and for uniform attention on the same grid) where it was saved, else the end values of
    ``layer_profile`` with init and uniform None (not measured)."""
    probe = getattr(run, "probe", None)
    if probe is not None and f"end_{key}" in probe and int(probe.get("token_layers", 1)):
        end, init = (np.asarray(probe[f"{w}_{key}"], np.float64) for w in ("end", "init"))
        return end.mean(-1).tolist(), init.mean(-1).tolist(), float(probe[f"uniform_{key}"])
    profile = layer_profile(run)
    return ([p[key] for p in profile] if profile else None), None, None


def _rises(d: list[float], uniform: float | None = None) -> bool:
    """Local early, far later: the last layer's distance above the first's, rising (or level) at half the
    steps or more, and, where the uniform value is known, the first layer more local than uniform attention
    (a flat model whose layers all sit at the uniform distance does not count as rising)."""
    monotone = sum(b >= a for a, b in zip(d, d[1:], strict=False)) >= (len(d) - 1) / 2
    return d[-1] > d[0] and monotone and (uniform is None or d[0] < uniform)


def _further_last(d: list[float], uniform: float | None = None) -> bool:
    """The weak form of ``_rises`` that initialisation is held to: the last layer attends further than the
    first at all."""
    return d[-1] > d[0]


def _created_by_training(end, init, holds, uniform=None, at_init=None) -> tuple[bool | None, str]:
    """(passes, note) of an ordering rule ``holds`` (values per layer, uniform value or None -> bool) on a
    model: False when the end values break it; True when they hold it and the initial ones did not hold
    ``at_init`` (default ``holds``; a weaker form, so that an order already begun at initialisation is not
    credited to training); False when they did; None when it holds at the end but initialisation was not
    measured. The note says which."""
    if not holds(end, uniform):  # the initial values shown all the same: every measure beside its start
        return False, "" if init is None else f"at initialisation {_fmt_layers(init, '{:.1f}')}"
    if init is None:
        return None, "not measured against initialisation"
    if (at_init or holds)(init, uniform):
        return False, f"already so at initialisation, {_fmt_layers(init, '{:.1f}')}"
    return True, f"at initialisation {_fmt_layers(init, '{:.1f}')}"


def _ordering(
    ev: Evidence, names, key: str, holds, unit: str, spec="{:.1f}", at_init=None
) -> tuple[str, str]:
    """An ordering claim on the models ``names``: each passes only if training created the order
    (``_created_by_training``); reproduced when every model passes, not reproduced when none does and
    each was measured, inconclusive otherwise (one model each way, or an order never compared with
    initialisation). The uniform value of the probe is named where known."""
    parts, passes = [], []
    for n in names:
        end, init, uniform = probe_layers(ev.runs.get(n), key)
        if end is None:
            continue
        ok, note = _created_by_training(end, init, holds, uniform, at_init)
        passes.append(ok)
        extra = "; ".join(
            filter(None, [note, None if uniform is None else f"uniform {spec.format(uniform)}"])
        )
        parts.append(f"{ev.name(n)}: {_fmt_layers(end, spec)}{unit}" + (f" ({extra})" if extra else ""))
    if not passes:
        return "no token attention saved", NOT_MEASURED
    return "; ".join(parts), verdict_of(passes)


def local_then_far(ev: Evidence, models: Experiments):
    return _ordering(ev, models, "distance", _rises, " px", at_init=_further_last)


def learned_fixed_shifts(ev: Evidence, models: Experiments, local_peak: float, flat_peak: float):
    """A positional-only model passes when its first layer peaks at `local_peak` or more and did not at
    initialisation (its standard probe's, else a fresh model's: positional attention is the same for every
    image), fails when it stays below `flat_peak` or started that peaked; reproduced when every model passes,
    not reproduced when every one fails, inconclusive otherwise."""
    parts, passes = [], []
    for name in models:
        run = ev.runs.get(name)
        end, init, _ = probe_layers(run, "peak")
        if not end:
            continue
        start = init[0] if init else initial_peaks(name, ev.preset_of(name))[0]
        parts.append(f"{ev.name(name)}: first layer {end[0]:.2f}× uniform, {start:.2f}× at initialisation")
        passes.append(
            True
            if end[0] >= local_peak > start
            else False
            if end[0] < flat_peak or start >= local_peak
            else None
        )
    if not parts:
        return "no positional-only learned run saved", NOT_MEASURED
    # our changes of these models (registry variants, where not judged as members) beside the verdict
    text = "; ".join(parts) + "".join(_variant_peak(ev, v) for v in _variants_of(models) if v not in models)
    return text, verdict_of(passes)


def _variant_base(name: str) -> str | None:
    """The experiment a claim variant changes (`Experiment.variant_of`), None for any other."""
    return experiments.get(name).variant_of


def _variants_of(bases) -> list[str]:
    """The registry's claim variants of the experiments `bases`, in registry order."""
    return [n for n in experiments.names(variants=True) if _variant_base(n) in bases]


def _variant_peak(ev: Evidence, name: str) -> str:
    """'; <its display name>, our variant, not the paper's model: first layer X× uniform, Y× at
    initialisation' when the variant is saved, else ''. Positional-only heads attend alike for every input, so
    the initial peak is that of a fresh model (seed 0) on any image."""
    end, init, _ = probe_layers(ev.runs.get(name), "peak")
    if not end:
        return ""
    start = init[0] if init else initial_peaks(name, ev.preset_of(name))[0]
    return (
        f"; {ev.name(name)}, our variant, not the paper's model: first layer {end[0]:.2f}× uniform, "
        f"{start:.2f}× at initialisation"
    )


# initial_peaks' answers: {(name, preset, ids of the registry objects behind them): (peaks, those objects)}
_INITIAL_PEAKS: dict[tuple, tuple[list[float], tuple]] = {}


def initial_peaks(name: str, preset: str) -> list[float]:
    """Per layer, the attention peak (× uniform) of a freshly built model of `name` (seed 0) on 8 random
    images: where a positional-only model starts. Deterministic, so computed once per process (seconds on a
    CPU) for each experiment and preset as the registry defines them (a replaced registry entry is new)."""
    sources = (experiments.EXPERIMENTS.get(name), experiments.PRESET_TABLE.get(preset))
    key = (name, preset, *map(id, sources))
    if key not in _INITIAL_PEAKS:
        _INITIAL_PEAKS[key] = (_initial_peaks(name, preset), sources)
    return list(_INITIAL_PEAKS[key][0])


def _initial_peaks(name: str, preset: str) -> list[float]:
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = experiments.build_model(name, preset).eval()
        images = torch.randn(8, 3, 32, 32)
        with torch.no_grad():
            row = measures.probe(model, images)
    return [v for k, v in row.items() if k.startswith("peak_")]


def content_depends_on_image(ev: Evidence, models: Experiments, image_dependent: float):
    """With content the maps depend on the image, and training made them so: a model passes when some layer's
    image dependence (TV of an image's map from the mean map, heads averaged) reaches `image_dependent` and
    exceeds that layer's value at initialisation, where the random content projections already make the maps
    depend on the image (uniform attention: 0). Reproduced when every model with content passes, not
    reproduced when none does, inconclusive otherwise or where initialisation was not measured."""
    parts, passes = [], []
    for name in models:
        end, init, uniform = probe_layers(ev.runs.get(name), "image_dependence")
        if not end:
            continue
        text = f"{ev.name(name)}: {_fmt_layers(end)} TV per layer"
        high = [i for i, v in enumerate(end) if v >= image_dependent]
        if init is None:
            passes.append(None if high else False)
            text += " (not measured against initialisation)"
        else:
            passes.append(any(end[i] > init[i] for i in high))
            text += f" (at initialisation {_fmt_layers(init)}; uniform {uniform:.2f})"
        parts.append(text)
    if not parts:
        return "no learned-with-content run saved", NOT_MEASURED
    return "; ".join(parts), verdict_of(passes)


def close_to_resnet(ev: Evidence, resnets: Experiments, comparable_within: float, near: float, far: float):
    """The claim "close to ResNet18 at a comparable number of parameters": each ResNet of `resnets` against the
    best paper attention model whose parameter count is within `comparable_within` of its own, compared within
    one preset (reproduced within `near` points, not beyond `far`); the first ResNet with such a model decides,
    untestable where none has one."""
    judged = [
        _against_resnet(ev, n, comparable_within, near, far) for n in resnets if ev.runs.get(n) is not None
    ]
    judged = [j for j in judged if j is not None]
    if not judged:
        return "ResNet18 or the attention models not saved", NOT_MEASURED
    return next((j for j in judged if j[1] != UNTESTABLE), judged[0])


def _params(run) -> int | None:
    return (getattr(run, "metrics", None) or {}).get("params")


def _comparable(a: int | None, b: int | None, within: float) -> bool:
    """Two parameter counts within `within` of each other (unknown counts are not held against it)."""
    return not (a and b) or max(a, b) / min(a, b) <= 1 + within


def resnet_rivals(ev: Evidence, name: str, within: float) -> tuple[list[str], list[str]]:
    """The paper attention models saved at the preset of ResNet `name` (our variants, SAN, ViT and HA models
    left out), and those of them within `within` of its parameter count."""
    same, size = ev.preset_of(name), _params(ev.runs[name])
    attention = [
        n
        for n, r in ev.runs.items()
        if r is not None
        and n not in RESNETS
        and not n.startswith(("san_", "vit"))
        and not n.endswith("_ha")
        and _variant_base(n) is None  # the paper's models, not our changes of them
        and ev.preset_of(n) == same
    ]
    return attention, [n for n in attention if _comparable(_params(ev.runs[n]), size, within)]


def _resnet_mean(ev: Evidence, name: str, preset: str) -> tuple[float, int]:
    """(mean test accuracy, seeds) of `name` over its seeds where they are of `preset`, else its one run."""
    seeds = ev.accuracies.get(name) or []
    if seeds and ev.seed_presets.get(name, ev.preset) == preset:
        return sum(seeds) / len(seeds), len(seeds)
    return ev.runs[name].test_accuracy, 1


def resnet_opponent(ev: Evidence, name: str, within: float) -> str | None:
    """The attention model ResNet `name` is judged against: among the models of comparable size
    (`resnet_rivals`; all of its preset where none is), the best by seed mean of those with the most seeds;
    None where no attention model is saved at its preset."""
    attention, near = resnet_rivals(ev, name, within)
    if not attention:
        return None
    scores = {n: _resnet_mean(ev, n, ev.preset_of(name)) for n in near or attention}
    most = max(k for _, k in scores.values())
    return max((n for n in scores if scores[n][1] == most), key=lambda n: scores[n][0])


def near_resnet_runs(ev: Evidence, resnets: Experiments, comparable_within: float) -> list[str]:
    """The runs the near_resnet claim's verdict compares (the ResNet that decides, as `close_to_resnet` picks it
    with the same parameters, and its opponent), for the verdict's label; every ResNet and its opponent where
    none is testable."""
    pairs = [(r, resnet_opponent(ev, r, comparable_within)) for r in resnets if ev.runs.get(r) is not None]
    pairs = [(r, o) for r, o in pairs if o is not None]
    testable = [(r, o) for r, o in pairs if resnet_rivals(ev, r, comparable_within)[1]]
    return [n for pair in (testable[:1] or pairs) for n in pair]


def _against_resnet(ev: Evidence, name: str, within: float, near_points: float, far_points: float):
    resnet, same = ev.runs[name], ev.preset_of(name)  # compared within one preset
    chosen = resnet_opponent(ev, name, within)
    if chosen is None:
        return None
    near = resnet_rivals(ev, name, within)[1]
    title, size = experiments.get(name).title, _params(resnet)
    (acc, n_best), (res, n_res) = _resnet_mean(ev, chosen, same), _resnet_mean(ev, name, same)
    gap = (res - acc) * 100  # points behind the ResNet
    text = (
        f"best ({ev.name(chosen)}) {acc:.1%} against {title} {res:.1%} (seeds: {n_best} and {n_res}): "
        f"{gap:.1f} points behind"
    )
    if size and _params(ev.runs[chosen]):
        text += f"; {title} has {size / _params(ev.runs[chosen]):.1f}× its parameters"
    if not near:
        return text + f" (none within {within:.0%}: no comparable size here)", UNTESTABLE
    return (
        text,
        REPRODUCED if gap <= near_points else NOT_REPRODUCED if gap > far_points else INCONCLUSIVE,
    )

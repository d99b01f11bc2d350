"""The claims ledger: every claim of both papers that the book can test, the number that tests it, and a
verdict computed from saved results by a rule stated next to it.

The claims are data, in claims.yaml (read and checked by `attnlib.analysis.claims_file`): each one's source and
words, its measure, and the rule that judges it, a function of `RULES` named there with its parameters, from the
`Evidence` (saved runs, accuracies over seeds, the theorem's live check) to `(value, verdict)`. Verdicts are one of VERDICTS; a
claim whose runs are not saved is NOT_MEASURED, never guessed.

The evidence of an experiment comes from the longer preset that `PREFERRED` names for the ledger's preset
(`long` for `budget`) where that run is saved, else from the ledger's preset; a model and its HA variant
always come from the same preset, and a value taken from the longer preset names it, e.g.
"vit_ha (long): ...". Without such runs the ledger is the ledger of its own preset alone.

    >>> from attnlib.analysis import claims
    >>> frame = claims.ledger(claims.gather("results", "budget"))   # doctest: +SKIP
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

from attnlib import experiments
from attnlib.analysis import controls, costs, ha_rules, rules
from attnlib.analysis.claims_file import Claim, document, load
from attnlib.analysis.rules import HA_FAMILY, HA_PAIRS, NOT_MEASURED, RESNETS, VERDICTS, Evidence
from attnlib.checks import check
from attnlib.models import resolved_config
from attnlib.results.load import read_seeds
from attnlib.results.timing import train_cost_report

#: The preset whose saved runs the ledger prefers to its own, per ledger preset: the runs trained for 60
#: epochs, with per-layer measures logged every epoch, over the quick budget grid.
PREFERRED = {"budget": "long"}
#: The preset at the papers' geometry per ledger preset: the paper's models on 16x16 tokens (2x2
#: space-to-depth) where the budget's see 8x8. A map claim is judged there, seed by seed, once each model it
#: reads that is trained there has GEOMETRY_SEEDS seeds; its budget evidence is then shown beside.
GEOMETRY = {"budget": "tokens16"}
GEOMETRY_SEEDS = 2

#: The rules claims.yaml may name (each by its function's name), with the measure each reads (its
#: ``measure.name``): the evidence and the rule's parameters -> (value, verdict).
RULES = {
    rule.__name__: (rule, measure)
    for rule, measure in (
        (rules.below_tolerance, "theorem_error"),
        (rules.centres_leave_init, "centre_displacement"),
        (controls.centres_on_grid, "grid_distance"),
        (rules.local_then_far, "distance"),
        (rules.learned_fixed_shifts, "peak"),
        (rules.content_depends_on_image, "image_dependence"),
        (controls.fixed_shift_heads, "offset_share"),
        (controls.quadratic_vs_learned, "accuracy"),
        (rules.close_to_resnet, "accuracy"),
        (ha_rules.ha_gain, "accuracy"),
        (ha_rules.ha_share, "params"),
        (costs.ha_train_cost, "train_step"),
        (costs.ha_inference_time, "wall_time"),
        (controls.layers_differ, "layer_similarity"),
        (ha_rules.fig8_local_then_far, "distance"),
        (ha_rules.fig8_not_sparse, "peak"),
    )
}
#: Every claim of claims.yaml, in ledger order, and what each one's verdict rests on: {key: (the experiments
#: it reads, their kind)} (claims.yaml's evidence).
CLAIMS, EVIDENCE = load(document(), RULES)


def by_key(key: str) -> Claim:
    """The claim of CLAIMS with this key."""
    found = [c for c in CLAIMS if c.key == key]
    check(bool(found), "claim", key, ", ".join(c.key for c in CLAIMS))
    return found[0]


def _epochs(name: str, run, preset: str) -> int:
    """Epochs a saved run trained (its provenance), else its preset's."""

    prov = (getattr(run, "metrics", None) or {}).get("provenance", {})
    epochs = prov.get("epochs_trained", prov.get("epochs"))
    return int(epochs) if epochs else experiments.preset_for(name, preset).train.epochs


def _compared(ev: Evidence, key: str, names) -> list[str]:
    """The runs claim `key`'s verdict compares: `names`, but for a claim judged by `rules.close_to_resnet` the
    ResNet that decides and the attention model it is judged against."""
    found = by_key(key)
    if found.judge is rules.close_to_resnet:
        return rules.near_resnet_runs(ev, found.params["resnets"], found.params["comparable_within"])
    return names


def _span(values, unit: str) -> str:
    low, high = min(values), max(values)
    return f"{low}{unit}" if low == high else f"{low}–{high}{unit}"


def evidence_scale(ev: Evidence, key: str) -> str:
    """Where a claim's verdict comes from, for its label: "at budget (4–12 epochs), 1 seed each",
    "at 60 epochs (long), 1 seed each", "at budget (12 epochs), 3–5 seeds per model", "live check, float64",
    "counted at the paper's settings"; "" when none of its runs is saved."""
    names, kind = EVIDENCE[key]
    if kind == "live":
        return "live check, float64"
    if kind == "counted":
        return "counted at the paper's settings"
    if kind == "measured":  # one run of the train-cost measure at the ledger's preset
        return f"at {ev.preset}, one measured training step per model, 1 run"
    if kind == "timed":  # Table 3's timing decides where it has the pairs; else the runs' own, over seeds
        if ev.timing:
            return f"at {ev.preset}, Table 3's timing: each pair in one process, interleaved rounds"
        kind = "seeds"
    names = _compared(ev, key, names)
    groups: dict[str, list[int]] = {}
    seeds = []
    for n in names:
        run = ev.runs.get(n)
        if kind == "seeds":
            found, preset = ev.accuracies.get(n) or [], ev.seed_presets.get(n, ev.preset)
        elif kind == "means":  # as close_to_resnet takes them
            preset = ev.preset_of(n)
            pooled = ev.seed_presets.get(n, ev.preset) == preset and ev.accuracies.get(n)
            found = [] if run is None else (ev.accuracies[n] if pooled else [1])
        else:
            found, preset = ([1] if run is not None else []), ev.preset_of(n)
        if not found:
            continue
        same = run is not None and ev.preset_of(n) == preset  # the seed-0 run is of this preset
        groups.setdefault(preset, []).append(_epochs(n, run if same else None, preset))
        seeds.append(len(found))
    if not groups:
        return ""
    where = " and ".join(
        f"at {_span(e, '')} epochs ({p})" if p == "long" else f"at {p} ({_span(e, ' epochs')})"
        for p, e in groups.items()
    )
    count = (
        "1 seed each"
        if max(seeds) == 1
        else f"{_span(seeds, '')} seed{'s' if max(seeds) > 1 else ''} per model"
    )
    return f"{where}, {count}"


def network_form(name: str) -> str:
    """Which network an experiment of the paper family is, in words for the ledger's "judged on" column: the
    form (the official code's block and scores, or the [Re] code's: `block`, `learned_form`, `score_layout`,
    `quadratic_target`) and the initialisation (`init`: the official N(0, 0.02²), or the [Re] code's PyTorch
    defaults): "official form and init", "[Re] form and init", "official form, [Re] init"; "" for others."""
    if experiments.get(name).family != "paper":
        return ""
    model = experiments.resolve(name, "paper").model
    re_parts = ("block", "learned_form", "score_layout", "quadratic_target")
    form = "[Re]" if any(model.get(k) == "re" for k in re_parts) else "official"
    init = "[Re]" if model.get("init") == "re" else "official"
    return f"{form} form and init" if form == init else f"{form} form, {init} init"


def evidence_models(ev: Evidence, key: str) -> str:
    """The models a claim's verdict is judged on, for the ledger's table: "every HA pair (6)" for the claims
    over the HA family, the Fig. 8 model and its control, the ResNet and attention model compared, else the
    saved runs it reads by display name ("(long)": the 60-epoch run); "" for the live check and none saved."""
    names, kind = EVIDENCE[key]
    if kind == "live":
        return ""
    if kind in ("counted", "measured") or (names and set(names) == set(HA_FAMILY)):
        return f"every HA pair ({len(HA_PAIRS)})"
    names, params = _compared(ev, key, names), by_key(key).params
    if "control" in params:  # one model judged, its normal model the control
        model, form = params["model"], network_form(params["model"])
        where = f", {form}" if form else ""
        return f"{ev.name(model)}{where}; control {ev.name(params['control'])}" if model in ev.runs else ""
    named = ev.seeds_name if kind == "seeds" else ev.name  # over seeds: the preset the seeds are of

    def name(n: str) -> str:  # with the network's form and initialisation where it is the paper's family
        form, _, init = network_form(n).partition(", ")  # the init once: a display name may say it already
        form += f", {init}" if init and not named(n).endswith(init) else ""
        return named(n) + (f", {form}" if form else "")

    saved = [n for n in names if ev.runs.get(n) is not None or ev.accuracies.get(n)]
    bases = [n for n in saved if n + "_ha" in saved]
    if bases and len(saved) == 2 * len(bases):  # HA pairs: each model once, "with its HA variant"
        return "each with its HA variant: " + "; ".join(name(n) for n in bases)
    return "; ".join(name(n) for n in saved)


def seed_verdicts(ev: Evidence, claim: Claim, geometry: bool = False) -> dict[int, str]:
    """{seed: verdict} of a map claim judged on each saved seed (`_seed_tests`)."""
    return {seed: verdict for seed, (_, verdict) in _seed_tests(ev, claim, geometry).items()}


def _seed_tests(ev: Evidence, claim: Claim, geometry: bool = False) -> dict[int, tuple[str, str]]:
    """{seed: (value, verdict)} of a map claim at the ledger's preset (`ev.preset`, not the longer one of its
    seed-0 evidence), or with `geometry` at the papers' (`ev.geometry`, GEOMETRY_SEEDS seeds a model there):
    for each seed at which every model the claim reads there (of EVIDENCE, saved at seed 0) has a run, the
    claim's test on those runs alone. {} for a claim not on maps, or with nothing saved there."""
    names, kind = EVIDENCE[claim.key]
    if kind != "maps":
        return {}
    found = ev.geometry_runs if geometry else ev.own_seed_runs
    saved = [n for n in names if 0 in found.get(n, {})]
    if not saved or (geometry and min(len(found[n]) for n in saved) < GEOMETRY_SEEDS):
        return {}
    seeds = sorted(set.intersection(*(set(found[n]) for n in saved)))
    return {seed: claim.test(_at_seed(ev, found, seed, geometry)) for seed in seeds}


def _at_seed(ev: Evidence, found: dict, seed: int, geometry: bool) -> Evidence:
    """The evidence of one seed's runs alone (`found`: {experiment: {seed: run}}), at the papers' geometry's
    preset with `geometry` (no other preset's accuracies: `evidence_models` names the models judged)."""
    runs = {n: found.get(n, {}).get(seed) for n in ev.runs}
    at = replace(ev, runs=runs, presets={}, seed_presets={}, accuracies={})
    return replace(at, preset=ev.geometry) if geometry else at


def _geometry_row(ev: Evidence, claim: Claim) -> tuple[str, str, str, str] | None:
    """(value, verdict, scale, models) of a map claim at the papers' geometry (None where not judged there):
    each seed's value ("seed 0: …; seed 1: …", the spread over seeds), seed 0's models, the verdict its
    seeds agree on (else inconclusive), the scale "at tokens16 (16×16 tokens, 20 epochs), seeds 0–1:
    reproduced on 2 of 2"."""
    tests = _seed_tests(ev, claim, geometry=True)  # each seed's test, once
    if len(tests) < GEOMETRY_SEEDS:
        return None
    verdicts = {seed: verdict for seed, (_, verdict) in tests.items()}
    at = _at_seed(ev, ev.geometry_runs, 0, True)
    verdict = verdicts[0] if len(set(verdicts.values())) == 1 else rules.INCONCLUSIVE  # seed 0: always
    names = [n for n in EVIDENCE[claim.key][0] if at.runs.get(n) is not None]
    epochs = _span([_epochs(n, at.runs[n], ev.geometry) for n in names], " epochs")
    found = experiments.resolve(names[0], ev.geometry)
    side = 32 // resolved_config(experiments.get(names[0]).family, **found.model)["downsample"]
    scale = f"at {ev.geometry} ({side}×{side} tokens, {epochs}), {_counts(verdicts)}"
    value = "; ".join(f"seed {s}: {value}" for s, (value, _) in tests.items())
    return value, verdict, scale, evidence_models(at, claim.key)


def _counts(verdicts: dict[int, str]) -> str:
    """ "seeds 0–4: not reproduced on 5 of 5": each verdict's count, most frequent first."""
    said = ", ".join(f"{v} on {k} of {len(verdicts)}" for v, k in Counter(verdicts.values()).most_common())
    return f"seeds {_seed_span(sorted(verdicts))}: {said}"


def _seed_span(seeds: list[int]) -> str:
    run = seeds == list(range(seeds[0], seeds[-1] + 1))
    return f"{seeds[0]}–{seeds[-1]}" if run else ", ".join(map(str, seeds))


def ledger(evidence: Evidence, claims=CLAIMS):
    """One row per claim: source, where, words, measure, our value, verdict, rule, ``models`` (what the verdict
    is judged on: ``evidence_models``), ``evidence`` (where the verdict comes from: ``evidence_scale``, then for
    a map claim its tally over every seed saved at the ledger's preset, ``seed_verdicts``) and ``label``, the
    verdict as the book shows it with its scale, "reproduced — at budget (4–12 epochs), 1 seed each; at budget,
    seeds 0–4: reproduced on 5 of 5" (a pandas DataFrame). The verdict is the seed-0 evidence's."""
    import pandas as pd

    rows = []
    for c in claims:
        value, verdict = c.test(evidence)
        assert verdict in VERDICTS, verdict
        scale = "" if verdict == NOT_MEASURED else evidence_scale(evidence, c.key)
        seeds = seed_verdicts(evidence, c)  # a map claim seed by seed, "at budget, seeds 0–4: …"
        tally = f"at {evidence.preset}, {_counts(seeds)}" if len(seeds) >= 2 else ""
        scale = "; ".join(filter(None, (scale, tally)))
        models = "" if verdict == NOT_MEASURED else evidence_models(evidence, c.key)
        if geometry := _geometry_row(evidence, c):  # judged at the papers' geometry; the 8x8 evidence beside
            before = f"{verdict} — {scale}" if scale else verdict
            value, verdict, scale, models = geometry
            scale = f"{scale}; on 8×8 tokens: {before}"
        row = {"claim": c.key} | {k: getattr(c, k) for k in ("title", "source", "where", "words", "measure")}
        row |= {"value": value, "verdict": verdict, "rule": c.rule, "models": models}
        rows.append(row | {"evidence": scale, "label": f"{verdict} — {scale}" if scale else verdict})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ gathering
def theorem_error(kernel_size: int = 3, alpha: float = 40.0, seed: int = 0) -> float:
    """Relative error ‖MHSA(X) − Conv(X)‖ / ‖Conv(X)‖ of the Theorem-1 construction, float64 (live, < 1 s)."""
    import torch

    from attnlib.theory import conv_relative_error

    g = torch.Generator().manual_seed(seed)
    conv = torch.nn.Conv2d(3, 5, kernel_size, padding=kernel_size // 2).double()
    with torch.no_grad():
        conv.weight.copy_(torch.randn(conv.weight.shape, generator=g, dtype=torch.float64))
        conv.bias.copy_(torch.randn(conv.bias.shape, generator=g, dtype=torch.float64))
    x = torch.randn(2, 8, 8, 3, generator=g, dtype=torch.float64)
    return conv_relative_error(conv, alpha, x)


def _saved(results_dir, name: str, preset: str, seeds, data) -> tuple:
    """(seed-0 RunResult or None, test accuracies of every saved seed among `seeds`, their inference wall times
    {seed: (ms, device)}, {seed: RunResult}) of `name` at `preset`,
    complete for today's configuration (`attnlib.results.load.read_seeds`: reads, never trains)."""
    found = read_seeds(name, preset, results_dir=results_dir, data=data, seeds=seeds)
    complete = {seed: saved for seed, saved in found.items() if saved.complete}
    first = complete[0].run if 0 in complete else None
    metrics = {seed: saved.run.metrics for seed, saved in complete.items()}
    walls = {s: (m.get("wall_time_ms"), m.get("wall_time_device")) for s, m in metrics.items()}
    walls = {s: w for s, w in walls.items() if isinstance(w[0], int | float) and w[0] > 0}
    runs = {seed: saved.run for seed, saved in complete.items()}
    return first, [m["test_accuracy"] for m in metrics.values()], walls, runs


# _paper_params' answers: {(name, ids of the registry objects behind it): (count, those objects)}
_PARAMS: dict[tuple, tuple[int, tuple]] = {}


def _paper_params(name: str) -> int:
    """`costs.count_parameters(name, "paper")`, counted once per process for each registry entry."""
    sources = (experiments.EXPERIMENTS.get(name), experiments.PRESET_TABLE.get("paper"))
    key = (name, *map(id, sources))
    if key not in _PARAMS:
        _PARAMS[key] = (costs.count_parameters(name, "paper"), sources)
    return _PARAMS[key][0]


def gather(
    results_dir: str | Path,
    preset: str,
    seeds=range(10),
    data=None,
    prefer: str | None = None,
    geometry: str | None = None,
) -> Evidence:
    """Evidence from saved results (never trains): seed-0 runs, accuracies of every saved seed, paper-preset
    parameter counts of the HA pairs and the theorem's live check.

    Each experiment's runs come from `prefer` (None: `PREFERRED.get(preset)`, `long` for `budget`) where
    its seed-0 run is saved there, else from `preset`; a model and its HA variant move together (both
    must be saved at `prefer`), and so do each ResNet18 width and the paper's attention models it is compared
    with (a ResNet moves when it and one of them are saved at `prefer`). `Evidence.presets` records the choice.
    A group's accuracies over seeds move with it only where `prefer` has, for each member, MIN_SEEDS seeds
    or as many as `preset`: a long run of one seed gives the maps, not the interval of a comparison
    (`Evidence.seed_presets` records that choice). Every saved seed at the papers' geometry (`geometry`,
    None: `GEOMETRY.get(preset)`) is read for the map claims (`Evidence.geometry_runs`)."""
    from attnlib.analysis import stats as compare

    prefer = PREFERRED.get(preset) if prefer is None else prefer
    ev = Evidence(preset)
    names = experiments.names(variants=True)
    own = {name: _saved(results_dir, name, preset, seeds, data) for name in names}
    longer = {}
    if prefer and prefer != preset:
        longer = {name: _saved(results_dir, name, prefer, seeds, data) for name in names}
    has = {name for name, (run, *_) in longer.items() if run is not None}
    paper_attention = [
        n for n in experiments.names() if n not in RESNETS and not n.startswith(("san_", "vit"))
    ]
    paper_attention = [n for n in paper_attention if not n.endswith("_ha")]
    groups = [(b, b + "_ha") for b in names if b + "_ha" in own]
    paired = {n for g in groups for n in g}
    groups += [(n,) for n in names if n not in paired and n not in RESNETS]
    for group in groups:
        moves = all(n in has for n in group)
        enough = moves and all(len(longer[n][1]) >= min(compare.MIN_SEEDS, len(own[n][1])) for n in group)
        for name in group:
            ev.runs[name] = (longer if moves else own)[name][0]
            ev.accuracies[name] = (longer if enough else own)[name][1]
            ev.wall_times[name] = (longer if enough else own)[name][2]
            if moves:
                ev.presets[name] = prefer
            if enough:
                ev.seed_presets[name] = prefer
    for resnet in (n for n in RESNETS if n in own):  # each moves when it and a model it is compared with do
        moves = resnet in has and any(n in has for n in paper_attention)
        ev.runs[resnet], ev.accuracies[resnet], *_ = (longer if moves else own)[resnet]
        if moves:
            ev.presets[resnet] = ev.seed_presets[resnet] = prefer
    ev.own_seed_runs = {n: own[n][3] for n in names}
    ev.geometry = GEOMETRY.get(preset) if geometry is None else geometry
    if ev.geometry and ev.geometry != preset:
        ev.geometry_runs = {n: _saved(results_dir, n, ev.geometry, seeds, data)[3] for n in names}
    ev.runs = {n: ev.runs[n] for n in names}  # registry order, as before
    ev.accuracies = {n: ev.accuracies[n] for n in names}
    for base in HA_PAIRS:
        for name in (base, base + "_ha"):
            ev.params_paper[name] = _paper_params(name)
    ev.theorem_error = theorem_error()
    ev.train_cost, ev.timing = (
        train_cost_report(results_dir, preset),
        costs.table3_timing(results_dir, preset),
    )
    return ev


def verdict_counts(frame) -> dict[str, int]:
    """{verdict: number of claims} in VERDICTS order (zeros left out)."""
    counts = frame["verdict"].value_counts()
    return {v: int(counts[v]) for v in VERDICTS if v in counts}

"""attnlib.claims: each verdict follows its rule, and changing a saved value changes the verdict."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from attnlib.analysis import claims, costs, rules
from attnlib.analysis.rules import (
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    UNTESTABLE,
    Evidence,
)


def _run(acc=0.5, history=None, attention=None, centers=None):
    return SimpleNamespace(test_accuracy=acc, history=history, attention=attention, centers=centers)


def _measured(distance, peak, dependence=0.0, similarity=None):
    """A run whose history logged the per-layer measures (the long preset)."""
    row = {"epoch": 1, "test_acc": 0.5}
    for i, (d, p) in enumerate(zip(distance, peak, strict=True)):
        row |= {f"distance_{i}": d, f"peak_{i}": p, f"image_dependence_{i}": dependence}
        if i and similarity is not None:
            row[f"similarity_{i}"] = similarity
    return _run(history=pd.DataFrame([row]))


def _probed(end, init, uniform, key="distance", heads=2):
    """A run whose standard probe (probe.npz) holds `key` per layer at the end and at initialisation (every
    head alike) and its uniform value."""
    layers = len(end)
    probe = {"token_layers": np.array(layers)}
    for k in dict.fromkeys(("distance", "peak", key)):
        for when, values in (("end", end), ("init", init)):
            v = values if k == key else [1.0] * layers
            probe[f"{when}_{k}"] = np.repeat(np.asarray(v, np.float64)[:, None], heads, axis=1)
        probe[f"uniform_{k}"] = np.array(uniform if k == key else 1.0)
    run = _run()
    run.probe = probe
    return run


def _verdict(key, ev):
    claim = claims.by_key(key)
    return claim.test(ev)[1]


def test_every_claim_has_a_verdict_even_with_nothing_saved():
    frame = claims.ledger(Evidence("budget"))
    assert len(frame) == len(claims.CLAIMS) and set(frame["verdict"]) == {NOT_MEASURED}
    assert frame["rule"].str.len().min() > 10 and frame["words"].str.len().min() > 10


def test_theorem_verdict_follows_the_error():
    assert claims.theorem_error() < claims.by_key("theorem").params["tolerance"]  # the construction, live
    assert _verdict("theorem", Evidence("x", theorem_error=1e-12)) == REPRODUCED
    assert _verdict("theorem", Evidence("x", theorem_error=1e-3)) == NOT_REPRODUCED


GRID8 = {"grid": np.array([8, 8])}  # the budget's attention grid: a key position spans 32 / 8 = 4 input px


def test_centre_moves_are_in_input_pixels():
    centers = np.zeros((2, 2, 4, 2))  # (epochs + 1, layers, heads, 2), in key positions
    centers[-1, 0, :, 1] = 1.0  # layer 1: every head moved one key cell sideways
    centers[-1, 1, :] = [3.0, 4.0]  # layer 2: every head moved (3, 4) cells, 5 cells
    run = _run(attention=GRID8, centers={"centers": centers})
    assert rules.key_pixels(run) == 4.0
    assert rules.centre_moves(run) == pytest.approx([4.0, 20.0])  # one cell of an 8×8 grid is 4 px
    run.attention = {"grid": np.array([16, 16])}  # the paper's 16×16 grid: 2 px a cell
    assert rules.centre_moves(run) == pytest.approx([2.0, 10.0])
    run.attention, run.probe = None, {"pixels_per_token": np.array(4.0)}  # no maps saved: the probe's scale
    assert rules.centre_moves(run) == pytest.approx([4.0, 20.0])
    run.probe = None  # nothing to convert with: not measured rather than a number in another unit
    assert rules.centre_moves(run) is None


def test_centres_verdict_follows_the_saved_centres():
    centers = np.zeros((3, 2, 4, 2))  # (epochs + 1, layers, heads, 2)
    centers[-1, :, :, 0] = 1.0  # every head of both layers moved by one key position: 4 px
    ev = Evidence("x", runs={"quadratic_aniso_9h": _run(attention=GRID8, centers={"centers": centers})})
    text, verdict = claims.by_key("centres_move").test(ev)
    assert verdict == REPRODUCED and "4.0 / 4.0 px per layer" in text
    centers[-1, :, :, 0] = 0.49  # 1.96 px: below the 2-px (half a key position) threshold
    assert _verdict("centres_move", ev) == NOT_REPRODUCED
    centers[-1, :, :, 0] = 1.0
    centers[-1, 1] = 0.1  # the second layer barely moved
    assert _verdict("centres_move", ev) == INCONCLUSIVE
    centers[-1] = 0.1
    assert _verdict("centres_move", ev) == NOT_REPRODUCED


def test_depth_verdict_follows_the_distances():
    # without a probe at initialisation an order at the end is not enough: never measured against init
    ev = Evidence("x", runs={"quadratic_iso_9h": _measured([2, 3, 5, 8], [9, 9, 9, 9])})
    text, verdict = claims.by_key("centres_depth").test(ev)
    assert verdict == INCONCLUSIVE and "not measured against initialisation" in text
    ev.runs["quadratic_iso_9h"] = _measured([8, 5, 3, 2], [9, 9, 9, 9])
    assert _verdict("centres_depth", ev) == NOT_REPRODUCED  # the order fails at the end: no init needed
    # with the probe: training created the order (flat at init), the first layer more local than uniform
    ev.runs["quadratic_iso_9h"] = _probed([2, 3, 5, 8], [9, 9, 9, 9], uniform=10)
    assert _verdict("centres_depth", ev) == REPRODUCED
    ev.runs["quadratic_aniso_9h"] = _probed([8, 5, 3, 2], [9, 9, 9, 9], uniform=10)
    assert _verdict("centres_depth", ev) == INCONCLUSIVE  # one model each way
    del ev.runs["quadratic_aniso_9h"]
    # the case: the order was already there at initialisation, training kept it: not reproduced
    ev.runs["quadratic_iso_9h"] = _probed([8.3, 9.1, 10.5, 10.5], [9.1, 8.9, 10.7, 10.1], uniform=10.8)
    text, verdict = claims.by_key("centres_depth").test(ev)
    assert verdict == NOT_REPRODUCED and "already so at initialisation" in text and "uniform 10.8" in text
    # a flat model at the uniform distance does not count as rising, however it creeps upwards
    ev.runs["quadratic_iso_9h"] = _probed([14.3, 14.35, 14.4, 14.4], [9, 9, 9, 9], uniform=14.3)
    assert _verdict("centres_depth", ev) == NOT_REPRODUCED


def test_peak_verdicts_follow_the_peaks():
    # no probe saved: initialisation is a fresh model's (learned_9h starts flat, below 1.1×)
    ev = Evidence("budget", runs={"learned_9h": _measured([1, 1], [6.0, 2.0])})
    assert _verdict("learned_shifts", ev) == REPRODUCED
    ev.runs["learned_9h"] = _measured([1, 1], [1.01, 1.0])
    assert _verdict("learned_shifts", ev) == NOT_REPRODUCED
    ev.runs["learned_9h"] = _measured([1, 1], [3.0, 1.0])
    assert _verdict("learned_shifts", ev) == INCONCLUSIVE
    # a peak the model already had at initialisation (its probe) is not one training created
    ev.runs["learned_9h"] = _probed([6.0, 2.0], [5.5, 2.0], uniform=1.0, key="peak")
    text, verdict = claims.by_key("learned_shifts").test(ev)
    assert verdict == NOT_REPRODUCED and "first layer 6.00× uniform, 5.50× at initialisation" in text
    ev.runs["learned_9h"] = _probed([6.0, 2.0], [4.1, 2.0], uniform=1.0, key="peak")
    assert _verdict("learned_shifts", ev) == REPRODUCED
    ev.runs["learned_9h"] = _measured([1, 1], [3.0, 1.0])
    # a claim variant (another init) is reported beside the verdict, which stays about the paper's models
    ev.preset, ev.runs["learned_9h_pos_init"] = "budget", _measured([1, 1], [12.0, 3.0])
    claim = claims.by_key("learned_shifts")
    text, verdict = claim.test(ev)
    assert (
        verdict == INCONCLUSIVE
        and "SA learned 2D, 9 heads, positional init std 0.2, our variant, not the paper's model:" in text
    )
    start = rules.initial_peaks("learned_9h_pos_init", "budget")[0]
    assert f"first layer 12.00× uniform, {start:.2f}× at initialisation" in text
    assert 1.5 < start < 5 and rules.initial_peaks("learned_9h", "budget")[0] < 1.1
    ev.runs["resnet18"] = _run(0.5)
    ev.runs["learned_9h_pos_init"].test_accuracy = 0.49  # a variant is not one of the paper's models
    assert "init std" not in claims.by_key("near_resnet").test(ev)[0]
    # Fig. 8b: the last two layers of the Fig. 8 model peak lower than every earlier one
    fig8, control = (claims.by_key("ha_not_sparse").params[k] for k in ("model", "control"))
    ha = Evidence("x", runs={fig8: _probed([8.0, 6.0, 2.0, 1.5], [2, 2, 2, 2], uniform=1.0, key="peak")})
    assert _verdict("ha_not_sparse", ha) == REPRODUCED
    ha.runs[fig8] = _probed([2.2, 6.4, 6.7, 6.5], [2, 2, 2, 2], uniform=1.0, key="peak")  # the run
    assert _verdict("ha_not_sparse", ha) == NOT_REPRODUCED
    # judged on the Fig. 8 model alone: other HA models are secondary lines, the normal model the control
    ha.runs["vit_ha"] = _probed([8.0, 6.0, 2.0, 1.5], [2, 2, 2, 2], uniform=1.0, key="peak")
    ha.runs[control] = _measured([1, 1, 1, 1], [1.5, 5.1, 5.0, 2.0])
    text, verdict = claims.by_key("ha_not_sparse").test(ev=ha)
    assert verdict == NOT_REPRODUCED and "secondary, not judged: ViT, HA" in text
    assert (
        f"control (no HA) {rules.display(control)}: 1.5 / 5.1 / 5.0 / 2.0× uniform, the order does not hold"
        in text
    )
    assert _verdict("ha_not_sparse", Evidence("x", runs={"vit_ha": ha.runs["vit_ha"]})) == NOT_MEASURED
    # "local early, far later" on the Fig. 8 model: first application the most global goes against it
    ha.runs[fig8] = _probed([16.4, 13.6, 14.3, 14.4], [14, 14, 14, 14], uniform=16.55)
    assert _verdict("ha_depth", ha) == NOT_REPRODUCED


def test_content_and_layer_similarity_verdicts():
    # image dependence counts only where training raised it above initialisation (random content
    # projections already make the maps depend on the image)
    ev = Evidence(
        "x", runs={"learned_content_9h": _probed([0.3, 0.1], [0.2, 0.2], 0.0, key="image_dependence")}
    )
    assert _verdict("content_maps", ev) == REPRODUCED
    # the saved 60-epoch control: above the bar, yet below where it started in every layer
    ev.runs["learned_content_9h"] = _probed(
        [0.13, 0.12, 0.14, 0.05], [0.14, 0.20, 0.20, 0.19], 0.0, key="image_dependence"
    )
    text, verdict = claims.by_key("content_maps").test(ev)
    assert verdict == NOT_REPRODUCED and "at initialisation 0.14 / 0.20 / 0.20 / 0.19; uniform 0.00" in text
    ev.runs["learned_content_16h"] = _probed([0.29, 0.2], [0.15, 0.2], 0.0, key="image_dependence")
    assert _verdict("content_maps", ev) == INCONCLUSIVE  # one model passes, one fails
    ev = Evidence("x", runs={"learned_content_9h": _measured([1, 1], [2, 2], dependence=0.3)})
    assert _verdict("content_maps", ev) == INCONCLUSIVE  # high, but not measured against initialisation
    ev.runs["learned_content_9h"] = _measured([1, 1], [2, 2], dependence=0.01)
    assert _verdict("content_maps", ev) == NOT_REPRODUCED
    # σ alone, without the normal model as the control, decides nothing (issue 29 §2)
    ha = Evidence("x", runs={"vit_ha": _measured([1, 1, 1], [2, 2, 2], similarity=0.5)})
    assert _verdict("ha_layers_differ", ha) == NOT_MEASURED


def test_resnet_and_parameter_verdicts():
    ev = Evidence("x", runs={"resnet18": _run(0.75), "learned_9h": _run(0.74), "vit": _run(0.9)})
    assert _verdict("near_resnet", ev) == REPRODUCED  # ViT is not one of the paper's models
    ev.runs["learned_9h"] = _run(0.60)
    assert _verdict("near_resnet", ev) == NOT_REPRODUCED
    # a comparable size: parameter counts within 25%; a ResNet 3x larger makes the claim untestable here
    for name, params in (("resnet18", 700_000), ("learned_9h", 240_000)):
        ev.runs[name].metrics = {"params": params}
    text, verdict = claims.by_key("near_resnet").test(ev)
    assert verdict == UNTESTABLE and "ResNet18 has 2.9× its parameters" in text
    ev.runs["learned_9h"].metrics = {"params": 600_000}  # 1.17x: comparable, judged on the gap again
    assert _verdict("near_resnet", ev) == NOT_REPRODUCED
    # the seeds of one preset are averaged: ResNet18 0.75 against learned_9h's mean 0.745, 0.5 points
    ev.accuracies = {"learned_9h": [0.74, 0.75], "resnet18": [0.75]}
    assert _verdict("near_resnet", ev) == REPRODUCED


def test_near_resnet_is_judged_against_the_resnet_of_comparable_size():
    """ResNet18 3x larger than the attention model: the narrow ResNet (within 25%) is the control."""
    ev = Evidence("x", runs={"resnet18": _run(0.75), "learned_9h": _run(0.60)})
    ev.runs["resnet18"].metrics, ev.runs["learned_9h"].metrics = {"params": 700_000}, {"params": 240_000}
    assert _verdict("near_resnet", ev) == UNTESTABLE  # no narrow ResNet saved: untestable
    ev.runs["resnet18_narrow"] = _run(0.61)
    ev.runs["resnet18_narrow"].metrics = {"params": 223_000}
    text, verdict = claims.by_key("near_resnet").test(ev)
    assert verdict == REPRODUCED and "against ResNet18 (narrow)" in text and "1.0 points behind" in text
    ev.runs["resnet18_narrow"] = _run(0.70)
    ev.runs["resnet18_narrow"].metrics = {"params": 223_000}
    assert _verdict("near_resnet", ev) == NOT_REPRODUCED
    ev.runs["resnet18_narrow"].metrics = {"params": 100_000}  # 2.4x smaller: not comparable either
    assert _verdict("near_resnet", ev) == UNTESTABLE
    assert costs.count_parameters("resnet18_narrow", "budget") / costs.count_parameters(
        "quadratic_aniso_9h", "budget"
    ) == pytest.approx(1, abs=claims.by_key("near_resnet").params["comparable_within"])
    assert costs.count_parameters("resnet18_narrow", "paper") == costs.count_parameters("resnet18")
    counts = {b: 100 for b in rules.HA_PAIRS} | {b + "_ha": 20 for b in rules.HA_PAIRS}
    assert _verdict("ha_params", Evidence("x", params_paper=counts)) == REPRODUCED
    counts["vit_ha"] = 60
    assert _verdict("ha_params", Evidence("x", params_paper=counts)) == NOT_REPRODUCED


def test_saved_attention_rows_give_the_profile():
    """Without logged measures the profile comes from attention.npz: a map attending to the query itself
    has distance 0 and peak N; uniform rows have peak 1."""
    n, queries = 16, np.array([0, 5, 10, 15])
    rows = np.zeros((2, 2, 3, 4, n))  # (images, layers, heads, queries, N)
    rows[:, 0, :, range(4), queries] = 1.0  # layer 0: each query attends to itself
    rows[:, 1] = 1 / n  # layer 1: uniform
    att = {"rows": rows, "rows_mean": rows.mean(0), "queries": queries, "grid": np.array([4, 4])}
    prof = rules.layer_profile(_run(attention=att))
    assert prof[0]["distance"] == 0 and prof[0]["peak"] == pytest.approx(n)
    assert prof[1]["peak"] == pytest.approx(1) and prof[1]["distance"] > 0
    assert prof[0]["image_dependence"] == prof[1]["image_dependence"] == 0
    # σ: each query's head-mean map is one-hot in layer 0 and uniform in layer 1, TV = 1 − 1/N
    assert "similarity" not in prof[0] and prof[1]["similarity"] == pytest.approx(1 / n)
    # HA against its normal model: HA's layers as different as the model's (σ = 1/16 both) pass ...
    ha = Evidence("x", runs={"vit_ha": _run(attention=att), "vit": _run(attention=dict(att))})
    assert _verdict("ha_layers_differ", ha) == REPRODUCED
    att["rows"] = np.repeat(rows[:, :1], 2, axis=1)  # ... HA's layers alike (σ = 1), its model's not: fail
    assert _verdict("ha_layers_differ", ha) == NOT_REPRODUCED
    # a pair alike by construction (positional-only shared block) is left out of the family, not failed
    same = Evidence(
        "x", runs={"quadratic_re_9h_ha": _run(attention=dict(att)), "quadratic_re_9h": _run(attention=att)}
    )
    assert claims.by_key("ha_layers_differ").params["left_out"] == ("quadratic_re_9h",)
    assert _verdict("ha_layers_differ", same) == NOT_MEASURED


def test_ha_gain_verdict_follows_the_welch_intervals():
    base = {b: [0.50, 0.51, 0.52] for b in rules.HA_PAIRS}
    far = {b + "_ha": [0.60, 0.61, 0.62] for b in rules.HA_PAIRS}  # +10 points, tight: above +5 for all
    assert _verdict("ha_gain", Evidence("x", accuracies=base | far)) == REPRODUCED
    near = far | {"vit_ha": [0.50, 0.51, 0.52]}  # one pair surely below +5 refutes "in each case"
    assert _verdict("ha_gain", Evidence("x", accuracies=base | near)) == NOT_REPRODUCED
    noisy = far | {"vit_ha": [0.45, 0.60, 0.75]}  # one interval holds +5: no verdict either way
    assert _verdict("ha_gain", Evidence("x", accuracies=base | noisy)) == INCONCLUSIVE
    # at a scaled-down preset the claim (300 epochs, full size) is untestable; the values still show, with
    # each pair's Holm-adjusted p and [Re]'s own logged gains beside them
    text, verdict = claims.by_key("ha_gain").test(Evidence("budget", accuracies=base | far))
    assert verdict == UNTESTABLE and "Holm p" in text
    assert (
        "[Re]'s own run logs: SA learned 2D + content, 9 heads +4.64, SA learned 2D + content, 16 heads +2.12, "
        "SA quadratic (non-isotropic; [Re] code), 9 heads -0.83" in text
    )
    assert _verdict("ha_gain", Evidence("budget")) == NOT_MEASURED


def test_every_label_names_its_evidence_and_scale():
    """The ledger's label: the verdict, then the preset, epochs and seeds it rests on."""
    ev = Evidence(
        "budget", runs={"quadratic_iso_9h": _measured([8, 5, 3, 2], [9, 9, 9, 9])}, theorem_error=1e-12
    )
    ev.accuracies = {b: [0.5, 0.51, 0.52] for b in rules.HA_PAIRS} | {
        b + "_ha": [0.5, 0.5] for b in rules.HA_PAIRS
    }
    frame = claims.ledger(ev).set_index("claim")
    assert frame.loc["theorem", "label"] == "reproduced — live check, float64"
    assert frame.loc["centres_depth", "label"] == "not reproduced — at budget (4 epochs), 1 seed each"
    assert frame.loc["ha_gain", "label"] == "untestable here — at budget (4–12 epochs), 2–3 seeds per model"
    assert frame.loc["ha_depth", "label"] == NOT_MEASURED  # nothing saved: no scale to name
    ev.presets["quadratic_iso_9h"] = "long"
    label = claims.ledger(ev).set_index("claim").loc["centres_depth", "label"]
    assert label.endswith("at 60 epochs (long), 1 seed each")


def test_near_resnet_takes_the_best_attention_model_of_comparable_size():
    """The best attention model overall may be far smaller than ResNet18: the claim is judged on the best one
    within 25% of the ResNet's parameters, not declared untestable because a smaller model scores higher."""
    ev = Evidence(
        "x", runs={"resnet18": _run(0.75), "learned_9h": _run(0.74), "learned_content_9h": _run(0.55)}
    )
    for name, params in (("resnet18", 700_000), ("learned_9h", 240_000), ("learned_content_9h", 600_000)):
        ev.runs[name].metrics = {"params": params}
    text, verdict = claims.by_key("near_resnet").test(ev)
    assert (
        verdict == NOT_REPRODUCED
        and "SA learned 2D + content, 9 heads" in text
        and "20.0 points behind" in text
    )
    ev.runs["learned_content_9h"].metrics = {"params": 1_000_000}  # 1.43x: no model of comparable size
    text, verdict = claims.by_key("near_resnet").test(ev)
    assert verdict == UNTESTABLE and "none within 25%" in text and "SA learned 2D, 9 heads" in text


def test_near_resnet_label_names_the_runs_compared():
    """The verdict's scale is that of the ResNet and the one model it is judged against: a model of comparable
    size with fewer seeds (and more epochs) that the rule passes over does not widen the label."""
    seeds = {"resnet18_narrow": [0.70, 0.71, 0.72], "quadratic_iso_9h": [0.48, 0.49, 0.50]}
    ev = Evidence("budget", runs={n: _run(0.5) for n in (*seeds, "learned_16h")}, accuracies=dict(seeds))
    ev.runs["learned_16h"].test_accuracy = 0.59  # higher, but one seed: not the model with the most seeds
    for name, params, epochs in (
        ("resnet18_narrow", 223_000, 4),
        ("quadratic_iso_9h", 240_000, 4),
        ("learned_16h", 256_000, 8),
    ):
        ev.runs[name].metrics = {"params": params, "provenance": {"epochs_trained": epochs}}
    assert rules.near_resnet_runs(ev, rules.RESNETS, 0.25) == ["resnet18_narrow", "quadratic_iso_9h"]
    assert claims.evidence_scale(ev, "near_resnet") == "at budget (4 epochs), 3 seeds per model"


def test_every_ledger_row_names_the_models_it_is_judged_on():
    """The ledger's `models`: the saved runs a claim reads by display name (the 60-epoch run's "(long)"), the
    seeds' preset for a claim over seeds, the HA family as one phrase, the Fig. 8 model with its control."""
    ev = Evidence(
        "budget",
        runs={
            "learned_9h": _measured([1, 1], [6.0, 2.0]),
            "learned_content_9h_ha": _run(),  # the Fig. 8 model
            "learned_content_9h": _run(),  # its control
        },
        presets={"learned_9h": "long", "learned_content_9h_ha": "long", "learned_content_9h": "long"},
        accuracies={"learned_9h": [0.5, 0.52], "quadratic_iso_9h": [0.55, 0.56]},
    )
    frame = claims.ledger(ev).set_index("claim")["models"]
    # each paper model with its network's form and initialisation (issue 48: official or the [Re] code's)
    official = "official form and init"
    assert frame["learned_shifts"] == f"SA learned 2D, 9 heads (long), {official}"  # learned_16h not saved
    assert frame["quadratic_vs_learned"] == (
        f"SA learned 2D, 9 heads, {official}; SA quadratic (isotropic), 9 heads, {official}"
    )
    assert claims.network_form("learned_16h") == "[Re] form and init"
    assert claims.network_form("learned_9h_init_re") == "official form, [Re] init"
    assert claims.network_form("learned_content_9h_init_official") == "[Re] form, official init"
    assert claims.network_form("vit") == ""  # not the paper's family
    assert frame["ha_gain"] == ""  # not measured: nothing named
    assert claims.evidence_models(ev, "ha_gain") == f"every HA pair ({len(rules.HA_PAIRS)})"
    assert claims.evidence_models(ev, "ha_train_cost") == f"every HA pair ({len(rules.HA_PAIRS)})"
    fig8 = (
        "SA learned 2D + content, 9 heads, HA (long), [Re] form and init; control SA learned 2D + content, 9 heads "
        "(long)"
    )
    assert claims.evidence_models(ev, "ha_depth") == fig8 and frame["theorem"] == ""
    ev.runs |= {"vit": _run(), "vit_ha": _run()}  # pairs: each model named once
    assert claims.evidence_models(ev, "ha_layers_differ") == (
        "each with its HA variant: SA learned 2D + content, 9 heads (long), [Re] form and init; ViT"
    )
    from attnbook.ledger import ledger_table

    table = ledger_table(claims.ledger(ev))
    assert list(table.columns) == ["claim", "source", "judged on", "verdict"]
    one_source = claims.ledger(ev, [c for c in claims.CLAIMS if c.source == claims.by_key("theorem").source])
    assert list(ledger_table(one_source).columns) == ["claim", "judged on", "verdict"]  # the caption names it
    assert table.set_index("claim").loc["Learned positional heads attend at fixed shifts", "judged on"] == (
        f"SA learned 2D, 9 heads (long), {official}"
    )
    ev.runs["learned_9h_init_re"] = _measured([1, 1], [6.0, 2.0])  # its display name says the init: said once
    shifts = claims.evidence_models(ev, "learned_shifts")
    assert shifts.endswith("SA learned 2D, 9 heads, [Re] init, official form"), shifts


def test_map_claims_are_judged_again_on_every_seed_of_the_ledgers_preset():
    """A map claim's verdict comes from its seed-0 evidence; its label adds the verdict of each seed saved at the
    ledger's preset, each judged on that seed's runs alone (issue 48: no "1 seed" where more are saved)."""
    n, queries = 16, np.array([0, 5, 10, 15])
    one_hot = np.zeros((2, 2, 3, 4, n))
    one_hot[:, 0, :, range(4), queries] = 1.0
    one_hot[:, 1] = 1 / n  # layers that differ: σ small
    alike = np.repeat(one_hot[:, :1], 2, axis=1)  # both layers the same pattern: σ = 1

    def att(rows):
        return _run(
            attention={"rows": rows, "rows_mean": rows.mean(0), "queries": queries, "grid": np.array([4, 4])}
        )

    seeds = {  # seed: (HA's maps, its model's maps) of the ViT pair
        0: (one_hot, one_hot),
        1: (alike, one_hot),  # HA's layers alike, its model's not: fails at seed 1
        2: (one_hot, one_hot),
    }
    ev = Evidence("budget", runs={"vit_ha": att(seeds[0][0]), "vit": att(seeds[0][1])})
    ev.own_seed_runs = {
        "vit_ha": {s: att(v[0]) for s, v in seeds.items()},
        "vit": {s: att(v[1]) for s, v in seeds.items()},
    }
    claim = claims.by_key("ha_layers_differ")
    assert claims.seed_verdicts(ev, claim) == {0: REPRODUCED, 1: NOT_REPRODUCED, 2: REPRODUCED}
    row = claims.ledger(ev, [claim]).iloc[0]
    assert row["verdict"] == REPRODUCED  # the seed-0 evidence's
    assert row["label"].endswith("at budget, seeds 0–2: reproduced on 2 of 3, not reproduced on 1 of 3")
    del ev.own_seed_runs["vit"][2]  # a seed the model lacks is not judged
    assert claims.seed_verdicts(ev, claim) == {0: REPRODUCED, 1: NOT_REPRODUCED}
    gain = claims.by_key("ha_gain")
    assert claims.seed_verdicts(ev, gain) == {}  # a claim over seeds already reads them all


def test_map_claims_are_judged_at_the_papers_geometry_once_two_seeds_are_saved_there():
    """Issue 48: a map claim is judged on the runs at 16x16 tokens (claims.GEOMETRY) seed by seed once each
    model it reads there has two seeds; the verdict is the one its seeds agree on (inconclusive where they
    differ), the 8x8 evidence stays in the label; with one seed there, the 8x8 evidence decides."""
    claim = claims.by_key("learned_shifts")
    flat = _probed([1.0, 1.0], [1.0, 1.0], uniform=1.0, key="peak")  # stays uniform: fails
    local = _probed([6.0, 2.0], [1.0, 1.0], uniform=1.0, key="peak")  # 6x uniform from 1x: passes
    ev = Evidence("budget", runs={"learned_9h": flat, "learned_16h": flat}, geometry="tokens16")
    ev.accuracies = {"learned_9h": [0.5], "learned_16h": [0.5]}  # 8x8 seeds: not what is judged at 16x16
    ev.geometry_runs = {"learned_9h": {0: local}}
    assert claims.ledger(ev, [claim]).iloc[0]["verdict"] == NOT_REPRODUCED  # one seed there: 8x8 decides
    ev.geometry_runs["learned_9h"][1] = local
    row = claims.ledger(ev, [claim]).iloc[0]
    assert (
        row["verdict"] == REPRODUCED and row["value"].startswith("seed 0: ") and "; seed 1: " in row["value"]
    )
    assert row["value"].count("6.00×") == 2  # each seed's value: the spread over seeds
    assert row["label"].startswith("reproduced — at tokens16 (16×16 tokens, ")
    assert "seeds 0–1: reproduced on 2 of 2; on 8×8 tokens: not reproduced" in row["label"]
    assert row["models"] == "SA learned 2D, 9 heads, official form and init"
    ev.geometry_runs["learned_9h"][2] = flat  # seeds disagree: inconclusive, each counted
    row = claims.ledger(ev, [claim]).iloc[0]
    assert row["verdict"] == INCONCLUSIVE and "reproduced on 2 of 3, not reproduced on 1 of 3" in row["label"]
    assert claims.seed_verdicts(ev, claims.by_key("ha_gain"), geometry=True) == {}  # not a map claim


def test_learned_shifts_at_the_papers_geometry_waits_for_both_initialisations():
    """Issue 48: the learned-2D model without content is trained at 16x16 tokens in both initialisations
    (`learned_9h`, official; `learned_9h_init_re`, [Re]); the claim is judged there only once each model saved
    there has two seeds, and the "judged on" column names both forms."""
    claim = claims.by_key("learned_shifts")
    flat = _probed([1.0, 1.0], [1.0, 1.0], uniform=1.0, key="peak")
    local = _probed([6.0, 2.0], [1.0, 1.0], uniform=1.0, key="peak")
    runs = {"learned_9h": flat, "learned_16h": flat, "learned_9h_init_re": None}  # [Re] init: not on 8x8
    ev = Evidence("budget", runs=runs, geometry="tokens16")
    ev.geometry_runs = {"learned_9h": {0: local, 1: local}, "learned_9h_init_re": {0: local}}
    row = claims.ledger(ev, [claim]).iloc[0]
    # the [Re] init has one seed there: the 8x8 evidence decides
    assert row["verdict"] == NOT_REPRODUCED and "16×16" not in row["label"]
    ev.geometry_runs["learned_9h_init_re"][1] = flat
    row = claims.ledger(ev, [claim]).iloc[0]
    assert row["verdict"] == INCONCLUSIVE  # one model passes, the other fails, on each seed
    assert row["label"].startswith("inconclusive — at tokens16 (16×16 tokens, ")
    assert "official form and init" in row["models"] and "[Re] init, official form" in row["models"]
    assert row["value"].count("[Re] init: first layer") == 2 and "our variant" not in row["value"]  # no aside

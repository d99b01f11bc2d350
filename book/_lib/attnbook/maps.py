"""The figures of a saved run's attention: its maps (token grids or SAN windows), a quadratic model's centres
and their paths, and the per-layer measures of the 60-epoch runs against the epoch. Each is a numbered figure
(``display.show``) or, for a run not saved, a placeholder and a note (``display.note``); both are looked up
on ``attnbook.display`` when called, so a test that replaces them there sees every figure and note.
"""

from __future__ import annotations

from attnbook import display
from attnbook.ledger import measure_endpoints
from attnbook.params import Params
from attnbook.phrases import _times, title, word_list
from attnlib.measures import NEAR_UNIFORM, QUERY_FRACTIONS, attention_peaks


def show_attention(
    run,
    experiment: str,
    params: Params,
    query: int = 0,
    name: str | None = None,
    status: dict | None = None,
    named: bool = False,
    shown_as: str | None = None,
    where: str = "",
    others: str = "fold",
    mean: bool = True,
) -> None:
    """The saved attention maps of one run: figures ``{name}-one`` (a fixed query pixel, first saved test
    image) and ``{name}-mean`` (averaged over the saved test images); ``name`` defaults to
    ``fig-<experiment>`` (``-q<query>`` added for another query); ``named``: the captions name the preset and
    epochs. A run not saved gets one placeholder labelled both ways (``status``: ``Runs.status``, damaged
    or stale), so references resolve. Token models: ``_token_maps`` (``others``: "fold" the other heads under
    each figure, or leave them to the "appendix"; ``mean`` False: the image's figure only, as [Re] Figs.
    B.1-B.10 show); SAN: ``_san_maps``. ``shown_as``: the label a chapter drew these maps under
    (``others="appendix"``): at query 0 a sentence refers back to them (``where``: "chapter 2") and only
    their other heads are drawn, as ``{shown_as}-{part}-more``.
    """
    from attnbook import viz

    label = name or f"fig-{experiment}" + (f"-q{query}" if query else "")
    model = title(experiment)
    if run is not None:
        model += _at(params.preset, run, named)
    if shown_as is not None and not query:
        _refer_back(run, model, shown_as, where)
        return
    if run is None:
        display.note_missing(f"Attention maps of {model}", params.preset, [experiment], status)
        display.show(
            viz.placeholder(f"{model}: not saved at preset {params.preset}"),
            f"{label}-one",
            not_saved(model, params.preset, "maps (one test image and the mean over test images)"),
            also=(f"{label}-mean",),
        )
        return
    if "rows" in run.attention:
        _token_maps(run, query, label, model, others, mean)
    else:
        _san_maps(run, query, label, model)


def _refer_back(run, model: str, shown_as: str, where: str) -> None:
    """``show_attention(..., shown_as=...)``: a sentence naming the figures of ``shown_as`` (chapter
    ``where``), then the other heads of those figures, which the chapter left to the appendix."""
    if _same_for_every_image(run):  # drawn once, labelled both ways
        shown = f"{{numref}}`{shown_as}-one` (the same for every test image)"
    else:
        one, mean = f"{{numref}}`{shown_as}-one`", f"{{numref}}`{shown_as}-mean`"
        shown = f"{one} (one test image) and {mean} (mean over test images)"
    maps = _Maps(run) if run is not None and "rows" in (run.attention or {}) else None
    tail = f"their {maps.others} follow" if maps and maps.rest else "they are not repeated here"
    display.note(
        f"The attention maps of {model} at this query pixel are {shown}{where and ' in ' + where}; {tail}."
    )
    for part, _ in maps.parts if maps and maps.rest else []:
        maps.show_rest(part, shown_as, model)


def _same_for_every_image(run) -> bool:
    """A token model's saved maps that do not depend on the image (no content term): each image's rows equal
    their mean. False for SAN, a run without maps or not saved."""
    import numpy as np

    att = getattr(run, "attention", None) or {}
    if "rows" not in att:
        return False
    rows = np.asarray(att["rows"])
    return bool(np.allclose(rows, np.asarray(att["rows_mean"])[None]))


def _heads(heads: list) -> str:
    """Heads [4, ..., 8] in words: "heads 5–9" ("head 1" for one, "" for none)."""
    return (
        f"heads {heads[0] + 1}–{heads[-1] + 1}" if len(heads) > 1 else f"head {heads[0] + 1}" if heads else ""
    )


class _Maps:
    """What a token model's maps figures show: heads ``first`` (and their mean) in the figure, heads
    ``rest`` in its other-heads figure (none where a figure holds every head, or where every map is
    near-uniform: then one row of each layer's sharpest head stands for them all, ``compact``)."""

    def __init__(self, run, query: int = 0, mean: bool = True):
        from attnbook import viz

        self.att, self.query = run.attention, query
        self.peaks = attention_peaks(run)
        self.compact = bool(self.peaks.max() < NEAR_UNIFORM)
        hierarchical = run.config.get("model", {}).get("hierarchical", False)
        shared = " of the shared block"  # an HA model's rows: the applications of its one block
        self.unit, self.units = (
            ("application" + shared, "applications" + shared) if hierarchical else ("layer", "layers")
        )
        self.word = self.unit.split(" ")[0]
        self.first, rest = viz.head_split(self.att["rows"].shape[2])
        self.rest = [] if self.compact else rest
        self.others = _heads(rest)
        self.same = _same_for_every_image(run)
        images = run.config.get("attention_mean_images", "the saved")
        self.parts = (
            [("one", "the same for every test image (no content term)")]
            if self.same
            else [("one", "one test image"), ("mean", f"mean over {images} test images")][: 2 if mean else 1]
        )

    def figure(self, part: str, heads: list, average: bool = False, columns: int | None = None):
        """The PNG of ``heads`` (and their mean) of one test image (``part`` "one") or of the mean."""
        from attnbook import viz

        image = 0 if part == "one" else None
        kw = dict(query=self.query, image=image, layer_label=self.word, heads=heads, average=average)
        return display.png(viz.token_attention(self.att, columns=columns or viz.MAX_COLUMNS, **kw))

    def show_rest(self, part: str, label: str, model: str, folded: str | None = None) -> None:
        """Figure ``{label}-{part}-more``: the heads ``rest`` of figure ``{label}-{part}``, one row per layer
        (more than ``MAX_COLUMNS`` heads: ``wide-maps``, printed the column's full width)."""
        from attnbook import viz

        wide = {"figclass": "wide-maps"} if len(self.rest) > viz.MAX_COLUMNS else {}
        display.show(
            self.figure(part, self.rest, columns=len(self.rest)),
            f"{label}-{part}-more",
            f"{model}: {self.others} of {{numref}}`{label}-{part}`, on the scale of every attention map.",
            also=(f"{label}-mean-more",) if self.same else (),
            folded=folded,
            **wide,
        )


def _token_maps(run, query: int, label: str, model: str, others: str = "fold", mean: bool = True) -> None:
    """A token model's maps: heads 1-4 and the mean of all heads in ``{label}-one`` (one test image) and
    ``{label}-mean`` (mean over images; one figure labelled both ways where no content term), the other heads
    in ``{label}-{part}-more`` (``_Maps.show_rest``); all maps near-uniform: one figure of each layer's
    sharpest head (``viz.sharpest_heads``); then a note of each layer's max peak."""
    from attnbook import viz

    maps = _Maps(run, query, mean)
    grid = tuple(int(g) for g in maps.att["grid"])
    pixel = divmod(int(maps.att["queries"][query]), grid[1])
    colour = f"colour: multiple of uniform attention 1/{grid[0] * grid[1]}, log scale, white uniform"
    if maps.compact:
        what = "the same for every test image" if maps.same else "mean over the saved test images"
        display.show(
            display.png(viz.sharpest_heads(maps.att, query, maps.word)),
            f"{label}-one",
            f"{model}: where query token {pixel} (outlined) attends. {_notice(maps.peaks, maps.word)} Each "
            f"{maps.unit}'s sharpest head, {what}; {colour}.",
            also=(f"{label}-mean",),
        )
    shown = _heads(maps.first)
    for part, what in [] if maps.compact else maps.parts:
        more = f"{{numref}}`{label}-{part}-more`"
        where = f"folded below, {more}" if others == "fold" else f"{more}, in the appendix"
        layout = f"Rows: {maps.units}; columns: {shown} and their mean" + (
            f" ({maps.others}: {where})" if maps.rest else ""
        )
        display.show(
            maps.figure(part, maps.first, average=True),
            f"{label}-{part}",
            f"{model}: where query token {pixel} (outlined) attends, {what}. {_notice(maps.peaks, maps.word)} "
            f"{layout}; {colour}.",
            also=(f"{label}-mean",) if maps.same else (),
        )
        if maps.rest and others == "fold":
            maps.show_rest(part, label, model, folded=f"The other heads of this figure: {maps.others}")
    listed = ", ".join(f"{_times(p)}×" for p in maps.peaks)
    flat = " (near-uniform in every layer)" if maps.compact else ""
    display.note(
        f"Max peak per {maps.unit} ({{ref}}`definitions <def-measures>`; over heads, the saved query pixels and "
        f"{len(maps.att['rows'])} test images): {listed}{flat}."
    )


def _notice(peaks, unit: str) -> str:
    """What to see first in a run's maps, from each layer's max peak (``attention_peaks``): "Every map is
    near-uniform: no head has learned where to look." or "Over the saved query pixels and images, the
    sharpest maps are in layer 3, up to 12× uniform; layer 1 stays near-uniform." """
    import numpy as np

    if peaks.max() < NEAR_UNIFORM:
        return "Every map is near-uniform (white): no head has learned where to look."
    best = int(np.argmax(peaks))
    flat = [str(i + 1) for i, p in enumerate(peaks) if p < NEAR_UNIFORM]
    one = len(flat) == 1
    rest = (
        f"; {unit}{'' if one else 's'} {word_list(flat)} stay{'s' if one else ''} near-uniform"
        if flat
        else ""
    )
    where = "Over the saved query pixels and images, the sharpest maps are in"
    return f"{where} {unit} {best + 1}, up to {_times(peaks[best])}× uniform{rest}."


def _san_maps(run, query: int, label: str, model: str) -> None:
    """A SAN's maps (``show_attention``): ``{label}-one``, each layer's aggregation weights over the K×K window
    of one query pixel in one test image; ``{label}-mean``, the weights averaged over pixels and images per
    weight group."""
    from attnbook import viz

    images = run.config.get("attention_mean_images", "the saved")
    unit = "application" if run.config.get("model", {}).get("hierarchical", False) else "layer"
    weights, means = viz.san_layers(run.attention)
    fraction = QUERY_FRACTIONS[query]
    names = [f"{unit} {i + 1}" for i in range(len(weights))]
    display.show(
        viz.window_maps([w[0] for w in weights], fraction, layer_names=names),
        f"{label}-one",
        f"{model}: aggregation weights of the query pixel at {fraction} of the image over its K×K window "
        f"(centre outlined), one test image, one panel per {unit}, averaged over weight groups.",
    )
    display.show(
        viz.window_means(means, layer_names=names),
        f"{label}-mean",
        f"{model}: aggregation weights averaged over pixels and {images} test images, one row per weight "
        f"group (the mean of all groups last), one column per {unit}.",
    )


def show_centres(name: str, run, label: str, preset: str, status: dict | None = None, named=False) -> None:
    """Figure ``label``: the final attention centres of a quadratic model, one panel per layer, or a
    placeholder and a note when ``run`` (at ``preset``; ``named``: the caption names the preset and the
    epochs, for a figure of another preset than the chapter's) is not saved."""
    from attnbook import viz

    if _centres_missing(name, run, label, preset, "Attention centres", status):
        return
    display.show(
        viz.quadratic_centres(
            run.centers["centers"][-1], run.centers["inverse_covariance"][-1], **_input_pixels(run)
        ),
        label,
        f"{title(name)}{_at(preset, run, named)}: attention centres $\\Delta^{{(h)}}$ after training, one panel per "
        "layer, in input pixels: dots the heads' centres (numbered), ellipses one standard deviation of each "
        "head's Gaussian, the square the query pixel.",
    )


def _input_pixels(run) -> dict:
    """The keywords that draw a run's centres in input pixels (``viz.quadratic_centres``): a token of its
    attention grid spans 32 / grid-width of them (``rules.key_pixels``: 4 on the budget's 8 × 8 grid)."""
    from attnlib.analysis.rules import key_pixels

    return {"pixel_size": key_pixels(run), "unit": "px"}


def show_centre_paths(
    name: str, run, label: str, preset: str, status: dict | None = None, named=False
) -> None:
    """Figure ``label``: a quadratic model's centres during training, from initial to final, one panel per
    layer, or a placeholder and a note when ``run`` is not saved."""
    from attnbook import viz

    if _centres_missing(name, run, label, preset, "Evolution of the centres", status):
        return
    display.show(
        viz.centre_trajectories(run.centers["centers"], x_values=run.centers["epoch"], **_input_pixels(run)),
        label,
        f"{title(name)}{_at(preset, run, named)}: attention centres during training, one panel per layer, in "
        "input pixels, from the initial centre of each head (hollow) to its final one (filled).",
    )


def not_saved(model: str, preset: str, what: str = "maps") -> str:
    """The caption of a placeholder figure: the run is not saved at ``preset`` (a statement, not a mark)."""
    return f"The run of {model} at the {preset} preset is not saved yet; its {what} appear here once it is."


def _at(preset: str, run, named: bool) -> str:
    """ " (long preset, 60 epochs)" when ``named``, else "" (captions of a run of another preset)."""
    return f" ({preset} preset, {len(run.history)} epochs)" if named else ""


def _centres_missing(name, run, label, preset, what, status) -> bool:
    from attnbook import viz

    if run is not None and run.centers is not None:
        return False
    display.note_missing(f"{what} of {title(name)}", preset, [name], status)
    display.show(
        viz.placeholder(f"{title(name)}: not saved at preset {preset}"),
        label,
        not_saved(title(name), preset, what.lower().replace("evolution of the", "paths of the")),
    )
    return True


def measured_runs(experiments, params: Params):
    """``Runs`` of ``experiments`` at the chapter's ``long_preset`` (seed 0, the chapter's data and results
    folder; never trains): the runs whose histories hold the per-layer attention measures of every epoch."""
    import dataclasses

    from attnbook.runs import load_all

    return load_all(
        experiments, dataclasses.replace(params, preset=params.long_preset, seed=0, train_missing=False)
    )


def show_measured_attention(
    experiments,
    params: Params,
    query: int = 0,
    names: dict | None = None,
    shown: dict | None = None,
    others: str = "fold",
    mean: bool = True,
) -> list[str]:
    """The attention maps of the saved runs of ``experiments`` at the chapter's ``long_preset`` (those that
    have maps), each as ``show_attention`` draws them, labelled ``fig-<experiment>-long`` (or ``names[e]``)
    and captioned with the preset; nothing when the chapter's own preset is its ``long_preset`` (its figures
    are those runs). ``shown``: ``{experiment: (label, where)}`` of maps another chapter already draws under
    ``label`` (its ``show_measured_attention(..., names=..., others="appendix")``): at query 0 a sentence
    refers to them and their other heads are drawn (``show_attention``'s ``others`` and ``mean``). Returns the
    experiments drawn or referred to."""
    import dataclasses

    if params.preset == params.long_preset:
        return []
    runs = measured_runs(experiments, params)
    longer = dataclasses.replace(params, preset=params.long_preset, seed=0)
    names, shown = names or {}, shown or {}
    drawn = [e for e, run in runs.items() if run is not None and run.attention]  # ResNet18 saves none
    for e in drawn:
        label, where = shown.get(e, (None, ""))
        kw = dict(name=names.get(e, f"fig-{e}-long"), named=True, others=others, mean=mean)
        show_attention(runs[e], e, longer, query, shown_as=label, where=where, **kw)
    return drawn


def show_measured_centres(experiments, params: Params) -> dict:
    """The final centres and the paths of the saved runs at the chapter's ``long_preset`` of the quadratic
    ``experiments`` (``show_centres`` / ``show_centre_paths``, labelled ``fig-centres-<experiment>-long`` and
    ``fig-paths-<experiment>-long``, captioned with the preset); nothing when the chapter's own preset is its
    ``long_preset``. Returns {experiment: run} of the runs drawn (the chapter quotes their numbers)."""
    longer = params.long_preset
    if params.preset == longer:
        return {}
    runs = {e: r for e, r in measured_runs(experiments, params).items() if r is not None}
    for e, run in runs.items():
        show_centres(e, run, f"fig-centres-{e}-long", longer, named=True)
        show_centre_paths(e, run, f"fig-paths-{e}-long", longer, named=True)
    return runs


def show_measure_curves(figures: dict, params: Params) -> int:
    """The per-layer attention measures of saved runs at the chapter's ``long_preset`` against the epoch, one
    numbered figure per entry of ``figures`` (``{figure name: (experiments, caption's first sentence)}``;
    ``viz.measures_vs_epochs``,
    one column per run found, in the order given; a model and its HA variant side by side). Without any
    such run: one note saying so and naming the command that trains them, and no figure (nor for a figure
    none of whose runs is saved). Returns the number of figures drawn."""
    from attnbook import viz
    from attnlib.measures import centre_displacement, logged_centres

    every = list(dict.fromkeys(e for experiments, _ in figures.values() for e in experiments))
    runs = measured_runs(every, params)
    found = [e for e in every if runs[e] is not None and viz.layer_series(runs[e].history, "distance")]
    command = f"`python -m attnlib train NAME --preset {params.long_preset} --data ...`"
    if not found:
        display.note(
            f"**No `{params.long_preset}` result is saved yet**, so the figures of how each layer's attention "
            f"measures evolve during training are not drawn. The runs that log them every epoch are trained "
            f"with {command}, for NAME in {', '.join(f'`{e}`' for e in every)}."
        )
        return 0
    drawn = 0
    for name, (experiments, what) in figures.items():
        shown = [e for e in experiments if e in found]
        if not shown:
            continue
        displacements = {}
        for e in shown:
            if (centres := logged_centres(runs[e])) is not None:
                displacements[title(e)] = centre_displacement(centres).numpy()
        figure = viz.measures_vs_epochs(
            {title(e): runs[e].history for e in shown},
            displacements=displacements,
            pixel_size=_input_pixels(runs[shown[0]])["pixel_size"] if displacements else None,
        )
        images = runs[shown[0]].config.get("probe_images")
        absent = [e for e in experiments if e not in shown]
        display.show(
            figure,
            name,
            f"{what} The measures of {{ref}}`the definitions <def-measures>` for each layer of the 60-epoch runs "
            f"(seed 0) after every epoch, on {images or 'the'} fixed test images; one line per layer (per "
            "application of the shared block for HA), dark to light with depth.",
        )
        if absent:
            display.note(
                f"Not drawn, as no 60-epoch run of them is saved: {word_list([title(e) for e in absent])}."
            )
        display.show_folded_table(
            measure_endpoints({title(e): runs[e].history for e in shown}),
            "The figure's numbers: each layer's mean peak and attended distance after the first and after the "
            "last epoch",
            by="model",
        )
        drawn += 1
    return drawn

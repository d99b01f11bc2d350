"""What a chapter's cells show: glued numbers, phrases and figures for the prose, tables, notes (a missing
result, a model below its target) and the attention maps of a saved run. Needs IPython and myst-nb.
"""

from __future__ import annotations

import re

from attnbook.benchmarks import profile_layout, throughput_tables
from attnbook.ledger import ledger_table, measure_endpoints
from attnbook.params import Params
from attnbook.phrases import (
    MISSING,
    NOT_MEASURED,
    NOT_USED,
    _times,
    display_names,
    escaped,
    fmt,
    ledger_markdown,
    title,
    word_list,
)
from attnbook.reference import model_tables, protocol_tables
from attnbook.tables import sources_markdown
from attnlib.measures import NEAR_UNIFORM, attention_peaks
from attnlib.results.tables import below_target


def glue_text(name: str, value, spec: str = "{:.1%}", missing: str = "—") -> None:
    """Glue a number, formatted, for ``{glue:text}`name``` in the prose (missing -> ``missing``, "—" by
    default: a sentence never carries the mark of a missing run)."""
    from myst_nb import glue

    glue(name, fmt(value, spec, missing), display=False)


def glue_str(name: str, text: str) -> None:
    """Glue a piece of text (a phrase computed from results) for ``{glue:text}`name```; the registry's
    experiment ids in it are written as their display names (``display_names``: prose names models as a
    reader does)."""
    from myst_nb import glue

    glue(name, display_names(text), display=False)


def glue_numbers(prefix: str, numbers: dict) -> None:
    """Glue each entry of ``numbers`` (already formatted) as ``{prefix}_{key}``."""
    for key, value in numbers.items():
        glue_str(f"{prefix}_{key}", value)


def glue_verdicts(ledger, prefix: str, claims=None) -> None:
    """Glue each claim's verdict with its evidence and scale (the ledger's ``label``: "not reproduced — at
    60 epochs (long), 1 seed each") as ``{prefix}_v_{claim}``, the words a chapter's findings quote; only
    the ``claims`` given, when given."""
    for row in ledger.itertuples():
        if claims is None or row.claim in claims:
            glue_str(f"{prefix}_v_{row.claim}", getattr(row, "label", row.verdict))


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


def note(text: str, kind: str = "note") -> None:
    """Show a MyST admonition (``note``, ``warning``, ``important``) in the cell output."""
    from IPython.display import Markdown, display

    display(Markdown(f":::{{{kind}}}\n{text}\n:::"))


def note_missing(what: str, preset: str, experiments=(), status: dict | None = None) -> None:
    """Say plainly that a figure or table cannot be drawn because results are missing at this preset,
    naming those whose saved result was found damaged or of another configuration (``status``:
    ``{experiment: (status, detail)}``, the ``Runs.status`` of ``load_all``)."""

    def name(e: str) -> str:
        found = (status or {}).get(e, ("missing", ""))[0]
        return escaped(title(e)) + (f" ({NOT_USED[found]})" if found in NOT_USED else "")

    names = ", ".join(name(e) for e in experiments)
    note(
        f"**{what}: runs not saved at preset `{preset}`**{' (' + names + ')' if names else ''}. "
        "The book build only reads saved results; train them with "
        f"`python -m attnlib train EXPERIMENT --preset {preset}`, or run this chapter with papermill "
        "(which trains what `results/` lacks).",
        "warning",
    )


def note_below_target(frame, preset: str) -> None:
    """At the budget preset, a warning naming every saved attention model below its accuracy target."""
    from attnlib import experiments

    low = below_target(frame, preset)
    if low:
        names = "; ".join(f"{title(n)} {a:.1%}" for n, a in low)
        note(
            f"Below {experiments.BUDGET_TARGET:.0%} test accuracy, the level the budget protocols were tuned "
            f"to reach: {names}. Read their rows as measured (the appendix's "
            "{ref}`hyper-parameters <appendix-hyperparameters>` give the protocols' history).",
            "warning",
        )


def show(
    figure, name: str | None = None, caption: str | None = None, also: tuple = (), folded: str | None = None
) -> None:
    """Display a matplotlib figure (or a PNG already made by ``png``) in the cell output as a PNG, and close it.

    With ``name`` (e.g. ``"fig-alpha"``) the figure is numbered, with ``caption`` (MyST Markdown) under it,
    and the prose refers to it as ``{numref}`fig-alpha```: the PNG is glued under ``name`` and shown by a
    ``glue:figure`` directive in the cell's Markdown output. Names are labels of the whole book: unique.
    ``also``: further labels of the same figure (MyST targets before it), so that a figure that stands for
    two (a missing run's one placeholder) is shown once and both references resolve to it. ``folded``: the
    figure goes in a fold-out (MyST dropdown) titled so, still numbered (the rest of a figure's maps).
    """
    from IPython.display import Image, Markdown, display

    if name is None:
        display(figure if isinstance(figure, Image) else png(figure))
        return
    from myst_nb import glue

    glue(name, figure if isinstance(figure, Image) else png(figure), display=False)
    targets = "".join(f"({label})=\n" for label in also)
    text = f"{targets}```{{glue:figure}} {name}\n:name: {name}\n\n{caption or ''}\n```"
    display(Markdown(text if folded is None else f":::{{dropdown}} {folded}\n{text}\n:::"))


def show_table(
    frame, caption: str | None = None, compact: bool = False, wrap_names: bool = False, right: tuple = ()
) -> None:
    """Display a table without its row index (and with a caption). ``compact``: a table of short cells
    (names and numbers), kept on one line each (CSS class ``results`` of ``book/_static/attnlib.css``);
    ``wrap_names``: its first column (long model names) may wrap, so that a table of many columns fits the
    page (CSS class ``wrap-names``); ``right``: further columns to right-align (the columns of numbers,
    ``number_columns``, always are, with their headers). A missing value reads "—" (never "nan"), a float
    two decimals (never pandas' six). Every table must fit the text column: `make check-book` fails on one
    that scrolls sideways (``protocol_tables``, ``model_tables`` and ``throughput_tables`` lay out the
    appendix's reference tables to fit)."""
    import html

    from IPython.display import HTML, display

    # cells, headers and caption as text: a string from a results file never reaches the page as markup
    styler = (
        frame.style.format(escape="html", na_rep="—", precision=2)
        .format_index(escape="html", axis=1)
        .hide(axis="index")
    )
    if compact:
        styler = styler.set_table_attributes('class="results"')
    elif wrap_names:
        styler = styler.set_table_attributes('class="wrap-names"')
    right = [c for c in frame.columns if c in set(right) or c in set(number_columns(frame))]
    if right:
        styler = styler.set_properties(subset=right, **{"text-align": "right"})
        positions = [i for i, c in enumerate(frame.columns) if c in set(right)]
        levels = frame.columns.nlevels
        styler = styler.set_table_styles(
            [
                {"selector": f"th.col_heading.level{levels - 1}.col{i}", "props": "text-align: right;"}
                for i in positions
            ],
            overwrite=False,
        )
    if caption:
        styler = styler.set_caption(html.escape(caption))
    # the one tag the library's own headers write, a soft line break (no attributes: nothing to inject)
    display(HTML(styler.to_html().replace("&lt;wbr&gt;", "<wbr>")))


#: A cell that reads as a number: "47.9", "-0.4", "+4.2 [+3.7, +4.6]", "12,086,844‡", "1.02×", "0.62".
_NUMBER = re.compile(r"^[+\-−]?(\d[\d,]*(\.\d+)?|\.\d+)")


def number_columns(frame) -> list:
    """The columns of ``frame`` whose every shown cell is a number (``_NUMBER``; numbers as numbers or as
    formatted text) or a mark standing for one ("—", "not yet trained", "not measured", the ``NOT_USED``
    marks, empty): right-aligned by ``show_table``, as a paper sets figures."""
    marks = {"", "—", MISSING, NOT_MEASURED, *NOT_USED.values()}
    found = []
    for column in frame.columns:
        cells = [v for v in frame[column].tolist() if not (v is None or (isinstance(v, float) and v != v))]
        if not cells:
            continue
        texts = [v if isinstance(v, str) else None for v in cells]
        numbers = [
            not isinstance(v, bool) and (isinstance(v, int | float) or bool(_NUMBER.match(t.strip())))
            for v, t in zip(cells, texts, strict=True)
            if t is None or t.strip() not in marks
        ]
        if numbers and all(numbers):
            found.append(column)
    return found


def show_protocols(preset: str) -> None:
    """The training protocols at ``preset`` (``protocol_tables``): a table per group of model families, one
    row per setting and one column per protocol, then the experiments that train with each and why."""
    settings, reasons = protocol_tables(preset)
    caption = f"Training protocols at preset {preset}"
    for families, table in settings:
        show_table(table, caption=f"{caption}: {word_list(families)} models")
    show_table(reasons, caption=f"{caption}: the experiments that train with each, and why")


def show_models(preset: str, family: str) -> None:
    """Every field of the model configs of ``family`` at ``preset`` (``model_tables``): one row per field, one
    column per experiment; a family of more than ``REFERENCE_COLUMNS`` models in a table per group."""
    chunks = model_tables(preset, family)
    caption = f"{family} models at preset {preset}"
    for groups, table in chunks:
        show_table(table, caption=caption + (f": {word_list(groups)}" if len(chunks) > 1 else ""))


def show_bench(report: dict, device: str) -> None:
    """A saved speed benchmark (``python -m attnlib bench``) in tables that fit the text column
    (``throughput_tables``, ``profile_layout``): throughput and utilisation; memory and FLOPs; the batch and
    layers timed of each shapes; where the time goes when the run was profiled."""
    main, more, setup = throughput_tables(report)
    show_table(main, caption=f"Throughput on {device}")
    show_table(
        more,
        caption=f"Memory and FLOPs on {device} (GFLOP per image: the implementation's own; model "
        "utilisation: the plain formulation's FLOPs over the same time, against the matmul peak)",
    )
    if setup is not None:
        show_table(setup, caption=f"Batch and layers timed of each shapes on {device}")
    profile = profile_layout(report)
    if profile is not None:
        show_table(
            profile,
            caption=f"Where the time goes on {device} (share of op time; each model's first row: the op "
            "time of the profiled step, in ms)",
        )


def show_folded(markdown: str, summary: str) -> None:
    """MyST Markdown in a fold-out titled ``summary`` (a reader opens it to check a detail)."""
    from IPython.display import Markdown, display

    display(Markdown(f":::{{dropdown}} {summary}\n{markdown}\n:::"))


def show_folded_table(frame, summary: str, by: str | None = None) -> None:
    """A table (no index) in a fold-out titled ``summary``, under the table it completes. ``by``: one table
    per value of that column, under its value in bold (a long name in a column of its own would not fit
    beside the numbers), each without the columns that are empty for it."""
    from IPython.display import Markdown, display

    from attnbook.phrases import escaped, markdown_table

    if by is None:
        body = markdown_table(frame)
    else:
        parts = []
        for value, rows in frame.groupby(by, sort=False):
            rows = rows.drop(columns=by)
            rows = rows.loc[:, [c for c in rows.columns if (rows[c].astype(str) != "").any()]]
            parts.append(f"**{escaped(value)}**\n\n{markdown_table(rows)}")
        body = "\n\n".join(parts)
    display(Markdown(f":::{{dropdown}} {summary}\n{body}\n:::"))


def show_sources(experiments) -> None:
    """Display ``sources_markdown`` under a table, folded (a reader opens it to check a figure)."""
    from IPython.display import Markdown, display

    display(
        Markdown(
            ":::{dropdown} Where the literature figures come from\n" + sources_markdown(experiments) + "\n:::"
        )
    )


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
) -> None:
    """The saved attention maps of one run as two numbered figures, ``{name}-one`` (a fixed query pixel,
    first saved test image) and ``{name}-mean`` (the same query pixel, averaged over the saved test images);
    ``name`` defaults to ``fig-<experiment>`` (``-q<query>`` added for another query); ``named``: the
    captions name the preset and the epochs (for a run of another preset than the chapter's). A missing run still
    gets both figure numbers, with a placeholder saying it is not saved at this preset, so references resolve
    (``status``, the ``Runs.status`` of ``load_all``, says whether its saved result is damaged or stale);
    the placeholder is one figure labelled both ways (a figure is never shown twice). ``shown_as``: the label
    these maps were already shown under (another chapter's ``show_attention(..., name=shown_as)``, at query 0):
    at query 0 a sentence refers back to them (``where``: "chapter 2") instead of drawing them again.

    Token models (paper models, ViT): layers × heads grids over the key grid. SAN: each layer's K×K
    window around the query pixel, and the weights averaged over pixels and images per weight group.
    """
    from attnbook import viz
    from attnlib.snapshots import QUERY_FRACTIONS

    label = name or f"fig-{experiment}" + (f"-q{query}" if query else "")
    model = title(experiment)
    if shown_as is not None and not query:
        note(
            f"The attention maps of {model} at this query pixel are {{numref}}`{shown_as}-one` (one test image) "
            f"and {{numref}}`{shown_as}-mean` (mean over test images){' in ' + where if where else ''}; "
            "they are not repeated here."
        )
        return
    if run is None:
        note_missing(f"Attention maps of {model}", params.preset, [experiment], status)
        show(
            viz.placeholder(f"{model}: not saved at preset {params.preset}"),
            f"{label}-one",
            not_saved(model, params.preset, "maps (one test image and the mean over test images)"),
            also=(f"{label}-mean",),
        )
        return
    model += _at(params.preset, run, named)
    images = run.config.get("attention_mean_images", "the saved")
    hierarchical = run.config.get("model", {}).get("hierarchical", False)
    unit = "application of the shared block" if hierarchical else "layer"
    att = run.attention
    if "rows" in att:
        grid = tuple(int(g) for g in att["grid"])
        pixel = divmod(int(att["queries"][query]), grid[1])
        first, rest = viz.head_split(att["rows"].shape[2])  # every head once: a figure and its fold-out
        word = unit.split(" ")[0]
        drawn = {
            part: [
                png(viz.token_attention(att, query=query, image=image, layer_label=word, heads=first)),
                rest
                and png(
                    viz.token_attention(
                        att, query=query, image=image, layer_label=word, heads=rest, average=False
                    )
                ),
            ]
            for image, part in ((0, "one"), (None, "mean"))
        }
        same = drawn["one"][0].data == drawn["mean"][0].data  # no content term: the same maps for every image
        parts = (
            [("one", "the same for every test image (no content term)")]
            if same
            else [
                ("one", "one test image"),
                ("mean", f"mean over {images} test images"),
            ]
        )
        shown = f"heads 1–{len(first)}" if len(first) > 1 else "head 1"
        others = (
            f"heads {rest[0] + 1}–{rest[-1] + 1}" if len(rest) > 1 else f"head {rest[0] + 1}" if rest else ""
        )
        colour = (
            f"Colour: each map's multiple of uniform attention 1/{grid[0] * grid[1]}, on one log scale for the "
            "figure (white: uniform; red above, blue below)"
        )
        for part, what in parts:
            more = f"{label}-{part}-more"
            layout = f"Rows: {unit}s; columns: {shown} and the mean of all heads" + (
                f" ({others}: {{numref}}`{more}`, folded under it)" if rest else ""
            )
            show(
                drawn[part][0],
                f"{label}-{part}",
                f"{model}: attention of query pixel {pixel} (outlined), {what}. {layout}. {colour}.",
                also=(f"{label}-mean",) if same else (),
            )
            if rest:
                show(
                    drawn[part][1],
                    more,
                    f"{model}: {others} of {{numref}}`{label}-{part}`, on its colour scale.",
                    also=(f"{label}-mean-more",) if same else (),
                    folded=f"The other heads of this figure: {others}",
                )
        peaks = attention_peaks(run)
        listed = ", ".join(f"{_times(p)}×" for p in peaks)
        flat = " (near-uniform in every layer)" if peaks.max() < NEAR_UNIFORM else ""
        note(
            f"Max peak per {unit} ({{ref}}`definitions <def-measures>`; over heads, the saved query pixels and "
            f"{len(att['rows'])} test images): {listed}{flat}."
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
        f"(centre outlined), one test image, one panel per {unit}, averaged over weight groups.",
    )
    show(
        viz.window_means(means, layer_names=names),
        f"{label}-mean",
        f"{model}: aggregation weights averaged over pixels and {images} test images, one row per weight "
        f"group (the mean of all groups last), one column per {unit}.",
    )


def show_ledger(frame, caption: str) -> None:
    """The ledger table, then its claims in full (words, measure, value, rule) in a fold-out."""
    from IPython.display import Markdown, display

    show_table(ledger_table(frame), caption=caption, wrap_names=True)
    display(
        Markdown(
            f":::{{dropdown}} The claims in full: words, measure, our value, rule\n{ledger_markdown(frame)}\n:::"
        )
    )


def show_centres(name: str, run, label: str, preset: str, status: dict | None = None, named=False) -> None:
    """Figure ``label``: the final attention centres of a quadratic model, one panel per layer, or a
    placeholder and a note when ``run`` (at ``preset``; ``named``: the caption names the preset and the
    epochs, for a figure of another preset than the chapter's) is not saved."""
    from attnbook import viz

    if _centres_missing(name, run, label, preset, "Attention centres", status):
        return
    show(
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
    show(
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
    note_missing(f"{what} of {title(name)}", preset, [name], status)
    show(
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


def show_measured_attention(experiments, params: Params, query: int = 0) -> list[str]:
    """The attention maps of the saved runs of ``experiments`` at the chapter's ``long_preset`` (those that
    have maps), each as ``show_attention`` draws them, labelled ``fig-<experiment>-long`` and captioned with
    the preset; nothing when the chapter's own preset is its ``long_preset`` (its figures are those runs).
    Returns the experiments drawn."""
    import dataclasses

    if params.preset == params.long_preset:
        return []
    runs = measured_runs(experiments, params)
    longer = dataclasses.replace(params, preset=params.long_preset, seed=0)
    drawn = [e for e, run in runs.items() if run is not None and run.attention]  # ResNet18 saves none
    for e in drawn:
        show_attention(runs[e], e, longer, query, name=f"fig-{e}-long", named=True)
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
        note(
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
        show(
            figure,
            name,
            f"{what} The measures of {{ref}}`the definitions <def-measures>` for each layer of the 60-epoch runs "
            f"(seed 0) after every epoch, on {images or 'the'} fixed test images; one line per layer (per "
            "application of the shared block for HA), dark to light with depth.",
        )
        if absent:
            note(f"Not drawn, as no 60-epoch run of them is saved: {word_list([title(e) for e in absent])}.")
        show_folded_table(
            measure_endpoints({title(e): runs[e].history for e in shown}),
            "The figure's numbers: each layer's mean peak and attended distance after the first and after the "
            "last epoch",
            by="model",
        )
        drawn += 1
    return drawn

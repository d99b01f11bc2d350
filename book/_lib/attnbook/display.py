"""What a chapter's cells show: glued numbers and phrases for the prose, numbered figures, tables, fold-outs
and notes (a missing result, a model below its target). The figures of a saved run's attention are drawn
by ``attnbook.maps`` through ``show`` and ``note`` here. Needs IPython and myst-nb.
"""

from __future__ import annotations

import re

from attnbook.benchmarks import profile_layout, throughput_tables
from attnbook.ledger import ledger_table
from attnbook.phrases import (
    MISSING,
    NOT_MEASURED,
    NOT_USED,
    display_names,
    escaped,
    fmt,
    ledger_markdown,
    title,
    visible,
    word_list,
)
from attnbook.reference import model_tables, protocol_tables
from attnbook.tables import below_target


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

    glue(name, display_names(visible(text)), display=False)


def glue_numbers(prefix: str, numbers: dict) -> None:
    """Glue each entry of ``numbers`` (already formatted) as ``{prefix}_{key}``."""
    for key, value in numbers.items():
        glue_str(f"{prefix}_{key}", value)


def glue_verdicts(ledger, prefix: str, claims=None) -> None:
    """Glue each claim's verdict with its evidence and scale (the ledger's ``label``: "not reproduced — at
    60 epochs (long), 1 seed each") as ``{prefix}_v_{claim}``, and the bare verdict ("not reproduced") as
    ``{prefix}_w_{claim}``, the word a chapter's sentences quote (the ledger's table gives the scale); only
    the ``claims`` given, when given."""
    for row in ledger.itertuples():
        if claims is None or row.claim in claims:
            glue_str(f"{prefix}_v_{row.claim}", getattr(row, "label", row.verdict))
            glue_str(f"{prefix}_w_{row.claim}", row.verdict)


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


def show(figure, name=None, caption: str | None = None, also: tuple = (), folded=None, figclass=None) -> None:
    """Display a matplotlib figure (or a PNG already made by ``png``) in the cell output as a PNG, and close it.

    With ``name`` (e.g. ``"fig-alpha"``) the figure is numbered, with ``caption`` (MyST Markdown) under it,
    and the prose refers to it as ``{numref}`fig-alpha```: the PNG is glued under ``name`` and shown by a
    ``glue:figure`` directive in the cell's Markdown output. Names are labels of the whole book: unique.
    ``also``: further labels of the same figure (MyST targets before it), so that a figure that stands for
    two (a missing run's one placeholder) is shown once and both references resolve to it. ``folded``: the
    figure goes in a fold-out (MyST dropdown) titled so, still numbered (the rest of a figure's maps);
    ``figclass``: a class of the figure for the style sheets (``wide-maps``).
    """
    from IPython.display import Image, Markdown, display

    if name is None:
        display(figure if isinstance(figure, Image) else png(figure))
        return
    from myst_nb import glue

    glue(name, figure if isinstance(figure, Image) else png(figure), display=False)
    targets = "".join(f"({label})=\n" for label in also)
    classes = f":figclass: {figclass}\n" if figclass else ""
    text = f"{targets}```{{glue:figure}} {name}\n:name: {name}\n{classes}\n{caption or ''}\n```"
    display(Markdown(text if folded is None else f":::{{dropdown}} {folded}\n{text}\n:::"))


def show_table(
    frame,
    caption: str | None = None,
    compact: bool = False,
    wrap_names: bool = False,
    right: tuple = (),
    whole_words: tuple = (),
) -> None:
    """Display a table without its row index (and with a caption). ``compact``: a table of short cells
    (names and numbers), kept on one line each (CSS class ``results`` of ``book/_static/attnlib.css``);
    ``wrap_names``: its first column (long model names) may wrap, so that a table of many columns fits the
    page (CSS class ``wrap-names``, whose cells may break inside a word: ``whole_words``, columns of short
    names that break only between words); ``right``: further columns to right-align (the columns of numbers,
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
    if whole := [c for c in whole_words if c in frame]:  # the columns shown of those named
        styler = styler.set_properties(subset=whole, **{"overflow-wrap": "normal"})
    styler = styler.map(_whole_number)  # a number never breaks across lines, in any table
    if caption:
        styler = styler.set_caption(html.escape(caption))
    # the one tag the library's own headers write, a soft line break (no attributes: nothing to inject)
    # bidirectional controls of a results string shown as their code points (phrases.visible) in cells,
    # headers and caption alike
    display(HTML(visible(styler.to_html()).replace("&lt;wbr&gt;", "<wbr>")))


#: A cell that reads as a number: "47.9", "-0.4", "+4.2 [+3.7, +4.6]", "12,086,844‡", "1.02×", "0.62".
_NUMBER = re.compile(r"^[+\-−]?(\d[\d,]*(\.\d+)?|\.\d+)")


#: The longest cell that ``_whole_number`` keeps on one line ("47.9 ± 0.1 (2)", "+4.2 [+3.7, +4.6]").
WHOLE_NUMBER_CHARS = 24


def _whole_number(value) -> str:
    """The CSS that keeps a short number-like cell on one line (a wrap-names table may otherwise break
    "11,124,606" after a comma), "" for any other cell."""
    text = value if isinstance(value, str) else "" if value is None or isinstance(value, bool) else f"{value}"
    short = len(text) <= WHOLE_NUMBER_CHARS and _NUMBER.match(text.strip())
    return "white-space: nowrap; overflow-wrap: normal" if short else ""


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
    show_table(
        reasons.drop(columns="history"), caption=f"{caption}: the experiments that train with each, and why"
    )
    past = reasons[reasons["history"] != ""][["protocol", "history"]]
    if len(past):  # the dated steps that led to each protocol, for a reader who wants them
        paper = "The dated history of each protocol is left out of print; the HTML book has it here, folded."
        show_folded_table(
            past, f"How each protocol at preset {preset} came about (dated history)", on_paper=paper
        )


def show_models(preset: str, family: str) -> None:
    """Every field of the model configs of ``family`` at ``preset`` (``model_tables``): those the family
    shares in one table, then one row per other field and one column per experiment; a family of more than
    ``REFERENCE_COLUMNS`` models in a table per group."""
    shared, chunks = model_tables(preset, family)
    caption = f"{family} models at preset {preset}"
    if shared is not None:
        show_table(shared, caption=f"{caption}: the fields every model of the family shares")
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


def show_folded(markdown: str, summary: str, on_paper: str | None = None) -> None:
    """MyST Markdown in a fold-out titled ``summary`` (a reader opens it to check a detail). ``on_paper``: a
    sentence that stands for the fold-out in print (``print-repeat`` and ``print-only`` in
    ``book/_static/attnlib.css``), where it is printed elsewhere or is an archive a page need not hold."""
    from IPython.display import Markdown, display

    paper = f"\n\n:::{{container}} print-only\n{on_paper}\n:::" if on_paper else ""
    markdown = (":class-container: print-repeat\n" if on_paper else "") + markdown
    display(Markdown(f":::{{dropdown}} {summary}\n{markdown}\n:::{paper}"))


def show_folded_table(frame, summary: str, by: str | None = None, on_paper: str | None = None) -> None:
    """A table (no index) in a fold-out titled ``summary`` (``show_folded``), under the table it completes.
    ``by``: one table per value of that column, under its value in bold (a long name in a column of its own
    would not fit beside the numbers), each without the columns that are empty for it."""
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
    show_folded(body, summary, on_paper)


def show_ledger(frame, caption: str, printed_under: str | None = None) -> None:
    """The ledger table, then its claims in full (words, measure, value, rule) in a fold-out.
    ``printed_under``: the label of the section whose ledger (the introduction's, of every claim) holds these
    claims in full too: on paper (``print-repeat`` and ``print-only`` in ``book/_static/attnlib.css``) the
    fold-out gives way to a sentence that refers there, so that no claim is printed twice."""
    from IPython.display import Markdown, display

    show_table(ledger_table(frame), caption=caption, wrap_names=True, whole_words=("source",))
    repeat = "" if printed_under is None else ":class-container: print-repeat\n"
    text = f":::{{dropdown}} The claims in full: words, measure, our value, rule\n{repeat}{ledger_markdown(frame)}\n:::"
    if printed_under is not None:
        text += (
            "\n\n:::{container} print-only\nThese claims in full (words, measure, our value, rule) are printed "
            f"once, with the ledger of every claim ({{ref}}`{printed_under}`, in the introduction).\n:::"
        )
    display(Markdown(text))

"""Results at a glance: test accuracy against parameter count, ours beside the literature's, an arrow from
each model to its HA variant, Welch verdict boxes and labels placed where they overlap nothing."""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.legend import Legend

# ----------------------------------------------------------------------------- results at a glance
#: Markers of the literature sources in ``accuracy_vs_params`` (hollow; ours are filled circles).
LITERATURE_MARKERS = ("s", "D", "^", "v")
#: Palette entries of the groups in order (seaborn "colorblind": grey first, for the convolutional
#: baseline, then blue, green, vermilion, purple, brown, pink...): neighbours never both orange.
GROUP_COLOURS = (7, 0, 2, 3, 4, 5, 6, 9, 8, 1)
#: Where a point's label may go, in points from the point, tried in order until it overlaps nothing: next
#: to it first, then further out (a thin leader line then joins label and point).
LABEL_SPOTS = (
    (5, 3, "left"),
    (5, -10, "left"),
    (-5, 3, "right"),
    (-5, -10, "right"),
    (0, 7, "center"),
    (0, -15, "center"),
    (14, 12, "left"),
    (14, -20, "left"),
    (-14, 12, "right"),
    (-14, -20, "right"),
    (0, 18, "center"),
    (0, -26, "center"),
    (24, 0, "left"),
    (-24, 0, "right"),
    (22, 24, "left"),
    (-22, 24, "right"),
    (22, -30, "left"),
    (-22, -30, "right"),
)
#: Spots of ``LABEL_SPOTS`` from this index on stand apart from their point: a leader line joins them.
LEADER_FROM = 6
#: Pixels kept free around an arrow (its head is about this wide) when a label is placed.
ARROW_MARGIN = 4


def _place_labels(ax, items, fontsize: float = 7, avoid=(), lines=(), bars=None) -> None:
    """Write each (x, y, text) next to its point where it overlaps no label written before nor a point nor
    an artist of ``avoid`` (texts, legends already drawn) nor a line of ``lines``
    (((x0, y0), (x1, y1)) in data coordinates: the arrows, heads included, with a margin of
    ``ARROW_MARGIN`` pixels) nor a box of ``bars()`` (pixels, once the figure is laid out: the error
    bars) and stays inside the axes; greedy, first free spot of ``LABEL_SPOTS`` (a leader
    line to the point from ``LEADER_FROM`` on); where none is free, the spot overlapping least."""
    fig = ax.figure
    fig.canvas.draw()  # lay the figure out first (constrained layout): positions are final
    renderer = fig.canvas.get_renderer()
    points = [ax.transData.transform((x, y)) for x, y, _ in items]
    taken = [matplotlib.transforms.Bbox.from_extents(px - 4, py - 4, px + 4, py + 4) for px, py in points]
    taken += [a.get_window_extent(renderer).padded(BOX_PAD) for a in avoid]  # a box: its frame too
    taken += list(bars()) if bars is not None else []
    paths = [matplotlib.path.Path(ax.transData.transform(np.asarray(line, float))) for line in lines]
    frame = ax.get_window_extent(renderer)

    def crowding(box) -> float:
        """Overlapped area (pixels²) with what is taken, plus a penalty per arrow crossed and off the axes."""
        area = sum(_overlap(box, t) for t in taken)
        padded = box.padded(ARROW_MARGIN)
        area += 400 * sum(path.intersects_bbox(padded, filled=False) for path in paths)
        return area + 4 * (box.width * box.height - _overlap(box, frame))

    for x, y, text in items:
        scores = []
        for dx, dy, ha in LABEL_SPOTS:
            label = ax.annotate(
                text, (x, y), textcoords="offset points", xytext=(dx, dy), fontsize=fontsize, ha=ha
            )
            scores.append(crowding(label.get_window_extent(renderer)))
            label.remove()
            if scores[-1] == 0:
                break
        k = int(np.argmin(scores))
        dx, dy, ha = LABEL_SPOTS[k]
        leader = {"arrowstyle": "-", "color": "0.55", "linewidth": 0.6, "shrinkA": 0, "shrinkB": 3}
        label = ax.annotate(
            text,
            (x, y),
            textcoords="offset points",
            xytext=(dx, dy),
            fontsize=fontsize,
            color="0.25",
            ha=ha,
            va="baseline",
            arrowprops=leader if k >= LEADER_FROM else None,
        )
        taken.append(label.get_window_extent(renderer))


def _overlap(a, b) -> float:
    """The area (pixels²) two boxes share."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(w, 0.0) * max(h, 0.0)


def accuracy_vs_params(
    points,
    *,
    title: str | None = None,
    source_labels: Mapping[str, str] | None = None,
    verdicts: Mapping[str, str] | None = None,
) -> Figure:
    """Test accuracy against parameter count in two panels: (a) every point, ours and the literature's, the
    literature's labelled and ours framed; (b) ours enlarged, each labelled, with an arrow from each model to
    its HA variant and the verdict boxes. ``fig.axes[0]`` is panel (b), ``fig.axes[1]`` panel (a) (drawn
    above it); without literature points, panel (b) alone.

    points: a DataFrame with ``experiment``, ``group`` (one colour each), ``label`` (written next to the
    point), ``source`` ("ours" is drawn filled, every other source hollow, one marker each), ``params``,
    ``accuracy`` (fraction; our points: the mean over seeds), optional ``accuracy_sd`` (fraction: our points
    get an error bar of ± one sd over seeds where it is finite) and ``baseline`` (the experiment an HA
    variant is compared with, else None).
    ``source_labels``: how the legend names each source. ``verdicts``: {experiment: short text} written
    in a box on the arrow from its model to our point of that experiment (an HA variant's Welch difference
    against its model, from ``attnbook.welch_labels``; under the point where there is no arrow; none are
    drawn when None). Every point is labelled: its ``label``, or its group where that is empty (ResNet18),
    our points with the number of seeds behind them ("n=3", from ``seeds`` where given); labels are placed
    where they overlap no other label, box, legend, error bar or arrow.
    """
    groups = list(dict.fromkeys(points["group"]))
    sources = list(dict.fromkeys(points["source"]))
    colours, markers = _colours(groups), _markers(sources)
    ours, theirs = points[points["source"] == "ours"], points[points["source"] != "ours"]
    fig = plt.figure(figsize=(6.8, 7.0 if len(theirs) else 4.8), layout="constrained")  # the column's width
    grid = fig.add_gridspec(2 if len(theirs) else 1, 1, height_ratios=[1.5, 3.3] if len(theirs) else [1])
    ax = fig.add_subplot(grid[-1])  # panel (b), first: ``fig.axes[0]``
    overview = fig.add_subplot(grid[0]) if len(theirs) else None
    mine = ours if len(ours) else points
    arrows = _ha_arrows(ax, mine, colours)  # first, under the points
    written = _glance_points(ax, mine, colours, markers, verdicts)
    _axes(ax, mine, pad=4 if verdicts else 2, room=0.08)
    _family_legend(fig, groups, colours)
    if title:
        fig.suptitle(title)
    if overview is not None:
        _overview(overview, points, colours, markers, mine, dict(source_labels or {}), sources)
        ax.set_title("(b) our models, enlarged", loc="left", fontsize=9)
    else:
        ax.legend(handles=_source_handles(sources, markers, dict(source_labels or {})), loc="lower right", fontsize=8)
    labelled = [(r.params, r.accuracy * 100, _point_label(r)) for r in mine.itertuples()]
    _spread_boxes(ax, written, [(r.params, r.accuracy * 100) for r in mine.itertuples()])
    avoid = [*written, *_legends(ax)]
    _place_labels(
        ax, labelled, fontsize=8, avoid=avoid, lines=arrows, bars=lambda: _bars(ax, mine)
    )  # last: the axes limits and legends are final
    return fig


def _axes(ax, points, pad: float, room: float) -> None:
    """Log parameter axis and accuracy axis fitted to ``points``: ``pad`` points of accuracy below the lowest,
    ``room`` of the range (3 points at least) above the highest."""
    ax.set_xscale("log")
    ax.set_xlabel("trainable parameters (log scale)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_xlim(points["params"].min() / 1.6, points["params"].max() * 1.6)
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0f}"))
    acc = points["accuracy"].astype(float) * 100
    low, high = (float(acc.min()), float(acc.max())) if len(acc) else (0.0, 100.0)
    ax.set_ylim(max(0.0, np.floor(low) - pad), min(100.0, high + max(3.0, room * (high - low))))


def _overview(ax, points, colours, markers, ours, source_labels, sources) -> None:
    """Panel (a): every point, ours small and framed (the frame is panel (b)), the literature's labelled,
    their HA arrows dashed; the sources' legend."""
    ax.set_xscale("log")
    arrows = _ha_arrows(ax, points[points["source"] != "ours"], colours)
    for r in points.itertuples():
        filled = r.source == "ours"
        ax.plot(r.params, r.accuracy * 100, markers[r.source], markersize=4 if filled else 6, color=colours[r.group],
                mfc=colours[r.group] if filled else "white", mew=1.2, linestyle="none", zorder=3)  # fmt: skip
    ax.set_xlim(points["params"].min() / 1.6, points["params"].max() * 2.5)
    low = float(points["accuracy"].min() * 100)
    ax.set_ylim(max(0.0, np.floor(low / 10) * 10 - 2), 100)
    ax.yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0f}"))
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("(a) every model, ours and the papers'", loc="left", fontsize=9)
    x0, x1 = ours["params"].min() / 1.3, ours["params"].max() * 1.3
    y0, y1 = ours["accuracy"].min() * 100 - 2, ours["accuracy"].max() * 100 + 2
    ax.add_patch(matplotlib.patches.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor="0.4",
                                              linewidth=0.8, linestyle=":", zorder=2))  # fmt: skip
    ax.annotate("(b)", (x1, y1), textcoords="offset points", xytext=(3, 2), fontsize=8, color="0.3")
    ax.legend(handles=_source_handles(sources, markers, source_labels), loc="lower right", fontsize=8)
    theirs = [(r.params, r.accuracy * 100, _point_label(r)) for r in points.itertuples() if r.source != "ours"]
    _place_labels(ax, theirs, fontsize=8, avoid=_legends(ax), lines=arrows)


def _family_legend(fig, groups, colours) -> None:
    """The models' colours, in a row under the panels."""
    family = [plt.Line2D([], [], marker="o", color=colours[g], linestyle="none", label=g) for g in groups]
    fig.legend(handles=family, loc="outside lower center", fontsize=8, ncols=4, frameon=False)


def _source_handles(sources, markers, source_labels) -> list:
    """The sources' markers and the HA arrow, as legend handles."""
    kinds = [
        plt.Line2D([], [], marker=markers[s], color="0.3", mfc="0.3" if s == "ours" else "white", mew=1.4,
                   linestyle="none", label=source_labels.get(s, s))  # fmt: skip
        for s in sources
    ]
    arrow = plt.Line2D([], [], color="0.3", marker=r"$\rightarrow$", markersize=12, linestyle="none",
                       label="model → its HA variant")  # fmt: skip
    return [*kinds, arrow]


def _point_label(r) -> str:
    """A point's label: its ``label`` or else its group; ours with its seeds, "iso 9h, n=3"."""
    text = r.label if isinstance(r.label, str) and r.label else r.group
    seeds = getattr(r, "seeds", None)
    if r.source == "ours" and seeds is not None and np.isfinite(seeds):
        text += f", n={int(seeds)}"
    return text


def _legends(ax) -> list:
    """The legends drawn on ``ax`` (the one ``ax.legend`` returns and those added as artists)."""
    return [a for a in ax.get_children() if isinstance(a, Legend)]


def _bars(ax, points) -> list:
    """The boxes (pixels) of our points' error bars (± one sd over seeds), 3 pixels wide on each side:
    what a label must not cover."""
    out = []
    for r in points.itertuples():
        sd = getattr(r, "accuracy_sd", float("nan"))
        if r.source == "ours" and np.isfinite(sd):
            low = ax.transData.transform((r.params, (r.accuracy - sd) * 100))
            high = ax.transData.transform((r.params, (r.accuracy + sd) * 100))
            out.append(matplotlib.transforms.Bbox.from_extents(low[0] - 3, low[1], high[0] + 3, high[1]))
    return out


def _colours(groups) -> dict:
    """{group: colour}, in the order of ``GROUP_COLOURS`` through the style's palette."""
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    order = [i for i in GROUP_COLOURS if i < len(palette)] or list(range(len(palette)))
    return {g: palette[order[i % len(order)]] for i, g in enumerate(groups)}


def _markers(sources) -> dict:
    """{source: marker}: a filled circle for ours, the ``LITERATURE_MARKERS`` in turn for the others."""
    others = [s for s in sources if s != "ours"]
    return {"ours": "o", **{s: LITERATURE_MARKERS[i % len(LITERATURE_MARKERS)] for i, s in enumerate(others)}}


def _ha_arrows(ax, points, colours) -> list:
    """An arrow from each model to its HA variant within one source; -> their (start, end), which the
    labels keep off."""
    where = {(r.experiment, r.source): (r.params, r.accuracy * 100) for r in points.itertuples()}
    arrows = []
    for r in points.itertuples():
        if r.baseline is None or not isinstance(r.baseline, str) or (r.baseline, r.source) not in where:
            continue
        start, end = where[(r.baseline, r.source)], (r.params, r.accuracy * 100)
        arrows.append((start, end))
        ax.annotate(
            "",
            xy=end,
            xytext=start,
            arrowprops={
                "arrowstyle": "-|>",
                "color": colours[r.group],
                "linewidth": 1.1,
                "linestyle": "-" if r.source == "ours" else "--",
                "shrinkA": 5,
                "shrinkB": 5,
            },
        )
    return arrows


def _glance_points(ax, points, colours, markers, verdicts) -> list:
    """Every point (ours filled, with ± one sd over seeds where finite) and, under our points named in
    ``verdicts``, a verdict box; -> the boxes written."""
    written = []
    for r in points.itertuples():
        filled = r.source == "ours"
        sd = getattr(r, "accuracy_sd", float("nan"))
        if filled and np.isfinite(sd):  # ± one sd over seeds around the mean
            bar = {"color": colours[r.group], "capsize": 2.5, "zorder": 2.5}
            ax.errorbar(r.params, r.accuracy * 100, yerr=sd * 100, **bar)
        ax.plot(
            r.params,
            r.accuracy * 100,
            markers[r.source],
            markersize=7,
            color=colours[r.group],
            mfc=colours[r.group] if filled else "white",
            mew=1.4,
            linestyle="none",
            zorder=3,
        )
        if verdicts and filled and r.experiment in verdicts:
            anchor = _arrow_middle(points, r) or (r.params, r.accuracy * 100)
            written.append(_verdict_box(ax, verdicts[r.experiment], anchor, colours[r.group]))
    return written


def _arrow_middle(points, r):
    """The middle of the arrow from our point of ``r``'s baseline to ``r`` (geometric mean of the parameter
    counts: the middle on the log axis), or None without that point."""
    if not isinstance(r.baseline, str):
        return None
    base = points[(points["experiment"] == r.baseline) & (points["source"] == r.source)]
    if not len(base):
        return None
    b = base.iloc[0]
    return (float(np.sqrt(b["params"] * r.params)), float((b["accuracy"] + r.accuracy) * 50))


def _verdict_box(ax, text: str, xy, colour):
    """A verdict in a framed box under its anchor (``_spread_boxes`` may move it later)."""
    return ax.annotate(
        text,
        xy,
        textcoords="offset points",
        xytext=(0, -7),
        va="top",
        fontsize=7,
        ha="center",
        color="0.1",
        bbox={
            "boxstyle": "round,pad=0.2",
            "facecolor": "white",
            "edgecolor": colour,
            "linewidth": 1.0,
            "alpha": 0.9,
        },
        zorder=4,
    )


#: Where a verdict box may stand around its point, in order of preference: (dx, dy) offset points, va, ha.
BOX_SPOTS = ((0, -7, "top", "center"), (0, 7, "bottom", "center"), (8, -5, "top", "left"),
             (-8, -5, "top", "right"), (8, 5, "bottom", "left"), (-8, 5, "bottom", "right"))  # fmt: skip
BOX_PAD = 4  # pixels around a verdict box's text: its frame


def _spread_boxes(ax, boxes, points) -> None:
    """Move each annotation of ``boxes`` (drawn under its point) to the spot of ``BOX_SPOTS`` where its frame
    overlaps least (by area; the first such spot) the boxes placed before it and the points of ``points``
    ((x, y) in data coordinates) other than its own, an area outside the axes counting four times. Greedy,
    in the order given."""
    if not boxes:
        return
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    dots = [ax.transData.transform(p) for p in points]
    dots = [matplotlib.transforms.Bbox.from_extents(x - 4, y - 4, x + 4, y + 4) for x, y in dots]

    def overlap(a, b) -> float:
        w = min(a.x1, b.x1) - max(a.x0, b.x0)
        h = min(a.y1, b.y1) - max(a.y0, b.y0)
        return max(w, 0.0) * max(h, 0.0)

    def put(box, spot):
        dx, dy, va, ha = spot
        box.xyann = (dx, dy)
        box.set_verticalalignment(va)
        box.set_horizontalalignment(ha)
        return box.get_window_extent(renderer).padded(BOX_PAD)

    placed = []
    for box in boxes:
        own = ax.transData.transform(box.xy)
        others = [d for d in dots if not d.contains(*own)]
        scores = []
        for spot in BOX_SPOTS:
            extent = put(box, spot)
            outside = extent.width * extent.height - overlap(extent, ax.bbox)  # off the axes: worse
            hidden = sum(overlap(extent, d) for d in others)
            scores.append(sum(overlap(extent, t) for t in placed) + hidden + 4 * outside)
        placed.append(put(box, BOX_SPOTS[scores.index(min(scores))]))

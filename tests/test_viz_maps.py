"""The book's attention-map figures (attnbook.viz.attention, .style, .schematic): maps coloured by their
multiple of uniform attention on a log scale centred on 1, panels of a readable size, every head shown once
across a figure and its fold-out, and the chapter-3 schematic."""

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pytest

from attnbook import viz


def _maps(fig):
    return [a for a in fig.axes if a.get_visible() and a.images]


def test_multiple_scale_is_log_symmetric_around_uniform():
    rng = np.random.default_rng(0)
    n = 64
    sharp = np.zeros(n)
    sharp[3] = 1.0  # all mass on one key: 64 × uniform, the others 0
    near = rng.dirichlet(np.full(n, 500.0))  # within a few percent of uniform
    shown, kw = viz.multiple_scale([sharp, near], 1.0 / n)
    norm = kw["norm"]
    assert (norm.vmin, norm.vmax) == (1 / 64, 64.0)  # the smallest power of 2 ≥ the largest multiple
    np.testing.assert_allclose(shown[1], near * n)  # p·N, independently
    assert shown[0].min() == pytest.approx(1 / 64)  # zeros take the lowest colour, not -inf
    assert norm(1.0) == pytest.approx(0.5)  # uniform: the middle (white) of the diverging map
    assert norm(8.0) == pytest.approx(1 - norm(1 / 8))  # symmetric in log
    assert np.all(np.abs(norm(near * n) - 0.5) < 0.05)  # a near-uniform map stays near white
    # a figure of only near-uniform maps still spans ×1/2 .. ×2: it never fills the scale
    _, kw = viz.multiple_scale([near], 1.0 / n)
    assert (kw["norm"].vmin, kw["norm"].vmax) == (0.5, 2.0)


def test_head_split_shows_every_head_once():
    for heads in (1, 4, 9, 16):
        first, rest = viz.head_split(heads)
        assert sorted(first + rest) == list(range(heads))
        assert len(first) + 1 <= viz.MAX_COLUMNS  # the first figure's row: its heads and their mean
    assert viz.head_split(9) == ([0, 1, 2, 3], [4, 5, 6, 7, 8])


@pytest.mark.parametrize("heads", [9, 16])
def test_a_figure_and_its_fold_out_share_one_scale_and_readable_panels(heads):
    rng = np.random.default_rng(1)
    rows = rng.dirichlet(np.ones(64) * 0.3, size=(4, heads))  # (layers, heads, N = 8 x 8)
    first, rest = viz.head_split(heads)
    main = viz.attention_grid(rows, (8, 8), (4, 4), heads=first)
    more = viz.attention_grid(rows, (8, 8), (4, 4), heads=rest, average=False)
    assert len(_maps(main)) == 4 * (len(first) + 1) and len(_maps(more)) == 4 * len(rest)
    scales = {(im.norm.vmin, im.norm.vmax) for f in (main, more) for a in _maps(f) for im in a.images}
    # both figures: one scale, that of every attention figure over 64 keys: ×1/64 (lowest) to ×64 (one key)
    assert scales == {(1 / 64, 64.0)}
    other = viz.attention_grid(rows * 0 + 1 / 64, (8, 8), (4, 4), heads=first)  # uniform maps: the same range
    assert {(im.norm.vmin, im.norm.vmax) for a in _maps(other) for im in a.images} == scales
    for fig in (main, more):
        fig.canvas.draw()
        width = fig.get_figwidth()
        for ax in _maps(fig):
            box = ax.get_position()  # figure fractions
            assert box.width * width >= 0.8 * viz.PANEL  # inches: the panel is not squeezed
            assert box.width >= 0.14  # ≥ 14% of the figure's width: ≥ ~90 px in a 640 px column
        columns = {round(a.get_position().x0, 3) for a in _maps(fig)}
        assert len(columns) <= viz.MAX_COLUMNS
        bars = [a for a in fig.axes if not a.images and a.get_ylabel().startswith("multiple of uniform")]
        assert len(bars) == 1  # one colour bar per figure
    # every map of the fold-out names its head; each layer's name stands beside its first row
    assert [a.get_title() for a in _maps(more)][: len(rest)] == [f"head {h + 1}" for h in rest]
    labels = [a.get_ylabel() for a in _maps(more) if a.get_ylabel()]
    assert labels == [f"layer {li + 1}" for li in range(4)]
    # the book's fold-out keeps one row per layer (printed full width): len(rest) columns, titled by head
    wide = viz.attention_grid(rows, (8, 8), (4, 4), heads=rest, average=False, columns=len(rest))
    assert len({round(a.get_position().y0, 3) for a in _maps(wide)}) == 4
    assert len({round(a.get_position().x0, 3) for a in _maps(wide)}) == len(rest)


def test_a_near_uniform_run_is_one_row_of_each_layers_sharpest_head():
    rows = np.full((2, 4, 3, 16), 1 / 16)  # (images, layers, queries, N = 4 x 4)
    rows = np.repeat(rows[:, :, None], 3, axis=2)  # (images, layers, heads 3, queries, N)
    rows[:, 2, 1, 0, 5] += 0.02  # layer 3, head 2 peaks highest at query 0
    rows[:, 2, 1, 0, 6] -= 0.02
    attention = {"rows": rows, "rows_mean": rows.mean(0), "grid": (4, 4), "queries": np.array([5, 0, 15])}
    fig = viz.sharpest_heads(attention, 0)
    maps = _maps(fig)
    assert len(maps) == 4 and maps[2].get_title() == "layer 3, head 2"  # one panel per layer
    assert {(im.norm.vmin, im.norm.vmax) for a in maps for im in a.images} == {(1 / 16, 16.0)}


def test_query_outline_is_thin_and_hollow():
    rows = np.full((1, 2, 16), 1 / 16)
    fig = viz.attention_grid(rows, (4, 4), (1, 2))
    outlines = [p for a in _maps(fig) for p in a.patches]
    assert len(outlines) == 3  # two heads and their mean
    for p in outlines:
        assert not p.get_fill() and p.get_linewidth() <= 1.0
        assert (p.get_x(), p.get_y(), p.get_width()) == (1.5, 0.5, 1.0)  # one key pixel: (row 1, col 2)


def test_bad_heads_are_refused():
    rows = np.full((1, 3, 16), 1 / 16)
    with pytest.raises(ValueError, match="heads"):
        viz.attention_grid(rows, (4, 4), (0, 0), heads=[3])


def test_san_windows_as_multiples_of_uniform_and_signed_weights_linear():
    k2 = 9
    soft = [np.full((k2, 2, 2), 1 / k2), np.broadcast_to(np.eye(k2)[4][:, None, None], (k2, 2, 2))]
    fig = viz.window_maps(soft, (0.5, 0.5))
    ims = [im for a in fig.axes for im in a.images]
    assert {(im.norm.vmin, im.norm.vmax) for im in ims} == {(1 / 9, 9.0)}  # every window figure: 1/K² .. K²
    np.testing.assert_allclose(ims[0].get_array(), 1.0)
    means = viz.window_means([np.full((2, k2), 1 / k2)] * 8)  # eight layers: two blocks of four
    assert len(_maps(means)) == 8 * 3
    assert len({round(a.get_position().x0, 3) for a in _maps(means)}) == 4


def test_schematic_shows_a_window_all_patches_and_a_gaussian_per_head():
    fig = viz.attention_scopes(side=9, kernel=3, patch=3, heads=9)
    san, vit, quadratic = fig.axes
    assert [a.get_title() for a in fig.axes] == list(viz.SCOPE_TITLES)
    window = [p for p in san.patches if p.get_fill()]
    assert [(p.get_width(), p.get_height()) for p in window][0] == (3, 3)
    assert len([p for p in vit.patches if p.get_fill()]) == 9  # 3 x 3 patch tokens, all attended
    centres = {p.center for p in quadratic.patches if hasattr(p, "center")}
    assert len(centres) == 9
    with pytest.raises(ValueError, match="side"):
        viz.attention_scopes(side=8)

"""The real-browser check of the book (tools/bookcheck.py): what counts as remote, which pages it opens, and,
where Chromium is installed, that it catches each kind of fault on small pages made for it (a remote
script, TeX or Markdown left unrendered, a JavaScript error, a figure wider than the page, a table wider than its
column, one figure shown twice, a code id or the missing mark in a sentence, an image that is not a numbered
figure, a display formula wider than its box) and passes a clean page."""

from __future__ import annotations

import bookcheck
import pytest

needs_chromium = pytest.mark.skipif(
    bookcheck.find_chromium() is None, reason=f"Chromium not installed: {bookcheck.INSTALL_HINT}"
)


@pytest.mark.parametrize(
    ("url", "remote"),
    [
        ("https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-mml-chtml.js", True),
        ("http://example.org/a.css", True),
        ("//cdn.example.org/font.woff2", True),  # protocol-relative: leaves the machine
        ("ws://localhost:8888/api", True),
        ("file:///tmp/book/_static/mathjax/tex-chtml.js", False),
        ("_static/mathjax/tex-chtml.js", False),
        ("data:image/png;base64,AAAA", False),
        ("about:blank", False),
    ],
)
def test_what_counts_as_remote(url, remote):
    assert bookcheck.is_remote(url) is remote


def test_pages_and_redirects(tmp_path):
    html = tmp_path / "html"
    for name in ("index.html", "02_b.html", "01_a.html", "search.html", "genindex.html"):
        (html / name).parent.mkdir(parents=True, exist_ok=True)
        (html / name).write_text("<html><body>x</body></html>")
    (html / "_static").mkdir()
    (html / "_static" / "theme.html").write_text("<html></html>")
    (html / "index.html").write_text(
        '<html><head><meta http-equiv="Refresh" content="0; url=01_a.html" /></head></html>'
    )
    names = [p.name for p in bookcheck.pages(html)]
    assert names == ["index.html", "01_a.html", "02_b.html", "genindex.html", "search.html"]
    assert bookcheck.redirect_target(html / "index.html") == "01_a.html"
    assert bookcheck.redirect_target(html / "01_a.html") is None


def test_missing_book_and_missing_chromium_say_what_to_do(tmp_path, monkeypatch, capsys):
    assert bookcheck.main([str(tmp_path)]) == 2
    assert "make book" in capsys.readouterr().err
    (tmp_path / "index.html").write_text("<html></html>")
    monkeypatch.setenv(bookcheck.CHROMIUM_ENV, str(tmp_path / "no-such-browser"))
    monkeypatch.setattr(bookcheck.shutil, "which", lambda name: None)
    assert bookcheck.find_chromium() is None
    assert bookcheck.main([str(tmp_path)]) == 2
    assert "apt-get install chromium" in capsys.readouterr().err
    assert bookcheck.main(["--find-chromium"]) == 2


def test_injected_markup_in_the_article_is_found_and_text_is_not():
    page = (
        '<html><head><script src="_static/theme.js"></script></head><body><button onclick="print()">p</button>'
        '<article class="bd-article"><section><p><b onmouseover="alert(1)">cifar10</b></p>'
        "<p>&lt;b onmouseover=&quot;alert(1)&quot;&gt; shown as text</p><script>alert(2)</script>"
        '<script type="application/json">{}</script><iframe src="x.html"></iframe></section>'
        '<script type="text/x-thebe-config">{}</script><script>kernelName = "python3"</script>'
        "</article></body></html>"
    )
    assert bookcheck.injected_markup(page) == [
        '<b onmouseover="alert(1)">',
        "<script>",
        "<iframe> x.html",
    ]  # the theme's head script, print button and thebe scripts after the sections are not the chapters'
    assert bookcheck.injected_markup("<article><section><p>&lt;script&gt;</p></section></article>") == []


#: Two 1 × 1 GIFs that differ in one byte (the colour table), as data URIs.
_GIF = "data:image/gif;base64,R0lGODlhAQABAIAAAP///wAAACwAAAAAAQABAAACAkQBADs="
_OTHER_GIF = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///ywAAAAAAQABAAACAkQBADs="


def test_two_byte_identical_figures_on_one_page_are_found(tmp_path):
    page = (
        '<html><body><img src="_static/logo.png"><img src="_static/logo.png">'  # the theme's, not the article's
        f'<article class="bd-article"><section><p>Fig. 1</p><img alt="one" src="{_GIF}">'
        f'<img alt="other" src="{_OTHER_GIF}"><section><img alt="again" src="{_GIF}"></section>'
        '<img src="_images/a.png"><img src="_images/b.png"><img src="_images/c.png"></section></article>'
        "</body></html>"
    )
    (tmp_path / "_images").mkdir()
    (tmp_path / "_images" / "a.png").write_bytes(b"\x89PNG one")
    (tmp_path / "_images" / "b.png").write_bytes(b"\x89PNG two")
    (tmp_path / "_images" / "c.png").write_bytes(b"\x89PNG one")  # another name, the same bytes
    found = bookcheck.repeated_figures(page, tmp_path)
    assert len(found) == 2, found
    assert found[0].startswith("figure 3 repeats figure 1: data:image/gif")
    assert found[1] == "figure 6 repeats figure 4: _images/c.png"
    single = f'<article><section><img src="{_GIF}"><img src="{_OTHER_GIF}"></section></article>'
    assert bookcheck.repeated_figures(single, tmp_path) == []


def test_a_code_id_in_a_sentence_is_found_and_code_tables_and_maths_are_not():
    ids = ["learned_9h", "learned_9h_pos_init", "vit", "vit_ha"]
    page = (
        "<html><body><nav>learned_9h in the sidebar</nav><article class='bd-article'><section>"
        "<p>At preset budget learned_9h_pos_init reached 50.4% against ViT, HA and the vit baseline.</p>"
        "<p>Train it with <code>python -m attnlib train learned_9h</code>; "
        "<span class='math'>\\(vit_ha\\)</span>; see results/vit_ha/budget-seed1 in <pre>vit</pre>.</p>"
        "<table><tr><td>learned_9h</td></tr></table>"
        "<figure><figcaption>Maps of learned_9h.</figcaption></figure></section></article></body></html>"
    )
    found = bookcheck.code_ids_in_text(page, ids)
    names = [f.split(":")[0] for f in found]  # a path in prose counts too: a path is code
    assert names == ["learned_9h_pos_init", "vit", "vit_ha", "learned_9h"], found
    assert "reached 50.4%" in found[0]
    clean = "<article><section><p>SA learned 2D, 9 heads, and ViT, HA</p></section></article>"
    assert bookcheck.code_ids_in_text(clean, ids) == []
    ids = bookcheck.experiment_ids()
    assert "vit_ha" in ids and "GRID_HOURS" in ids and "BUDGET_TARGET" in ids
    jargon = "<article><section><p>The grid took 30.01 CPU-hours, beyond GRID_HOURS.</p></section></article>"
    assert [f.split(":")[0] for f in bookcheck.code_ids_in_text(jargon, ids)] == ["GRID_HOURS"]


def test_the_missing_mark_in_running_text_is_found_and_tables_code_and_quotes_are_not():
    page = (
        "<html><body><nav>not yet trained</nav><article class='bd-article'><section>"
        "<p>ResNet18 reached 93.2%; SA learned 2D is Not yet trained at this preset.</p>"
        "<ul><li>HA: not yet trained</li></ul>"
        "<figure><img src='a.png'><figcaption><p>Fig. 2.1 Maps. Not yet trained: ViT.</p></figcaption></figure>"
        "<table><caption>Table 2.1 Accuracy (—: not yet trained)</caption><tr><td>not yet trained</td></tr></table>"
        "<p>A missing run is shown as “not yet trained.” in tables; run <code>not yet trained</code>.</p>"
        "</section></article></body></html>"
    )
    found = bookcheck.missing_mark_in_text(page)
    assert len(found) == 3, found  # the paragraph, the list item, the figure caption
    assert "is Not yet trained at this preset" in found[0] and "HA: not yet trained" in found[1], found
    assert "Maps. Not yet trained: ViT" in found[2], found
    clean = (
        "<article><section><p>ResNet18 reached 93.2%.</p><table><tr><td>not yet trained</td></tr></table>"
        "<p>A missing run reads 'not yet trained' in a table.</p></section></article>"
    )
    assert bookcheck.missing_mark_in_text(clean) == []


def test_an_image_outside_a_numbered_figure_is_found():
    numbered = (
        '<figure class="align-default" id="fig-alpha"><img alt="" src="_images/a.png">'
        '<figcaption><p><span class="caption-number">Fig. 1.1 </span><span class="caption-text">Error.'
        "</span></p></figcaption></figure>"
    )
    page = (
        '<html><body><img src="_static/logo.png"><article class="bd-article"><section>'
        + numbered
        + '<div class="cell_output"><img src="_images/bare.png"></div>'  # a plot a cell displayed bare
        + '<figure><img src="_images/uncaptioned.png"><figcaption><p>A caption, no number</p></figcaption>'
        + '</figure><div class="figure"><p><img src="_images/old.png"></p>'
        + '<p class="caption"><span class="caption-number">Fig. 1.2 </span>Old markup.</p></div>'
        + "</section></article></body></html>"
    )
    found = bookcheck.unnumbered_figures(page)
    assert found == [
        "image 2 outside any figure: _images/bare.png",
        "image 3 in a figure whose caption has no number: _images/uncaptioned.png",
    ], found
    assert bookcheck.unnumbered_figures(f"<article><section>{numbered}</section></article>") == []


#: A typeset display formula as MathJax writes it (hand-made: no MathJax needed), ``width`` px wide, in a
#: ``div.math`` of the 600 px column, with its equation number.
def _formula(width: int, label: str) -> str:
    return (
        f'<div class="math notranslate nohighlight" id="equation-{label}"><span class="eqno">(1.1)</span>'
        f'<mjx-container class="MathJax CtxtMenu_Attached_0" jax="CHTML" display="true" style="display: block">'
        f'<mjx-math display="true" style="display: inline-block; width: {width}px; height: 20px"></mjx-math>'
        "</mjx-container></div>"
    )


PAGES = {
    "injected.html": '<html><body><article class="bd-article"><section><p>data: <b onmouseover="alert(1)">'
    "cifar10</b></p></section></article></body></html>",
    "clean.html": "<html><body><main style='width: 600px'><p>Plain prose: a 3 × 3 kernel, 5 $ each.</p>"
    + _formula(400, "eq-fits")
    + "<pre>C:\\temp \\alpha</pre>"
    '<img alt="small" width="200" height="100" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">'
    "</main></body></html>",
    "remote.html": '<html><head><script src="https://cdn.example.org/mathjax.js"></script></head>'
    "<body><p>text</p></body></html>",
    "tex.html": '<html><body><p>The score is <span class="math">\\(A_{q,k}\\)</span> and '
    "\\[ \\frac{1}{2} \\]</p></body></html>",
    "command.html": "<html><body><p>a width \\alpha left in the prose</p></body></html>",
    "error.html": "<html><body><p>text</p><script>undefinedFunction();</script></body></html>",
    "markdown.html": "<html><body><p>0 of the 6 `converge` runs</p><table><caption>**Wall time** of"
    "</caption><tr><td>1</td></tr></table><p>a <code>`quoted`</code> span is fine</p></body></html>",
    "repeated.html": f'<html><body><article><section><img alt="a" src="{_GIF}"><p>later</p>'
    f'<img alt="b" src="{_GIF}"><p>The run of learned_9h_pos_init.</p></section></article></body></html>',
    "widemath.html": "<html><body><main style='width: 600px'>"
    + _formula(900, "eq-mhsa")
    + "</main></body></html>",
    "wide.html": '<html><body><main style="width: 600px"><canvas width="2400" height="50"></canvas>'
    "</main></body></html>",
    # a table too wide for its scrolling box (as the theme wraps cell outputs), beside one that fits
    "widetable.html": '<html><body><main style="width: 600px"><table><tr><td>fits</td></tr></table>'
    '<div style="overflow-x: auto"><table><caption>Table 3. Too wide</caption><tr>'
    + '<td style="white-space: nowrap">47.9 ± 0.1 % (n = 2)</td>'
    * 40
    + "</tr></table></div>"
    # a table of any class too wide for its box fails too (no table may scroll sideways)
    '<div style="overflow-x: auto"><table class="wide-reference"><caption>Protocols</caption><tr>'
    + '<td style="white-space: nowrap">every field of a setup</td>' * 40
    + "</tr></table></div></main></body></html>",
}


@pytest.mark.slow
@needs_chromium
def test_the_browser_catches_each_fault(tmp_path):
    html = tmp_path / "html"
    html.mkdir()
    for name, text in PAGES.items():
        (html / name).write_text(text)
    shots = tmp_path / "screenshots"
    reports = {
        r.page: r
        for r in bookcheck.check_pages(
            sorted(html.glob("*.html")), screenshots=shots, root=html, timeout_ms=20_000
        )
    }
    assert reports["clean.html"].ok, reports["clean.html"].problems
    assert any(
        "remote host: https://cdn.example.org/mathjax.js" in p for p in reports["remote.html"].problems
    )
    tex = reports["tex.html"].problems
    assert any("not typeset by MathJax" in p for p in tex) and any("unrendered TeX" in p for p in tex)
    assert any("unrendered TeX in the text: …a width \\alpha" in p for p in reports["command.html"].problems)
    assert any("undefinedFunction" in p for p in reports["error.html"].problems)
    markdown = [p for p in reports["markdown.html"].problems if "unrendered Markdown" in p]
    assert len(markdown) == 2 and "`converge`" in markdown[0] and "**Wall time**" in markdown[1], markdown
    assert any("figure wider than the page" in p for p in reports["wide.html"].problems)
    assert any(
        "markup no chapter wrote" in p and "onmouseover" in p for p in reports["injected.html"].problems
    )
    wide_tables = [p for p in reports["widetable.html"].problems if "table wider than its column" in p]
    assert len(wide_tables) == 2, reports["widetable.html"].problems
    assert "Table 3. Too wide" in wide_tables[0] and "Protocols" in wide_tables[1], wide_tables
    assert not any("table wider" in p for p in reports["wide.html"].problems)
    repeated = reports["repeated.html"].problems
    assert any("the same figure twice on one page: figure 2 repeats figure 1" in p for p in repeated), (
        repeated
    )
    assert any("a code id in a sentence" in p and "learned_9h_pos_init" in p for p in repeated), repeated
    wide_math = [p for p in reports["widemath.html"].problems if "formula wider than its box" in p]
    assert len(wide_math) == 1 and "(1.1) equation-eq-mhsa: 900 px wide" in wide_math[0], wide_math
    assert any("a figure without a number" in p and "outside any figure" in p for p in repeated), repeated
    assert sorted(p.name for p in shots.glob("*.png")) == sorted(n.replace(".html", ".png") for n in PAGES)


def test_stderr_outputs_are_found():
    """A cell's stderr output (here tqdm's warning with a machine path) is reported; a stdout output is not."""
    warned = (
        '<div class="cell_output docutils container"><div class="output stderr highlight-myst-ansi notranslate">'
        '<div class="highlight"><pre><span></span>/srv/x/site-packages/tqdm/auto.py:21: TqdmWarning: IProgress '
        "not found.\n</pre></div></div></div>"
    )
    printed = '<div class="output stream highlight-myst-ansi notranslate"><pre>42</pre></div>'
    found = bookcheck.stderr_outputs(f"<article>{warned}{printed}</article>")
    assert found == ["/srv/x/site-packages/tqdm/auto.py:21: TqdmWarning: IProgress not found."], found
    assert bookcheck.stderr_outputs(f"<article>{printed}</article>") == []
    assert bookcheck.stderr_outputs(warned) == []  # outside the article: the theme's, not a chapter's
    two = f"<article><section>{warned}</section>{printed}{warned.replace('IProgress', 'Other')}</article>"
    assert [line.split(": ")[-1] for line in bookcheck.stderr_outputs(two)] == [
        "IProgress not found.",
        "Other not found.",
    ]

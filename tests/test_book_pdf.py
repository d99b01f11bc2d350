"""The whole-book PDF (tools/bookpdf.py, tools/pdfparts.py, `make pdf`): which pages are printed and in what
order, how the page counts add up, the joined PDF and its outline, where each kind of link leads, and, where
Chromium is installed, pages printed for real: a small book with its title page, contents, page numbers,
numbered titles and links that stay in the PDF."""

from __future__ import annotations

import io
from pathlib import Path

import bookcheck
import bookpdf
import pdfparts
import pytest
from pypdf import PdfReader, PdfWriter

from attnbook.sphinx import RESULTS_ZIP

CSS = (Path(__file__).resolve().parents[1] / "book" / "_static" / "attnlib.css").as_uri()
REPO = {"url": "https://github.com/o/r", "branch": "main", "path_to_book": "book"}


def _blank_pdf(pages: int) -> bytes:
    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=595, height=842)  # A4 in points
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_chapter_pages_in_reading_order(tmp_path):
    for name in (
        "references.html",
        "02_b.html",
        "00_intro.html",
        "genindex.html",
        "search.html",
        "01_a.html",
    ):
        (tmp_path / name).write_text("<html><body>x</body></html>")
    (tmp_path / "index.html").write_text('<meta http-equiv="refresh" content="0; url=00_intro.html">')
    (tmp_path / "_static").mkdir()
    (tmp_path / "_static" / "x.html").write_text("<html></html>")
    names = [p.name for p in bookpdf.chapter_pages(tmp_path)]
    assert names == ["00_intro.html", "01_a.html", "02_b.html", "references.html"]


def test_page_counts_totals_and_the_joined_pdf(tmp_path):
    printed = [
        bookpdf.Printed(name, title, _blank_pdf(n), n)
        for name, title, n in [
            ("00_intro.html", "Introduction", 3),
            ("04_hierarchical.html", "Hierarchical", 2),
            ("05_appendix.html", "Appendix", 4),
            ("references.html", "References", 1),
        ]
    ]
    assert [bookpdf.page_count(p.pdf) for p in printed] == [3, 2, 4, 1]
    assert bookpdf.totals(printed, front=2) == {
        "chapters 0-4": 5,
        "appendix (chapter 5)": 4,
        "whole book": 12,
    }
    assert bookpdf.over_bounds({"chapters 0-4": 40, "appendix (chapter 5)": 25}) == []
    assert bookpdf.over_bounds({"chapters 0-4": 41, "appendix (chapter 5)": 25}) == ["chapters 0-4: 41 > 40"]
    target = tmp_path / "book.pdf"
    links, unresolved = bookpdf.join(printed, target, tmp_path, REPO, front=_blank_pdf(2))
    assert (links, unresolved) == ({"file://": 0}, [])
    reader = PdfReader(target)
    assert len(reader.pages) == 12
    outline = [(item.title, reader.get_destination_page_number(item)) for item in reader.outline]
    assert outline == [
        ("Contents", 1),
        ("Introduction", 2),
        ("Hierarchical", 5),
        ("Appendix", 7),
        ("References", 11),
    ]
    assert not list(tmp_path.glob("*.part"))


@pytest.mark.slow
@pytest.mark.skipif(bookcheck.find_chromium() is None, reason="Chromium not installed")
def test_chromium_prints_a_page_offline(tmp_path):
    long = "".join(f"<p>Paragraph {i} of a chapter.</p>" for i in range(300))  # several A4 pages
    (tmp_path / "01_a.html").write_text(
        f"<html><head><title>A — Book</title></head><body>{long}</body></html>"
    )
    (tmp_path / "02_b.html").write_text(
        "<html><head><title>B — Book</title></head><body><p>one</p></body></html>"
    )
    printed = bookpdf.print_pages(sorted(tmp_path.glob("*.html")), "A4", bookcheck.find_chromium())
    assert [p.title for p in printed] == ["A", "B"]
    assert printed[0].pages > 2 and printed[1].pages == 1, [p.pages for p in printed]
    assert all(bookpdf.page_count(p.pdf) == p.pages for p in printed)


@pytest.mark.slow
@pytest.mark.skipif(bookcheck.find_chromium() is None, reason="Chromium not installed")
def test_print_shows_every_folded_result_once(tmp_path):
    """Printed with the book's style sheet, closed fold-outs show their results (a MyST dropdown, a cell
    output tagged hide-output); a folded code cell's source, and a fold-out that repeats another page's
    (``print-repeat``, its ``print-only`` pointer shown instead), do not. A reader printing the page gets the
    same as ``make pdf``."""
    from pathlib import Path

    css = (Path(__file__).resolve().parents[1] / "book" / "_static" / "attnlib.css").as_uri()
    page = f"""<html><head><title>A — Book</title><link rel="stylesheet" href="{css}"></head><body><article>
    <p>Running text.</p>
    <details class="sd-sphinx-override sd-dropdown sd-card sd-mb-3"><summary>The other heads</summary>
      <div class="sd-card-body">Heads five to nine.</div></details>
    <details class="admonition hide above-input"><summary>Show code cell source</summary>
      <pre>secret_code = 1</pre></details>
    <details class="admonition hide below-input"><summary>Show code cell output</summary>
      <div class="cell_output">Table of sizes.</div></details>
    <details class="sd-dropdown print-repeat"><summary>The claims in full</summary>
      <div>Repeated claims.</div></details>
    <div class="print-only docutils container"><p>Printed with the ledger.</p></div>
    </article></body></html>"""
    (tmp_path / "01_a.html").write_text(page)
    (printed,) = bookpdf.print_pages([tmp_path / "01_a.html"], "A4", bookcheck.find_chromium())
    text = " ".join(" ".join(p.extract_text() for p in PdfReader(io.BytesIO(printed.pdf)).pages).split())
    for shown in ("Running text.", "Heads five to nine.", "Table of sizes.", "Printed with the ledger."):
        assert shown in text, (shown, text)
    for left_out in ("secret_code", "Repeated claims.", "Show code cell"):
        assert left_out not in text, (left_out, text)


def test_where_a_file_link_leads(tmp_path):
    """A link to a chapter leads to its anchor in the PDF, else to its first page; a page's source to the
    repository's file, results/ to its folder, any other file (of the build or not) to the repository."""
    html = tmp_path / "html"
    starts, places = {"01_a.html": 2, "02_b.html": 9}, {("02_b.html", "fig-x"): (11, 0.0, 500.0)}

    def lead(path: str):
        return pdfparts.file_link(path, html, starts, places, REPO)

    uri = (html / "02_b.html").as_uri()
    assert lead(uri + "#fig-x") == ("to an anchor of another chapter", (11, 0.0, 500.0))
    assert lead(uri + "#gone") == lead(uri) == ("to the first page of a chapter", (9, 0.0, None))
    sources = (html / "_sources" / "02_b.ipynb").as_uri()
    assert lead(sources) == ("to the repository", "https://github.com/o/r/blob/main/book/02_b.ipynb")
    assert lead((html / RESULTS_ZIP).as_uri())[1] == "https://github.com/o/r/tree/main/results"
    for elsewhere in (
        (html / "_images" / "a.png").as_uri(),
        "file:///etc/hosts",
        (html / "search.html").as_uri(),
    ):
        assert lead(elsewhere) == ("to the repository", "https://github.com/o/r")


def test_link_targets_and_the_front_matter(tmp_path):
    (tmp_path / "01_a.html").write_text('<a href="02_b.html#fig-x">Fig. 2.1</a> <a href="#own">here</a>')
    (tmp_path / "02_b.html").write_text(
        '<a href="01_a.html#eq-%C3%A9&amp;1">(1.1)</a> <a href="01_a.html">1</a>'
    )
    assert pdfparts.link_targets(sorted(tmp_path.glob("*.html"))) == {
        "02_b.html": {"fig-x"},
        "01_a.html": {"eq-é&1"},
    }
    assert pdfparts.css_string('2. "A" \\ b') == '"2. \\"A\\" \\\\ b"'
    book = {"title": "T <1>", "subtitle": "S", "author": "A", "date": "1 May 2026", "commit": "abc-dirty",
            "repository": "https://github.com/o/r"}  # fmt: skip
    front = pdfparts.front_html(
        book, [("1. Alpha", tmp_path / "01_a.html", 3), ("References", tmp_path / "r.html", 9)]
    )
    assert "T &lt;1&gt;" in front and "abc-dirty" in front and "1 May 2026" in front
    assert f'<a href="{(tmp_path / "01_a.html").as_uri()}"><span>1. Alpha</span><i></i><b>3</b></a>' in front


def _book(html):
    """A small built book: an index that redirects, a chapter of several pages with an anchor far down, and a
    chapter linking to it, to itself, to its own source, to results/, to a file elsewhere and to the web."""
    html.mkdir()
    (html / "index.html").write_text('<meta http-equiv="refresh" content="0; url=01_a.html">')
    long = "".join(f"<p>Paragraph {i} of a chapter.</p>" for i in range(200))
    links = [
        ("01_a.html#far", "far away"),
        ("01_a.html", "chapter A"),
        ("#near", "near here"),
        ("_sources/02_b.ipynb", "source"),
        (RESULTS_ZIP, "results"),
        ("file:///etc/hosts", "hosts"),
        ("https://example.org/", "web"),
    ]
    anchors = " ".join(f'<a href="{href}">{words}</a>' for href, words in links)
    for name, number, title, body in [
        ("01_a.html", "1. ", "Alpha", f'{long}<p id="far">The far target.</p>'),
        ("02_b.html", "2. ", "Beta", f'<p>{anchors}</p>{long}<p id="near">The near target.</p>'),
    ]:
        (html / name).write_text(
            f'<html><head><title>{number}{title} — Book</title><link rel="stylesheet" href="{CSS}">'
            "<style>a.headerlink { display: none; }</style></head><body>"
            f'<div id="jb-print-docs-body"><h1>{title} unnumbered</h1></div><article class="bd-article">'
            f'<h1><span class="section-number">{number}</span>{title}<a class="headerlink" href="#x">#</a></h1>'
            f"{body}</article></body></html>"
        )


@pytest.mark.slow
@pytest.mark.skipif(bookcheck.find_chromium() is None, reason="Chromium not installed")
def test_a_small_book_printed_whole(tmp_path, capsys, monkeypatch):
    html, target = tmp_path / "html", tmp_path / "book.pdf"
    _book(html)
    assert bookpdf.main([str(html), "-o", str(target)]) == 0
    out = capsys.readouterr().out
    reader = PdfReader(target)
    lines = [page.extract_text().splitlines() for page in reader.pages]
    texts = [" ".join(" ".join(page).split()) for page in lines]
    book = bookpdf.book_info()
    assert book["title"] in texts[0] and book["commit"] in texts[0] and book["subtitle"][:20] in texts[0]
    a_pages = sum("Paragraph" in t and "Alpha" in t for t in texts)
    assert "Contents" in texts[1] and f"1. Alpha 3 2. Beta {3 + a_pages}" in texts[1], texts[1]
    assert "1. Alpha" in texts[2] and "1. Alpha" in texts[3]  # the numbered title, then the running head
    assert "unnumbered" not in " ".join(texts)  # the theme's copy of the title without its number
    assert "1" not in lines[0]  # the title page has no number, every other page its own
    assert all(str(number) in page for number, page in enumerate(lines[1:], start=2)), lines
    for kind in ("1 to an anchor of another chapter", "3 to the first page of a chapter", "1 within a chapter",
                 "3 to the repository", "2 to the web", "0 file://"):  # fmt: skip
        assert kind in out, (kind, out)
    pages = {p.indirect_reference.idnum: i for i, p in enumerate(reader.pages)}
    links = [a.get_object() for a in reader.pages[2 + a_pages]["/Annots"]]
    far = next(i for i, t in enumerate(texts) if "The far target." in t)
    near = next(i for i, t in enumerate(texts) if "The near target." in t)
    assert {pages[link["/Dest"][0].idnum] for link in links if "/Dest" in link} == {far, 2, near}
    uris = sorted(str(link["/A"]["/URI"]) for link in links if "/A" in link)
    url = bookpdf.repository(bookpdf.ROOT)["url"]  # _config.yml's repository.url, or the origin remote's
    assert uris == [
        "https://example.org/",
        url,
        f"{url}/blob/main/book/02_b.ipynb",
        f"{url}/tree/main/results",
    ]

    monkeypatch.setattr(pdfparts, "file_link", lambda *args: ("to the repository", "file:///left"))
    assert bookpdf.main([str(html), "-o", str(target)]) == 1  # a file:// link left fails the command
    assert "file:// links left" in capsys.readouterr().err
    monkeypatch.undo()
    monkeypatch.setitem(bookpdf.GROUPS, "chapters 0-4", (("01_", "02_"), 1))  # the small book's 2 chapters
    assert bookpdf.main([str(html), "-o", str(target)]) == 1  # a group over its bound fails the command
    assert "over the bound ['chapters 0-4: " in capsys.readouterr().err

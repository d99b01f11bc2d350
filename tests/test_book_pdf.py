"""The whole-book PDF (tools/bookpdf.py, `make pdf`): which pages are printed and in what order, how the page
counts add up, the joined PDF and its outline, and, where Chromium is installed, a page printed for real."""

from __future__ import annotations

import io

import bookcheck
import bookpdf
import pytest
from pypdf import PdfReader, PdfWriter


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
    assert bookpdf.totals(printed) == {"chapters 0-4": 5, "appendix (chapter 5)": 4, "whole book": 10}
    target = tmp_path / "book.pdf"
    bookpdf.join(printed, target)
    reader = PdfReader(target)
    assert len(reader.pages) == 10
    outline = [(item.title, reader.get_destination_page_number(item)) for item in reader.outline]
    assert outline == [("Introduction", 0), ("Hierarchical", 3), ("Appendix", 5), ("References", 9)]
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

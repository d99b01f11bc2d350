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

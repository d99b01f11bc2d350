"""The whole book as one PDF, printed from its HTML build by the installed Chromium, with each chapter's page count.

``python tools/bookpdf.py [_build/html] [-o _build/attnlib.pdf] [--paper A4|Letter]`` (``make pdf``) opens
every chapter page of the built book in headless Chromium with the network off (Debian's ``chromium``,
found as ``make check-book`` finds it: never Playwright's or pyppeteer's download), waits for MathJax,
prints the page with the theme's print style sheet and the book's (no sidebars; every fold-out of results
open, as a reader printing the page gets it: ``book/_static/attnlib.css``; the code cells' source left out),
and joins the chapters, in the order of the book, into one PDF with pypdf. It prints the number of printed pages of each chapter and the totals that issue 31 sets
bounds for: chapters 0-4 (the introduction to chapter 4) and the appendix (chapter 5).
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import bookcheck

#: Paper sizes Chromium prints (Playwright's names) and the margins of every printed page.
PAPERS = ("A4", "Letter")
MARGIN = "15mm"
#: The paper's print style, laid over the theme's print style sheet and the book's own (``book/_static/attnlib.css``
#: opens every fold-out on paper): a 10 pt text (the theme prints at 12 pt) at line height 1.3, headings to
#: scale, no "Contents" box at the top of each chapter (the PDF's outline lists the chapters), figures no
#: taller than 80 mm, an attention grid and the grid of its other heads (folded under it on screen) side by
#: side, each half the column wide, the text of fold-outs, tables and code a size smaller, tables and notes
#: free to break between rows and lines (the theme keeps each whole: a long one left most of a page blank) and
#: a table's first column free to wrap (but in the compact result tables), no page break forced before a figure.
#: A cell output holding an attention grid and its other heads (``attnbook.maps``: figure ``...-more``).
GRID_PAIR = '.cell_output:has(> details figure[id$="-more"])'
PRINT_CSS = """
@media print {
  html { font-size: 13.33px !important; }
  body { line-height: 1.3 !important; }
  h1 { font-size: 2.0rem !important; margin-top: 0 !important; }
  h2 { font-size: 1.45rem !important; margin-top: 1.2rem !important; }
  h3 { font-size: 1.15rem !important; }
  #jb-print-toc { display: none !important; }
  figure img, .cell_output img { max-width: 100% !important; max-height: 80mm !important; width: auto !important;
                                 height: auto !important; object-fit: contain; }
  figure { margin: 0.6rem auto !important; break-inside: avoid; }
  table, pre, .highlight { font-size: 0.85rem !important; }
  details.sd-dropdown .sd-card-body { font-size: 0.8rem !important; }
  details.sd-dropdown { break-inside: auto !important; }
  details.sd-dropdown > summary, caption { break-after: avoid !important; }
  .bd-main .bd-content table, .admonition, div.admonition { break-inside: auto !important; }
  tr, caption { break-inside: avoid !important; }
  .cell_output table:not(.results) td:first-child { white-space: normal !important; }
  GRID_PAIR { display: flex !important; flex-wrap: wrap; align-items: flex-start; justify-content: space-between; }
  GRID_PAIR > * { flex: 0 0 100%; }
  GRID_PAIR > figure:has(+ details figure[id$="-more"]),
  GRID_PAIR > figure + details:has(figure[id$="-more"]) { flex: 0 0 49%; margin: 0 !important; border: none !important; }
  details.sd-dropdown:has(figure) > summary { display: none !important; }
  details.sd-dropdown:has(figure) > .sd-card-body { padding: 0 !important; }
  p, li { orphans: 3; widows: 3; }
}
""".replace("GRID_PAIR", GRID_PAIR)
#: Pages of the build that are no chapter: Sphinx's index and search pages.
NOT_CHAPTERS = ("genindex.html", "search.html")
#: The totals printed, by chapter file name prefix: chapters 0-4, and the appendix.
GROUPS = {"chapters 0-4": ("00_", "01_", "02_", "03_", "04_"), "appendix (chapter 5)": ("05_",)}


@dataclass
class Printed:
    """One chapter page printed: its file name, its title, its PDF bytes and how many pages they hold."""

    page: str
    title: str
    pdf: bytes
    pages: int


def chapter_pages(html: Path) -> list[Path]:
    """The book's pages in reading order (file names sort as the table of contents: 00_intro ... 05_appendix,
    then references): redirects, the index and the search page left out."""
    return [
        p
        for p in bookcheck.pages(html)
        if p.parent == html and p.name not in NOT_CHAPTERS and bookcheck.redirect_target(p) is None
    ]


def page_count(pdf: bytes) -> int:
    """The number of pages of a PDF."""
    from pypdf import PdfReader

    return len(PdfReader(io.BytesIO(pdf)).pages)


def print_pages(
    files: list[Path], paper: str, chromium: str, timeout_ms: int = 120_000, paper_style: bool = True
) -> list[Printed]:
    """Each file printed to PDF by headless Chromium, network off, after MathJax has typeset it;
    ``paper_style``: with ``PRINT_CSS`` over the theme's print style sheet (False: the theme's alone, as a
    reader's "Print" button gets it)."""
    from playwright.sync_api import sync_playwright

    printed = []
    with sync_playwright() as p:
        browser = bookcheck.launch(p, chromium)
        try:
            context = browser.new_context(viewport=bookcheck.VIEWPORT, offline=True)
            for file in files:
                page = context.new_page()
                page.set_default_timeout(timeout_ms)
                page.goto(file.resolve().as_uri(), wait_until="load")
                if paper_style:
                    page.add_style_tag(content=PRINT_CSS)
                page.evaluate(bookcheck.MATHJAX_READY)
                pdf = page.pdf(
                    format=paper,
                    print_background=True,
                    margin={side: MARGIN for side in ("top", "bottom", "left", "right")},
                )
                title = page.title().split(" — ")[0].strip() or file.stem  # "Chapter title — Book title"
                printed.append(Printed(file.name, title, pdf, page_count(pdf)))
                page.close()
        finally:
            browser.close()
    return printed


def join(printed: list[Printed], target: Path) -> None:
    """The printed chapters, in order, as one PDF at ``target`` (written beside it, then renamed into place),
    each chapter's title an entry of the PDF's outline."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    for chapter in printed:
        writer.append(io.BytesIO(chapter.pdf), outline_item=chapter.title)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    with partial.open("wb") as out:
        writer.write(out)
    partial.replace(target)


def totals(printed: list[Printed]) -> dict[str, int]:
    """Printed pages of each group of ``GROUPS`` (chapters 0-4, the appendix) and of the whole book."""
    found = {
        name: sum(c.pages for c in printed if c.page.startswith(prefixes))
        for name, prefixes in GROUPS.items()
    }
    found["whole book"] = sum(c.pages for c in printed)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/bookpdf.py", description=__doc__.splitlines()[0])
    parser.add_argument("html", nargs="?", default="_build/html", help="the built book (default _build/html)")
    parser.add_argument("-o", "--output", default=None, help="the PDF (default: attnlib.pdf beside html)")
    parser.add_argument("--paper", choices=PAPERS, default="A4", help="paper size (default A4)")
    parser.add_argument(
        "--theme-style", action="store_true", help="print with the theme's print style sheet alone (12 pt)"
    )
    args = parser.parse_args(argv)
    html = Path(args.html)
    if not (html / "index.html").is_file():
        print(f"pdf: no built book at {html} (run `make book` first)", file=sys.stderr)
        return 2
    chromium = bookcheck.find_chromium()
    if chromium is None:
        print(f"pdf: Chromium not found; {bookcheck.INSTALL_HINT}.", file=sys.stderr)
        return 2
    target = Path(args.output) if args.output else html.parent / "attnlib.pdf"
    start = time.perf_counter()
    printed = print_pages(chapter_pages(html), args.paper, chromium, paper_style=not args.theme_style)
    join(printed, target)
    style = "the theme's print style" if args.theme_style else "10 pt paper style"
    elapsed = time.perf_counter() - start
    print(f"pdf: {target} ({args.paper}, margins {MARGIN}, {style}, {elapsed:.0f} s); printed pages:")
    for chapter in printed:
        print(f"  {chapter.pages:4d}  {chapter.page}")
    for name, count in totals(printed).items():
        print(f"  {count:4d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

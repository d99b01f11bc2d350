"""The whole book as one PDF, printed from its HTML build by the installed Chromium, with each chapter's page count.

``python tools/bookpdf.py [_build/html] [-o _build/attnlib.pdf] [--paper A4|Letter]`` (``make pdf``) opens
every chapter page of the built book in headless Chromium with the network off (Debian's ``chromium``,
found as ``make check-book`` finds it: never Playwright's or pyppeteer's download), waits for MathJax,
prints the page with the theme's print style sheet and the book's (every fold-out of results open, but
those printed elsewhere or archived, and the chapter's title numbered, as a reader printing the page gets
it: ``book/_static/attnlib.css``) and the paper style below (``PRINT_CSS``), numbered on
from the pages before it, and joins the chapters in the order of the book behind a title page and contents
(tools/pdfparts.py), one outline entry each, every link made to lead to its place in the PDF or to the
repository. It prints each chapter's pages, the totals that issue 31 bounds (``GROUPS``) and the links by kind,
and fails on a group over its bound or a ``file://`` link left. ``make pdf`` then copies the PDF into the HTML
build (``attnbook.sphinx.BOOK_PDF``), which every page's download menu links.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import bookcheck
import pdfparts

from attnbook.sphinx import repository

ROOT = Path(__file__).resolve().parents[1]

#: Paper sizes Chromium prints (Playwright's names) and the margins of every printed page.
PAPERS = ("A4", "Letter")
MARGIN = "15mm"
#: The paper's print style, laid over the theme's print style sheet and the book's own (``book/_static/attnlib.css``
#: opens every fold-out on paper): a 10 pt text (the theme prints at 12 pt) at line height 1.3, headings to
#: scale, figures no taller than 62 mm (captions, paragraph and box spacing a little tighter), an attention
#: grid and the grid of its other heads (folded under it on screen) side by side, each half the column wide,
#: as a run's maps of one image and of the mean, the text of fold-outs, tables and code 0.75 rem, tables and notes
#: free to break between rows and lines (the theme keeps each whole: a long one left most of a page blank) and
#: a table's first column free to wrap (but in the compact result tables), no page break forced before a figure.
#: A cell output holding an attention grid and its other heads (``attnbook.maps``: figure ``...-more``).
GRID_PAIR = '.cell_output:has(> details figure[id$="-more"])'
#: A cell output holding a run's maps of one image and of the mean (or their other heads, in the appendix):
#: printed side by side too, each half the column wide.
MAP_PAIR = (
    '.cell_output:has(> figure[id$="-one"] + figure[id$="-mean"], '
    '> figure[id$="-one-more"] + figure[id$="-mean-more"])'
)
PRINT_CSS = """
@media print {
  html { font-size: 13.33px !important; }
  body { line-height: 1.3 !important; }
  h1 { font-size: 2.0rem !important; margin-top: 0 !important; }
  h2 { font-size: 1.45rem !important; margin-top: 1.2rem !important; }
  h3 { font-size: 1.15rem !important; }
  figure img, .cell_output img { max-width: 100% !important; max-height: 62mm !important; width: auto !important;
                                 height: auto !important; object-fit: contain; }
  figure { margin: 0.6rem auto !important; break-inside: avoid; }
  figcaption { font-size: 0.85rem !important; }
  p { margin-bottom: 0.55rem !important; }
  .admonition, div.admonition, details.sd-dropdown { margin-top: 0.5rem !important; margin-bottom: 0.5rem !important; }
  table, pre, .highlight { font-size: 0.75rem !important; }
  details.sd-dropdown .sd-card-body { font-size: 0.75rem !important; }
  details.sd-dropdown { break-inside: auto !important; }
  details.sd-dropdown > summary, caption { break-after: avoid !important; }
  .bd-main .bd-content table, .admonition, div.admonition { break-inside: auto !important; }
  tr, caption { break-inside: avoid !important; }
  .cell_output table:not(.results) td:first-child { white-space: normal !important; }
  GRID_PAIR { display: flex !important; flex-wrap: wrap; align-items: flex-start; justify-content: space-between; }
  GRID_PAIR > * { flex: 0 0 100%; }
  GRID_PAIR > figure:has(+ details figure[id$="-more"]),
  GRID_PAIR > figure + details:has(figure[id$="-more"]) { flex: 0 0 49%; margin: 0 !important; border: none !important; }
  GRID_PAIR:has(figure.wide-maps) { display: block !important; }  /* 16 heads: the other 12 under, full width */
  figure.wide-maps img { max-height: 100mm !important; }
  MAP_PAIR { display: flex !important; flex-wrap: wrap; align-items: flex-start; justify-content: space-between; }
  MAP_PAIR > * { flex: 0 0 100%; }
  MAP_PAIR > figure[id$="-one"]:has(+ figure[id$="-mean"]), MAP_PAIR > figure[id$="-one"] + figure[id$="-mean"],
  MAP_PAIR > figure[id$="-one-more"]:has(+ figure[id$="-mean-more"]),
  MAP_PAIR > figure[id$="-one-more"] + figure[id$="-mean-more"] { flex: 0 0 49%; margin: 0 !important; }
  details.sd-dropdown:has(figure) > summary { display: none !important; }
  details.sd-dropdown:has(figure) > .sd-card-body { padding: 0 !important; }
  p, li { orphans: 3; widows: 3; }
}
""".replace("GRID_PAIR", GRID_PAIR).replace("MAP_PAIR", MAP_PAIR)
#: Pages of the build that are no chapter: Sphinx's index and search pages.
NOT_CHAPTERS = ("genindex.html", "search.html")
#: The totals printed, by chapter file name prefix, and the most A4 pages each may take (issue 31's bounds).
GROUPS = {"chapters 0-4": (("00_", "01_", "02_", "03_", "04_"), 40), "appendix (chapter 5)": (("05_",), 25)}


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
    pages = (p for p in bookcheck.pages(html) if p.parent == html and p.name not in NOT_CHAPTERS)
    return [p for p in pages if bookcheck.redirect_target(p) is None]


def page_count(pdf: bytes) -> int:
    """The number of pages of a PDF."""
    from pypdf import PdfReader

    return len(PdfReader(io.BytesIO(pdf)).pages)


@contextmanager
def browser(chromium: str):
    """A context of headless Chromium (Playwright driving ``chromium``) with the network off."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = bookcheck.launch(p, chromium)
        try:
            yield launched.new_context(viewport=bookcheck.VIEWPORT, offline=True)
        finally:
            launched.close()


def _pdf(page, paper: str) -> bytes:
    margin = dict.fromkeys(("top", "bottom", "left", "right"), MARGIN)
    return page.pdf(format=paper, print_background=True, margin=margin)


def _print_chapters(context, files, paper, first, targets, paper_style, timeout_ms=120_000) -> list[Printed]:
    printed = []
    for file in files:
        page = context.new_page()
        page.set_default_timeout(timeout_ms)
        page.goto(file.resolve().as_uri(), wait_until="load")
        title = page.title().split(" — ")[0].strip() or file.stem  # "Chapter title — Book title"
        title = " ".join(page.evaluate(pdfparts.HEADING) or ("", title)).strip()  # "2. Reproducing ..."
        page.add_style_tag(content=pdfparts.page_css(first, title) + (PRINT_CSS if paper_style else ""))
        page.evaluate(pdfparts.ANCHORS, sorted(targets.get(file.name, ())))
        page.evaluate(bookcheck.MATHJAX_READY)
        pdf = _pdf(page, paper)
        printed.append(Printed(file.name, title, pdf, page_count(pdf)))
        first += printed[-1].pages
        page.close()
    return printed


def print_pages(
    files: list[Path], paper: str, chromium: str, first: int = 1, paper_style: bool = True
) -> list[Printed]:
    """Each file printed to PDF by headless Chromium, network off, after MathJax has typeset it, its pages
    numbered on from ``first``; ``paper_style``: with ``PRINT_CSS`` over the theme's print style sheet (False:
    the theme's alone, as a reader's "Print" button gets it)."""
    with browser(chromium) as context:
        return _print_chapters(context, files, paper, first, pdfparts.link_targets(files), paper_style)


def print_book(
    files: list[Path], paper: str, chromium: str, book: dict[str, str], paper_style: bool = True
) -> tuple[bytes, list[Printed]]:
    """The title page and contents (``pdfparts.front_html``), and each chapter numbered on after them. The
    chapters are printed first, as the contents give the page each starts on; printed again where the front
    matter takes more pages than assumed (two)."""
    targets, front_pages = pdfparts.link_targets(files), 2
    with browser(chromium) as context:
        for _ in range(3):
            chapters = _print_chapters(context, files, paper, front_pages + 1, targets, paper_style)
            firsts = [front_pages + 1 + sum(c.pages for c in chapters[:i]) for i in range(len(chapters))]
            contents = [(c.title, f, n) for c, f, n in zip(chapters, files, firsts, strict=True)]
            page = context.new_page()
            page.set_content(pdfparts.front_html(book, contents))
            page.add_style_tag(content=pdfparts.page_css(1, None))
            front = _pdf(page, paper)
            page.close()
            if page_count(front) == front_pages:
                return front, chapters
            front_pages = page_count(front)
    raise RuntimeError(f"the title page and contents took {front_pages} pages, then another number")


def book_info(root: Path = ROOT) -> dict[str, str]:
    """What the title page says: ``_config.yml``'s title, author and ``pdf.subtitle``, today's date, the commit
    of the checkout (``git describe --dirty``: "-dirty" for uncommitted changes) and the repository's URL."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text())
    git = ["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=12"]
    commit = subprocess.run(git, capture_output=True, text=True).stdout.strip() or "unknown"
    today = date.today()
    return {
        "title": config["title"],
        "subtitle": (config.get("pdf") or {}).get("subtitle", ""),
        "author": config.get("author", ""),
        "date": f"{today.day} {today:%B %Y}",
        "commit": commit,
        "repository": repository(root)["url"],
    }


def join(
    printed: list[Printed],
    target: Path,
    html: Path,
    repo: dict[str, str],
    front: bytes | None = None,
    book: dict[str, str] | None = None,
) -> tuple[Counter, list[str]]:
    """The front matter and the printed chapters, in order, as one PDF at ``target`` (written beside it, then
    renamed into place), each chapter's title an entry of the PDF's outline, every link made to work in it
    (``pdfparts.relink``: ``html`` is the build the chapters were printed from, ``repo`` its repository).
    Returns the links by kind (``file://`` those left) and the links that lead nowhere."""
    from pypdf import PdfWriter

    writer, owners, starts, places = PdfWriter(), [], {}, {}
    if front is not None:
        writer.append(io.BytesIO(front))
        owners += [None] * page_count(front)
        writer.add_outline_item(title="Contents", page_number=min(1, len(owners) - 1))
    for chapter in printed:
        starts[chapter.page] = len(owners)
        for name, (page, left, top) in pdfparts.anchors(chapter.pdf).items():
            places[chapter.page, name] = (len(owners) + page, left, top)
        writer.append(io.BytesIO(chapter.pdf), outline_item=chapter.title)
        owners += [chapter.page] * chapter.pages

    def resolve(uri: str, owner: str | None):
        if uri.startswith("#"):
            return "within a chapter", places.get((owner, uri[1:]))
        return pdfparts.file_link(uri, html, starts, places, repo)

    counts, unresolved = pdfparts.relink(writer, owners, resolve)
    writer.root_object.pop("/Names", None)  # the chapters' named destinations: every link now has its page
    if book is not None:
        writer.add_metadata({"/Title": book["title"], "/Author": book["author"]})
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    with partial.open("wb") as out:
        writer.write(out)
    partial.replace(target)
    return counts, unresolved


def totals(printed: list[Printed], front: int = 0) -> dict[str, int]:
    """Printed pages of each group of ``GROUPS`` (chapters 0-4, the appendix) and of the whole book, the
    ``front`` pages of the title page and contents with it."""
    found = {name: sum(c.pages for c in printed if c.page.startswith(g[0])) for name, g in GROUPS.items()}
    found["whole book"] = front + sum(c.pages for c in printed)
    return found


def over_bounds(found: dict[str, int]) -> list[str]:
    """The groups of `totals` printed on more A4 pages than ``GROUPS`` allows them, each as 'name: n > bound'."""
    return [f"{name}: {found[name]} > {bound}" for name, (_, bound) in GROUPS.items() if found[name] > bound]


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
    start, book = time.perf_counter(), book_info()
    front, printed = print_book(chapter_pages(html), args.paper, chromium, book, not args.theme_style)
    links, unresolved = join(printed, target, html, repository(ROOT), front, book)
    style = "the theme's print style" if args.theme_style else "10 pt paper style"
    elapsed = time.perf_counter() - start
    print(f"pdf: {target} ({args.paper}, margins {MARGIN}, {style}, {elapsed:.0f} s); printed pages:")
    print(f"  {page_count(front):4d}  title page and contents")
    for chapter in printed:
        print(f"  {chapter.pages:4d}  {chapter.page}")
    found = totals(printed, page_count(front))
    over = over_bounds(found) if args.paper == "A4" else []
    for name, count in found.items():
        print(f"  {count:4d}  {name}" + (f" (at most {GROUPS[name][1]})" if name in GROUPS else ""))
    print("links: " + ", ".join(f"{n} {kind}" for kind, n in links.items()))
    if links["file://"] or unresolved or over:
        left = f"{links['file://']} file:// links left, links to no place {unresolved}, over the bound {over}"
        print(f"pdf: {left}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

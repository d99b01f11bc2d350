"""The built book as a reader sees it: every page opened in headless Chromium with the network off.

``python tools/bookcheck.py [_build/html]`` (``make check-book``) opens each HTML page of the built book
in Debian's ``chromium``, driven by Playwright, and fails when a page

- asks for anything from a remote host (every request that is not ``file:``, ``data:``, ``blob:`` or
  ``about:`` is aborted and reported: the book must work on a plane),
- shows unrendered TeX (``\\(``, ``\\[``, ``$$``, ``\\frac``... left in the visible text, a math element that
  MathJax did not typeset, or a MathJax error),
- shows Markdown as typed (`` `name` `` or ``**bold**`` in the visible text: a glued sentence or a table
  caption is plain text),
- logs a JavaScript error (console errors and uncaught exceptions; a local file that fails to load counts),
- holds markup no chapter wrote in its article: an event-handler attribute (``on*=``) or a script, iframe,
  object or embed element (a string from a results file shown as HTML; ``injected_markup``),
- has a figure (``img``, ``svg``, ``canvas``, ``video``) wider than its text column or the window,
- has a table wider than the box that holds it (its ``scrollWidth`` over the parent's ``clientWidth``:
  the theme lets it scroll sideways) or than its text column, whatever its class; tables in closed
  fold-outs are not seen,
- shows one figure twice: two images of its article with the same bytes (``repeated_figures``; a later
  section refers back to the first in words instead),
- names a model or a setting by its code id in a sentence: an experiment name of the registry
  (``learned_content_9h_ha``) or one of its constants (``GRID_HOURS``) in the article's running text, outside code elements, tables and formulas
  (``code_ids_in_text``; a reader gets the display name, "SA learned 2D + content, 9 heads, HA"),
- says "not yet trained" in a sentence: the missing mark in the article's running text (paragraphs, list
  items, notes and figure captions; table cells and their captions, code and the mark quoted as a term
  excepted: ``missing_mark_in_text``); a sentence needs the number or verdict, a table may say a run is missing,
- shows an unnumbered figure: an image of the article that is not inside a ``<figure>`` whose caption
  carries a number ("Fig. 2.3"), as a chapter's ``{glue:figure}`` with ``:name:`` and a caption makes
  (``unnumbered_figures``; a plot a cell displays bare is one a reader cannot refer to),
- or shows a display formula wider than its box: the typeset formula (MathJax's ``mjx-math``) wider than
  the ``div.math`` that holds it, or ending right of the text column (split it with ``aligned``).

It saves one full-page screenshot per page under ``_build/screenshots/``. Chromium is found as
``$ATTNLIB_CHROMIUM``, ``chromium``, ``chromium-browser`` or ``google-chrome`` on the PATH; where none
is, the command says how to install it and exits with status 2. Playwright's own browser download is
never used (it needs the network).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bookarticle import (  # tools/bookarticle.py: what a page's HTML holds, read without a browser
    LOCAL_SCHEMES,
    code_ids_in_text,
    experiment_ids,
    injected_markup,
    is_remote,
    missing_mark_in_text,
    repeated_figures,
    stderr_outputs,
    unnumbered_figures,
)

from attnlib.env import CHROMIUM_ENV

__all__ = [  # the page readers, re-exported: bookcheck.repeated_figures(...) as before the split
    "LOCAL_SCHEMES",
    "code_ids_in_text",
    "experiment_ids",
    "injected_markup",
    "is_remote",
    "missing_mark_in_text",
    "repeated_figures",
    "stderr_outputs",
    "unnumbered_figures",
    "check_pages",
    "find_chromium",
    "main",
    "pages",
    "redirect_target",
]

#: How to get Chromium where it is missing (Debian / Ubuntu).
INSTALL_HINT = "install it with `apt-get install chromium` (Debian) or set ATTNLIB_CHROMIUM to its path"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: The window the pages are opened in: a laptop screen.
VIEWPORT = {"width": 1280, "height": 900}
#: Pages of the build that are not chapters but are still opened (Sphinx's index and search pages).
SKIP_FOLDERS = ("_static", "_sources", "_images", "reports", "_downloads")

#: Runs in a loaded page: waits until MathJax has typeset every formula; its version, or null without MathJax.
MATHJAX_READY = r"""
async () => {
  const MJ = window.MathJax;
  if (!(MJ && MJ.startup && MJ.startup.promise)) return null;
  await MJ.startup.promise;
  if (MJ.typesetPromise) { await MJ.typesetPromise(); }
  return MJ.version || "loaded";
}
"""

# Runs in the page once it has loaded: waits for MathJax, then reports what a reader would see wrong.
_INSPECT = (
    r"""
async () => {
  const out = {untypeset: [], mathErrors: [], tex: [], wide: [], wideTables: [], mathjax: null};
  out.mathjax = await ("""
    + MATHJAX_READY
    + r""")();
  const maths = document.querySelectorAll("span.math, div.math");
  for (const el of maths) {
    if (!el.querySelector("mjx-container")) { out.untypeset.push(el.textContent.trim().slice(0, 80)); }
  }
  for (const el of document.querySelectorAll("mjx-merror, [data-mjx-error]")) {
    out.mathErrors.push((el.getAttribute("data-mjx-error") || el.textContent).slice(0, 120));
  }
  // Visible text outside code, scripts and typeset math.
  const skip = "pre, code, script, style, textarea, mjx-container, .highlight, .mjx-assistive-mml";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const pieces = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || parent.closest(skip)) continue;
    if (!parent.getClientRects().length) continue;   // not rendered (display: none, collapsed details)
    const style = getComputedStyle(parent);
    if (style.visibility === "hidden") continue;
    pieces.push(node.textContent);
  }
  const text = pieces.join(" ");
  const pattern = /\\[()\[\]]|\$\$|\\[A-Za-z]{2,}/g;   // \( \[ $$ or a command such as \frac, \alpha
  for (const m of text.matchAll(pattern)) {
    out.tex.push(text.slice(Math.max(0, m.index - 30), m.index + 40).replace(/\s+/g, " "));
    if (out.tex.length >= 5) break;
  }
  // Markdown shown as typed: `code` or **bold** in the visible text (a glued string or a table caption
  // is plain text, not Markdown)
  out.markdown = [];
  for (const m of text.matchAll(/`[^`\s][^`]{0,80}`|\*\*[^*\s][^*]{0,80}\*\*/g)) {
    out.markdown.push(text.slice(Math.max(0, m.index - 30), m.index + m[0].length + 10).replace(/\s+/g, " "));
    if (out.markdown.length >= 5) break;
  }
  // Figures wider than their text column or the window.
  const page = document.documentElement.clientWidth;
  const figures = "img, svg, canvas, video";
  for (const el of document.querySelectorAll(figures)) {
    if (el.closest("mjx-container, nav, header, .bd-sidebar-primary, .bd-sidebar-secondary, button, a.headerlink")) continue;
    const box = el.getBoundingClientRect();
    if (box.width < 50 || !el.getClientRects().length) continue;  // icons, hidden figures
    const column = el.closest("article, main, .bd-article, .bd-content") || document.body;
    const limit = Math.min(page, column.getBoundingClientRect().right);
    if (box.right > limit + 1) {
      const name = el.getAttribute("src") || el.getAttribute("alt") || el.tagName.toLowerCase();
      out.wide.push(`${name.slice(-60)}: ${Math.round(box.width)} px wide, ends at ${Math.round(box.right)} px, column ends at ${Math.round(limit)} px`);
    }
  }
  // Tables wider than the box that holds them (a reader would have to scroll them sideways) or the column.
  for (const el of document.querySelectorAll("table")) {
    if (el.closest("nav, header, .bd-sidebar-primary, .bd-sidebar-secondary")) continue;
    if (!el.getClientRects().length || !el.parentElement) continue;   // hidden (a closed fold-out)
    const room = el.parentElement.clientWidth;
    const column = el.closest("article, main, .bd-article, .bd-content") || document.body;
    const limit = Math.min(page, column.getBoundingClientRect().right);
    const box = el.getBoundingClientRect();
    if (el.scrollWidth > room + 1 || box.right > limit + 1) {
      const head = el.querySelector("caption") || el.querySelector("th, td");
      const name = (head ? head.textContent : "").trim().replace(/\s+/g, " ").slice(0, 60) || "table";
      out.wideTables.push(`${name}: ${el.scrollWidth} px wide in a box of ${room} px (column ends at ${Math.round(limit)} px, table at ${Math.round(box.right)} px)`);
    }
  }
  // Markup no chapter wrote, live in the article: an event-handler attribute (on*=) or an executable
  // element (a string from a results file that reached the page as HTML; injected_markup reads the file)
  out.injected = [];
  const article = document.querySelector("article.bd-article") || document.querySelector("article, main") || document.body;
  // the chapters' content is the article's sections; the theme appends its own scripts (thebe) after them
  for (const el of article.querySelectorAll("section *")) {
    const tag = el.tagName.toLowerCase();
    for (const a of el.attributes) {
      if (/^on/i.test(a.name)) out.injected.push(`<${tag} ${a.name}="${a.value.slice(0, 40)}">`);
    }
    const data = tag === "script" && /json|math\/tex/i.test(el.getAttribute("type") || "");
    if (["script", "iframe", "object", "embed"].includes(tag) && !data) {
      out.injected.push(`<${tag}> ${(el.getAttribute("src") || el.textContent).trim().slice(0, 60)}`);
    }
  }
  // Display formulas wider than their box (the reader loses their end or scrolls them sideways)
  out.wideMath = [];
  for (const el of document.querySelectorAll('mjx-container[display="true"]')) {
    if (el.closest("nav, header, .bd-sidebar-primary, .bd-sidebar-secondary") || !el.getClientRects().length) continue;
    const formula = (el.querySelector("mjx-math") || el).getBoundingClientRect();
    const holder = el.closest("div.math") || el.parentElement;
    const room = holder.clientWidth;
    const column = el.closest("article, main, .bd-article, .bd-content") || document.body;
    const limit = Math.min(page, column.getBoundingClientRect().right);
    if (formula.width > room + 1 || formula.right > limit + 1) {
      const number = holder.querySelector(".eqno");
      const text = (el.querySelector("mjx-assistive-mml") || el).textContent.replace(/\s+/g, " ").trim().slice(0, 50);
      const name = (number ? number.textContent.trim().slice(0, 12) + " " : "") + (holder.id || text);
      out.wideMath.push(`${name}: ${Math.round(formula.width)} px wide in a box of ${room} px (column ends at ${Math.round(limit)} px, formula at ${Math.round(formula.right)} px)`);
    }
  }
  out.scrollWidth = document.documentElement.scrollWidth;
  out.clientWidth = page;
  return out;
}
"""
)


@dataclass
class PageReport:
    """What one page showed: problems (each a line), and what was checked."""

    page: str
    problems: list[str] = field(default_factory=list)
    maths: int = 0
    mathjax: str | None = None
    screenshot: Path | None = None
    seconds: float = 0.0
    redirect: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def find_chromium() -> str | None:
    """The Chromium executable to drive: ``$ATTNLIB_CHROMIUM`` or the first of ``CHROMIUM_NAMES`` on the
    PATH; None when there is none."""
    given = os.environ.get(CHROMIUM_ENV)
    if given:
        return given if Path(given).is_file() else shutil.which(given)
    return next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)


def pages(html: Path) -> list[Path]:
    """Every HTML page of a built book, the book's own pages first (index, then by name)."""
    found = [p for p in sorted(html.rglob("*.html")) if not any(part in SKIP_FOLDERS for part in p.parts)]
    return sorted(
        found, key=lambda p: (p.name != "index.html", p.name in ("genindex.html", "search.html"), str(p))
    )


def launch(playwright, chromium: str):
    """Chromium (the executable at ``chromium``, never Playwright's download) started headless by Playwright."""
    return playwright.chromium.launch(executable_path=chromium, headless=True, args=["--no-first-run"])


def check_pages(
    files: list[Path],
    *,
    screenshots: Path | None = None,
    chromium: str | None = None,
    root: Path | None = None,
    timeout_ms: int = 60_000,
) -> list[PageReport]:
    """Open each file in headless Chromium with the network off and report what a reader would see wrong.

    ``screenshots``: folder for one full-page PNG per page (named after the page); ``root``: the folder the
    page names are relative to (default: the first file's folder).
    """
    from playwright.sync_api import sync_playwright

    chromium = chromium or find_chromium()
    if chromium is None:
        raise FileNotFoundError(f"Chromium not found: {INSTALL_HINT}")
    root = root or (files[0].parent if files else Path.cwd())
    if screenshots is not None:
        screenshots.mkdir(parents=True, exist_ok=True)
    reports = []
    with sync_playwright() as p:
        browser = launch(p, chromium)
        try:
            for file in files:
                reports.append(_check_page(browser, file, root, screenshots, timeout_ms))
        finally:
            browser.close()
    return reports


def redirect_target(file: Path) -> str | None:
    """The page an HTML file redirects to at once (``<meta http-equiv="refresh" content="0; url=...">``,
    as Jupyter Book's ``index.html``), or None."""
    found = _REFRESH.search(file.read_text(errors="replace")[:4000])
    return found[1] if found else None


_REFRESH = re.compile(r"<meta[^>]+http-equiv=[\"']?refresh[\"']?[^>]+url=([^\"'>\s]+)", re.IGNORECASE)


def _check_page(browser, file: Path, root: Path, screenshots: Path | None, timeout_ms: int) -> PageReport:
    start = time.perf_counter()
    resolved = file.resolve()
    name = str(resolved.relative_to(root.resolve())) if resolved.is_relative_to(root.resolve()) else file.name
    report = PageReport(name)
    target = redirect_target(file)
    if target is not None:  # a redirect: its target is checked as a page of its own
        report.redirect = target
        if not (file.parent / target).is_file() and is_remote(target) is False:
            report.problems.append(f"redirects to a missing page: {target}")
        elif is_remote(target):
            report.problems.append(f"redirects to a remote host: {target}")
        report.seconds = time.perf_counter() - start
        return report
    context = browser.new_context(viewport=VIEWPORT, offline=True, java_script_enabled=True)
    page = context.new_page()
    page.set_default_timeout(timeout_ms)

    def route(r):  # the network is off: every remote request is aborted and reported
        url = r.request.url
        if is_remote(url):
            report.problems.append(f"loads from a remote host: {url}")
            r.abort()
        else:
            r.continue_()

    def console(message):
        if message.type == "error":
            report.problems.append(f"JavaScript console error: {message.text}")

    def failed(request):
        if not is_remote(request.url):  # remote ones are reported by route()
            report.problems.append(f"local file failed to load: {request.url} ({request.failure})")

    page.route("**/*", route)
    page.on("console", console)
    page.on("pageerror", lambda error: report.problems.append(f"JavaScript error: {error}"))
    page.on("requestfailed", failed)
    try:
        page.goto(file.resolve().as_uri(), wait_until="load")
        found = page.evaluate(_INSPECT)
        page.wait_for_timeout(500)  # let late console messages arrive and the theme settle
    except Exception as err:  # a page that does not load or times out is a failure, with its reason
        report.problems.append(f"could not be inspected: {type(err).__name__}: {str(err).splitlines()[0]}")
        found = None
    if found is not None:
        report.mathjax = found["mathjax"]
        report.maths = page.locator("span.math, div.math").count()
        if found["untypeset"]:
            first = found["untypeset"][0].replace("\n", " ")
            report.problems.append(
                f"{len(found['untypeset'])} of {report.maths} formulas not typeset by MathJax "
                f"(MathJax {'loaded' if report.mathjax else 'not loaded'}; first: {first})"
            )
        for error in found["mathErrors"]:
            report.problems.append(f"MathJax error: {error}")
        for tex in found["tex"]:
            report.problems.append(f"unrendered TeX in the text: …{tex}…")
        for markdown in found["markdown"]:
            report.problems.append(f"unrendered Markdown in the text: …{markdown}…")
        source = file.read_text(errors="replace")
        for repeat in repeated_figures(source, file.parent):
            report.problems.append(f"the same figure twice on one page: {repeat}")
        for where in code_ids_in_text(source, experiment_ids()):
            report.problems.append(f"a code id in a sentence (write the display name): {where}")
        for where in missing_mark_in_text(source):
            report.problems.append(
                f"'not yet trained' in a sentence (give the number, or say it in a table): {where}"
            )
        for printed in stderr_outputs(source):
            report.problems.append(f"a cell printed to stderr (a warning the reader sees): {printed}")
        for figure in unnumbered_figures(source):
            report.problems.append(
                f"a figure without a number (a named {{glue:figure}} with a caption): {figure}"
            )
        for wide in found["wideMath"]:
            report.problems.append(f"formula wider than its box (split it: aligned): {wide}")
        for markup in sorted(set(found["injected"]) | set(injected_markup(source))):
            report.problems.append(
                f"markup no chapter wrote (a results file's string shown as HTML?): {markup}"
            )
        for wide in found["wide"]:
            report.problems.append(f"figure wider than the page: {wide}")
        for wide in found["wideTables"]:
            report.problems.append(f"table wider than its column (scrolls sideways): {wide}")
        if found["scrollWidth"] > found["clientWidth"] + 1:
            report.problems.append(
                f"the page scrolls sideways: {found['scrollWidth']} px of content in a {found['clientWidth']} px window"
            )
    if screenshots is not None:
        shot = screenshots / (name.replace("/", "__").removesuffix(".html") + ".png")
        try:
            page.screenshot(path=str(shot), full_page=True)
            report.screenshot = shot
        except Exception as err:
            report.problems.append(f"no screenshot: {type(err).__name__}: {str(err).splitlines()[0]}")
    context.close()
    report.seconds = time.perf_counter() - start
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/bookcheck.py",
        description="Open every page of the built book in headless Chromium with the network off.",
    )
    parser.add_argument("html", nargs="?", default="_build/html", help="the built book (default _build/html)")
    parser.add_argument(
        "--screenshots",
        default=None,
        help="folder for one PNG per page (default: _build/screenshots beside html)",
    )
    parser.add_argument(
        "--find-chromium",
        action="store_true",
        help="only print the Chromium found (exit 2 when there is none)",
    )
    args = parser.parse_args(argv)
    if args.find_chromium:
        chromium = find_chromium()
        if chromium is None:
            print(f"check-book: Chromium not found; {INSTALL_HINT}.", file=sys.stderr)
            return 2
        print(f"check-book: Chromium at {chromium}")
        return 0
    html = Path(args.html)
    if not (html / "index.html").is_file():
        print(f"check-book: no built book at {html} (run `make book` first)", file=sys.stderr)
        return 2
    chromium = find_chromium()
    if chromium is None:
        print(f"check-book: Chromium not found; {INSTALL_HINT}.", file=sys.stderr)
        return 2
    shots = Path(args.screenshots) if args.screenshots else html.parent / "screenshots"
    if shots.exists():
        shutil.rmtree(shots)
    files = pages(html)
    start = time.perf_counter()
    print(f"check-book: {len(files)} pages of {html} in {chromium}, network off; screenshots in {shots}")
    try:
        reports = check_pages(files, screenshots=shots, chromium=chromium, root=html)
    except Exception as err:  # noqa: BLE001 -- ATTNLIB_CHROMIUM naming no browser: Playwright's launch error
        reason = " ".join(str(err).split())[:200]
        print(
            f"check-book: could not drive {chromium} as Chromium ({type(err).__name__}: {reason}); {INSTALL_HINT}.",
            file=sys.stderr,
        )
        return 2
    for r in reports:
        maths = f"{r.maths} formulas, MathJax {r.mathjax}" if r.maths else "no formulas"
        if r.redirect:
            maths = f"redirects to {r.redirect}"
        print(f"  {'ok  ' if r.ok else 'FAIL'} {r.page} ({maths}, {r.seconds:.1f} s)")
        for problem in r.problems:
            print(f"       - {problem}")
    bad = [r for r in reports if not r.ok]
    elapsed = time.perf_counter() - start
    if bad:
        print(f"check-book: {len(bad)} of {len(reports)} pages FAILED ({elapsed:.0f} s)")
        return 1
    print(f"check-book: all {len(reports)} pages passed ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

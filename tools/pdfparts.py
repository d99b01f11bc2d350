"""The parts of the whole-book PDF that are not a chapter's print (tools/bookpdf.py, `make pdf`): the title page
and contents, the running head and page number of every page, and the links made internal.

Chromium prints a link within a page as a named destination (it writes one for every id that a link of the
same page points at) and any other link as a URI: a link to another chapter as ``file:///.../02_x.html#id``.
``relink`` turns each into a link to that place in the joined PDF, and a ``file://`` link to another file of the
build into the repository's URL (``attnbook.sphinx.repository``: ``_config.yml``'s, the one place it is written).
"""

from __future__ import annotations

import html as markup
import io
import re
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urlparse

from attnbook.sphinx import RESULTS_ZIP

#: Runs in a chapter page: its title's number ("2.", Sphinx's section number; "" for an unnumbered page) and
#: words, or null on a page without the theme's article heading.
HEADING = """() => {
  const h = document.querySelector(".bd-article h1");
  if (!h) return null;
  const words = h.cloneNode(true);
  words.querySelectorAll(".section-number, .headerlink").forEach(e => e.remove());
  return [(h.querySelector(".section-number") || {textContent: ""}).textContent.trim(), words.textContent.trim()];
}"""
#: Runs in a chapter page with the ids that other pages link to: a hidden link to each that the page holds, so
#: that Chromium writes a named destination for it (it writes them only for the targets of the page's links).
ANCHORS = """(ids) => {
  for (const id of ids) {
    if (!document.getElementById(id)) continue;
    const a = document.createElement("a");
    a.href = "#" + id;
    a.style.display = "none";
    document.body.appendChild(a);
  }
}"""
#: The margins' text: the page number, bottom centre, and the chapter's title, top right, but on its first page.
_MARGIN_FONT = "font: 8.5pt system-ui, sans-serif; color: #555;"
_HREF = re.compile(r'href="([^"#]+\.html)#([^"]+)"')


def css_string(text: str) -> str:
    """``text`` as a CSS string literal."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def page_css(first: int, running: str | None) -> str:
    """A page's print style for its margins: its pages numbered from ``first`` on (Chromium's page counter), the
    running head ``running`` at the top right of every page but the first (none: no number on the first
    page, as a title page)."""
    head = f"@top-right {{ content: {css_string(running)}; {_MARGIN_FONT} }}" if running is not None else ""
    first_page = (
        "@top-right { content: none; }" if running is not None else "@bottom-center { content: none; }"
    )
    return f"""
@page {{ @bottom-center {{ content: counter(page); {_MARGIN_FONT} }} {head} }}
@page :first {{ counter-increment: page {first}; {first_page} }}
"""


def link_targets(files: list[Path]) -> dict[str, set[str]]:
    """Page file name -> the ids of it that the pages ``files`` link to from another page (``02_x.html#id``)."""
    found: dict[str, set[str]] = {}
    for file in files:
        for page, fragment in _HREF.findall(file.read_text(errors="replace")):
            found.setdefault(Path(page).name, set()).add(markup.unescape(unquote(fragment)))
    return found


def front_html(book: dict[str, str], contents: list[tuple[str, Path, int]]) -> str:
    """The title page (``book``'s title, subtitle, author, date, commit and repository) and the contents: each
    (title, page file, first page) as a line, linked to its page. Printed with ``page_css(1, None)``."""
    e = markup.escape
    lines = "\n".join(
        f'<li><a href="{file.resolve().as_uri()}"><span>{e(title)}</span><i></i><b>{first}</b></a></li>'
        for title, file, first in contents
    )
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>{e(book["title"])}</title><style>
body {{ font-family: system-ui, sans-serif; color: #222; margin: 0; }}
.title {{ height: 240mm; display: flex; flex-direction: column; justify-content: center; text-align: center;
          break-after: page; }}
h1 {{ font-size: 30pt; font-weight: 500; margin: 0 0 8mm; }}
.subtitle {{ font-size: 14pt; color: #444; margin: 0 15mm 20mm; }}
.author {{ font-size: 14pt; margin: 0 0 40mm; }}
.built, .built a {{ font-size: 9.5pt; color: #555; text-decoration: none; }}
h2 {{ font-size: 20pt; font-weight: 500; margin: 10mm 0 8mm; }}
ol {{ list-style: none; padding: 0; font-size: 12pt; }}
li a {{ display: flex; align-items: baseline; color: #222; text-decoration: none; margin: 0 0 3.5mm; }}
li i {{ flex: 1; border-bottom: 1px dotted #888; margin: 0 2mm; }}
</style></head><body>
<section class="title"><h1>{e(book["title"])}</h1><p class="subtitle">{e(book["subtitle"])}</p>
<p class="author">{e(book["author"])}</p>
<p class="built">Built on {e(book["date"])} from commit {e(book["commit"])} of
<a href="{e(book["repository"])}">{e(book["repository"])}</a></p></section>
<section><h2>Contents</h2><ol>
{lines}
</ol></section></body></html>"""


def anchors(pdf: bytes) -> dict[str, tuple[int, float, float]]:
    """The named destinations of a printed page: id -> (its page, left, top)."""
    from pypdf import PdfReader

    reader = PdfReader(io.BytesIO(pdf))
    places = {name: (reader.get_destination_page_number(d), d.left or 0, d.top or 0) for name, d in
              reader.named_destinations.items()}  # fmt: skip
    return {str(name).removeprefix("/"): place for name, place in places.items()}


def file_link(uri: str, html: Path, starts: dict[str, int], places: dict, repository: dict[str, str]):
    """Where a ``file://`` link goes in the book: (kind, place) with place a (page, left, top) of the joined
    PDF (``starts``: each page file's first page; ``places``: (page file, id) -> its place) or a URL of the
    repository: a page's source as the repository's file, results/ as its folder, anything else the repository."""
    parsed = urlparse(uri)
    path = Path(unquote(parsed.path))
    fragment = unquote(parsed.fragment)
    if path.is_relative_to(html.resolve()):
        rel = path.relative_to(html.resolve()).as_posix()
        if rel in starts:
            if fragment and (rel, fragment) in places:
                return "to an anchor of another chapter", places[rel, fragment]
            return "to the first page of a chapter", (starts[rel], 0.0, None)
        url, branch = repository["url"], repository["branch"]
        if rel.startswith("_sources/"):
            return "to the repository", f"{url}/blob/{branch}/{repository['path_to_book']}/{rel[9:]}"
        if rel == RESULTS_ZIP:
            return "to the repository", f"{url}/tree/{branch}/results"
    return "to the repository", repository["url"]


def relink(writer, owners: list[str | None], resolve) -> tuple[Counter, list[str]]:
    """Every link of the joined PDF in ``writer`` made to work in it: a named destination of the page file
    ``owners[i]`` of page i, and a ``file://`` URI (``resolve(uri, owner)`` -> (kind, place or URL)), become
    a destination in the PDF or a URL. Returns the links counted by kind (``file://``: those still leading to
    a file) and those that lead nowhere."""
    from pypdf.generic import ArrayObject, FloatObject, NameObject, NullObject, TextStringObject

    def destination(page: int, left: float, top: float | None) -> ArrayObject:
        top = float(writer.pages[page].mediabox.top) if top is None else top
        return ArrayObject([writer.pages[page].indirect_reference, NameObject("/XYZ"), FloatObject(left),
                            FloatObject(top), NullObject()])  # fmt: skip

    counts, unresolved = Counter({"file://": 0}), []
    for i, page in enumerate(writer.pages):
        for annotation in page.get("/Annots") or []:
            link = annotation.get_object()
            action = link["/A"].get_object() if "/A" in link else {}
            if isinstance(link.get("/Dest"), str):
                uri = "#" + str(link["/Dest"]).removeprefix("/")
            elif action.get("/S") == "/URI":
                uri = str(action["/URI"])
            else:
                continue
            kind, place = resolve(uri, owners[i]) if uri.startswith(("#", "file:")) else ("to the web", None)
            if place is None and kind != "to the web":
                unresolved.append(uri)
            elif isinstance(place, tuple):
                link.pop("/A", None)
                link[NameObject("/Dest")] = destination(*place)
            elif isinstance(place, str):
                action[NameObject("/URI")] = TextStringObject(place)
            counts[kind] += 1
            counts["file://"] += str(action.get("/URI", "")).startswith("file:") and "/A" in link
    return counts, unresolved

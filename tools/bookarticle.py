"""What a page of the built book holds, read from its HTML without a browser (``tools/bookcheck.py`` runs
these on every page beside what it measures in Chromium). Each reads the page's ``<article>``, the chapter's
content, and returns one line per fault:

- ``injected_markup``: event-handler attributes or executable elements no chapter wrote,
- ``repeated_figures``: two images with the same bytes,
- ``code_ids_in_text``: a registry code id in running text,
- ``missing_mark_in_text``: "not yet trained" in running text,
- ``unnumbered_figures``: an image outside a numbered ``<figure>``,
- ``stderr_outputs``: a cell output printed to stderr.
"""

from __future__ import annotations

import base64
import hashlib
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

LOCAL_SCHEMES = ("", "file", "data", "blob", "about")  # "": a relative link


def is_remote(url: str) -> bool:
    """True for a URL that would leave the machine (anything but a relative link, file:, data:, blob:, about:)."""
    parts = urlsplit(url)
    return parts.scheme.lower() not in LOCAL_SCHEMES or (parts.scheme == "" and bool(parts.netloc))


class _Article(HTMLParser):
    """Counts where the parser stands: inside the page's <article> (``depth``) and inside its sections
    (``sections``: the chapters' content; the theme appends its own scripts after them). Subclasses see every
    tag through ``start`` (``opens_section``: the tag opened a section) and ``end``."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth, self.sections, self.found = 0, 0, []

    def handle_starttag(self, tag, attrs):
        if tag == "article":
            self.depth += 1
        opens_section = tag == "section" and bool(self.depth)
        self.sections += opens_section
        self.start(tag, attrs, opens_section)

    def handle_endtag(self, tag):
        if tag == "article" and self.depth:
            self.depth -= 1
        if tag == "section" and self.sections:
            self.sections -= 1
        self.end(tag)

    def start(self, tag, attrs, opens_section):
        pass

    def end(self, tag):
        pass


class _ArticleMarkup(_Article):
    """Collects, inside the article's sections, event-handler attributes and executable elements."""

    def start(self, tag, attrs, opens_section):
        if opens_section or not self.sections:
            return
        for name, value in attrs:
            if name.lower().startswith("on"):
                self.found.append(f'<{tag} {name}="{(value or "")[:40]}">')
        kind = dict(attrs).get("type") or ""
        if tag in ("script", "iframe", "object", "embed") and not re.search(r"json|math/tex", kind, re.I):
            self.found.append(f"<{tag}> {(dict(attrs).get('src') or '')[:60]}".rstrip())


def injected_markup(html: str) -> list[str]:
    """What the page's article holds that no chapter writes: event-handler attributes (``onmouseover=``...)
    and script, iframe, object or embed elements (data scripts, JSON or MathJax's, excepted). Chapters show
    results as text and figures as images, so any of these is a string from a results file shown as HTML."""
    parser = _ArticleMarkup()
    parser.feed(html)
    return parser.found


class _ArticleImages(_Article):
    """The ``src`` of every <img> inside the sections of the page's <article> (the chapters' content), in order."""

    def start(self, tag, attrs, opens_section):
        if tag == "img" and self.sections and dict(attrs).get("src"):
            self.found.append(dict(attrs)["src"])


def _image_bytes(src: str, folder: Path) -> bytes | None:
    """The bytes an <img src> shows: a ``data:`` URI decoded, a local file read (relative to the page's
    ``folder``); None for a remote or missing file (reported elsewhere)."""
    if src.startswith("data:"):
        head, _, data = src.partition(",")
        try:
            return base64.b64decode(data) if head.endswith(";base64") else unquote(data).encode()
        except ValueError:
            return src.encode()
    if is_remote(src):
        return None
    path = folder / unquote(urlsplit(src).path)
    return path.read_bytes() if path.is_file() else None


def repeated_figures(html: str, folder: Path) -> list[str]:
    """The figures of the page's article that repeat an earlier one byte for byte, each as a line ("figure 3
    repeats figure 1: _images/ab12.png"), counting the article's images from 1 in order. ``folder``: where the
    page lies (its relative ``src`` are read from there). A figure shown twice is one a reader sees twice;
    a later section refers back to it in words instead."""
    parser = _ArticleImages()
    parser.feed(html)
    seen, found = {}, []
    for number, src in enumerate(parser.found, start=1):
        data = _image_bytes(src, folder)
        if data is None:
            continue
        digest = hashlib.sha256(data).hexdigest()
        if digest in seen:
            found.append(f"figure {number} repeats figure {seen[digest]}: {src[:60]}")
        else:
            seen[digest] = number
    return found


#: Elements whose text is not running text: code, formulas, tables (their cells name models as the
#: registry does only where a code id is the point), scripts.
_NOT_PROSE = {"code", "pre", "kbd", "samp", "table", "script", "style", "textarea", "math", "svg"}
_NOT_PROSE_CLASSES = {"math", "highlight", "headerlink"}


#: Elements that hold no text and have no end tag.
_VOID = {"img", "br", "hr", "wbr", "input", "meta", "link", "col", "source"}


class _ArticleProse(_Article):
    """The running text of the sections of the page's <article>: text outside code, tables and formulas."""

    def __init__(self):
        super().__init__()
        self.stack, self.pieces = [], []

    def start(self, tag, attrs, opens_section):
        if tag in _VOID:
            return  # void elements hold no text
        classes = set((dict(attrs).get("class") or "").split())
        self.stack.append((tag, tag in _NOT_PROSE or bool(classes & _NOT_PROSE_CLASSES)))

    def end(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):  # tolerate unclosed tags: pop back to the match
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        if self.sections and not any(skip for _, skip in self.stack):
            self.pieces.append(data)


def code_ids_in_text(html: str, ids) -> list[str]:
    """Where the page's article names a model by its code id in running text (outside code elements,
    tables and formulas): each as a line with the words around it. ``ids``: the experiment names of the
    registry (``attnlib.experiments.EXPERIMENTS``); matched whole and case-sensitively, so "ViT" is not "vit"
    and ``learned_9h`` is not found inside ``learned_9h_pos_init``."""
    names = sorted(ids, key=len, reverse=True)
    if not names:
        return []
    parser = _ArticleProse()
    parser.feed(html)
    text = " ".join(" ".join(parser.pieces).split())
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, names)) + r")(?![\w-])")
    found = []
    for m in pattern.finditer(text):
        found.append(f"{m[1]}: …{text[max(0, m.start() - 40) : m.end() + 30]}…")
    return found


class _ArticleStderr(_Article):
    """The text of every cell output inside the page's <article> that MyST-NB marks as printed to stderr
    (a ``div`` of classes ``output`` and ``stderr``), one string per output, in order."""

    def __init__(self):
        super().__init__()
        self.stack = []  # the open elements of the stderr output being read, its own div first

    def start(self, tag, attrs, opens_section):
        if tag in _VOID:
            return
        classes = set((dict(attrs).get("class") or "").split())
        if self.stack:
            self.stack.append(tag)
        elif self.depth and tag == "div" and {"output", "stderr"} <= classes:
            self.stack.append(tag)
            self.found.append("")

    def end(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):  # tolerate unclosed tags: pop back to the match
            if self.stack[i] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        if self.stack:
            self.found[-1] += data


def stderr_outputs(html: str) -> list[str]:
    """The start (120 characters) of every cell output a chapter printed to stderr (a warning, a progress bar,
    a traceback): the book shows what its cells print, so a warning with the build machine's paths would
    reach the reader."""
    parser = _ArticleStderr()
    parser.feed(html)
    return [" ".join(text.split())[:120] or "(empty)" for text in parser.found]


def missing_mark_in_text(html: str) -> list[str]:
    """Where the page's article says "not yet trained" (``attnbook.sphinx.MISSING_MARK``, any case) in running
    text: paragraphs, list items, notes and figure captions, outside tables (their cells and captions may say a
    run is missing), code and formulas; the mark quoted as a term ('shown as "not yet trained"') excepted. Each
    as a line with the words around it. The build fails on the mark in a Markdown paragraph already
    (``attnbook.sphinx``); this reads the page as built, glued phrases and figure captions included."""
    from attnbook.sphinx import MISSING_MARK

    quoted = re.compile(r"[\"“‘']\s*" + re.escape(MISSING_MARK) + r"\s*[.,]?\s*[\"”’']", re.IGNORECASE)
    parser = _ArticleProse()
    parser.feed(html)
    text = quoted.sub(" ", " ".join(" ".join(parser.pieces).split()))
    found = []
    for m in re.finditer(re.escape(MISSING_MARK), text, re.IGNORECASE):
        found.append(f"…{text[max(0, m.start() - 60) : m.end() + 40]}…")
    return found


class _ArticleFigures(_Article):
    """Each <img> of the article's sections with the figure that holds it: ``found`` gets (number, src,
    where) for every image that is not in a ``<figure>`` (or ``div.figure``) whose caption has a
    ``caption-number``."""

    def __init__(self):
        super().__init__()
        self.stack, self.images = [], 0  # stack: [tag, figure?, numbered?, its images]

    def start(self, tag, attrs, opens_section):
        attrs = dict(attrs)
        classes = set((attrs.get("class") or "").split())
        if tag == "img" and self.sections:
            self.images += 1
            figure = next((entry for entry in reversed(self.stack) if entry[1]), None)
            image = (self.images, attrs.get("src") or "")
            if figure is None:
                self.found.append((*image, "outside any figure"))
            else:
                figure[3].append(image)
            return
        if tag in _VOID:
            return
        if "caption-number" in classes:
            figure = next((entry for entry in reversed(self.stack) if entry[1]), None)
            if figure is not None:
                figure[2] = True
        self.stack.append([tag, tag == "figure" or (tag == "div" and "figure" in classes), False, []])

    def end(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):  # tolerate unclosed tags: pop back to the match
            if self.stack[i][0] == tag:
                for _, figure, numbered, images in self.stack[i:]:
                    if figure and not numbered:
                        self.found.extend(
                            (*image, "in a figure whose caption has no number") for image in images
                        )
                del self.stack[i:]
                break


def unnumbered_figures(html: str) -> list[str]:
    """The images of the page's article that are not numbered figures, each as a line ("image 3 outside any
    figure: _images/ab12.png"), counting the article's images from 1 in order. A figure of this book is a
    chapter's ``{glue:figure}`` (``attnbook.show`` with a name and a caption): a ``<figure>`` whose caption
    starts with its number ("Fig. 2.3"); an image a cell displays bare, or a figure without a caption, has no
    number a sentence could refer to."""
    parser = _ArticleFigures()
    parser.feed(html)
    return [f"image {number} {where}: {src[:60]}" for number, src, where in sorted(parser.found)]


def experiment_ids() -> list[str]:
    """The code ids a sentence must not show: the registry's experiment names (``learned_9h``), and the
    names of its settings and plan constants (``GRID_HOURS``, ``BUDGET_TARGET``: the public upper-case names
    of ``attnlib.experiments`` and ``attnlib.analysis.plan`` with an underscore), which a reader knows by what
    they mean ("the budget's target accuracy"), not by their name in the code."""
    from attnlib import experiments
    from attnlib.analysis import plan

    constants = {
        name
        for module in (experiments, plan)
        for name in vars(module)
        if name.isupper() and "_" in name.strip("_") and not name.startswith("_")
    }
    return list(experiments.EXPERIMENTS) + sorted(constants)

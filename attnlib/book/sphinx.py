"""The book build's Sphinx extension (``_config.yml``: ``sphinx.extra_extensions: attnlib.book``)."""

from __future__ import annotations

import os

from attnlib.env import TRAIN_MISSING_ENV


def _unique_scripts(app, pagename, templatename, context, doctree) -> None:
    """Drop repeated ``<script>`` entries from a page. Jupyter Book 1.x registers some inline scripts
    twice (sphinx-thebe's ``const THEBE_JS_URL = ...``), and a second ``const`` of one name is a
    JavaScript error in every page."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        # an inline script is registered once with filename None and once with "" (same body)
        key = (getattr(js, "filename", js) or "", tuple(sorted(getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique


def setup(app):
    """Sphinx extension hook (listed in ``_config.yml``): chapters executed by the book build read saved
    results and never train, unless ``ATTNLIB_TRAIN_MISSING`` was set explicitly; and every page carries
    each of its scripts once (see ``_unique_scripts``)."""
    os.environ.setdefault(TRAIN_MISSING_ENV, "0")
    app.connect("html-page-context", _unique_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

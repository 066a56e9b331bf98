"""A ``{chapter}`` role for the book: link a chapter by its number, whatever it is titled.

Usage in MyST: ``{chapter}`06``` -> "6. Fake tensors" linked to notebooks/06_*.ipynb;
``{chapter}`06#a-heading``` links a heading inside it; ``{chapter}`my text <06#a-heading>```
sets the text. The chapters live in ``notebooks/NN_name.ipynb`` (``book/notebooks`` is a
symlink to them), so the front page, module map and glossary need not repeat file names.

A chapter that is not in the book (yet) renders as plain text "chapter NN (not written
yet)" and an info line in the build log ("chapter NN: not written yet"), which
``tests/test_book.py`` reports; it is not a build warning, so the book builds while
chapters are still being written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

_EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)


def chapter_title(path: Path) -> str:
    """The first Markdown heading of a notebook, without the leading '#'."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        source = "".join(cell.get("source", []))
        for line in source.splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return path.stem


def find_chapter(srcdir: Path, number: str) -> Path | None:
    matches = sorted((srcdir / "notebooks").glob(f"{number}_*.ipynb"))
    return matches[0] if matches else None


def chapter_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    env = inliner.document.settings.env
    match = _EXPLICIT.match(text)
    label, target = (match.group("text"), match.group("target")) if match else (None, text)
    number, _, anchor = target.strip().partition("#")
    number = number.strip().zfill(2)
    path = find_chapter(Path(env.srcdir), number)
    if path is None:
        logger.info("chapter %s: not written yet (no notebooks/%s_*.ipynb)", number, number, location=(env.docname, lineno))
        return [nodes.emphasis(rawtext, f"chapter {number} (not written yet)")], []
    docname = f"notebooks/{path.stem}"
    uri = env.app.builder.get_relative_uri(env.docname, docname)
    if anchor:
        uri += f"#{anchor}"
    if not label:
        label = chapter_title(path)
    env.note_dependency(str(path))
    return [nodes.reference(rawtext, label, refuri=uri, internal=True)], []


# A chapter links book pages (the table of contents, the solutions) as ``../book/NAME.md``:
# the path from notebooks/ in JupyterLab. In the book the chapters are read from
# book/notebooks/ (a symlink), where the same page is ``../NAME.md``.
_BOOK_FROM_NOTEBOOKS = "](../book/"


def _toc_link_in_the_book(app, docname, source):
    if docname.startswith("notebooks/") and source and _BOOK_FROM_NOTEBOOKS in source[0]:
        source[0] = source[0].replace(_BOOK_FROM_NOTEBOOKS, "](../")


# The widget bundle's CSS (``_static/widgets/embed-amd.js``) asks for its icon font at
# page-relative paths (webpack's public path is the page): ``@jupyter-widgets/`` and
# ``@jupyter-widgets/html-manager/dist/`` beside each page. The three files ship in
# ``_static/widgets/fonts/`` (copied from the same npm package); after the build they are
# copied where the pages look, so no page logs a 404 (see _static/widgets/README.md).
_WIDGET_FONT_DIRS = ("@jupyter-widgets", "@jupyter-widgets/html-manager/dist")


def _widget_fonts_where_pages_look(app, exception):
    import shutil
    from pathlib import Path

    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir)
    fonts = sorted((Path(app.srcdir) / "_static" / "widgets" / "fonts").glob("*.*"))
    for base in (out, out / "notebooks"):
        for sub in _WIDGET_FONT_DIRS:
            (base / sub).mkdir(parents=True, exist_ok=True)
            for font in fonts:
                shutil.copy2(font, base / sub / font.name)


# sphinx-thebe adds its inline config script from inside each page's render, and in this
# Sphinx a script added there stays for every later page: pages got it twice, and the
# second ``const THEBE_JS_URL`` is a JavaScript error in the console. Keep each script once.
def _each_script_once(app, pagename, templatename, context, doctree):
    scripts, seen = context.get("script_files"), set()
    if not scripts:
        return
    kept = []
    for js in scripts:
        # an inline script's filename is None from one extension, "" from another: the same script
        key = (getattr(js, "filename", None) or "", tuple(sorted((getattr(js, "attributes", None) or {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(js)
    scripts[:] = kept  # in place: handlers after this one add to the same list (myst-nb, the widget state)


def setup(app):
    app.add_role("chapter", chapter_role)
    app.connect("html-page-context", _each_script_once, priority=100)  # before any handler that returns a template (emit_firstresult)
    app.connect("source-read", _toc_link_in_the_book)
    app.connect("build-finished", _widget_fonts_where_pages_look)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}

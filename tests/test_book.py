"""The book builds offline, holds every chapter, and has no broken internal link.

Builds ``book/`` with Jupyter Book 1.x into a temporary directory (``--path-output``,
so the checkout is not touched), then reads the HTML: every
``notebooks/NN_*.ipynb`` is rendered and in the table of contents; every internal
``href``/``src`` points to a file that exists and, with a ``#fragment``, to an id in
it; the widget JavaScript is served from ``_static/`` and not from a CDN. A build
warning about a missing file or a broken reference fails the test.

Also here: the kernel-side behaviour of ``minidynamo.widgets.Stepper``, the widget
frame the book's widgets are built on (the browser side is in ``test_browser.py``).
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytestmark = pytest.mark.ch00

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
NOTEBOOKS = ROOT / "notebooks"
CHAPTER = re.compile(r"^\d\d_.+\.ipynb$")

# Warnings that mean something the book points to is not there.
MISSING = re.compile(
    r"nonexisting document|unknown document|not readable|image file not|undefined label|"
    r"reference target not found|xref_missing|does not exist|not found|"
    r"isn't included in any toctree|failed to import",
    re.IGNORECASE,
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def chapter_files() -> list[Path]:
    return sorted(p for p in NOTEBOOKS.glob("*.ipynb") if CHAPTER.match(p.name))


ARTIFACTS = ROOT / "test-artifacts"


def _sources_digest() -> str:
    """A hash of everything the book is built from (book/ and the chapters)."""
    digest = hashlib.sha256()
    files = [p for p in BOOK.rglob("*") if "_build" not in p.parts and p.is_file() and not p.is_symlink()]
    files += chapter_files()
    for path in sorted(files):
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def build_book() -> tuple[int, str, Path]:
    """Build the book into test-artifacts/book/ (once per source state); return (rc, log, html dir).

    ``test_browser.py`` calls this too; a file lock makes the second caller (another
    xdist worker) wait for the first build and reuse it instead of building again.
    """
    from filelock import FileLock

    out = ARTIFACTS / "book"
    ARTIFACTS.mkdir(exist_ok=True)
    with FileLock(str(ARTIFACTS / "book.lock"), timeout=600):
        digest = _sources_digest()
        stamp, log_file = out / "sources.sha256", out / "build.log"
        if stamp.is_file() and stamp.read_text() == digest and log_file.is_file():
            rc_text, _, log = log_file.read_text(encoding="utf-8").partition("\n")
            return int(rc_text), log, out / "_build" / "html"
        jb = shutil.which("jupyter-book", path=str(Path(sys.executable).parent)) or shutil.which("jupyter-book")
        if jb is None:
            pytest.fail("jupyter-book is not installed (pip install -e '.[dev]')")
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        proc = subprocess.run(
            [jb, "build", str(BOOK), "--path-output", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=ROOT,
        )
        log = _ANSI.sub("", proc.stdout + proc.stderr)
        log_file.write_text(f"{proc.returncode}\n{log}", encoding="utf-8")
        stamp.write_text(digest)
        return proc.returncode, log, out / "_build" / "html"


@pytest.fixture(scope="module")
def built():
    return build_book()


def test_book_builds(built):
    rc, log, html_dir = built
    assert rc == 0, f"jupyter-book build failed:\n{log[-4000:]}"
    assert (html_dir / "intro.html").is_file(), "the front page was not written"


def test_no_warning_about_a_missing_file_or_reference(built):
    _rc, log, _html_dir = built
    warnings = [line for line in log.splitlines() if "WARNING" in line]
    missing = [line for line in warnings if MISSING.search(line)]
    assert not missing, "the book points to things that are not there:\n" + "\n".join(missing)


def test_book_symlink_is_committed_as_a_link():
    link = BOOK / "notebooks"
    assert link.is_symlink() and link.resolve() == NOTEBOOKS.resolve(), (
        "book/notebooks must be a symlink to ../notebooks (that is how the chapters enter the book)"
    )


def test_every_chapter_is_rendered_and_in_the_toc(built):
    _rc, _log, html_dir = built
    chapters = chapter_files()
    assert chapters, "no notebooks/NN_*.ipynb found"
    front = (html_dir / "intro.html").read_text(encoding="utf-8")
    for nb in chapters:
        page = html_dir / "notebooks" / f"{nb.stem}.html"
        assert page.is_file(), f"{nb.name} was not rendered into the book (expected {page.name})"
        assert f"notebooks/{nb.stem}.html" in front, f"{nb.name} is not in the book's table of contents"


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.scripts: list[dict] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            if attrs.get(key):
                self.links.append(attrs[key])
        if tag == "script":
            self.scripts.append(attrs)


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _pages(html_dir: Path) -> list[Path]:
    return sorted(p for p in html_dir.rglob("*.html") if "_static" not in p.parts and "_sources" not in p.parts)


def test_no_broken_internal_link(built):
    _rc, _log, html_dir = built
    parsed = {page: _parse(page) for page in _pages(html_dir)}
    broken = []
    for page, links in parsed.items():
        for link in links.links:
            parts = urlsplit(html.unescape(link))
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:", "data:")):
                continue
            target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
            if not target.exists():
                broken.append(f"{page.relative_to(html_dir)}: {link} (no file)")
                continue
            if parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(html_dir)}: {link} (no id {parts.fragment!r})")
    assert not broken, "broken internal links:\n" + "\n".join(sorted(set(broken)))


def _has_widget_state(nb: Path) -> bool:
    meta = json.loads(nb.read_text(encoding="utf-8")).get("metadata", {})
    state = meta.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return bool(state.get("state"))


def test_every_widget_view_has_saved_state():
    """A widget shows in the book only if the notebook was saved with its state."""
    lacking = []
    for nb in chapter_files():
        data = json.loads(nb.read_text(encoding="utf-8"))
        state = data.get("metadata", {}).get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
        models = state.get("state", {})
        for cell in data.get("cells", []):
            for out in cell.get("outputs", []):
                view = out.get("data", {}).get("application/vnd.jupyter.widget-view+json")
                if view and view.get("model_id") not in models:
                    lacking.append(nb.name)
    assert not lacking, (
        f"saved without widget state: {sorted(set(lacking))}; re-run with jupyter nbconvert --to notebook "
        "--execute --inplace --ExecutePreprocessor.store_widget_state=True"
    )


def test_widget_pages_load_the_widget_manager_locally(built):
    _rc, _log, html_dir = built
    assert _has_widget_state(NOTEBOOKS / "00_welcome.ipynb"), (
        "00_welcome.ipynb was saved without widget state; re-run it with "
        "jupyter nbconvert --execute --inplace --ExecutePreprocessor.store_widget_state=True"
    )
    checked = 0
    for nb in chapter_files():
        if not _has_widget_state(nb):
            continue
        page = html_dir / "notebooks" / f"{nb.stem}.html"
        links = _parse(page)
        sources = [urlsplit(s.get("src", "")).path for s in links.scripts]
        # Exactly once: loaded twice, the manager renders every widget twice.
        assert sum(s.endswith("_static/widgets/embed-amd.js") for s in sources) == 1, (
            f"{page.name} must load the local widget manager exactly once: {sources}"
        )
        assert sum(s.endswith("_static/widgets/require.js") for s in sources) == 1, f"{page.name}: require.js once"
        remote = [s.get("src") for s in links.scripts if urlsplit(s.get("src", "")).scheme in ("http", "https")]
        assert not remote, f"{page.name} loads scripts from the network: {remote}"
        assert any(s.get("type") == "application/vnd.jupyter.widget-state+json" for s in links.scripts), (
            f"{page.name}: the widget state was not embedded"
        )
        checked += 1
    assert checked >= 1


# -- the Stepper, kernel side -----------------------------------------------------------


def test_stepper_repr_follows_the_step():
    from minidynamo.widgets import Stepper, pre

    s = Stepper(["<p>first &amp; one</p>", pre("a < b"), "<b>three</b>"], "demo", labels=["x", "y", "z"])
    assert repr(s) == "Stepper('demo', step 1/3: x: first & one)"
    s.next()
    assert repr(s) == "Stepper('demo', step 2/3: y: a < b)"
    assert s.stack.selected_index == 1 and s.slider.value == 1
    s.next().next()
    assert s.index == 2, "Next on the last step stays there"
    s.prev_button.click()
    assert s.index == 1
    assert s._repr_mimebundle_()["text/plain"] == repr(s)


def test_stepper_links_slider_to_stack_in_the_browser():
    import ipywidgets as widgets

    from minidynamo.widgets import Stepper

    s = Stepper(["a", "b"], "t")
    from ipywidgets.widgets.widget_link import Link

    links = [w for w in list(widgets.Widget.widgets.values()) if isinstance(w, Link)]
    assert any(
        l.source[0] is s.slider and l.source[1] == "value" and l.target[0] is s.stack and l.target[1] == "selected_index"
        for l in links
    ), "the slider must be jslinked to the stack (stepping in a static page needs it)"


def test_stepper_snapshot_has_every_step_in_order():
    from minidynamo.widgets import Stepper

    s = Stepper([f"<i>s{i}</i>" for i in range(4)], "four")
    page = s.snapshot_html()
    assert page.startswith("<!DOCTYPE html>")
    positions = [page.index(f"<i>s{i}</i>") for i in range(4)]
    assert positions == sorted(positions)
    assert "step 4/4" in page


@pytest.mark.parametrize(
    "steps,labels,error",
    [([], None, ValueError), ([1], None, TypeError), (["a"], ["x", "y"], ValueError)],
)
def test_stepper_rejects_bad_input(steps, labels, error):
    from minidynamo.widgets import Stepper

    with pytest.raises(error, match="Stepper"):
        Stepper(steps, "bad", labels=labels)


def test_kernel_only_controls_are_marked_and_no_icon_fonts_are_needed():
    """Note [Kernel-only controls]: buttons and checkboxes that run Python carry the class the book greys out."""
    from minidynamo.widgets.dispatch_explorer import DispatchKeyExplorer
    from minidynamo.widgets.stepper import KERNEL_ONLY, Stepper

    s = Stepper(["<p>a</p>", "<p>b</p>"])
    for button in (s.prev_button, s.next_button):
        assert KERNEL_ONLY in button._dom_classes and not button.icon
    assert KERNEL_ONLY not in s.slider._dom_classes  # the slider works without a kernel (jslink)
    explorer = DispatchKeyExplorer()
    assert all(KERNEL_ONLY in c._dom_classes for c in [*explorer.boxes.values(), explorer.op_menu])
    css = (BOOK / "_static" / "static-widgets.css").read_text()
    assert f".{KERNEL_ONLY}" in css and "overflow-x: auto" in css


def test_book_pages_load_the_static_widget_css_and_chapters_link_next_and_toc(built):
    _rc, _log, html_dir = built
    page = (html_dir / "notebooks" / "07_the_dispatcher.html").read_text(encoding="utf-8")
    assert "static-widgets.css" in page
    assert 'href="08_decompositions.html"' in page and 'href="../intro.html"' in page
    assert (html_dir / "solutions.html").exists()


def test_every_chapter_ends_with_next_and_toc_links():
    """The last cell of each chapter links the next chapter (the last one says it is last) and the contents."""
    chapters = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    problems = []
    for i, nb in enumerate(chapters):
        last = "".join(json.loads(nb.read_text(encoding="utf-8"))["cells"][-1]["source"])
        wanted = f"]({chapters[i + 1].name})" if i + 1 < len(chapters) else "the last chapter"
        if "**Next:**" not in last or wanted not in last or "](../book/intro.md)" not in last:
            problems.append(f"{nb.name}: last cell lacks **Next:** {wanted} and the contents link")
    assert not problems, problems


def test_prev_next_buttons_walk_the_chapters_in_order(built):
    """The theme's Prev/Next footer of each chapter page points at its neighbours, files that exist."""
    _rc, _log, html_dir = built
    pages = sorted((html_dir / "notebooks").glob("[0-9][0-9]_*.html"))
    assert len(pages) == len(list(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")))
    for i, page in enumerate(pages):
        links = dict(re.findall(r'<a class="(left-prev|right-next)"\s+href="([^"#]+)', page.read_text(encoding="utf-8")))
        assert links.get("left-prev") == (pages[i - 1].name if i else "../intro.html"), page.name
        if i + 1 < len(pages):
            assert links.get("right-next") == pages[i + 1].name, page.name
        assert all((page.parent / href).is_file() for href in links.values()), (page.name, links)

"""Widgets in a real browser: in JupyterLab with a kernel, and in the built book without one.

Headless chromium (Debian's, driven by playwright) opens:

1. JupyterLab, started on 127.0.0.1 over a temporary copy of every chapter whose
   saved outputs hold a widget. Each notebook is run top to bottom; every widget
   must render its controls and react to a slider move or a click (the content on
   show changes the way the widget's state says). A screenshot per widget goes to
   ``test-artifacts/``.
2. The built book, from ``file://``, with no kernel: in chapter 00 moving the
   stepper's slider turns the page (jslink), and so do its Prev/Next buttons; one search
   box is on show; every chapter page with widgets renders them; no page requests
   anything from the network, and no page logs a console error or warning.

Without chromium the tests skip and say why; with ``CI=true`` a missing browser fails.
MINIDYNAMO_BROWSER_CHAPTERS="07,13" limits the JupyterLab part to those chapters (plus 00).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.ch00]

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
ARTIFACTS = ROOT / "test-artifacts"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
RENDER_TIMEOUT_MS = 30_000
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _chromium() -> str:
    path = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path, why = None, "playwright is not installed (pip install -e '.[dev]')"
    else:
        why = "chromium is not installed (apt-get install chromium)"
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests need a browser in CI: {why}")
        pytest.skip(why)
    return path


def widget_notebooks(only: str | None = None) -> list[Path]:
    """Chapters whose committed outputs contain at least one widget view.

    ``only``: comma-separated chapter numbers ("00,07") to keep; JupyterLab runs each
    chapter again, so CI can narrow the Lab test with MINIDYNAMO_BROWSER_CHAPTERS.
    """
    keep = {n.strip().zfill(2) for n in only.split(",")} if only else None
    found = []
    for nb in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        if keep is not None and nb.name[:2] not in keep | {"00"}:
            continue
        cells = json.loads(nb.read_text(encoding="utf-8")).get("cells", [])
        if any(WIDGET_VIEW in out.get("data", {}) for cell in cells for out in cell.get("outputs", [])):
            found.append(nb)
    return found


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """A JupyterLab server over a temporary copy of the widget chapters; yields (base url, token, names)."""
    _chromium()
    root = tmp_path_factory.mktemp("lab_root")
    config = tmp_path_factory.mktemp("lab_config")
    # Turn off the news pop-up, which could cover the widgets in a screenshot.
    (config / "labconfig").mkdir()
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    # Render every cell (JupyterLab 4 otherwise virtualizes cells that are off screen,
    # and a widget far down a chapter is then "not visible").
    settings = config / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    # Server extensions the test does not need cost start-up time.
    (config / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"jupyter_lsp": False, "jupyter_server_terminals": False}}})
    )
    # The root mirrors the repository, so that paths a chapter uses (``../tests``) hold;
    # the notebooks themselves are copies, so JupyterLab's autosave cannot touch ours.
    for item in ROOT.iterdir():
        if item.name not in {".git", ".venv", "notebooks", "test-artifacts"}:
            (root / item.name).symlink_to(item)
    shutil.copytree(NOTEBOOKS, root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    names = [f"notebooks/{nb.name}" for nb in widget_notebooks(os.environ.get("MINIDYNAMO_BROWSER_CHAPTERS"))]
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config), JUPYTER_RUNTIME_DIR=str(config / "runtime"))
    log = open(config / "lab.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
            "--LabApp.expose_app_in_browser=True", f"--LabApp.workspaces_dir={config / 'workspaces'}",
            "--LabApp.news_url=None", "--allow-root", f"--LabApp.user_settings_dir={config / 'settings'}",
        ],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root / "notebooks",
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("JupyterLab did not start:\n" + (config / "lab.log").read_text()[-3000:])
            time.sleep(0.5)
        yield base, token, names
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _step_text(widget) -> str:
    return widget.locator(".minidynamo-step").first.inner_text()


def _move_slider(widget, page) -> None:
    """Move the first slider of ``widget`` one step with the keyboard (as a reader's arrow key)."""
    handle = widget.locator(".noUi-handle").first
    before = handle.get_attribute("aria-valuenow")
    handle.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_timeout(100)
    if handle.get_attribute("aria-valuenow") == before:  # already on the last step
        page.keyboard.press("ArrowLeft")


def _check_widget(output, page, shot: Path) -> None:
    """The widget view in ``output`` shows controls and reacts to the reader."""
    from playwright.sync_api import Error as PlaywrightError, expect

    # A view renders after its model arrives from the kernel; on a busy machine (CI has two
    # cores and a kernel per chapter) that can lag the end of the run: wait for it.
    try:
        output.scroll_into_view_if_needed(timeout=RENDER_TIMEOUT_MS)
        expect(output).to_be_visible(timeout=RENDER_TIMEOUT_MS)
        expect(output).to_contain_text(re.compile(r"\S"), timeout=RENDER_TIMEOUT_MS)
    except (AssertionError, PlaywrightError) as e:
        page.screenshot(path=str(shot.with_name(shot.stem + "-page.png")), full_page=True)
        pytest.fail(f"{shot.stem}: the widget rendered nothing within {RENDER_TIMEOUT_MS // 1000} s ({e})")
    output.evaluate("el => el.scrollIntoView({block: 'center'})")
    controls = output.locator(".widget-slider, .jupyter-button, .widget-dropdown, .widget-toggle-buttons, .widget-checkbox")
    if controls.count() == 0:  # a display-only widget (HTML, Label...): nothing to click
        output.screenshot(path=str(shot))
        return
    stepper = output.locator(".minidynamo-stepper")
    if stepper.count():
        stepper = stepper.first
        before = _step_text(stepper)
        if re.search(r"step 1/1\b", before):  # one step: nothing to move to
            output.screenshot(path=str(shot))
            return
        _move_slider(stepper, page)
        page.wait_for_function(
            "([el, before]) => el.querySelector('.minidynamo-step').innerText !== before",
            arg=[stepper.element_handle(), before],
            timeout=10_000,
        )
        after_slider = _step_text(stepper)
        assert after_slider != before
        # Prev/Next talk to the kernel; the slider and the page follow.
        button = stepper.locator(".jupyter-button", has_text="Prev" if "step 1/" not in after_slider else "Next")
        button.first.click()
        page.wait_for_function(
            "([el, before]) => el.querySelector('.minidynamo-step').innerText !== before",
            arg=[stepper.element_handle(), after_slider],
            timeout=10_000,
        )
    else:
        before = output.inner_html()
        if output.locator(".noUi-handle").count():
            _move_slider(output, page)
        else:
            controls.first.click()
        page.wait_for_function(
            "([el, before]) => el.innerHTML !== before", arg=[output.element_handle(), before], timeout=10_000
        )
    output.screenshot(path=str(shot))


def _workspace(name: str) -> str:
    """A JupyterLab workspace name of the chapter's own (letters, digits, ``-`` and ``_``)."""
    return "ch-" + re.sub(r"[^A-Za-z0-9_-]", "-", Path(name).stem)


def test_widgets_render_and_react_in_jupyterlab(browser, jupyterlab):
    base, token, names = jupyterlab
    assert "notebooks/00_welcome.ipynb" in names, "00_welcome.ipynb must hold the Stepper demo widget"
    ARTIFACTS.mkdir(exist_ok=True)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pages = {}
    try:
        # Start every notebook first, so their kernels run side by side. Each page gets a
        # workspace of its own: in the shared default one, a page restores the notebooks that
        # other pages opened, and a locator could find a widget in a hidden tab.
        for name in names:
            page = context.new_page()
            page.goto(f"{base}/lab/workspaces/{_workspace(name)}/tree/{name}?token={token}")
            page.wait_for_function(
                "(name) => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
                " const k = w && w.context && w.context.path === name && w.sessionContext"
                " && w.sessionContext.session && w.sessionContext.session.kernel;"
                " return k && k.status === 'idle'; }",
                arg=name,
                timeout=60_000,
            )
            page.evaluate("() => { window.__ran = window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            pages[name] = page
        for name, page in pages.items():
            page.bring_to_front()
            # Everything below looks inside this notebook's own panel only.
            panel_id = page.evaluate("() => window.jupyterapp.shell.currentWidget.id")
            panel = page.locator(f"[id='{panel_id}']")
            page.wait_for_function(
                "(id) => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'"
                " && ![...document.getElementById(id).querySelectorAll('.jp-InputArea-prompt')]"
                ".some(p => p.innerText.includes('*'))",
                arg=panel_id,
                timeout=180_000,
            )
            errors = panel.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.error"]')
            assert errors.count() == 0, f"{name}: a cell raised:\n{errors.first.inner_text()[:2000]}"
            ok = page.evaluate("() => window.__ran")
            assert ok is not False, f"{name}: JupyterLab reports that running all cells failed"
            # A widget view's output area holds the view's element, classed "jupyter-widgets".
            outputs = panel.locator(".jp-OutputArea-child:has(.jupyter-widgets)")
            if outputs.count() == 0:
                page.screenshot(path=str(ARTIFACTS / f"lab-{Path(name).stem}-page.png"), full_page=True)
            assert outputs.count() > 0, f"{name}: no widget was displayed after running the notebook"
            for i in range(outputs.count()):
                _check_widget(outputs.nth(i), page, ARTIFACTS / f"lab-{Path(name).stem}-widget{i}.png")
    finally:
        context.close()


def test_book_page_steps_without_a_kernel(browser):
    sys.path.insert(0, str(Path(__file__).parent))
    from test_book import build_book

    rc, log, html_dir = build_book()
    assert rc == 0, f"the book did not build:\n{log[-3000:]}"
    page_file = html_dir / "notebooks" / "00_welcome.html"
    assert page_file.is_file()
    ARTIFACTS.mkdir(exist_ok=True)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    remote = []

    def route(r):
        url = r.request.url
        if url.startswith(("file:", "data:", "blob:")):
            r.continue_()
        else:
            remote.append(url)
            r.abort()

    context.route("**/*", route)
    console: list[str] = []  # every console error or warning and uncaught exception, on every page opened

    def watch(page, name):
        page.on("console", lambda m: console.append(f"{name}: console.{m.type}: {m.text}")
                if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: console.append(f"{name}: uncaught {e}"))
        return page

    try:
        page = watch(context.new_page(), "00_welcome")
        page.goto(page_file.as_uri())
        stepper = page.locator(".minidynamo-stepper").first
        stepper.wait_for(timeout=30_000)
        page.wait_for_timeout(500)
        assert page.locator(".minidynamo-stepper").count() == 1, "chapter 00 has one stepper; it rendered more than once"
        assert stepper.locator(".noUi-handle").count() == 1, "the stepper's slider did not render"
        before = _step_text(stepper)
        assert "step 1/" in before
        _move_slider(stepper, page)
        page.wait_for_function(
            "([el, before]) => el.querySelector('.minidynamo-step').innerText !== before",
            arg=[stepper.element_handle(), before],
            timeout=10_000,
        )
        assert "step 2/" in _step_text(stepper), "the slider moved but the page did not turn to step 2"
        stepper.screenshot(path=str(ARTIFACTS / "book-00_welcome-stepper.png"))
        # Prev/Next work without a kernel too (book/_static/widgets/stepper-buttons.js): they move the slider
        handle = stepper.locator(".noUi-handle").first
        for name, expected in (("Next", "2"), ("Prev", "1")):
            button = stepper.get_by_role("button", name=name)
            assert button.is_enabled() and button.evaluate("e => getComputedStyle(e).pointerEvents") != "none", (
                f"the stepper's {name} button is greyed in the book")
            before = handle.get_attribute("aria-valuenow")
            button.click()
            page.wait_for_function("([h, v]) => h.getAttribute('aria-valuenow') !== v",
                                   arg=[handle.element_handle(), before], timeout=10_000)
        assert "step 2/" in _step_text(stepper), "Next then Prev should come back to step 2"
        fields = page.locator(".search-button-field")
        visible = sum(fields.nth(i).is_visible() for i in range(fields.count()))
        assert visible == 1, f"{visible} search boxes on show (the header's only)"
        assert not remote, f"the book page tried to reach the network: {remote}"

        # Every other chapter with widgets: each saved widget view renders in its page.
        for nb in widget_notebooks():
            cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
            views = sum(WIDGET_VIEW in o.get("data", {}) for c in cells for o in c.get("outputs", []))
            other = watch(context.new_page(), nb.stem)
            other.goto((html_dir / "notebooks" / f"{nb.stem}.html").as_uri())
            roots = other.locator(".cell_output .jupyter-widgets")
            roots.first.wait_for(timeout=30_000)
            assert roots.count() >= views, f"{nb.stem}.html: {views} widget views saved, fewer rendered"
            roots.first.screenshot(path=str(ARTIFACTS / f"book-{nb.stem}-widget0.png"))
            other.close()
        assert not remote, f"a book page tried to reach the network: {remote}"
        # Every chapter page (widgets or not) opens without a console error or warning (the widget
        # bundle's schema compile warned in strict mode once: book/_static/widgets/README.md)
        for nb in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
            other = watch(context.new_page(), nb.stem)
            other.goto((html_dir / "notebooks" / f"{nb.stem}.html").as_uri())
            other.wait_for_timeout(1000)
            other.close()
        assert not console, "console errors or warnings in the book:\n" + "\n".join(console[:20])
    finally:
        context.close()

"""A step-through widget: pre-rendered steps, a slider, Prev/Next, a static snapshot.

Place in the pipeline: none; this is the frame the chapters' widgets are built on
(``DispatchKeyExplorer``, ``PassTimeline``). The widgets read the event log,
render each step to an HTML string once, and hand the list to :class:`Stepper`.

There is no PyTorch counterpart: the nearest thing is ``TORCH_LOGS`` output and
``tlparse``'s HTML report, which show the same artifacts as a static page.

Note [Stepping without a kernel]
    A book page built from a notebook has no Python kernel behind it. The steps are
    therefore rendered in Python up front, put in an ``ipywidgets.Stack`` (one
    ``HTML`` child per step), and the stack's ``selected_index`` is tied to the
    slider's ``value`` with ``widgets.jslink``. A jslink lives in the browser, so
    moving the slider turns the page in a static HTML export too, as long as the
    notebook was saved with its widget state. The Prev/Next buttons change the
    slider from Python, so they need a kernel; the slider does not.

Note [A repr nbval can compare]
    nbval ignores widget views but compares the ``text/plain`` part of every output.
    ipywidgets' default repr lists the children (and truncates at 110 characters),
    so we give the stepper its own one-line repr: the title, the current step and
    that step's text with the tags stripped, e.g.
    ``Stepper('dispatch of add', step 1/7: Python key -> ...)``. It depends only on
    the steps and the index, so it is the same on every run.
"""

from __future__ import annotations

import html as _html
import re
from typing import Sequence

import ipywidgets as widgets

__all__ = ["Stepper", "html_to_text", "pre"]

# Note [Kernel-only controls]
#     A control whose effect runs in Python (a button's on_click, a checkbox that
#     re-runs a trace) cannot do anything in the static book. Such controls carry
#     this CSS class; the book's stylesheet (book/_static/static-widgets.css) shows
#     them disabled there, while in a live notebook they work as usual. The slider
#     is not one of them: its link to the page runs in the browser.
KERNEL_ONLY = "minidynamo-kernel-only"

_TAG = re.compile(r"<[^>]+>")
_BLOCK_END = re.compile(r"</(p|div|li|tr|h\d|pre)>|<br\s*/?>", re.IGNORECASE)
_SPACE = re.compile(r"\s+")

# The text of one step in the repr is cut here, so a long graph keeps the repr one line.
REPR_TEXT_LIMIT = 160


def html_to_text(fragment: str) -> str:
    """Plain text of an HTML fragment: tags dropped, entities decoded, spaces collapsed."""
    text = _BLOCK_END.sub(" ", fragment)
    text = _TAG.sub("", text)
    text = _html.unescape(text)
    return _SPACE.sub(" ", text).strip()


def pre(text: str) -> str:
    """An HTML ``<pre>`` block showing ``text`` verbatim (escaped): for graphs and code."""
    return f'<pre style="margin:0">{_html.escape(text)}</pre>'


class Stepper(widgets.VBox):
    """Step through pre-rendered HTML steps with a slider (works offline) and Prev/Next.

    ``steps`` is a list of HTML strings; ``labels`` (optional, one per step) names each
    step in its heading and in the snapshot. The parts are attributes so that other
    widgets can extend the layout: ``slider``, ``stack``, ``prev_button``,
    ``next_button``, ``header``.
    """

    def __init__(self, steps: Sequence[str], title: str = "", labels: Sequence[str] | None = None, **kwargs):
        steps = list(steps)
        if not steps:
            raise ValueError(f"Stepper({title!r}) needs at least one step; got an empty list")
        for i, step in enumerate(steps):
            if not isinstance(step, str):
                raise TypeError(f"Stepper({title!r}): step {i} must be an HTML string, got {type(step).__name__}")
        if labels is not None:
            labels = [str(label) for label in labels]
            if len(labels) != len(steps):
                raise ValueError(
                    f"Stepper({title!r}): {len(labels)} labels for {len(steps)} steps; give one label per step"
                )
        self.steps: list[str] = steps
        self.labels: list[str] | None = labels
        self.title: str = str(title)

        n = len(steps)
        self.header = widgets.HTML(f"<b>{_html.escape(self.title)}</b>" if self.title else "")
        self.stack = widgets.Stack([widgets.HTML(self._page(i)) for i in range(n)], selected_index=0)
        self.slider = widgets.IntSlider(
            value=0, min=0, max=n - 1, step=1, description="step", readout=False, continuous_update=True
        )
        # Note [Stepping without a kernel]: the link runs in the browser.
        self._link = widgets.jslink((self.slider, "value"), (self.stack, "selected_index"))
        # Text arrows, not Font Awesome icons: nothing to load in an offline page. The buttons
        # run Python, so the book (no kernel) shows them disabled (Note [Kernel-only controls]).
        self.prev_button = widgets.Button(description="\u25c0 Prev", layout=widgets.Layout(width="80px"))
        self.next_button = widgets.Button(description="Next \u25b6", layout=widgets.Layout(width="80px"))
        for button in (self.prev_button, self.next_button):
            button.add_class(KERNEL_ONLY)
        self.prev_button.on_click(lambda _b: self.prev())
        self.next_button.on_click(lambda _b: self.next())
        controls = widgets.HBox([self.prev_button, self.slider, self.next_button])
        super().__init__([self.header, controls, self.stack], **kwargs)
        self.add_class("minidynamo-stepper")

    # -- stepping (kernel side) --------------------------------------------------
    @property
    def index(self) -> int:
        """The current step, 0-based."""
        return int(self.slider.value)

    @index.setter
    def index(self, i: int) -> None:
        self.go(i)

    def go(self, i: int) -> "Stepper":
        """Show step ``i`` (0-based); negative counts from the end like a list index."""
        n = len(self.steps)
        if not -n <= i < n:
            raise IndexError(f"Stepper({self.title!r}) has steps 0..{n - 1}; no step {i}")
        i %= n
        self.slider.value = i
        # jslink only acts in the browser; keep the Python side in step as well.
        self.stack.selected_index = i
        return self

    def next(self) -> "Stepper":
        """One step forward (stays on the last step)."""
        return self.go(min(self.index + 1, len(self.steps) - 1))

    def prev(self) -> "Stepper":
        """One step back (stays on the first step)."""
        return self.go(max(self.index - 1, 0))

    # -- text -----------------------------------------------------------------
    def label(self, i: int) -> str:
        """The heading of step ``i``: ``step 3/7`` plus its label if there is one."""
        head = f"step {i + 1}/{len(self.steps)}"
        return f"{head}: {self.labels[i]}" if self.labels else head

    def step_text(self, i: int | None = None) -> str:
        """Plain text of step ``i`` (default: the current one), label first."""
        i = self.index if i is None else i
        body = html_to_text(self.steps[i])
        if self.labels:
            body = f"{self.labels[i]}: {body}" if body else self.labels[i]
        return body

    def _page(self, i: int) -> str:
        return (
            f'<div class="minidynamo-step"><div style="color:#555;font-size:90%">'
            f"{_html.escape(self.label(i))}</div>{self.steps[i]}</div>"
        )

    # Note [A repr nbval can compare]
    def __repr__(self) -> str:
        text = self.step_text()
        if len(text) > REPR_TEXT_LIMIT:
            text = text[: REPR_TEXT_LIMIT - 3] + "..."
        return f"{type(self).__name__}({self.title!r}, step {self.index + 1}/{len(self.steps)}: {text})"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:  # no frontend that can show widgets
            bundle = {}
        bundle["text/plain"] = repr(self)
        return bundle

    # -- static snapshot --------------------------------------------------------
    def snapshot_html(self) -> str:
        """One static HTML page with every step in order (no JavaScript needed)."""
        parts = [
            "<!DOCTYPE html>",
            '<html><head><meta charset="utf-8">',
            f"<title>{_html.escape(self.title or type(self).__name__)}</title></head><body>",
            self.snapshot_fragment(),
            "</body></html>",
        ]
        return "\n".join(parts)

    def snapshot_fragment(self) -> str:
        """The body of :meth:`snapshot_html`: a ``<div>`` to put beside the widget in a notebook."""
        parts = ['<div class="minidynamo-stepper-snapshot">']
        if self.title:
            parts.append(f"<h4>{_html.escape(self.title)}</h4>")
        parts.append("<ol>")
        for i, step in enumerate(self.steps):
            parts.append(f"<li><div><b>{_html.escape(self.label(i))}</b></div>{step}</li>")
        parts.append("</ol></div>")
        return "\n".join(parts)

    def snapshot(self):
        """The snapshot as an ``IPython.display.HTML`` object, for a cell beside the widget."""
        from IPython.display import HTML

        return HTML(self.snapshot_fragment())

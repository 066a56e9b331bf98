"""PassTimeline: the FakeTensor passes of one compile, live while it runs, then step by step.

Place in the pipeline: beside it. It subscribes to ``minidynamo.events`` while
``md.compile(fn)(*inputs)`` runs and redraws a small table (ops per pass, the
current op) on every op event; afterwards it hands every op of every pass to a
:class:`~minidynamo.widgets.stepper.Stepper`, the passes side by side, with the ops
of the same user source line lit in all of them.

PyTorch has no such widget: the closest are ``TORCH_LOGS="+dynamo,aot"`` and
tlparse's report, which show the artifacts of each pass but not the passes' ops.

Note [Counting live updates]
    Every op event sets ``live.value`` (an ``ipywidgets.HTML`` trait), which is a
    state change the frontend receives at once, while the cell is still running.
    ``updates`` keeps (pass, op count) per change so a test can check that each
    pass really redrew the widget during the compile, not only at the end.

Note [Lines of the AOT passes]
    Dynamo's op events carry the user's source line, and so do the forward ops
    of the AOT passes behind ``md.compile`` (Note [AOT ops carry Dynamo's source
    lines], ``aot/aot_autograd.py``); backward ops carry none and stay unlit.
    A pass with no line at all (``aot_function`` on a plain function) gets
    inferred ones: walk its ops in order and match each against the Dynamo ops
    by op name (forward ops come in the same order); a matched op takes that
    line and is marked "inferred".
"""

from __future__ import annotations

import contextlib
import html as _html
from typing import Iterator, Sequence

import ipywidgets as widgets

from minidynamo import events
from minidynamo.widgets.stepper import Stepper

__all__ = ["PassTimeline", "TimelineOp", "timeline_ops"]

PASS_ORDER = (events.DYNAMO, events.AOT_METADATA, events.AOT_JOINT)
_LIT = "background:#ffe08a"
_CURRENT = "background:#f4a259;font-weight:bold"


class TimelineOp:
    """One op of one pass: its name, line (maybe inferred) and position in the pass."""

    __slots__ = ("pass_name", "op", "line", "inferred", "index")

    def __init__(self, pass_name: str, op: str, line: int | None, index: int, inferred: bool = False):
        self.pass_name, self.op, self.line, self.index, self.inferred = pass_name, op, line, index, inferred

    def __repr__(self) -> str:
        where = f" line {self.line}{'?' if self.inferred else ''}" if self.line is not None else ""
        return f"{self.pass_name}[{self.index}] {self.op}{where}"


def timeline_ops(log: Sequence[events.Event]) -> dict[str, list[TimelineOp]]:
    """The op events of ``log`` grouped by pass (in order), lines inferred per Note [Lines of the AOT passes]."""
    by_pass: dict[str, list[TimelineOp]] = {}
    for e in log:
        if e.kind != "op" or e.pass_name is None:
            continue
        ops = by_pass.setdefault(e.pass_name, [])
        ops.append(TimelineOp(e.pass_name, e.op, e.line, len(ops)))
    dynamo_ops = by_pass.get(events.DYNAMO, [])
    for name, ops in by_pass.items():
        if name == events.DYNAMO or any(op.line is not None for op in ops):
            continue
        cursor = 0
        for op in ops:
            if op.line is not None:
                continue
            for j in range(cursor, len(dynamo_ops)):
                if dynamo_ops[j].op == op.op:
                    op.line, op.inferred, cursor = dynamo_ops[j].line, True, j + 1
                    break
    ordered = {p: by_pass[p] for p in PASS_ORDER if p in by_pass}
    ordered.update({p: ops for p, ops in by_pass.items() if p not in ordered})
    return ordered


class PassTimeline(widgets.VBox):
    """Watch a compile's FakeTensor passes live (``with timeline.watch(): ...``), then step through them.

    ``PassTimeline.from_events(log)`` builds the stepping part from a recorded log.
    """

    def __init__(self, title: str = "FakeTensor passes", **kwargs):
        self.title = title
        self.live = widgets.HTML(self._live_html({}, None))
        self.updates: list[tuple[str, int]] = []  # Note [Counting live updates]
        self.events_log: list[events.Event] = []
        self.stepper: Stepper | None = None
        self.passes: dict[str, list[TimelineOp]] = {}
        self._all_ops: list[TimelineOp] = []
        super().__init__([self.live], **kwargs)
        self.add_class("minidynamo-pass-timeline")

    # -- live -----------------------------------------------------------------
    @contextlib.contextmanager
    def watch(self) -> Iterator["PassTimeline"]:
        """Redraw on every op event emitted inside the block; build the stepper when it ends."""
        counts: dict[str, int] = {}

        def on_event(event: events.Event) -> None:
            self.events_log.append(event)
            if event.kind != "op" or event.pass_name is None:
                return
            counts[event.pass_name] = counts.get(event.pass_name, 0) + 1
            self.live.value = self._live_html(counts, event)
            self.updates.append((event.pass_name, counts[event.pass_name]))

        with events.subscribe(on_event):
            yield self
        self._build(self.events_log)

    def _live_html(self, counts: dict[str, int], current: events.Event | None) -> str:
        names = list(PASS_ORDER) + [p for p in counts if p not in PASS_ORDER]
        cells = []
        for name in names:
            style = _CURRENT if current is not None and current.pass_name == name else ""
            cells.append(f'<td style="padding:2px 8px;{style}">{name}: {counts.get(name, 0)} ops</td>')
        now = ""
        if current is not None:
            where = f" (line {current.line})" if current.line is not None else ""
            now = f"<div>now: <code>{_html.escape(current.op or '')}</code>{where}</div>"
        return f"<table><tr>{''.join(cells)}</tr></table>{now}"

    # -- stepping -------------------------------------------------------------
    @classmethod
    def from_events(cls, log: Sequence[events.Event], title: str = "FakeTensor passes") -> "PassTimeline":
        timeline = cls(title)
        timeline.events_log = list(log)
        timeline._build(timeline.events_log)
        return timeline

    def counts(self) -> dict[str, int]:
        """Ops per pass, passes in pipeline order."""
        return {name: len(ops) for name, ops in self.passes.items()}

    def _build(self, log: Sequence[events.Event]) -> None:
        self.passes = timeline_ops(log)
        self._all_ops = [op for ops in self.passes.values() for op in ops]
        if not self._all_ops:
            self.live.value = "<i>no FakeTensor op events were recorded</i>"
            return
        counts = {name: len(ops) for name, ops in self.passes.items()}
        self.live.value = self._live_html(counts, None)
        steps = [self._render(op) for op in self._all_ops]
        labels = [repr(op) for op in self._all_ops]
        self.stepper = Stepper(steps, title=self.title, labels=labels)
        self.children = (self.live, self.stepper)

    def _render(self, current: TimelineOp) -> str:
        columns = []
        for name, ops in self.passes.items():
            rows = []
            for op in ops:
                if op is current:
                    style = _CURRENT
                elif current.line is not None and op.line == current.line:
                    style = _LIT
                else:
                    style = ""
                line = f"{op.line}{'?' if op.inferred else ''}" if op.line is not None else ""
                rows.append(
                    f'<tr style="{style}"><td style="color:#888">{line}</td>'
                    f"<td><code>{_html.escape(op.op)}</code></td></tr>"
                )
            columns.append(
                f'<td style="vertical-align:top;padding:0 10px"><b>{name}</b> ({len(ops)} ops)'
                f"<table>{''.join(rows)}</table></td>"
            )
        return f"<table><tr>{''.join(columns)}</tr></table>"

    def go(self, i: int) -> "PassTimeline":
        if self.stepper is None:
            raise RuntimeError("PassTimeline has no steps yet: compile something inside `with timeline.watch():`")
        self.stepper.go(i)
        return self

    def snapshot(self):
        """A static HTML snapshot of every step (for a page without a kernel)."""
        if self.stepper is None:
            from IPython.display import HTML

            return HTML(self.live.value)
        return self.stepper.snapshot()

    # Note [A repr nbval can compare] (stepper.py)
    def __repr__(self) -> str:
        counts = ", ".join(f"{name}={n}" for name, n in self.counts().items()) or "no ops yet"
        if self.stepper is None:
            return f"PassTimeline({self.title!r}: {counts})"
        op = self._all_ops[self.stepper.index]
        return f"PassTimeline({self.title!r}: {counts}; step {self.stepper.index + 1}/{len(self._all_ops)}: {op!r})"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs)
        if bundle is None:
            bundle = {}
        bundle["text/plain"] = repr(self)
        return bundle

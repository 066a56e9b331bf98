"""DispatchKeyExplorer: pick a tensor and an op, step through the handlers that really ran.

Place in the pipeline: beside it, for chapter 07. Everything it shows comes from
``minidynamo.dispatch``: the key set from ``dispatch.keys`` and the steps from
``dispatch.trace`` (each step written by the kernel, mode or hook that ran), never
from a hand-written list. The stepping is :class:`minidynamo.widgets.stepper.Stepper`.

Note [What works without a kernel]
    The steps of the chosen configuration are rendered up front, so the slider
    steps through them in a static HTML page (see Note [Stepping without a kernel]
    in stepper.py). Changing a flag or the op re-runs ``dispatch.trace``, which needs
    a live Python kernel; the snapshot beside the widget shows the saved steps.
"""

from __future__ import annotations

import contextlib
import html

import ipywidgets as widgets
import torch

from minidynamo import dispatch
from minidynamo.widgets.stepper import KERNEL_ONLY, Stepper

__all__ = ["DispatchKeyExplorer", "OPS", "FLAGS", "explore"]

# "fake" and "functional" are minidynamo's own FakeTensor and FunctionalTensor (both
# Python subclasses: they sit at the Python key); "torch_functional" is torch's C++
# functional wrapper, which carries the Functionalize key instead.
FLAGS = ("requires_grad", "fake", "functional", "torch_functional", "inference", "mode")

# The op choices: which probe kernels are registered (or a plain aten op).
OPS = {
    "probe (every probe kernel)": dispatch.PROBE_KEYS,
    "probe without ADInplaceOrView": tuple(k for k in dispatch.PROBE_KEYS if k != "ADInplaceOrView"),
    "probe without Autograd": tuple(k for k in dispatch.PROBE_KEYS if k != "Autograd"),
    "probe without PythonTLSSnapshot": tuple(k for k in dispatch.PROBE_KEYS if k != "PythonTLSSnapshot"),
    "aten.mul (torch's kernels; modes and autograd Nodes report)": None,
}


def _make_tensor(flags: dict):
    """``(tensor, mode or None)`` for ``flags``; an impossible combination raises a clear error.

    The mode is our FunctionalTensorMode when ``functional`` is on: its tensors are
    only usable inside it, so the call runs ``under`` it.
    """
    from minidynamo._torch_private import to_functional_tensor
    from minidynamo.aot.functional_tensor import FunctionalTensorMode
    from minidynamo.fake import FakeTensorMode

    ctx = torch.inference_mode() if flags["inference"] else contextlib.nullcontext()
    with ctx:
        x = torch.arange(3.0)
    if flags["requires_grad"]:
        if flags["inference"]:
            raise ValueError("an inference tensor cannot require grad (it has no autograd keys to record with)")
        x.requires_grad_(True)
    if flags["functional"] and flags["torch_functional"]:
        raise ValueError("choose one functional wrapper: ours (Python key) or torch's (Functionalize key)")
    if flags["fake"]:
        x = FakeTensorMode().from_tensor(x)
    under = None
    if flags["functional"]:
        under = FunctionalTensorMode()
        x = under.to_fun(x)
    if flags["torch_functional"]:
        x = to_functional_tensor(x)
    return x, under


def explore(op: str = "probe (every probe kernel)", **flags):
    """``(keys, trace)`` for one configuration: the data the explorer draws."""
    unknown = set(flags) - set(FLAGS)
    if unknown:
        raise ValueError(f"unknown flags {sorted(unknown)}; the flags are {FLAGS}")
    if op not in OPS:
        raise ValueError(f"unknown op choice {op!r}; choose from {list(OPS)}")
    flags = {name: bool(flags.get(name, False)) for name in FLAGS}
    x, under = _make_tensor(flags)
    probe_keys = OPS[op]
    if probe_keys is None:
        tr = dispatch.trace(torch.mul, x, 2.0, mode=flags["mode"], under=under)
    else:
        with dispatch.probe(probe_keys) as p:
            tr = dispatch.trace(p, x, mode=flags["mode"], under=under)
    return tr.keys, tr


def _badges(keys, current: str | None) -> str:
    cells = []
    for k in keys:
        hit = current is not None and (k == current or (current == "Autograd" and k.startswith("Autograd")))
        style = "background:#ffd54f;font-weight:bold" if hit else "background:#eee"
        cells.append(f'<span style="{style};padding:1px 5px;margin:1px;border-radius:3px">{html.escape(k)}</span>')
    return "<div>keys (highest priority first): " + " ".join(cells) + "</div>"


def _render(keys, tr) -> tuple[list[str], list[str]]:
    steps = ["<p>The call enters the dispatcher with these keys.</p>" + _badges(keys, None)]
    labels = ["the call"]
    for s in tr:
        what = "inferred from evidence after the call" if s.inferred else "reported by the handler itself"
        got = f"<br>key set it received: {html.escape(', '.join(s.keyset))}" if s.keyset else ""
        phase = f" ({s.phase})" if s.phase != "forward" else ""
        steps.append(
            f"<p>{html.escape(s.handler)} [{html.escape(s.op)}]{phase}, <i>{what}</i>{got}</p>" + _badges(keys, s.key)
        )
        labels.append(f"{s.key}{' (inferred)' if s.inferred else ''}")
    return steps, labels


class DispatchKeyExplorer(widgets.VBox):
    """Checkboxes for the tensor flags, a dropdown for the op, and a Stepper over the trace."""

    def __init__(self, op: str = "probe (every probe kernel)", **flags):
        self.boxes = {name: widgets.Checkbox(value=bool(flags.get(name, False)), description=name) for name in FLAGS}
        self.op_menu = widgets.Dropdown(options=list(OPS), value=op, description="op")
        for control in [*self.boxes.values(), self.op_menu]:  # Note [Kernel-only controls] (stepper.py)
            control.add_class(KERNEL_ONLY)
        self.stepper: Stepper | None = None
        self._holder = widgets.VBox()
        self.message = ""
        controls = widgets.VBox([widgets.HBox(list(self.boxes.values())[:3]), widgets.HBox(list(self.boxes.values())[3:] + [self.op_menu])])
        super().__init__([controls, self._holder])
        self.refresh()
        for w in [*self.boxes.values(), self.op_menu]:
            w.observe(lambda _change: self.refresh(), names="value")

    @property
    def flags(self) -> dict:
        return {name: box.value for name, box in self.boxes.items()}

    def refresh(self) -> None:
        """Re-run ``dispatch.trace`` for the current choices and pre-render its steps."""
        title = self._title()
        try:
            keys, tr = explore(self.op_menu.value, **self.flags)
            steps, labels = _render(keys, tr)
            self.message = ""
        except (ValueError, RuntimeError) as exc:
            steps, labels = [f"<p>{html.escape(str(exc))}</p>"], ["not possible"]
            self.message = str(exc)
        self.stepper = Stepper(steps, title=title, labels=labels)
        self._holder.children = [self.stepper]

    def _title(self) -> str:
        on = [name for name, value in self.flags.items() if value] or ["plain"]
        return f"{self.op_menu.value} on a {' + '.join(on)} tensor"

    # -- stepping, delegated ---------------------------------------------------------
    def next(self):
        self.stepper.next()
        return self

    def prev(self):
        self.stepper.prev()
        return self

    def go(self, i: int):
        self.stepper.go(i)
        return self

    # -- text and snapshot ---------------------------------------------------------
    def text(self) -> str:
        """Every step as plain text, one per line (deterministic)."""
        return "\n".join(f"{i + 1}. {self.stepper.step_text(i)}" for i in range(len(self.stepper.steps)))

    def __repr__(self) -> str:
        return f"DispatchKeyExplorer({self.stepper!r})"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))

    def _repr_mimebundle_(self, **kwargs):
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/plain"] = repr(self)
        return bundle

    def snapshot_html(self) -> str:
        return self.stepper.snapshot_html()

    def snapshot(self):
        return self.stepper.snapshot()

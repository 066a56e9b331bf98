"""``trace(fn, *args)``: the handlers that really ran for a call, in the order they ran.

Place in the pipeline: beside it; chapter 07's evidence. Mirrors nothing in torch
directly: the nearest tools are ``torch._C._dispatch_dump_table`` (what *would* run)
and ``TORCH_SHOW_DISPATCH_TRACE=1`` (a debug build's C++ log of what did run).

Note [Every step was appended by the thing that ran]
    A step is written by a probe kernel (probe.py), by the logging TorchDispatchMode
    that ``mode=True`` installs, by a FakeTensorMode's handler (torch's FakeTensorMode
    is wrapped for the call; ours reports op events), by an autograd hook during
    ``backward=True``, or by the autograd kernel of an aten op (next Note). Nothing
    is sorted out of ``dispatch.keys``: a step's place is the moment it reported.

Note [The autograd kernel of an aten op reports through anomaly mode]
    We cannot put a probe at AutogradCPU for ``aten.sin`` (it would replace torch's
    kernel). But the generated autograd kernel (``VariableType``) creates the op's
    backward Node *before* it redispatches below autograd, and under anomaly mode
    every Node's constructor calls back into Python to capture the stack
    (``_torch_private.autograd_node_created_hook``). That callback is our report,
    made from inside the autograd kernel, in the order things ran; the output's
    ``grad_fn`` afterwards names the Node it built. The TLS exclude set is *not*
    evidence: the Python fallback restores the TLS snapshot taken at
    PythonTLSSnapshot (above autograd) and ``__torch_dispatch__`` always runs with
    the keys above Python excluded, autograd ran or not. If an output carries a
    ``grad_fn`` but no Node creation was seen, a step after the call says so,
    marked ``inferred=True`` (it did not report where it ran).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import torch

from minidynamo import events

__all__ = ["Step", "Trace", "trace"]


@dataclass(frozen=True)
class Step:
    """One handler that ran: its dispatch key, what it was, the op, the key set it got."""

    key: str
    handler: str
    op: str
    keyset: tuple[str, ...] | None = None
    phase: str = "forward"
    inferred: bool = False

    def __str__(self) -> str:
        text = f"{self.key:<18} {self.handler}  [{self.op}]"
        if self.phase != "forward":
            text += f" ({self.phase})"
        if self.inferred:
            text += " (inferred)"
        return text


class Trace:
    """The steps of one traced call, in order; ``keys`` is the key set at the call."""

    def __init__(self, steps: list[Step], keys: tuple[str, ...], error: BaseException | None = None, output=None):
        self.steps = list(steps)
        self.keys = keys
        self.error = error
        self.output = output

    def handler_keys(self, phase: str = "forward", observed_only: bool = True) -> list[str]:
        """The keys of the steps of ``phase``, in the order they ran."""
        return [s.key for s in self.steps if s.phase == phase and not (observed_only and s.inferred)]

    def position(self, key: str, phase: str = "forward") -> int:
        """The index of the first ``phase`` step at ``key`` among that phase's observed steps."""
        ran = self.handler_keys(phase)
        if key not in ran:
            raise KeyError(f"no observed {phase} step at key {key!r}; the steps were {ran}")
        return ran.index(key)

    def __len__(self) -> int:
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)

    def __getitem__(self, i):
        return self.steps[i]

    def text(self) -> str:
        lines = [f"keys at the call: {', '.join(self.keys) if self.keys else '(no tensor arguments)'}"]
        lines += [f"{i + 1:>2}. {step}" for i, step in enumerate(self.steps)]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.text()


@functools.lru_cache(maxsize=None)
def _logging_mode_class():
    """A TorchDispatchMode that reports each op it sees at the Python key (built lazily)."""
    from minidynamo._torch_private import TorchDispatchMode

    class LoggingMode(TorchDispatchMode):
        def __init__(self, handler: str = "TorchDispatchMode (LoggingMode)"):
            super().__init__()
            self.handler = handler

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            events.emit(
                "dispatch", op=str(func), key="Python", handler=self.handler,
                keyset=None, phase="forward", inferred=False,
            )  # fmt: skip
            return func(*args, **(kwargs or {}))

    return LoggingMode


@contextlib.contextmanager
def _report_torch_fake_modes(args):
    """Wrap each torch FakeTensorMode found on ``args`` so its handler reports (instance only)."""
    modes = []
    for a in args:
        mode = getattr(a, "fake_mode", None)
        if isinstance(a, torch.Tensor) and mode is not None and hasattr(mode, "dispatch") and mode not in modes:
            modes.append(mode)
    for mode in modes:
        original = mode.dispatch

        def dispatch(func, types, args=(), kwargs=None, _original=original):
            events.emit(
                "dispatch", op=str(func), key="Python", handler="torch FakeTensorMode (__torch_dispatch__)",
                keyset=None, phase="forward", inferred=False,
            )  # fmt: skip
            return _original(func, types, args, kwargs)

        mode.dispatch = dispatch  # an instance attribute: shadows the method for this mode only
    try:
        yield
    finally:
        for mode in modes:
            mode.__dict__.pop("dispatch", None)


_NODE = "autograd Node created"  # the handler text of a node-creation report


@contextlib.contextmanager
def _entered_and_reporting(mode):
    """Enter ``mode`` (a TorchDispatchMode) for the call and report each op it gets.

    Torch reads ``__torch_dispatch__`` off the mode's class, so we cannot wrap it on
    the instance; a reporting mode pushed on top of it runs first at the Python key,
    reports, and hands the op on to ``mode`` (the next mode on the stack).
    """
    where = "minidynamo" if type(mode).__module__.startswith("minidynamo") else "torch"
    handler = f"{where} {type(mode).__name__} (__torch_dispatch__)"
    with mode, _logging_mode_class()(handler=handler):
        yield


def _steps_from(log) -> list[Step]:
    steps = []
    for e in log:
        if e.kind == "dispatch" and e.handler == _NODE:
            # Note [The autograd kernel of an aten op reports through anomaly mode]
            # Consecutive Nodes (the op's and an AccumulateGrad for a leaf input) come
            # from one kernel; a probe's Autograd kernel already reported itself.
            if steps and steps[-1].key.startswith("Autograd") and steps[-1].phase == "forward":
                continue
            steps.append(Step(e.key, _NODE, "", phase="forward"))
        elif e.kind == "dispatch":
            steps.append(Step(e.key, e.handler, e.op, e.keyset, e.phase, e.inferred))
        elif e.kind == "op":  # our mini FakeTensorMode reports each op it handles
            # It reports when the op is done (its event carries output shapes), so its step
            # comes after the kernels it called; the handler text says so.
            steps.append(Step("Python", "minidynamo FakeTensorMode (reports when done)", e.op))
    return steps


def trace(
    fn, *args, mode: bool = False, backward: bool = False, pre_dispatch: bool = False, under=None, **kwargs
) -> Trace:
    """Call ``fn(*args, **kwargs)`` once and return the handlers that ran, in order.

    ``mode=True`` runs the call under a logging TorchDispatchMode (the Python key
    is then in the thread's include set); ``backward=True`` then calls
    ``out.sum().backward()`` with hooks on the output's grad_fn and the inputs;
    ``pre_dispatch=True`` turns the PreDispatch key on, as export's pre-dispatch
    tracing does; ``under=m`` runs the call inside the TorchDispatchMode ``m``
    (e.g. our FunctionalTensorMode, whose tensors need it), whose handler then
    reports when it is entered. An exception stops the call and becomes the last step.
    """
    from minidynamo._torch_private import EnablePreDispatch, autograd_node_created_hook
    from minidynamo.dispatch.key_set import keys as _keys

    if not callable(fn):
        raise TypeError(f"dispatch.trace needs a callable first, got {type(fn).__name__}")
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    error = None
    out = None
    with events.record() as log:
        with contextlib.ExitStack() as stack:
            if pre_dispatch:
                stack.enter_context(EnablePreDispatch())
            if mode:
                stack.enter_context(_logging_mode_class()())
            stack.enter_context(_report_torch_fake_modes(args))
            if under is not None:
                stack.enter_context(_entered_and_reporting(under))
            at_call = _keys(*tensors) if tensors else ()
            autograd_key = next((k for k in at_call if k.startswith("Autograd")), "Autograd")
            stack.enter_context(autograd_node_created_hook(functools.partial(_report_node, autograd_key)))
            try:
                out = fn(*args, **kwargs)
            except Exception as exc:  # the trace shows where it stopped
                error = exc
        forward_steps = _steps_from(log)
        if backward and error is None:
            error = _run_backward(out, tensors)
    steps = _steps_from(log)
    if error is not None:
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        steps.append(Step("error", f"{type(error).__name__}: {first[:160]}", "", phase="forward"))
    steps = _name_nodes(steps, out)
    steps += _inferred(out, forward_steps)
    return Trace(steps, at_call, error, out)


def _report_node(key: str) -> None:
    events.emit("dispatch", op="", key=key, handler=_NODE, keyset=None, phase="forward", inferred=False)


def _name_nodes(steps: list[Step], out) -> list[Step]:
    """Give each node-creation step the name of the Node the output carries afterwards."""
    grad_fn = getattr(out, "grad_fn", None) if isinstance(out, torch.Tensor) else None
    named = f"built {type(grad_fn).__name__}" if grad_fn is not None else "built a backward Node"
    return [
        Step(
            s.key,
            f"autograd kernel: {named} before redispatching (reported from the Node's constructor)",
            s.op,
            phase=s.phase,
        )
        if s.handler == _NODE
        else s
        for s in steps
    ]


def _run_backward(out, inputs) -> BaseException | None:
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        return None
    handles = []
    if out.grad_fn is not None:
        name = type(out.grad_fn).__name__

        def pre_hook(grad_outputs, _name=name):
            events.emit(
                "dispatch", op="", key="Autograd", handler=f"pre-hook on the output's grad_fn ({_name})",
                keyset=None, phase="backward", inferred=False,
            )  # fmt: skip

        handles.append(out.grad_fn.register_prehook(pre_hook))
    for i, t in enumerate(inputs):
        if t.requires_grad:

            def hook(grad, _i=i):
                events.emit(
                    "dispatch", op="", key="Autograd", handler=f"tensor hook on input {_i} (gradient arrives)",
                    keyset=None, phase="backward", inferred=False,
                )  # fmt: skip

            handles.append(t.register_hook(hook))
    try:
        out.sum().backward()
    except Exception as exc:
        return exc
    finally:
        for h in handles:
            h.remove()
    return None


def _inferred(out, steps: list[Step]) -> list[Step]:
    """An autograd Node on the output that no step reported being built (see the Note)."""
    if not isinstance(out, torch.Tensor) or out.grad_fn is None:
        return []
    if any(s.key.startswith("Autograd") and s.phase == "forward" for s in steps):
        return []  # the autograd kernel reported itself (a probe, or its Node's constructor)
    backend = {"cpu": "CPU", "cuda": "CUDA", "meta": "Meta"}.get(out.device.type, out.device.type)
    return [
        Step(
            "Autograd" + backend,
            f"autograd kernel, not seen running (evidence after the call: the output's grad_fn is "
            f"{type(out.grad_fn).__name__})",
            "",
            inferred=True,
        )
    ]

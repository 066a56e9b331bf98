"""Helpers that several test files share (tests/ is on sys.path; no package).

* ``quiet()``: swallow what compiled code prints (``print`` is a graph-break case) and
  the warnings it raises (a fallback's warning), for a test that checks something else.
* ``capture(call)``: the exception ``call()`` raises (its prints swallowed); fails if it
  raises nothing.
* ``MulSavedInBackward``: a custom ``autograd.Function`` whose backward mutates the input
  it saved (AOTAutograd must copy that mutation back, as eager leaves it).
* ``Counter``: a backend that counts the graphs it is handed (torch's ``CompileCounter``).
* ``DEVICES``: ``pytest.mark.parametrize("device", DEVICES)`` runs a test on ``cpu``,
  ``meta`` and ``cuda`` (the last under the ``cuda`` marker, skipped without a GPU).
"""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest
import torch

# Note [Tests on every device] (issue 29): a tensor the pipeline makes without ``device=`` is a
# cpu tensor, and a cpu tensor mixes with any device only when it is 0-dim. So ``meta`` inputs
# (outputs not 0-dim) fail exactly where cuda inputs would, on a machine without a GPU; values
# on meta cannot be compared, only shapes, strides, dtypes, devices and "no fallback".
DEVICES = [
    "cpu",
    "meta",
    pytest.param("cuda", marks=[
        pytest.mark.cuda,
        pytest.mark.skipif(not torch.cuda.is_available(),
                           reason=f"no CUDA device (torch {torch.__version__}, built with CUDA: "
                                  f"{torch.version.cuda or 'no'})"),
    ]),
]


class Counter:
    """A backend that counts the graphs it is handed and runs them as they are (torch's CompileCounter)."""

    def __init__(self) -> None:
        self.frame_count = 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        return gm.forward


@contextlib.contextmanager
def quiet():
    """Swallow stdout and warnings inside the block."""
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def capture(call):
    """The exception ``call()`` raises, with what it prints swallowed; AssertionError if none."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            call()
    except Exception as e:  # noqa: BLE001
        return e
    raise AssertionError("did not raise")


class MulSavedInBackward(torch.autograd.Function):
    """Its backward doubles the input it saved, in place (eager leaves the input changed)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x.mul_(2)
        return g * x


@contextlib.contextmanager
def setting(get, set_, value):
    """Set a global (``set_(value)``) for a ``with`` block, restoring ``get()``'s value after it."""
    old = get()
    set_(value)
    try:
        yield
    finally:
        set_(old)


def canonical_placeholders(gm, symbol: "re.Pattern", others: bool = False) -> list:
    """A graph's placeholders: a tensor's shape or a symbolic scalar, its symbols renamed S0, S1... in order
    of appearance (``symbol`` finds them); with ``others``, any other placeholder by its type's name."""
    import torch

    names: dict[str, str] = {}

    def canon(text: str) -> str:
        return symbol.sub(lambda m: names.setdefault(m.group(0), f"S{len(names)}"), text)

    out = []
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value", node.meta.get("val"))
        if isinstance(value, torch.Tensor):
            out.append(tuple(canon(str(s)) for s in value.shape))
        elif isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            out.append(canon(str(value)))
        elif others:
            out.append(type(value).__name__)
    return out


def explain_both(fn, *args) -> tuple:
    """``md.explain`` and torch's ``explain`` (with each break's registry gb_type) of one call, stdout
    swallowed: ``(graph_count, graph_break_count, [gb_type, ...])`` for ours, then torch's, then the
    two explain outputs themselves."""
    import minidynamo as md
    from minidynamo._torch_private import dynamo_explain_with_gb_types, dynamo_reset

    with contextlib.redirect_stdout(io.StringIO()):
        md.reset()
        ours = md.explain(fn, *args)
        dynamo_reset()
        theirs, gb_types = dynamo_explain_with_gb_types(fn, *args)
    return ((ours.graph_count, ours.graph_break_count, [r.gb_type for r in ours.break_reasons]),
            (theirs.graph_count, theirs.graph_break_count, gb_types), ours, theirs)


def strict_xfails(names, known: dict) -> list:
    """``names`` as pytest params, each in ``known`` a strict xfail with its reason (it must fail)."""
    return [pytest.param(n, marks=pytest.mark.xfail(reason=known[n], strict=True)) if n in known else n
            for n in names]

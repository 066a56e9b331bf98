"""``MyFunction.apply(x)`` of a custom ``torch.autograd.Function``, traced as torch traces it.

torch's ``AutogradFunctionVariable.call_apply`` (torch/_dynamo/variables/misc.py) inlines
``forward`` when no input needs a gradient, and otherwise traces it as the body of the
``autograd.Function`` higher-order op (``AutogradFunctionApplyVariable``,
torch/_dynamo/variables/higher_order_ops.py): a graph break inside ``forward`` then falls
back to a graph break at ``.apply`` (``add_hop_context``), and the eager ``.apply`` runs the
user's ``forward`` frame, which is compiled on its own. Ours: Note [autograd.Function.apply is
speculated, then falls back] (minidynamo/symbolic/variables/autograd_function.py).

Each program runs through real torch (``torch._dynamo.explain``) and ``md.explain``: graphs,
breaks, their registry gb_types and user lines (the first held-out set's ``compare``); then
the compiled result, its gradient and what it prints against eager.
"""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

import minidynamo as md
from test_breaks_like_torch_heldout import compare  # tests/ is on sys.path
from _helpers import strict_xfails  # tests/ is on sys.path


class _PrintFwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        print("fwd")
        return t * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class _BranchFwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        if t.sum() > 0:
            return t * 2
        return t * 3

    @staticmethod
    def backward(ctx, g):
        return g * 5


class _BreakFwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        y = t.sin()
        torch._dynamo.graph_break()
        return y * 2

    @staticmethod
    def backward(ctx, g):
        return g * 7


class _CtxFwd(torch.autograd.Function):
    """A traceable forward that uses its ctx: an attribute, save_for_backward, needs_input_grad."""

    @staticmethod
    def forward(ctx, t, k):
        ctx.k = k
        ctx.save_for_backward(t)
        return t.sin() * k

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return g * t.cos() * ctx.k * 3, None


class _SetupCtx(torch.autograd.Function):
    """forward without ctx; setup_context saves what backward needs (torch 2.0's style)."""

    @staticmethod
    def forward(t):
        return t.exp()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out * 2


class _PrintBwd(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        return t * 2

    @staticmethod
    def backward(ctx, g):
        print("bwd")
        return g * 2


def a_print_forward(x):
    return _PrintFwd.apply(x) + 1


def a_print_forward_after_an_op(x):
    y = x.sin()
    return _PrintFwd.apply(y) + 1


def a_data_dependent_forward(x):
    return _BranchFwd.apply(x.cos()) + 1


def a_graph_break_in_forward(x):
    y = x * 3
    return _BreakFwd.apply(y) - 1


def a_ctx_forward(x):
    return _CtxFwd.apply(x, 3) + 1


def a_setup_context_forward(x):
    return _SetupCtx.apply(x * 2) + 1


def a_print_forward_no_grad(x):
    return _PrintFwd.apply(x) + 1


def a_ctx_forward_no_grad(x):
    return _CtxFwd.apply(x, 3) + 1


def a_print_backward(x):
    return _PrintBwd.apply(x) + 1


class _TensorAttrBwd(torch.autograd.Function):
    """backward reads a tensor kept as a ctx attribute and a saved one: both traceable."""

    @staticmethod
    def forward(ctx, t):
        ctx.scale = t.abs() + 1
        ctx.save_for_backward(t)
        return t * ctx.scale

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        if ctx.needs_input_grad[0]:
            return g * ctx.scale * 2 + t * 0
        return None


def a_print_backward_after_an_op(x):
    y = x.exp()
    return _PrintBwd.apply(y) * 2


def a_tensor_attribute_in_backward(x):
    return _TensorAttrBwd.apply(x.cos()) + 1


PROGRAMS = {name: fn for name, fn in dict(globals()).items() if name.startswith("a_")}
NEEDS_GRAD = {n for n in PROGRAMS if not n.endswith("_no_grad")}

# Where we still differ from torch, and why (each a strict xfail).
KNOWN: dict[str, str] = {}


@pytest.mark.parametrize("name", strict_xfails(PROGRAMS, KNOWN))
def test_autograd_function_breaks_like_torch(name):
    mine, theirs = compare(name, PROGRAMS, NEEDS_GRAD, __file__)
    assert mine == theirs, f"ours (graphs, breaks, gb types, lines) {mine} != torch's {theirs}"


def _run(fn, grad: bool):
    torch.manual_seed(0)
    x = torch.randn(4, requires_grad=grad)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        out = fn(x)
        if grad:
            out.sum().backward()
    return out.detach(), (x.grad if grad else None), printed.getvalue()


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_autograd_function_runs_like_eager(name):
    """The result, the gradient (the user's backward, not forward's derivative) and what is printed, once."""
    fn, grad = PROGRAMS[name], name in NEEDS_GRAD
    expected = _run(fn, grad)
    md.reset()
    got = _run(md.compile(fn, backend="aot_eager"), grad)
    torch.testing.assert_close(got[0], expected[0])
    if grad:
        torch.testing.assert_close(got[1], expected[1])
    assert got[2] == expected[2], f"printed {got[2]!r}, eager printed {expected[2]!r}"


def test_a_forward_break_is_reported_at_apply_with_the_hop_named():
    """torch's message: the inner break's gb_type, then ``Higher Order Operator: autograd.Function``
    (torch/_dynamo/exc.py augment_exc_message_with_hop_name); the user's line is the print's."""
    md.reset()
    torch.manual_seed(0)
    with contextlib.redirect_stdout(io.StringIO()):
        report = md.explain(a_print_forward_after_an_op, torch.randn(4, requires_grad=True))
    (reason,) = report.break_reasons
    assert reason.gb_type == "Failed to trace builtin operator"
    assert reason.hop_name == "autograd.Function"
    assert "\n  Higher Order Operator: autograd.Function\n" in str(reason)
    assert reason.source.strip() == 'print("fwd")'
    with contextlib.redirect_stdout(io.StringIO()):
        torch._dynamo.reset()
        theirs = torch._dynamo.explain(a_print_forward_after_an_op)(torch.randn(4, requires_grad=True))
    assert theirs.break_reasons[0].user_stack[-1].lineno == reason.lineno


def test_without_grad_forward_is_inlined_into_the_graph():
    """No input needs a gradient: torch inlines forward, so its ops are nodes of the caller's graph."""
    def ops(gm):
        return [str(n.target).split(".")[-1].replace("<built-in function ", "").rstrip(">")
                for n in gm.graph.nodes if n.op in ("call_function", "call_method")]

    x = torch.randn(4)
    md.reset()
    mine = md.explain(a_ctx_forward_no_grad, x)
    torch._dynamo.reset()
    theirs = torch._dynamo.explain(a_ctx_forward_no_grad)(x)
    assert [ops(g) for g in mine.graphs] == [ops(g) for g in theirs.graphs]
    assert "sin" in ops(mine.graphs[0])

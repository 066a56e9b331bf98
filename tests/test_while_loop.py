"""``torch.while_loop`` against torch 2.13: one ``while_loop`` node with ``cond_fn`` / ``body_fn`` subgraphs.

Each program runs through our Dynamo and torch's: graph and break counts, the higher-order
operators in each graph (subgraphs included), results (and gradients) against eager. Through
AOT, for inference, the forward graph holds one ``while_loop`` whose subgraphs are ATen ops, as
torch's ``aot_eager``'s; in training torch's ``aot_eager`` fails to trace the backward and runs
the loop eagerly, and so do we (Note [while_loop has no backward here], aot/higher_order.py).
Where torch refuses (a side effect, an alias, a mismatched carry) we raise the same class of error.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_explain, dynamo_recorded_graphs, dynamo_reset, \
    torch_aot_eager_forward_graphs
from minidynamo.aot.aot_autograd import AOTFallbackWarning

pytestmark = pytest.mark.ch16


def hops(gm) -> list:
    """The higher-order operators of ``gm`` in order, each with the list of its subgraphs' own."""
    out = []
    for n in gm.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.HigherOrderOperator):
            subs = [hops(getattr(gm, a.target)) for a in n.args if isinstance(a, torch.fx.Node) and a.op == "get_attr"]
            out.append((n.target.name(), subs))
    return out


def hop_args(gm) -> list:
    """For each while_loop node: the number of carried and of additional inputs."""
    return [(len(n.args[2]), len(n.args[3])) for n in gm.graph.nodes
            if n.op == "call_function" and n.target is torch.ops.higher_order.while_loop]


# --- the programs ---------------------------------------------------------------------------

Y = torch.randn(3, generator=torch.Generator().manual_seed(2))
torch.manual_seed(3)
LIN = torch.nn.Linear(3, 3)


def wl_counter(x):
    return torch.while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t.sin() + 1), (torch.tensor(0), x))


def wl_closure(x):
    return torch.while_loop(lambda i, t: i < 4, lambda i, t: (i + 1, t * Y + 1), (torch.tensor(0), x))[1]


def wl_data_dependent(x):
    return torch.while_loop(lambda t: t.sum() < 10, lambda t: (t * 1.5 + 0.5,), (x,))[0] * 2


def wl_module(x):
    return torch.while_loop(lambda i, t: i < 2, lambda i, t: (i + 1, LIN(t).tanh()), (torch.tensor(0), x))[1]


def wl_cond_reads_closure(x):
    limit = x.max() + 3
    return torch.while_loop(lambda t: t.sum() < limit, lambda t: (t.abs() + 0.25,), [x])[0]


def wl_two_loops(x):
    _, h = torch.while_loop(lambda i, t: i < 2, lambda i, t: (i + 1, t.cos()), (torch.tensor(0), x))
    return torch.while_loop(lambda i, t: i < 3, lambda i, t: (i + 2, t * 2 + Y), (torch.tensor(0), h))[1].sum()


def wl_never_runs(x):
    return torch.while_loop(lambda i, t: False, lambda i, t: (i + 1, t * 2), (torch.tensor(0), x))[1] + 1


def wl_then_ops(x):
    z = x.exp()
    _, out = torch.while_loop(lambda i, t: i < 5, lambda i, t: (i + 1, (t + z) / 2), (torch.tensor(0), x))
    return out.relu() + z


def wl_int_carry(x):
    return torch.while_loop(lambda i, t: i < x.shape[0], lambda i, t: (i + 1, t.cos()), (0, x))


def wl_int_carry_used(x):
    n, t = torch.while_loop(lambda i, t: 2 * i < 7, lambda i, t: (i + 1, t + i), (1, x))
    return t * 2, n


def wl_in_cond(x):
    def t(a):
        return torch.while_loop(lambda i, u: i < 3, lambda i, u: (i + 1, u.sin()), (torch.tensor(0), a))[1]

    return torch.cond(x.sum() > 0, t, lambda a: a.cos(), (x,))


def wl_in_wl(x):
    def body(i, u):
        inner = torch.while_loop(lambda j, v: j < 2, lambda j, v: (j + 1, v * 2), (torch.tensor(0), u))[1]
        return i + 1, inner.tanh()

    return torch.while_loop(lambda i, u: i < 2, body, (torch.tensor(0), x))[1]


TENSOR_CARRIES = [wl_counter, wl_closure, wl_data_dependent, wl_module, wl_cond_reads_closure, wl_two_loops,
                  wl_never_runs, wl_then_ops, wl_in_cond, wl_in_wl]
INT_CARRIES = [wl_int_carry, wl_int_carry_used]  # torch: each int a fresh unbacked symbol in the subgraphs
PROGRAMS = TENSOR_CARRIES + INT_CARRIES
ids = [f.__name__ for f in PROGRAMS]


def _x(requires_grad: bool = False):
    x = torch.rand(3, generator=torch.Generator().manual_seed(0))
    return x.requires_grad_(requires_grad)


def placeholder_kinds(gm) -> list:
    """Per while_loop subgraph: each placeholder a tensor or a symbol (unbacked: an int carry)."""
    out = []
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is torch.ops.higher_order.while_loop:
            for sub in n.args[:2]:
                out.append([type(p.meta.get("example_value")).__name__.replace("FakeTensor", "Tensor")
                            for p in getattr(gm, sub.target).graph.find_nodes(op="placeholder")])
    return out


@pytest.mark.parametrize("fn", PROGRAMS, ids=ids)
def test_graphs_and_hops_match_torch(fn, real_dynamo):
    theirs = dynamo_explain(fn, _x())
    ours = md.explain(fn, _x())
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count)
    assert ours.break_reasons == []
    their_graphs = dynamo_recorded_graphs(fn, _x())
    assert [hops(g) for g in ours.graphs] == [hops(g) for g in their_graphs]
    assert [hop_args(g) for g in ours.graphs] == [hop_args(g) for g in their_graphs]
    assert [placeholder_kinds(g) for g in ours.graphs] == [placeholder_kinds(g) for g in their_graphs]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", PROGRAMS, ids=ids)
def test_inference_results_equal_eager(fn, backend):
    md.reset()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")  # no AOT fallback in inference, but for an int carry (below)
        # torch's eager while_loop runs through torch.compile, whose guards warn once on CPython 3.13.0
        warnings.filterwarnings("ignore", "Guards may run slower on Python 3.13.0", RuntimeWarning)
        if fn in INT_CARRIES and backend == "aot_eager":
            warnings.simplefilter("ignore", AOTFallbackWarning)
        out = md.compile(fn, backend=backend)(_x())
        ref = fn(_x())
    torch.testing.assert_close(out, ref)


@pytest.mark.parametrize("fn", INT_CARRIES, ids=[f.__name__ for f in INT_CARRIES])
def test_an_int_carry_in_aot_runs_eagerly_and_says_why(fn):
    """torch's aot_eager traces the int carry as an unbacked symbol; ours runs Dynamo's graph eagerly."""
    md.reset()
    with torch.no_grad(), pytest.warns(AOTFallbackWarning, match="int carry"):
        out = md.compile(fn, backend="aot_eager")(_x())
    torch.testing.assert_close(out, fn(_x()))


def test_an_int_carry_with_grad_is_refused_as_torch_refuses(real_dynamo):
    with pytest.raises(Exception) as theirs:
        torch.compile(wl_int_carry, backend="eager")(_x(True))
    dynamo_reset()
    with pytest.raises(Exception) as ours:
        md.compile(wl_int_carry, backend="eager")(_x(True))
    assert type(theirs.value).__name__ == type(ours.value).__name__ == "TorchRuntimeError"
    words = "all carried_inputs must be tensors for stack_output"
    assert words in str(theirs.value) and words in str(ours.value)


@pytest.mark.parametrize("fn", TENSOR_CARRIES, ids=[f.__name__ for f in TENSOR_CARRIES])
def test_inference_aot_graph_matches_torch_aot_eager(fn, real_dynamo):
    """The forward graph AOT compiles: the same higher-order ops, subgraphs of ATen ops, as torch's."""
    arts = []

    def backend(gm, example_inputs):
        from minidynamo.backends import aot_eager

        compiled = aot_eager(gm, example_inputs)
        arts.append(compiled.artifacts)
        return compiled

    with torch.no_grad():
        theirs, errors, _ = torch_aot_eager_forward_graphs(fn, _x())
        md.reset()
        md.compile(fn, backend=backend)(_x())
    assert errors == [] and all(a.fallback is None for a in arts)
    ours = [a.fw_module for a in arts]
    assert [hops(g) for g in ours] == [hops(g) for g in theirs]

    def aten_only(gm):  # every call in every subgraph, nested ones too, an ATen op or a higher-order op
        for n in gm.graph.nodes:
            if n.op == "call_function" and isinstance(n.target, torch._ops.HigherOrderOperator):
                for sub in n.args:
                    if isinstance(sub, torch.fx.Node) and sub.op == "get_attr":
                        body = getattr(gm, sub.target)
                        assert all(isinstance(m.target, (torch._ops.OpOverload, torch._ops.HigherOrderOperator))
                                   or m.target is __import__("operator").getitem
                                   for m in body.graph.nodes if m.op == "call_function"), body.code
                        aten_only(body)

    for gm in ours:
        aten_only(gm)


TRAINING = [wl_counter, wl_closure, wl_data_dependent, wl_then_ops]


@pytest.mark.parametrize("fn", TRAINING, ids=[f.__name__ for f in TRAINING])
def test_training_falls_back_where_torch_aot_eager_fails(fn, real_dynamo):
    """torch's aot_eager cannot trace while_loop's backward (default config): its backend fails and the loop
    runs eagerly. Ours warns and runs Dynamo's graph eagerly; results and gradients equal eager."""
    _, errors, their_out = torch_aot_eager_forward_graphs(fn, _x(True))
    assert errors, "torch's aot_eager now compiles while_loop's backward: compile it here too"
    md.reset()
    x = _x(True)
    with pytest.warns(AOTFallbackWarning, match="while_loop"):
        out = md.compile(fn, backend="aot_eager")(x)
    ex = _x(True)
    ref = fn(ex)
    out, ref = (out[-1], ref[-1]) if isinstance(out, tuple) else (out, ref)
    torch.testing.assert_close(out, ref)
    (g,) = torch.autograd.grad(out.sum(), x)
    (rg,) = torch.autograd.grad(ref.sum(), ex)
    torch.testing.assert_close(g, rg)


# --- where torch refuses ------------------------------------------------------------------------

LOG = []


def wl_side_effect(x):
    def body(i, t):
        LOG.append(1)
        return i + 1, t * 2

    return torch.while_loop(lambda i, t: i < 2, body, (torch.tensor(0), x))


def wl_returns_input(x):
    return torch.while_loop(lambda i, t: i < 2, lambda i, t: (i + 1, t), (torch.tensor(0), x))


def wl_mutates_input(x):
    def body(i, t):
        t.add_(1)
        return i + 1, t * 2

    return torch.while_loop(lambda i, t: i < 2, body, (torch.tensor(0), x))


def wl_shape_changes(x):
    return torch.while_loop(lambda i, t: i < 2, lambda i, t: (i + 1, t.sum()), (torch.tensor(0), x))


def wl_dtype_changes(x):
    return torch.while_loop(lambda i, t: i < 2, lambda i, t: (i + 1, t.double()), (torch.tensor(0), x))


def wl_drops_a_carry(x):
    return torch.while_loop(lambda i, t: i < 2, lambda i, t: (i + 1,), (torch.tensor(0), x))


def wl_cond_not_scalar(x):
    return torch.while_loop(lambda i, t: t > 0, lambda i, t: (i + 1, t - 1), (torch.tensor(0), x))


def wl_forever(x):
    return torch.while_loop(lambda i, t: True, lambda i, t: (i + 1, t * 2), (torch.tensor(0), x))


@pytest.mark.parametrize("fn, words", [
    (wl_side_effect, "Mutating a variable from outside the scope"),
    (wl_returns_input, "Encountered aliasing during higher order op tracing"),
    (wl_mutates_input, "Encountered input mutation during higher order op tracing"),
    (wl_shape_changes, "pair[1] differ in 'shape: torch.Size([]) vs torch.Size([3])'"),
    (wl_dtype_changes, "pair[1] differ in 'dtype: torch.float64 vs torch.float32'"),
    (wl_drops_a_carry, "Expected body_fn_output and carried_inputs to have same number of outputs"),
    (wl_cond_not_scalar, "Expected cond_fn to return a scalar tensor or a bool but got torch.Size([3])."),
    (wl_forever, "Infinite loop detected because while_loop's cond_fn always returns the same value True."),
], ids=lambda v: getattr(v, "__name__", "")[:0] or None)
def test_refused_as_torch_refuses(fn, words, real_dynamo):
    with pytest.raises(Exception) as theirs:
        torch.compile(fn, backend="eager")(torch.rand(3))
    dynamo_reset()
    with pytest.raises(Exception) as ours:
        md.compile(fn, backend="eager")(torch.rand(3))
    assert type(theirs.value).__name__ == type(ours.value).__name__ == "UncapturedHigherOrderOpError"
    assert words in str(theirs.value) and words in str(ours.value)

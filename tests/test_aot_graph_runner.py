"""The compiled graph's ops called through their Python bindings give what OpOverload.__call__ gives.

Covers graph_runner's Note [Calling aten ops without OpOverload.__call__]: each graph
is run both ways (fx's own ``gm.forward``, every op through ``OpOverload.__call__``,
and ``run_graph_fast``) on the same inputs, and compared bit for bit and with eager;
and a binding that reaches another overload, or none, is not used.
"""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx

from minidynamo._torch_private import TENSOR_BASE, VARIABLE_FUNCTIONS
from minidynamo.aot import aot_function
from minidynamo.aot.graph_runner import bind_op, op_bindings, run_graph_fast

aten = torch.ops.aten


def _int_and_float(x):
    i = (x * 10).to(torch.int32)
    return i + 0.5, i * 2, i // 3, (x > 0).sum(), x.to(torch.float64) * 1.5


def _views_and_mutation(x, y):
    x.add_(1)
    y[0].mul_(2)
    return x.view(-1), x[1:], y.t(), y.transpose(0, 1).contiguous(), x.expand(2, 4, 4)


def _multi_output(x):
    values, idx = x.max(dim=1)
    a, b = x.split(2, dim=0)
    return values, idx, a * b, torch.cat([a, b]), x.std(dim=0), torch.where(x > 0, x, 0.0)


def _factories_and_kwargs(x):
    z = torch.zeros(x.shape, dtype=torch.float16)
    return x.new_ones(3) * 2, torch.full((2, 2), 3.0), z + 1, torch.arange(4) * x.sum(), x.clamp(min=-0.5, max=0.5)


def _nn_ops(x, w):
    h = torch.nn.functional.gelu(x @ w)
    return torch.nn.functional.layer_norm(h, h.shape[-1:]), torch.nn.functional.softmax(h, -1), h.relu().sin()


CASES = {
    "int_and_float": (_int_and_float, lambda: (torch.randn(4, 4),)),
    "views_and_mutation": (_views_and_mutation, lambda: (torch.randn(4, 4), torch.randn(4, 4))),
    "multi_output": (_multi_output, lambda: (torch.randn(4, 4),)),
    "factories_and_kwargs": (_factories_and_kwargs, lambda: (torch.randn(4),)),
    "nn_ops": (_nn_ops, lambda: (torch.randn(3, 4), torch.randn(4, 5))),
    "nn_ops_train": (_nn_ops, lambda: (torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True))),
}


def _graphs(fn, make):
    """Every graph aot_function compiles for ``fn`` (forward, and backward when training)."""
    graphs = []

    def compiler(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = aot_function(fn, compiler, compiler)
    out = compiled(*make())
    loss = sum(o.float().sum() for o in out if isinstance(o, torch.Tensor) and o.requires_grad)
    if isinstance(loss, torch.Tensor):
        loss.backward()
    return graphs


def _inputs_like(gm):
    g = torch.Generator().manual_seed(0)
    out = []
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        v = n.meta["val"]
        if v.dtype.is_floating_point:
            out.append(torch.randn(v.shape, generator=g, dtype=v.dtype).as_strided(v.shape, v.stride()).clone())
        else:
            out.append(torch.randint(0, 3, v.shape, generator=g, dtype=v.dtype))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_fast_graph_equals_opoverload_graph(case):
    fn, make = CASES[case]
    graphs = _graphs(fn, make)
    assert graphs
    for gm in graphs:
        fast = run_graph_fast(gm)
        a, b = _inputs_like(gm), _inputs_like(gm)
        with torch.no_grad():
            want, got = gm.forward(*a), fast(*b)
        assert len(want) == len(got)
        for w, g in zip(want, got):
            if isinstance(w, torch.Tensor):
                assert (w.dtype, w.shape, w.stride()) == (g.dtype, g.shape, g.stride())
                assert torch.equal(w, g) or (w.isnan() == g.isnan()).all()
            else:
                assert w == g
        for x, y in zip(a, b):  # the same in-place writes on the inputs
            assert torch.equal(x, y)
        assert op_bindings(fast), "no aten op in the graph?"


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_function_matches_eager(case):
    fn, make = CASES[case]
    compiled = aot_function(fn)
    for _ in range(2):
        args_e = make()
        args_c = [a.detach().clone().requires_grad_(a.requires_grad) for a in args_e]
        want, got = fn(*args_e), compiled(*args_c)
        torch.testing.assert_close(got, want)
        for x, y in zip(args_c, args_e):
            torch.testing.assert_close(x, y)


def _graph_of(op, *args):
    g = fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(3)
    node = g.call_function(op, (x, *args))
    g.output((node,))
    return fx.GraphModule(torch.nn.Module(), g)


def test_a_binding_reaching_another_overload_is_not_used():
    # torch.mul(x, 2) parses to mul.Tensor (2 as a wrapped number), never to mul.Scalar
    fast = run_graph_fast(_graph_of(aten.mul.Scalar, 2))
    assert op_bindings(fast)[aten.mul.Scalar] is aten.mul.Scalar._op
    fast = run_graph_fast(_graph_of(aten.mul.Tensor, 2))
    assert op_bindings(fast)[aten.mul.Tensor] is VARIABLE_FUNCTIONS.mul
    x = torch.randn(3)
    assert torch.equal(fast(x)[0], aten.mul.Tensor(x, 2))


def test_an_op_without_a_binding_keeps_its_c_entry():
    fast = run_graph_fast(_graph_of(aten.slice.Tensor, 0, 1, 3))  # no torch.slice, no Tensor.slice
    assert op_bindings(fast)[aten.slice.Tensor] is aten.slice.Tensor._op
    x = torch.randn(3)
    assert torch.equal(fast(x)[0], x[1:3])


def test_bind_op_for_view_replays():
    assert bind_op(aten.view.default, (torch.empty(0), [-1])) is TENSOR_BASE.view
    assert bind_op(aten.t.default, (torch.empty(0),)) is VARIABLE_FUNCTIONS.t
    assert bind_op(aten.slice.Tensor, (torch.empty(0), 0, 1, 2)) is aten.slice.Tensor._op

"""make_fx, the joint graph and the default partition, against the real torch.

Differential: our make_fx vs torch's make_fx (same ATen ops), and our forward /
backward graphs vs the ones real ``aot_function`` hands to its fw/bw compilers
(same op multiset, same number of saved values). The joint graph is checked before
partitioning: primals and tangents, CompositeImplicitAutograd ops decomposed.
"""

from __future__ import annotations

import collections

import pytest
import torch
import torch.nn.functional as F

from minidynamo import events
from minidynamo.aot import aot_function
from minidynamo.aot.make_fx import TraceError, make_fx
from minidynamo.aot.partitioners import saved_values_table
from minidynamo.fake import FakeTensor, FakeTensorMode
from minidynamo._torch_private import torch_aot_keeping_graphs, torch_make_fx

pytestmark = pytest.mark.ch10


def op_multiset(gm) -> collections.Counter:
    return collections.Counter(str(n.target) for n in gm.graph.nodes if n.op == "call_function")


# -- functions used by several tests ---------------------------------------------------


def linear_relu(x, w, b):
    return F.linear(x, w, b).relu()


def mul_sum(x, y):
    return (x * y).sum(), x.exp()


def softmax_mm(x, w):
    return torch.softmax(x @ w, dim=-1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (4,), w, b)


def mutate_input(x, y):
    x.mul_(2)
    return x + y


def alias_input(x):
    return x.t(), x.sin()


def alias_intermediate(x):
    y = x * 3
    return y.view(-1), y[0]


def _inputs(name):
    g = torch.Generator().manual_seed(0)

    def leaf(*s):
        return torch.randn(*s, generator=g).requires_grad_()

    return {
        "linear_relu": lambda: [leaf(3, 4), leaf(5, 4), leaf(5)],
        "mul_sum": lambda: [leaf(3, 4), leaf(3, 4)],
        "softmax_mm": lambda: [leaf(3, 4), leaf(4, 5)],
        "layer_norm": lambda: [leaf(2, 4), leaf(4), leaf(4)],
        "mutate_input": lambda: [leaf(3, 4).clone(), leaf(3, 4)],
        "alias_input": lambda: [leaf(3, 4)],
        "alias_intermediate": lambda: [leaf(3, 4)],
    }[name]()


FUNCTIONS = [linear_relu, mul_sum, softmax_mm, layer_norm, mutate_input, alias_input, alias_intermediate]


def _torch_graphs(fn, args):
    """The forward and backward graphs real aot_function compiles (backward run to get it)."""
    captured, compiled = torch_aot_keeping_graphs(fn)
    outs = compiled(*args)
    outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
    torch.autograd.backward([o.sum() for o in outs if o.requires_grad])
    return captured["fw"], captured["bw"]


# -- make_fx ---------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [linear_relu, softmax_mm, layer_norm, alias_intermediate], ids=lambda f: f.__name__)
def test_make_fx_records_the_same_ops_as_torch(fn):
    args = [a.detach() for a in _inputs(fn.__name__)]
    ours = make_fx(fn)(*args)
    theirs = torch_make_fx(fn)(*args)
    assert op_multiset(ours) == op_multiset(theirs)
    torch.testing.assert_close(ours(*args), fn(*args))


def test_make_fx_on_fake_tensors_records_fake_values():
    args = [a.detach() for a in _inputs("linear_relu")]
    gm = make_fx(linear_relu, fake_mode=FakeTensorMode())(*args)
    vals = [n.meta["val"] for n in gm.graph.nodes if n.op == "call_function"]
    tensors = [v for v in vals if isinstance(v, torch.Tensor)]
    assert len(tensors) >= 3 and all(isinstance(v, FakeTensor) for v in tensors)
    torch.testing.assert_close(gm(*args), linear_relu(*args))


def test_make_fx_emits_op_events_under_its_pass():
    args = [a.detach() for a in _inputs("mul_sum")]
    with events.record() as log:
        make_fx(mul_sum, fake_mode=FakeTensorMode())(*args)
    ops = [e.op for e in log if e.kind == "op" and e.pass_name == "aot_joint"]
    assert "aten.mul.Tensor" in ops and "aten.sum.default" in ops
    assert [e.kind for e in log if e.kind.startswith("pass_")] == ["pass_begin", "pass_end"]


def test_make_fx_refuses_a_fake_tensor_from_elsewhere():
    other = FakeTensorMode().from_tensor(torch.randn(3))

    def f(x):
        return x + other

    with pytest.raises(TraceError, match="neither an input"):
        make_fx(f)(torch.randn(3))


# -- the joint graph before partitioning -------------------------------------------------


def test_joint_graph_is_inspectable_and_decomposed():
    compiled = aot_function(linear_relu)
    compiled(*_inputs("linear_relu"))
    joint = compiled.artifacts.joint
    names = [n.name for n in joint.gm.graph.nodes if n.op == "placeholder"]
    assert names == ["primals_1", "primals_2", "primals_3", "tangents_1"]
    ops = op_multiset(joint.gm)
    # linear is CompositeImplicitAutograd: the joint graph only sees what it decomposes into.
    assert "aten.linear.default" not in ops and "aten.addmm.default" in ops
    assert "aten.threshold_backward.default" in ops
    fw, bw = _torch_graphs(linear_relu, _inputs("linear_relu"))
    assert ops == op_multiset(fw) + op_multiset(bw)


def test_joint_tangents_only_for_outputs_that_need_them():
    compiled = aot_function(alias_input)
    compiled(*_inputs("alias_input"))
    joint = compiled.artifacts.joint
    # x.t() aliases the input: no tangent; x.sin() gets one.
    assert joint.tangent_mask == [False, True]
    assert joint.num_tangents == 1


def test_joint_trace_is_one_pass_named_aot_joint():
    with events.record() as log:
        aot_function(mutate_input)(*_inputs("mutate_input"))
    begins = [e.pass_name for e in log if e.kind == "pass_begin"]
    assert begins.count("aot_joint") == 1
    joint_ops = {e.op for e in log if e.kind == "op" and e.pass_name == "aot_joint"}
    # Functionalized: the in-place mul_ reaches the fake tensors as mul.
    assert "aten.mul.Tensor" in joint_ops and "aten.mul_.Tensor" not in joint_ops


# -- forward / backward vs real aot_function ----------------------------------------------


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_partition_matches_torch(fn):
    compiled = aot_function(fn)
    compiled(*_inputs(fn.__name__))
    part = compiled.artifacts.partition
    fw, bw = _torch_graphs(fn, _inputs(fn.__name__))
    assert op_multiset(part.fw_module) == op_multiset(fw)
    assert op_multiset(part.bw_module) == op_multiset(bw)
    n_torch_saved = len([n for n in bw.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")])
    assert part.num_saved == n_torch_saved


def test_saved_values_table_lists_what_backward_reads():
    compiled = aot_function(linear_relu)
    compiled(*_inputs("linear_relu"))
    part = compiled.artifacts.partition
    table = saved_values_table(part)
    bw_inputs = [n.name for n in part.bw_module.graph.nodes if n.op == "placeholder"]
    for node in part.saved_values:
        assert node.name in table and node.name in bw_inputs
    assert "primal" in table and "activation" in table


def test_compiled_backward_gives_eager_gradients():
    for fn in FUNCTIONS:
        args_e, args_c = _inputs(fn.__name__), _inputs(fn.__name__)
        outs_e, outs_c = fn(*args_e), aot_function(fn)(*args_c)
        outs_e = outs_e if isinstance(outs_e, tuple) else (outs_e,)
        outs_c = outs_c if isinstance(outs_c, tuple) else (outs_c,)
        leaves_e = [a for a in args_e if a.is_leaf]
        leaves_c = [a for a in args_c if a.is_leaf]
        ge = torch.autograd.grad([o.sum() for o in outs_e], leaves_e, allow_unused=True)
        gc = torch.autograd.grad([o.sum() for o in outs_c], leaves_c, allow_unused=True)
        for x, y in zip(ge, gc):
            torch.testing.assert_close(y, x)

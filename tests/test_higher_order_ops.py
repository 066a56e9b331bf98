"""Higher-order operators (``torch.cond``, activation checkpointing) against torch 2.13.

Each program runs through our Dynamo and torch's: the number of graphs and graph breaks,
the higher-order operators in each graph (subgraphs included), results and gradients
(backends "eager" and "aot_eager") against eager, and, for checkpointing, the tensors the
partition saves for the backward against torch's ``aot_eager``. Where torch refuses
(a side effect in a branch, branches that disagree) we raise the same class of error.
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

import minidynamo as md
from minidynamo._torch_private import dynamo_explain, dynamo_recorded_graphs, dynamo_reset, torch_aot_eager_saved
from minidynamo.notebook import saved_for_backward

pytestmark = pytest.mark.ch16


def hops(gm) -> list:
    """The higher-order operators of ``gm`` in order, each followed by the list of its subgraphs' own."""
    out = []
    for n in gm.graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.HigherOrderOperator):
            subs = [hops(getattr(gm, a.target)) for a in n.args if isinstance(a, torch.fx.Node) and a.op == "get_attr"]
            out.append((n.target.name(), subs))
    return out


# --- the programs ---------------------------------------------------------------------------

W = torch.randn(4, 4)


def cond_closure(x, y):
    return torch.cond(x.sum() > 0, lambda t: t.sin() + y, lambda t: t.cos() * y, (x,))


def cond_tuple(x, y):
    def t(a, b):
        return a + b, a * b

    def f(a, b):
        return a - b, a.exp()

    u, v = torch.cond(x.mean() > y.mean(), t, f, (x, y))
    return u * 2 + v


def cond_nested(x, y):
    def outer_t(a):
        return torch.cond(a.max() > 1, lambda b: b * 3, lambda b: b - y, (a,))

    return torch.cond(x.sum() > 0, outer_t, lambda a: a.abs() + 1, (x,))


def cond_constant_pred(x, y):
    return torch.cond(True, lambda t: t.sin(), lambda t: t.cos(), (x,)) + y


def cond_global_weight(x, y):
    return torch.cond(x[0] > 0, lambda t: t @ W[:3, :3], lambda t: t.relu(), (x.view(1, 3),)).view(3) + y


def cond_then_ops(x, y):
    z = (x * y).tanh()
    out = torch.cond(z.sum() < 0.5, lambda a, b: a * b, lambda a, b: a + b, (z, y))
    return out.sigmoid()


def cond_chained(x, y):
    h = x.cos() + y
    out = torch.cond(h.sum() > 0, lambda t: t.exp(), lambda t: t.sin().abs(), (h,))
    return out + torch.cond(out.mean() > 1, torch.sin, torch.cos, [out])


def cond_under_no_grad(x, y):
    with torch.no_grad():
        z = torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))
    return z * y


class Branchy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x, y):
        return torch.cond(x.sum() > 0, lambda t: self.lin(t), lambda t: t * 2, (x,)) + y


COND_PROGRAMS = [cond_closure, cond_tuple, cond_nested, cond_constant_pred, cond_global_weight, cond_then_ops,
                 cond_chained, cond_under_no_grad]


def _inputs(sign: float):
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(3, generator=g) + 0.1) * sign
    return x.requires_grad_(), torch.randn(3, generator=g).requires_grad_()


def _check_results_and_grads(fn, backend: str):
    md.reset()
    compiled = md.compile(fn, backend=backend)
    for sign in (1.0, -1.0):  # each branch taken once, by the same compiled entry
        x, y = _inputs(sign)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no AOT fallback, no eager fallback
            out = compiled(x, y)
        gx, gy = torch.autograd.grad(out.sum(), (x, y), allow_unused=True)
        ex, ey = _inputs(sign)
        ref = fn(ex, ey)
        rx, ry = torch.autograd.grad(ref.sum(), (ex, ey), allow_unused=True)
        torch.testing.assert_close(out, ref)
        for a, b in ((gx, rx), (gy, ry)):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b)


@pytest.mark.parametrize("fn", COND_PROGRAMS + [Branchy()], ids=lambda f: getattr(f, "__name__", type(f).__name__))
def test_cond_graphs_and_hops_match_torch(fn, real_dynamo):
    x, y = _inputs(1.0)
    theirs = dynamo_explain(fn, x, y)
    ours = md.explain(fn, x, y)
    assert ours.graph_count == theirs.graph_count
    assert ours.graph_break_count == theirs.graph_break_count
    assert ours.break_reasons == [] or len(ours.break_reasons) == ours.graph_break_count
    their_graphs = dynamo_recorded_graphs(fn, x, y)
    assert [hops(g) for g in ours.graphs] == [hops(g) for g in their_graphs]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", COND_PROGRAMS + [Branchy()], ids=lambda f: getattr(f, "__name__", type(f).__name__))
def test_cond_results_and_grads_equal_eager(fn, backend):
    torch.manual_seed(0)
    _check_results_and_grads(fn, backend)


def test_cond_in_the_aot_graphs():
    """Forward: one cond of the ATen branches; backward: one cond of their VJPs (torch's CondAutogradOp)."""
    arts = []

    def backend(gm, example_inputs):
        from minidynamo.backends import aot_eager

        compiled = aot_eager(gm, example_inputs)
        arts.append(compiled.artifacts)
        return compiled

    md.compile(cond_closure, backend=backend)(*_inputs(1.0))
    (art,) = arts
    assert art.fallback is None
    part = art.partition
    assert [h for h, _ in hops(part.fw_module)] == ["cond"]
    assert [h for h, _ in hops(part.bw_module)] == ["cond"]
    fw_cond = next(n for n in part.fw_module.graph.nodes if n.target is torch.ops.higher_order.cond)
    branch = getattr(part.fw_module, fw_cond.args[1].target)
    assert all(isinstance(n.target, torch._ops.OpOverload) for n in branch.graph.nodes if n.op == "call_function")


def test_explain_counts_agree_with_reasons_for_cond():
    out = md.explain(cond_closure, *_inputs(1.0))
    assert (out.graph_count, out.graph_break_count, out.break_reasons) == (1, 0, [])


# --- where torch refuses ------------------------------------------------------------------------

LOG = []


def cond_side_effect(x):
    def t(a):
        LOG.append(1)
        return a.sin()

    return torch.cond(x.sum() > 0, t, lambda a: a.cos(), (x,))


def cond_graph_break_in_branch(x):
    def t(a):
        torch._dynamo.graph_break()
        return a.sin()

    return torch.cond(x.sum() > 0, t, lambda a: a.cos(), (x,))


def cond_shapes_disagree(x):
    return torch.cond(x.sum() > 0, lambda a: a.sin(), lambda a: a.cos().sum(), (x,))


def cond_returns_input(x):
    return torch.cond(x.sum() > 0, lambda a: a, lambda a: a * 2, (x,))


def cond_mutates_input(x):
    def t(a):
        a.add_(1)
        return a * 2

    return torch.cond(x.sum() > 0, t, lambda a: a * 3, (x,))


@pytest.mark.parametrize("fn, cls, words", [
    (cond_side_effect, "UncapturedHigherOrderOpError", "Mutating a variable from outside the scope"),
    (cond_returns_input, "UncapturedHigherOrderOpError", "Encountered aliasing during higher order op tracing"),
    (cond_mutates_input, "UncapturedHigherOrderOpError", "Encountered input mutation during higher order op"),
    (cond_graph_break_in_branch, "UncapturedHigherOrderOpError", "doesn't work unless it is captured completely"),
    (cond_shapes_disagree, "TorchRuntimeError", "When merging two branches' output in torch.cond"),
])
def test_cond_refused_as_torch_refuses(fn, cls, words, real_dynamo):
    import torch._dynamo  # noqa: F401  (cond_graph_break_in_branch reads torch._dynamo.graph_break)

    with pytest.raises(Exception) as theirs:
        torch.compile(fn, backend="eager")(torch.randn(3))
    dynamo_reset()
    with pytest.raises(Exception) as ours:
        md.compile(fn, backend="eager")(torch.randn(3))
    assert type(theirs.value).__name__ == type(ours.value).__name__ == cls
    assert words in str(theirs.value) and words in str(ours.value)


# --- activation checkpointing ---------------------------------------------------------------------


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 16))


MLP = _mlp()


def ckpt_lambda(x):
    return checkpoint(lambda t: t.sin().cos(), x, use_reentrant=False) * 2


def ckpt_mlp(x):
    return checkpoint(lambda t: MLP(t).relu().sin(), x, use_reentrant=False) * 2


def plain_mlp(x):
    return MLP(x).relu().sin() * 2


def ckpt_two_regions(x):
    h = checkpoint(lambda t: MLP[1](MLP[0](t)).sin(), x, use_reentrant=False)
    return checkpoint(lambda t: MLP[4](MLP[3](MLP[2](t))).cos(), h, use_reentrant=False)


def ckpt_closure(x):
    w = MLP[2].weight
    return checkpoint(lambda t: (MLP[0](t).tanh() @ w.t()).exp(), x, use_reentrant=False).sum(-1)


SAVE_ADDMM = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.addmm.default])


def _save_activations(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op in (torch.ops.aten.gelu.default, torch.ops.aten.tanh.default) \
        else CheckpointPolicy.PREFER_RECOMPUTE


SAVE_ACTIVATIONS = functools.partial(create_selective_checkpoint_contexts, _save_activations)


def sac_list(x):
    return checkpoint(lambda t: MLP(t).relu().sin(), x, use_reentrant=False, context_fn=SAVE_ADDMM) * 2


def sac_policy(x):
    return checkpoint(lambda t: MLP(t).relu().sin(), x, use_reentrant=False, context_fn=SAVE_ACTIVATIONS) * 2


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.ln = torch.nn.Linear(16, 32), torch.nn.Linear(32, 16), torch.nn.LayerNorm(16)

    def forward(self, x, scale=1.0):
        return self.ln(x + self.l2(torch.relu(self.l1(x))) * scale)


torch.manual_seed(1)
LAYERS = torch.nn.ModuleList([_Block() for _ in range(3)])


def ckpt_layers(x):
    for block in LAYERS:  # one region per layer, as a transformer's blocks
        x = checkpoint(block, x, use_reentrant=False)
    return x


def ckpt_module_with_args(x):
    return checkpoint(LAYERS[0], x, 0.5, use_reentrant=False).sum(-1)


def ckpt_tuple(x):
    a, b = checkpoint(lambda t: (t.sin(), t.cos() * 2), x, use_reentrant=False)
    return a * b


def ckpt_kwargs(x):
    return checkpoint(lambda t, s=1.0: t.exp() * s, x, s=3.0, use_reentrant=False)


def ckpt_attention(x):
    def attend(q):
        return torch.softmax(q @ q.transpose(-1, -2) / 4.0, -1) @ q

    return checkpoint(attend, x, use_reentrant=False) + x


CKPT_PROGRAMS = [ckpt_lambda, ckpt_mlp, ckpt_two_regions, ckpt_closure, sac_list, sac_policy, ckpt_layers,
                 ckpt_module_with_args, ckpt_tuple, ckpt_kwargs, ckpt_attention]


def _x():
    return torch.randn(8, 16, generator=torch.Generator().manual_seed(1)).requires_grad_()


@pytest.mark.parametrize("fn", CKPT_PROGRAMS, ids=lambda f: f.__name__)
def test_checkpoint_graphs_and_hops_match_torch(fn, real_dynamo):
    theirs = dynamo_explain(fn, _x())
    ours = md.explain(fn, _x())
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count)
    assert [hops(g) for g in ours.graphs] == [hops(g) for g in dynamo_recorded_graphs(fn, _x())]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", CKPT_PROGRAMS, ids=lambda f: f.__name__)
def test_checkpoint_results_and_grads_equal_eager(fn, backend):
    x, ex = _x(), _x()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = md.compile(fn, backend=backend)(x)
    ref = fn(ex)
    torch.testing.assert_close(out, ref)
    params = list(MLP.parameters())
    got = torch.autograd.grad(out.sum(), [x, *params], allow_unused=True)
    want = torch.autograd.grad(ref.sum(), [ex, *params], allow_unused=True)
    for a, b in zip(got, want):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(a, b)


@pytest.mark.parametrize("fn", CKPT_PROGRAMS + [plain_mlp], ids=lambda f: f.__name__)
def test_checkpoint_saves_what_torch_aot_eager_saves(fn, real_dynamo):
    """Count and bytes of the tensors saved for the backward, graph by graph, equal torch's aot_eager's."""
    theirs = torch_aot_eager_saved(fn, _x())
    ours = saved_for_backward(fn, _x())
    assert [len(g) for g in ours] == [len(g) for g in theirs]
    assert [sum(b for _, b in g) for g in ours] == [sum(b for _, b in g) for g in theirs]


def test_selective_checkpoint_tags_each_op_with_its_policy():
    arts = []

    def backend(gm, example_inputs):
        from minidynamo.backends import aot_eager

        compiled = aot_eager(gm, example_inputs)
        arts.append(compiled.artifacts)
        return compiled

    md.compile(sac_policy, backend=backend)(_x())
    tags = {n.name: n.meta.get("recompute") for n in arts[0].joint.gm.graph.nodes if "ac_graph_id" in n.meta}
    assert tags["gelu"] is CheckpointPolicy.MUST_SAVE and tags["tanh"] is CheckpointPolicy.MUST_SAVE
    assert tags["addmm"] is CheckpointPolicy.PREFER_RECOMPUTE


def test_checkpoint_saves_less_than_without():
    with_ck = sum(b for g in saved_for_backward(ckpt_mlp, _x()) for _, b in g)
    without = sum(b for g in saved_for_backward(plain_mlp, _x()) for _, b in g)
    assert with_ck < without

"""CSE before the min-cut partition (minidynamo/aot/cse.py) against torch's ``fx_graph_cse``.

Two levels: the pass itself on one traced graph (the nodes that survive equal those of
torch's ``fx_graph_cse`` on a copy), and what it changes downstream (the saved tensors of
our ``aot_eager`` partition equal torch's ``aot_eager``'s, with ``cse`` on and off on both
sides, on a program whose duplicates change what is saved).
"""

from __future__ import annotations

import copy

import pytest
import torch

import minidynamo.aot.config as aot_config
from minidynamo._torch_private import functorch_config_patch, torch_aot_eager_saved, torch_fx_graph_cse
from minidynamo.aot.cse import fx_graph_cse
from minidynamo.aot.make_fx import make_fx
from minidynamo.fake import FakeTensorMode
from minidynamo.notebook import saved_for_backward

pytestmark = pytest.mark.ch10

aten = torch.ops.aten


def _graph_with_every_rule(x):
    a = aten.sin(x)
    b = aten.sin(x)                       # merged into a
    c, d = aten.cos(x), aten.cos(x)       # both returned: two tensors for the caller, kept
    e = aten.rand_like(x)
    f = aten.rand_like(x)                 # a random op: kept
    h, k = aten.add(x, 1), aten.add(x, 1.0)  # 1 and 1.0: kept apart
    aten.add_(x, 1)                       # a mutation: a new region
    g = aten.sin(x)                       # not merged with a (another region)
    m = aten.sin(x)                       # merged into g
    s = aten.sum(aten.mul(a, b), [0], True)
    t = aten.sum(aten.mul(a, b), [0], True)  # list arguments, merged
    return aten.add(aten.add(aten.add(s, t), aten.add(g, m)), aten.add(aten.add(e, f), aten.add(h, k))), c, d


def _survivors(graph) -> list[str]:
    return [n.name for n in graph.nodes if n.op == "call_function"]


def test_cse_keeps_what_torchs_keeps():
    gm = make_fx(_graph_with_every_rule, fake_mode=FakeTensorMode(), pass_name=None)(torch.randn(3, 4))
    theirs = torch_fx_graph_cse(copy.deepcopy(gm.graph))
    removed = fx_graph_cse(gm.graph)
    assert _survivors(gm.graph) == _survivors(theirs)
    assert removed  # the program has duplicates: the test can see a pass that does nothing
    gm.graph.lint()


def _duplicated(x, w):
    """``x @ w`` twice and a reduction twice: without CSE the min-cut must save both matmuls."""
    return (x @ w) * (x @ w).sigmoid() + x.exp().sum(-1, keepdim=True) / x.exp().sum(-1, keepdim=True).sqrt()


def _inputs():
    torch.manual_seed(0)
    return torch.randn(4, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)


def _count_and_bytes(saved):
    return [(len(g), sum(b for _, b in g)) for g in saved]


@pytest.mark.parametrize("cse", [True, False], ids=["cse", "no_cse"])
def test_saved_tensors_equal_torch_aot_eager(cse, monkeypatch):
    """Count and bytes of the saved tensors equal torch's aot_eager's, with torch's flag set the same."""
    monkeypatch.setattr(aot_config, "cse", cse)
    with functorch_config_patch(cse=cse):
        theirs = torch_aot_eager_saved(_duplicated, *_inputs())
    ours = saved_for_backward(_duplicated, *_inputs())
    assert _count_and_bytes(ours) == _count_and_bytes(theirs)


def test_cse_saves_fewer_tensors(monkeypatch):
    with_cse = _count_and_bytes(saved_for_backward(_duplicated, *_inputs()))
    monkeypatch.setattr(aot_config, "cse", False)
    without = _count_and_bytes(saved_for_backward(_duplicated, *_inputs()))
    assert with_cse[0][0] < without[0][0] and with_cse[0][1] < without[0][1]


def test_saved_tensors_equal_torch_inductor():
    """The same through the inductor backend: what the backward graph Inductor compiles reads from
    the forward (its non-tangent inputs), count and bytes, ours against ``torch.compile(backend="inductor")``."""
    import minidynamo as md
    from minidynamo._torch_private import dynamo_reset, inductor_graphs_recorder

    def saved(compile_fn):
        with inductor_graphs_recorder() as seen:
            compile_fn(_duplicated)(*_inputs()).sum().backward()
        (bw,) = [gm for kind, gm, _ in seen if kind == "backward"]
        inputs = [n.meta["val"] for n in bw.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]
        return len(inputs), sum(v.numel() * v.element_size() for v in inputs if isinstance(v, torch.Tensor))

    md.reset()
    dynamo_reset()
    ours = saved(lambda f: md.compile(f, backend="inductor"))
    theirs = saved(lambda f: torch.compile(f, backend="inductor"))
    assert ours == theirs

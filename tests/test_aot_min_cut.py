"""The min-cut partitioner against torch's, on the same joint graphs.

Each joint graph is traced once by mini AOTAutograd (through ``md.compile`` with
``backend="aot_eager"``, or ``aot_function``); then our
``min_cut_rematerialization_partition`` and torch's split copies of it. The saved
values, the forward's op multiset and the backward's op multiset must be equal.
"""

from __future__ import annotations

import collections
import copy

import pytest
import torch
import torch.nn.functional as F

import minidynamo as md
from minidynamo import bench
from minidynamo._torch_private import torch_min_cut_partition, torch_min_cut_ban_reasons
from minidynamo.aot import aot_function
from minidynamo.aot.min_cut_partition import activation_bytes, min_cut_decisions_table, min_cut_rematerialization_partition
from minidynamo.aot.partitioners import default_partition

pytestmark = pytest.mark.ch10


def _ops(gm) -> collections.Counter:
    return collections.Counter(str(n.target) for n in gm.graph.nodes if n.op == "call_function")


def _order(gm) -> list[str]:
    """The backward's nodes in order (Note [The backward in the autograd engine's order]); names are the joint's."""
    return [n.name for n in gm.graph.nodes if n.op == "call_function"]


def _joints_of(fn, *args):
    joints = []

    def backend(gm, example_inputs):
        from minidynamo.backends import aot_eager

        compiled = aot_eager(gm, example_inputs)
        joints.append((compiled.artifacts.joint, compiled.aot_function))
        return compiled

    md.reset()
    md.compile(fn, backend=backend)(*args)
    return [j for j in joints if j[0] is not None]


def _compare(joint, static=()):
    ours = min_cut_rematerialization_partition(copy.deepcopy(joint.gm), num_fwd_outputs=joint.num_fwd_outputs,
                                               static_lifetime_input_indices=list(static))
    fw, bw = torch_min_cut_partition(copy.deepcopy(joint.gm), num_fwd_outputs=joint.num_fwd_outputs,
                                     static_lifetime_input_indices=list(static))
    theirs_saved = [n.name for n in bw.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]
    assert sorted(n.name for n in ours.saved_values) == sorted(theirs_saved)
    assert _ops(ours.fw_module) == _ops(fw)
    assert _ops(ours.bw_module) == _ops(bw)
    assert _order(ours.bw_module) == _order(bw)  # torch's reordering_to_mimic_autograd_engine
    if not static:  # why each node may not be recomputed, in torch's words (chapter 10 prints both)
        theirs_banned = torch_min_cut_ban_reasons(copy.deepcopy(joint.gm), num_fwd_outputs=joint.num_fwd_outputs)
        # torch's two heuristics (values used far apart, long fusible chains) ban with no stated
        # reason, "cannot recompute" (Note [Values used far apart, and long fusible chains])
        assert ours.banned == theirs_banned
    return ours


def _workload(name):
    wl = bench._BUILDERS[name](True)
    torch.manual_seed(0)
    return wl.fn, wl.make_inputs()


def _params_static(fn, args):
    params = list(fn.parameters()) if isinstance(fn, torch.nn.Module) else []
    return params


@pytest.mark.parametrize("name", ["mlp", "transformer_block"])
def test_benchmark_workloads_match_torch(name):
    fn, args = _workload(name)
    joints = _joints_of(fn, *args)
    assert joints
    for joint, compiled in joints:
        static = [i for i, a in enumerate(joint.gm.graph.find_nodes(op="placeholder"))
                  if isinstance(a.meta.get("val"), torch.nn.Parameter)]
        _compare(joint, static)


def _chain(x, w):
    y = x @ w
    return (y.sin().cos() * 2).relu().sum()


def _norms(x, w, b):
    y = F.layer_norm(x, (x.shape[-1],), w, b)
    return F.gelu(y).softmax(-1).sum()


def _reduction(x, w):
    return (x * w).sum(-1).exp().sum()


def _dropout(x, w):
    return F.dropout(x @ w, 0.5, training=True).tanh().sum()


def _conv_bn(x, w, bw, bb):
    y = F.conv2d(x, w, padding=1)
    y = F.batch_norm(y, None, None, bw, bb, training=True)
    return F.relu(y).mean()


PROGRAMS = {
    "chain": (_chain, lambda: [torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)]),
    "norms": (_norms, lambda: [torch.randn(4, 8, requires_grad=True), torch.randn(8, requires_grad=True),
                                torch.randn(8, requires_grad=True)]),
    "reduction": (_reduction, lambda: [torch.randn(6, 16, requires_grad=True), torch.randn(16)]),
    "dropout": (_dropout, lambda: [torch.randn(3, 4, requires_grad=True), torch.randn(4, 5)]),
    "conv_bn": (_conv_bn, lambda: [torch.randn(2, 3, 6, 6, requires_grad=True), torch.randn(4, 3, 3, 3, requires_grad=True),
                                   torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)]),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_programs_match_torch(name):
    fn, make = PROGRAMS[name]
    torch.manual_seed(0)
    compiled = aot_function(fn, partition_fn=min_cut_rematerialization_partition)
    args = make()
    out = compiled(*args)
    _compare(compiled.artifacts.joint)
    if name != "dropout":  # numerics and gradients against eager
        torch.manual_seed(0)
        args_e = make()
        torch.testing.assert_close(out, fn(*args_e))
        leaves = [a for a in args if a.requires_grad]
        g_c = torch.autograd.grad(out, leaves)
        g_e = torch.autograd.grad(fn(*args_e), [a for a in args_e if a.requires_grad])
        torch.testing.assert_close(g_c, g_e)


def test_decisions_are_inspectable():
    fn, make = PROGRAMS["chain"]
    compiled = aot_function(fn, partition_fn=min_cut_rematerialization_partition)
    compiled(*make())
    part = compiled.artifacts.partition
    joint = compiled.artifacts.joint
    default = default_partition(copy.deepcopy(joint.gm), num_fwd_outputs=joint.num_fwd_outputs)
    assert [n.name for n in part.recomputed] == ["sin"]
    assert "mm" in part.banned and part.banned["mm"] == "not in recomputable allowlist"
    # default: mm, sin, detach (3 x 60 bytes); min-cut recomputes sin from mm
    assert part.saved_bytes == 120 and activation_bytes(default.saved_values) == 180
    table = min_cut_decisions_table(part, default)
    assert "recomputed" in table and "default partition saves" in table


def test_aot_eager_means_torchs():
    from minidynamo.backends import BACKENDS

    assert "aot_eager_default_partitioner" in BACKENDS
    fn, make = PROGRAMS["chain"]
    (joint, compiled), = _joints_of(fn, *make())
    assert compiled.artifacts.partition.__class__.__name__ == "MinCutResult"


class _Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(16, 48), torch.nn.Linear(16, 16)

    def forward(self, x):
        q, k, v = (t.view(2, 8, 2, 8).transpose(1, 2) for t in self.qkv(x).split(16, dim=2))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(a.transpose(1, 2).reshape(2, 8, 16))


def test_an_attention_forward_is_saved_not_run_again_in_the_backward():
    """``_scaled_dot_product_flash_attention_for_cpu`` is tagged nondeterministic_seeded; its inputs
    are saved, so the backward could compute it. Torch's backward reads its saved output and
    logsumexp (Note [A random op is no effect of the backward], partitioners.py)."""
    torch.manual_seed(0)
    (joint, _), = _joints_of(_Attention(), torch.randn(2, 8, 16))
    ours = _compare(joint)
    sdpa = "aten._scaled_dot_product_flash_attention_for_cpu.default"
    assert _ops(ours.fw_module)[sdpa] == 1 and _ops(ours.bw_module)[sdpa] == 0

"""The graphs our AOTAutograd hands Inductor, and the kernels Inductor makes of them, as torch's.

GPT-2 in training compiled to 20 Inductor C++ kernels through ``md.compile(backend="inductor")``
and to 17 through ``torch.compile``: the backward's recomputed forward ops sat at its top where
torch's partitioner moves each just before its first use (partitioners.py's Note [The backward in
the autograd engine's order]), and every returned view was regenerated at the end of the joint
graph (functional_tensor.py's Note [A mutated view stays stale]). Here one attention block (a
fused QKV projection, ``split``, SDPA, as GPT-2's) is compiled by both; every graph Inductor
receives (``inductor_graphs_recorder``) must hold torch's ops in torch's order, and Inductor must
make the same kernels of it. One cold compile (torch's second compile finds the same C++ source).
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import minidynamo as md
from minidynamo._torch_private import inductor_graphs_recorder
from minidynamo.aot.aot_autograd import AOTFallbackWarning

pytestmark = pytest.mark.ch17


@pytest.fixture(autouse=True)
def _fresh():
    md.reset()
    torch._dynamo.reset()
    yield
    md.reset()
    torch._dynamo.reset()


class QKVAttention(torch.nn.Module):
    """GPT-2's attention at toy size: ``c_attn`` as ``addmm``, q, k, v ``split`` off it, SDPA, ``c_proj``."""

    def __init__(self, dim: int = 32, heads: int = 2) -> None:
        super().__init__()
        self.dim, self.heads = dim, heads
        self.w, self.b = torch.nn.Parameter(torch.randn(dim, 3 * dim) * 0.02), torch.nn.Parameter(torch.zeros(3 * dim))
        self.pw, self.pb = torch.nn.Parameter(torch.randn(dim, dim) * 0.02), torch.nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        qkv = torch.addmm(self.b, x.view(-1, self.dim), self.w).view(*x.shape[:-1], 3 * self.dim)
        q, k, v = (t.view(*x.shape[:-1], self.heads, -1).transpose(1, 2) for t in qkv.split(self.dim, dim=2))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(x.shape)
        return torch.addmm(self.pb, a.view(-1, self.dim), self.pw).view(x.shape)


def _ops(gm) -> list[str]:
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def _kernels(output_code) -> list[str]:
    return [ln.split(" = ")[0].strip() for ln in output_code.source_code.splitlines()
            if "= async_compile.cpp_pybinding(" in ln]


def _compiled_graphs(compile_fn, model, x):
    with inductor_graphs_recorder() as seen:
        compile_fn(model)(x).sum().backward()
    return [(kind, _ops(gm), _kernels(out)) for kind, gm, out in seen], {n: p.grad for n, p in model.named_parameters()}


def test_attention_training_graphs_and_kernels_as_torchs():
    torch.manual_seed(0)
    base, x = QKVAttention(), torch.randn(2, 8, 32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AOTFallbackWarning)
        ours, our_grads = _compiled_graphs(lambda m: md.compile(m, backend="inductor"), copy.deepcopy(base), x)
    theirs, their_grads = _compiled_graphs(lambda m: torch.compile(m, backend="inductor"), copy.deepcopy(base), x)
    assert [kind for kind, _, _ in ours] == [kind for kind, _, _ in theirs] == ["forward", "backward"]
    for (kind, our_ops, our_kernels), (_, their_ops, their_kernels) in zip(ours, theirs):
        assert our_ops == their_ops, f"the {kind} graph Inductor compiled"
        assert our_kernels == their_kernels, f"the {kind} graph's kernels"
    for name, grad in their_grads.items():
        torch.testing.assert_close(our_grads[name], grad, rtol=0, atol=0)

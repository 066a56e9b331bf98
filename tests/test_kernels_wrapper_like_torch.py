"""transformers 5.25's layers through our Dynamo: the ``kernels`` package's ``new_forward``.

``@use_kernelized_func(fn)`` (kernels/_internals/layer/layer.py) replaces a module class's
``forward`` with ``new_forward``, whose closure holds the kernel function (itself an
``nn.Module`` instance, made by ``@use_kernel_forward_from_hub``); each call reads
``kernel_func.forward.__func__`` and sets and resets a ``CompileableContextVar`` in
``try/finally`` (a plain attribute while ``torch.compiler.is_compiling()``). Graph count,
break count and results against torch 2.13 (Note [A method's closure is read through its
class], variables/functions.py).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import minidynamo as md
from minidynamo._torch_private import dynamo_explain

kernels = pytest.importorskip("kernels")
pytestmark = pytest.mark.usefixtures("real_dynamo")


@kernels.use_kernel_forward_from_hub("realmodels_rotate")
def rotate(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([-x[..., 1:], x[..., :1]], dim=-1)


@kernels.use_kernelized_func(rotate)
class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return rotate(self.proj(x)).relu()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer(), Layer()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x) + x
        return x.sum(-1)


def test_graph_and_break_counts_equal_torchs():
    torch.manual_seed(0)
    model, x = Model(), torch.randn(3, 8)
    ours = md.explain(model, x)
    theirs = dynamo_explain(model, x)
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count) == (1, 0), \
        [str(r).splitlines()[0] for r in ours.break_reasons]


def test_results_equal_eager_and_torch_compile():
    torch.manual_seed(0)
    model, x = Model(), torch.randn(3, 8)
    eager = model(x)
    ours = md.compile(model, backend="aot_eager")(x)
    theirs = torch.compile(model, backend="aot_eager")(x)
    torch.testing.assert_close(ours, eager)
    torch.testing.assert_close(ours, theirs)
    assert kernels._internals.layer.layer._ACTIVE_KERNEL_FUNCS.global_var is None  # reset after the call, as eager


def test_bound_method_halves():
    lin = nn.Linear(2, 2)

    def f(x):
        m = lin.forward
        return m.__func__(m.__self__, x)

    x = torch.randn(2)
    ours = md.explain(f, x)
    theirs = dynamo_explain(f, x)
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count) == (1, 0)
    torch.testing.assert_close(md.compile(f)(x), f(x))

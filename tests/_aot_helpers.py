"""Helpers that several AOT test files share (tests/ is on sys.path; no package).

* ``torch_aot_keeping_graphs``: the real ``aot_function`` with compilers that keep the
  forward and backward graphs they are given (the oracle the chapter 10-11 claims and
  the joint-graph tests compare with).
* ``MulSavedInBackward``: a custom ``autograd.Function`` whose backward mutates the input
  it saved (AOTAutograd must copy that mutation back, as eager leaves it).
"""

from __future__ import annotations

import torch

from minidynamo._torch_private import torch_aot_function, torch_make_boxed_func


def torch_aot_keeping_graphs(fn):
    """The real aot_function of ``fn``, and the dict its forward and (after a backward) backward graphs go into."""
    graphs = {}

    def compiler(name):
        def compile_(gm, example_inputs):
            graphs[name] = gm
            return torch_make_boxed_func(gm)

        return compile_

    return graphs, torch_aot_function(fn, compiler("fw"), compiler("bw"))


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

"""Helpers that several AOT test files share (tests/ is on sys.path; no package).

* ``MulSavedInBackward``: a custom ``autograd.Function`` whose backward mutates the input
  it saved (AOTAutograd must copy that mutation back, as eager leaves it).
"""

from __future__ import annotations

import torch


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

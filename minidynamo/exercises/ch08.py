"""Exercises of chapter 08 (decompositions): write one; predict where the fused backward appears.

Place in the pipeline: none; ``notebooks/08_decompositions.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from minidynamo.exercises import NotYet, correct

__all__ = [
    "check_hardsigmoid_decomposition",
    "solution_hardsigmoid_decomposition",
    "check_where_fused_backward_appears",
    "solution_where_fused_backward_appears",
]

aten = torch.ops.aten


def check_hardsigmoid_decomposition(fn) -> str:
    """``fn(x)``: a decomposition of ``aten.hardsigmoid.default`` that never calls hardsigmoid."""
    if fn is None:
        raise NotYet("no answer yet: write def my_hardsigmoid(x): ... with smaller ops")
    if not callable(fn):
        raise NotYet(f"give a function, not a {type(fn).__name__}")
    from minidynamo.decompositions import ops_run

    x = torch.linspace(-5, 5, 41)
    ops, _, out = ops_run(fn, x)
    if any("hardsigmoid" in op for op in ops):
        raise NotYet("your function still calls aten.hardsigmoid; use smaller ops (add, div, clamp, ...)")
    want = aten.hardsigmoid.default(x)
    if not isinstance(out, torch.Tensor) or out.shape != want.shape:
        raise NotYet(f"expected a tensor of shape {tuple(want.shape)}")
    if not torch.allclose(out, want, atol=1e-6):
        worst = (out - want).abs().argmax().item()
        raise NotYet(f"wrong value at x={x[worst].item():.2f}: got {out[worst].item():.4f}, want {want[worst].item():.4f}")
    return correct(f"it runs as {sorted(set(ops))}")


def solution_hardsigmoid_decomposition():
    def hardsigmoid(x):
        return torch.clamp(x / 6 + 0.5, 0.0, 1.0)

    return hardsigmoid


_SETUPS = ("cpu", "meta", "cpu with a simulated fused kernel")


def _appears(setup: str) -> bool:
    from minidynamo.decompositions import ops_run
    from minidynamo.simulated_kernels import simulated_fused_kernels

    device = "meta" if setup == "meta" else "cpu"
    x = torch.randn(2, 4, device=device, requires_grad=True)
    f = lambda t: F.rms_norm(t, (4,))  # noqa: E731
    if setup == "cpu with a simulated fused kernel":
        with simulated_fused_kernels("CPU"):
            ops, _, _ = ops_run(f, x, backward=True)
    else:
        ops, _, _ = ops_run(f, x, backward=True)
    return "aten._fused_rms_norm_backward.default" in ops


def check_where_fused_backward_appears(answer) -> str:
    """``answer``: a dict setup -> bool for the setups "cpu", "meta" and "cpu with a
    simulated fused kernel": does ``aten._fused_rms_norm_backward`` run in the
    backward of ``F.rms_norm``?"""
    if answer is None:
        raise NotYet(f"no answer yet: give a dict with the keys {list(_SETUPS)} and True/False values")
    if not isinstance(answer, dict) or set(answer) != set(_SETUPS):
        raise NotYet(f"give a dict with exactly the keys {list(_SETUPS)}")
    for setup in _SETUPS:
        if bool(answer[setup]) != _appears(setup):
            raise NotYet(f"{setup!r}: run the experiment (decompositions.ops_run with backward=True) and look")
    return correct("only where the backend has a fused kernel does autograd record the fused op's own backward")


def solution_where_fused_backward_appears():
    return {setup: _appears(setup) for setup in _SETUPS}

"""SIMULATION: stand-in fused RMSNorm kernels at a backend key (chapter 08).

Place in the pipeline: none; it changes the dispatcher's tables for one block so a
CPU-only build behaves, for ``_fused_rms_norm``, like a build with a fused kernel.
Mirrors nothing in torch; it uses ``torch.library.Library("aten", "IMPL")`` the
way an out-of-tree backend registers kernels.

Note [The stand-in kernels are a simulation]
    This CPU build has no CUDA kernels. ``simulated_fused_kernels`` registers Python
    kernels for ``aten::_fused_rms_norm`` and ``aten::_fused_rms_norm_backward`` at a
    backend key (CPU by default), so the dispatcher's tables for that key look like a
    CUDA build's. The kernels compute with our decompositions; the point is which
    ops the dispatcher chooses, not how fast they run. Everything observed under it
    is labelled SIMULATION.
"""

from __future__ import annotations

import contextlib

import torch

from minidynamo.decompositions import fused_rms_norm, fused_rms_norm_backward

__all__ = ["simulated_fused_kernels"]

aten = torch.ops.aten


@contextlib.contextmanager
def simulated_fused_kernels(key: str = "CPU"):
    """SIMULATION: register Python kernels for the fused RMSNorm ops at backend ``key``.

    See Note [The stand-in kernels are a simulation]. Inside the block the dispatcher
    treats ``key`` as a backend with fused RMSNorm kernels, as a CUDA build does; the
    registrations are removed on exit.
    """

    def forward(x, normalized_shape, weight=None, eps=None):
        return fused_rms_norm(x, normalized_shape, weight, eps)

    def backward(grad_out, x, normalized_shape, rstd, weight, output_mask):
        gx, gw = fused_rms_norm_backward(grad_out, x, normalized_shape, rstd, weight, output_mask)
        return gx, gw

    from minidynamo._torch_private import clear_python_dispatch_cache

    ops = (aten._fused_rms_norm.default, aten._fused_rms_norm_backward.default)
    lib = torch.library.Library("aten", "IMPL")
    try:
        lib.impl("_fused_rms_norm", forward, key)
        lib.impl("_fused_rms_norm_backward", backward, key)
        for op in ops:  # the Python dispatcher (used by AOTAutograd) caches kernel choices
            clear_python_dispatch_cache(op)
        yield
    finally:
        lib._destroy()
        for op in ops:
            clear_python_dispatch_cache(op)

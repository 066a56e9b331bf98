"""Decompositions: rewriting one ATen op as smaller ATen ops (chapter 08).

Place in the pipeline: inside AOTAutograd's graph capture. ``make_fx`` runs the
program under a tracing TorchDispatchMode; when an op reaches the Python key and is
in the decomposition table, the mode runs the table's Python function instead, and
the graph records the smaller ops (``maybe_handle_decomp`` in
``torch/fx/experimental/proxy_tensor.py``). Ops whose kernel is
CompositeImplicitAutograd decompose even earlier, in C++, at the Autograd key.

Mirrors ``torch/_decomp/__init__.py`` (``register_decomposition``,
``get_decompositions``) and ``torch/_decomp/decompositions.py``. Ours is a small
table of hand-written decompositions; torch's has several hundred, and
torch.compile passes Inductor's selection of them to AOTAutograd.

Note [Two places an op decomposes]
    1. CompositeImplicitAutograd (CIA): the op has no kernel of its own for this
       backend, so the dispatcher's table sends the Autograd<Backend> key straight to
       the composite C++ kernel, which calls smaller ops *before* autograd records
       anything. Autograd then differentiates the smaller ops.
    2. A decomposition table: an op that *did* reach the Python key (it has a real
       kernel for this backend, and autograd recorded its own backward formula) is
       replaced by Python code under the tracing mode. This is how
       ``_fused_rms_norm_backward`` leaves a CUDA graph.

    The stand-in fused kernels of chapter 08's simulation live in
    ``simulated_kernels.py``; the fake-CUDA experiment in ``fake/cuda_demo.py``.
"""

from __future__ import annotations

import contextlib
import math
from typing import Callable, Iterable

import torch

from minidynamo import events

__all__ = [
    "decomposition_table",
    "register_decomposition",
    "get_decompositions",
    "decomposition_mode",
    "ops_run",
]

aten = torch.ops.aten

# Our table: OpOverload -> a Python function computing the same result with smaller ops.
decomposition_table: dict = {}


def register_decomposition(op) -> Callable:
    """Decorator: put ``fn`` in :data:`decomposition_table` for ``op`` (an OpOverload)."""
    if not hasattr(op, "_schema"):
        raise TypeError(f"register_decomposition needs an OpOverload such as aten.silu.default, got {op!r}")

    def wrap(fn):
        if op in decomposition_table:
            raise ValueError(f"a decomposition for {op} is already registered")
        decomposition_table[op] = fn
        return fn

    return wrap


def get_decompositions(ops: Iterable) -> dict:
    """The entries of our table for ``ops``; an OpOverloadPacket selects all its overloads."""
    out = {}
    for op in ops:
        if hasattr(op, "_schema"):
            if op not in decomposition_table:
                raise KeyError(f"no decomposition for {op} in minidynamo's table")
            out[op] = decomposition_table[op]
        else:
            found = {k: v for k, v in decomposition_table.items() if k.overloadpacket is op}
            if not found:
                raise KeyError(f"no decomposition for any overload of {op} in minidynamo's table")
            out.update(found)
    return out


# --- the decompositions --------------------------------------------------------------


@register_decomposition(aten.silu.default)
def silu(x):
    return x * torch.sigmoid(x)


@register_decomposition(aten.gelu.default)
def gelu(x, approximate: str = "none"):
    if approximate == "tanh":
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
        return 0.5 * x * (1 + torch.tanh(inner))
    return 0.5 * x * (1 + torch.erf(x * (1 / math.sqrt(2))))


@register_decomposition(aten.addmm.default)
def addmm(bias, mat1, mat2, *, beta=1, alpha=1):
    out = torch.mm(mat1, mat2)
    if alpha != 1:
        out = out * alpha
    if beta == 0:
        return out
    return out + (bias * beta if beta != 1 else bias)


@register_decomposition(aten.mse_loss.default)
def mse_loss(x, target, reduction: int = 1):
    loss = (x - target) ** 2
    if reduction == 0:  # none
        return loss
    return loss.mean() if reduction == 1 else loss.sum()  # 1 mean, 2 sum


def _rms_dims(x, normalized_shape):
    return [x.dim() - 1 - i for i in range(len(normalized_shape))]


def _eps(x, eps):
    return torch.finfo(x.dtype).eps if eps is None else eps


@register_decomposition(aten._fused_rms_norm.default)
def fused_rms_norm(x, normalized_shape, weight=None, eps=None):
    """Returns (output, rstd) like the fused kernel; rstd keeps the reduced dims."""
    rstd = torch.rsqrt((x * x).mean(dim=_rms_dims(x, normalized_shape), keepdim=True) + _eps(x, eps))
    out = x * rstd
    if weight is not None:
        out = out * weight
    return out, rstd


@register_decomposition(aten._fused_rms_norm_backward.default)
def fused_rms_norm_backward(grad_out, x, normalized_shape, rstd, weight, output_mask):
    """d/dx of y = x * rstd * w with rstd = (mean(x^2) + eps)^-1/2 over the last dims.

    dx = rstd * (g - x_hat * mean(g * x_hat)) with g = grad_out * w, x_hat = x * rstd;
    dw = sum over the outer dims of grad_out * x_hat.
    """
    dims = _rms_dims(x, normalized_shape)
    x_hat = x * rstd
    g = grad_out * weight if weight is not None else grad_out
    grad_x = grad_w = None
    if output_mask[0]:
        grad_x = rstd * (g - x_hat * (g * x_hat).mean(dim=dims, keepdim=True))
    if output_mask[1] and weight is not None:
        outer = list(range(x.dim() - len(normalized_shape)))
        grad_w = (grad_out * x_hat).sum(dim=outer) if outer else grad_out * x_hat
    return grad_x, grad_w


# --- applying a table: the Python-key handler ----------------------------------------


def _has_cia_kernel(func) -> bool:
    from minidynamo.dispatch.tables import kernels_for

    return "CompositeImplicitAutograd" in kernels_for(func)


def decomposition_mode(table: dict | None = None, *, decompose_implicit: bool = False):
    """A TorchDispatchMode that applies ``table`` to every op reaching the Python key.

    ``.ops`` lists the ops that ran (after decomposition), ``.decomposed`` the ops
    the table replaced. With ``decompose_implicit`` an op with a
    CompositeImplicitAutograd kernel that still reaches the Python key (under
    inference mode, say) is decomposed with ``func.decompose``, as make_fx does.
    """
    from minidynamo._torch_private import TorchDispatchMode

    chosen = decomposition_table if table is None else table

    class DecompositionMode(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.table = chosen
            self.decompose_implicit = decompose_implicit
            self.ops: list[str] = []
            self.decomposed: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in self.table:
                with self:  # the decomposition's own ops come back through this mode
                    out = self.table[func](*args, **kwargs)
                if out is not NotImplemented:  # torch's entries may decline
                    self.decomposed.append(str(func))
                    events.emit("decomposition", op=str(func), how="table")
                    return out
            if self.decompose_implicit and _has_cia_kernel(func):
                with self:
                    out = func.decompose(*args, **kwargs)
                if out is not NotImplemented:
                    self.decomposed.append(str(func))
                    events.emit("decomposition", op=str(func), how="CompositeImplicitAutograd")
                    return out
            self.ops.append(str(func))
            return func(*args, **kwargs)

    return DecompositionMode()


def ops_run(
    fn,
    *args,
    table: dict | None = None,
    backward: bool = False,
    decompose_implicit: bool = False,
    python_dispatcher: bool = False,
):
    """The ATen ops that reach the Python key while ``fn(*args)`` runs (and its backward).

    ``table=None`` applies no decompositions (pass ``decomposition_table`` or torch's
    to apply one). Returns ``(ops, decomposed, output)``; ``ops`` are torch's op
    names such as "aten.mul.Tensor". Bookkeeping ops (``detach``, ``prim.device``) are
    dropped so that lists compare across devices. ``python_dispatcher=True`` dispatches
    through torch/_ops.py as make_fx and AOTAutograd do (see Note [Kernels only the
    Python dispatcher sees] in dispatch/tables.py).
    """
    from minidynamo._torch_private import enable_python_dispatcher

    mode = decomposition_mode({} if table is None else table, decompose_implicit=decompose_implicit)
    with enable_python_dispatcher() if python_dispatcher else contextlib.nullcontext(), mode:
        out = fn(*args)
        if backward:
            first = out[0] if isinstance(out, (tuple, list)) else out
            first.sum().backward()
    skip = ("aten.detach.default", "prim.device.default", "aten.ones_like.default", "aten.expand.default")
    ops = [op for op in mode.ops if op not in skip]
    return ops, mode.decomposed, out

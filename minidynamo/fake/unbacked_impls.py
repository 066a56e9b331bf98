"""Fake outputs over unbacked symbols: ``_local_scalar_dense``, ``nonzero``, ``masked_select``, bool indexing.

Place in the pipeline: inside ``FakeTensorMode.__torch_dispatch__`` (step 2, fake_mode.py), for an op
whose output depends on data, when the mode's ShapeEnv allows it (``allow_scalar_outputs`` /
``allow_dynamic_output_shape_ops``, which Dynamo sets from ``minidynamo.config``). AOTAutograd's
passes run Dynamo's graph again on fakes: an ``item`` or ``nonzero`` node there must give a fresh
unbacked symbol (``u1``), which AOT then binds to Dynamo's (``u0``, Note [Unbacked symbols are
rebound to Dynamo's] in aot/sym_tracing.py). Mirrors ``torch/_subclasses/fake_impls.py``
(``local_scalar_dense``, ``nonzero``, ``masked_select``, ``index_tensor`` via ``meta_index``'s
``nonzero`` of a bool index).

Note [A fake mode makes unbacked symbols only when told]
    Without the flags these ops raise ``DataDependentOutputError``, which Dynamo turns
    into a graph break (torch: ``DataDependentOutputException`` /
    ``DynamicOutputShapeException``). With them, a scalar gets an unbacked SymInt
    (an int or bool tensor; a bool is ``Eq(u, 1)`` of an unbacked int in ``[0, 1]``) or
    SymFloat, and a data-dependent size an unbacked SymInt in ``[0, numel]``, torch's
    ranges. Dynamo's own trace makes its symbols before the op reaches the fake mode
    (symbolic/variables/unbacked.py); these rules serve the passes after it.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["unbacked_output"]

aten = torch.ops.aten


def unbacked_output(mode: Any, func: Any, args: tuple, kwargs: dict) -> Any:
    """The fake output of a data-dependent ``func``, over new unbacked symbols, or ``NotImplemented``."""
    env = mode.shape_env
    if env is None:
        return NotImplemented
    if func is aten._local_scalar_dense.default and env.allow_scalar_outputs:
        return _scalar(env, args[0])
    if not env.allow_dynamic_output_shape_ops:
        return NotImplemented
    with mode:
        if func is aten.nonzero.default:
            x = args[0]
            u = env.create_unbacked_symint("Tensor.nonzero()", 0, _numel(x))
            # column-major, as torch's (torch/_subclasses/fake_impls.py ``nonzero``: strides (1, u0))
            return torch.empty_strided((u, x.dim()), (1, u), dtype=torch.int64, device=x.device)
        if func is aten.masked_select.default:
            x, mask = args
            shape = torch.broadcast_shapes(x.shape, mask.shape)
            u = env.create_unbacked_symint("torch.masked_select()", 0, _numel_of(shape))
            return torch.empty((u,), dtype=x.dtype, device=x.device)
        if func is aten.index.Tensor:
            # meta_index: a bool (or uint8) index is its nonzero() columns, then integer indexing
            x, indices = args
            expanded: list = []
            for idx in indices:
                if idx is not None and idx.dtype in (torch.bool, torch.uint8):
                    expanded.extend(idx.nonzero().unbind(1))
                else:
                    expanded.append(idx)
            return aten.index.Tensor(x, expanded)
    return NotImplemented


def _scalar(env: Any, x: torch.Tensor) -> Any:
    import sympy

    from minidynamo.shapes.sym_node import SymNode

    if x.dtype is torch.bool:  # an unbacked int in [0, 1]; the bool is Eq(u, 1), as Dynamo's item
        u = env.create_unbacked_symint("Tensor.item() of a bool tensor", 0, 1)
        env.creation_range.pop(u.node.expr, None)
        return torch.SymBool(SymNode(sympy.Eq(u.node.expr, 1), env, bool, None))
    if x.dtype.is_floating_point:
        return env.create_unbacked_symfloat("Tensor.item()")
    return env.create_unbacked_symint("Tensor.item()")


def _numel(x: torch.Tensor) -> Any:
    return _numel_of(x.shape)


def _numel_of(shape) -> Any:
    n = 1
    for s in shape:
        n = n * s
    return n

"""Rebuild an alias from its base, the way eager made it: replay its views, else ``as_strided``.

Place in the pipeline: called per call by the runtime wrapper's output handlers
(``runtime_wrappers.py``, Note [Aliased outputs are returned, then regenerated]) for
each output that aliases an input or an intermediate. Mirrors ``gen_alias_from_base``
of ``torch/_functorch/_aot_autograd/functional_utils.py`` (its ``patch_requires_grad``
and its replay of the ``ViewMetaSequence`` functionalization recorded).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from minidynamo import events
from minidynamo.aot.schemas import replay_views

__all__ = ["gen_alias_from_base"]


def gen_alias_from_base(
    base: torch.Tensor,
    target: torch.Tensor,
    target_requires_grad: bool,
    view_chain: tuple | None,
    *,
    replay_views_ok: bool = True,
    no_grad_view: bool = False,
    layout: tuple | None = None,
    **why: Any,
) -> torch.Tensor:
    """Rebuild the alias ``target`` (same size/stride/offset) as a view of ``base``.

    ``target`` is the alias the compiled forward returned (or its fake twin);
    ``view_chain`` the views functionalization saw from the base to the output.
    """
    replay = functools.partial(replay_views, view_chain=view_chain) if replay_views_ok and view_chain else None
    return _regen(base, target, target_requires_grad, replay, no_grad_view, layout, why)


def _regen(base: torch.Tensor, target: torch.Tensor, target_requires_grad: bool, replay: Callable | None,
           no_grad_view: bool, layout: tuple | None, why: dict) -> torch.Tensor:
    """``gen_alias_from_base`` with the view replay prepared once.

    runtime_wrappers' Note [Precomputed indices on the hot path]: the handlers build ``replay`` once.
    """
    if layout is not None:
        size, stride, offset = layout
    else:
        size, stride, offset = target.size(), target.stride(), target.storage_offset()
    out = None
    if replay is not None:
        try:
            candidate = replay(base)
        except RuntimeError:
            candidate = None
        # size() is a torch.Size, a tuple: it compares equal to the tuple a layout holds.
        if (candidate is not None and candidate.size() == size and candidate.stride() == stride
                and candidate.storage_offset() == offset):
            out = candidate
    how = "view_replay" if out is not None else "as_strided"
    if out is None:
        out = base.as_strided(size, stride, offset)
    if out.dtype != target.dtype:
        out = out.view(target.dtype)
    # torch: patch_requires_grad in gen_alias_from_base.
    base_rg = base.requires_grad
    if no_grad_view and target_requires_grad and base_rg:
        # Eager made this view under no_grad: it requires grad but has no grad_fn (torch
        # gives it a grad_fn here; the metadata's requires_grad_for_backward lets us match eager).
        with torch.no_grad():
            out = out.view_as(out)
    elif base_rg and not target_requires_grad:
        out = out.detach()
    elif not base_rg and target_requires_grad:
        out.requires_grad_(True)
    if events._recording:
        events.emit("alias_regen", how=how, **why)
    return out


def _single_view(chain: tuple | None) -> tuple | None:
    """``(callable, args)`` when the chain is one plain view (no kwargs, one output), else None.

    The callable is the view's cheapest entry point (graph_runner's Note [Calling aten ops
    without OpOverload.__call__]); any tensor stands for the base in that choice.
    """
    if chain and len(chain) == 1 and not chain[0].kwargs and chain[0].out_index is None:
        from minidynamo.aot.graph_runner import bind_op

        op, args = chain[0].op, chain[0].args
        return bind_op(op, (_ANY_TENSOR, *args)), args
    return None


_ANY_TENSOR = torch.empty(0)  # no device: only binds an op's first argument, never computed with


def _view_replayer(chain: tuple | None) -> Callable | None:
    """``replay_views(·, chain)``, specialised once: a chain of one plain view is a single op call."""
    if not chain:
        return None
    single = _single_view(chain)
    if single is not None:
        op, args = single
        return lambda base: op(base, *args)
    return functools.partial(replay_views, view_chain=chain)

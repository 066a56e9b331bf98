"""Inverse views: write a view's new value back into its root base with functional ops.

Place in the pipeline: ``FunctionalTensorMode._commit`` (``functional_tensor.py``) calls
``scatter_into_base`` when an in-place op hits a view (Note [Mutating a view]).
Mirrors ``aten/src/ATen/FunctionalInverses.cpp`` (the generated reverse view functions)
and the ``*_scatter`` ops torch's functionalization emits.
"""

from __future__ import annotations

import torch

from minidynamo.aot.functional_wrapper import FunctionalizationError
from minidynamo.aot.schemas import ViewMeta

aten = torch.ops.aten


def _inverse_view(step: ViewMeta, parent: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """The value of ``parent`` after its view ``step(parent)`` became ``new`` (a functional op).

    Torch generates one "reverse view function" per view op (``*_scatter`` ops
    and inverse views); ours covers the common view ops by hand and falls back
    to ``as_strided_scatter``.
    """
    op, args = step.op, step.args
    name = op._schema.name.split("::")[1]
    if name in ("view", "_unsafe_view", "reshape", "squeeze", "flatten", "unflatten", "view_as"):
        return aten.view.default(new, list(parent.shape))
    if name in ("alias", "detach", "lift_fresh"):
        return new
    if name in ("_conj", "_neg_view"):  # torch's _conj_inverse / _neg_view_inverse (FunctionalInverses.cpp)
        return getattr(aten, name).default(new)
    if name == "t":
        return aten.t.default(new)
    if name == "transpose":
        return aten.transpose.int(new, *args)
    if name == "permute":
        dims = [d % parent.dim() for d in args[0]]
        inverse = [dims.index(i) for i in range(len(dims))]
        return aten.permute.default(new, inverse)
    if name == "unsqueeze":
        return aten.squeeze.dim(new, args[0])
    if name == "select":
        return aten.select_scatter.default(parent, new, *args)
    if name == "slice":
        return aten.slice_scatter.default(parent, new, *args)
    if name == "diagonal":
        return aten.diagonal_scatter.default(parent, new, *args)
    if name == "as_strided":
        return aten.as_strided_scatter.default(parent, new, *args)
    if name == "unbind":
        dim = args[0] if args else 0
        return aten.select_scatter.default(parent, new, dim, step.out_index)
    if name in ("split", "split_with_sizes", "chunk"):
        dim = args[1] if len(args) > 1 else 0
        sizes = _split_sizes(name, parent.shape[dim], args[0])
        start = sum(sizes[: step.out_index])
        return aten.slice_scatter.default(parent, new, dim, start, start + sizes[step.out_index])
    if name == "expand":
        # torch's expand_inverse (FunctionalInverses.cpp): each changed element of the expanded
        # view adds its change to the one element of the parent it shows (``scatter_into_base``
        # has refused writes that reach one element twice).
        delta = aten.sub.Tensor(new, step.replay(parent))
        lead = new.dim() - parent.dim()
        dims = list(range(lead)) + [lead + i for i, n in enumerate(parent.shape) if n == 1 and new.shape[lead + i] != 1]
        if dims:
            delta = aten.view.default(aten.sum.dim_IntList(delta, dims, True, dtype=parent.dtype), list(parent.shape))
        return aten.add.Tensor(parent, delta)
    # Fallback: where the view sits inside its parent, from the layout below us.
    view = step.replay(parent)
    offset = view.storage_offset() - parent.storage_offset()
    return aten.as_strided_scatter.default(parent, new, list(view.shape), list(view.stride()), offset)


def _split_sizes(name: str, total: int, arg) -> list[int]:
    if name == "split_with_sizes":
        return list(arg)
    if name == "chunk":
        arg = -(-total // arg)
    return [min(arg, total - i) for i in range(0, total, arg)] or [0]


_MAY_OVERLAP = frozenset({"aten::expand", "aten::unfold", "aten::as_strided"})


def _has_internal_overlap(t: torch.Tensor, exact_up_to: int = 1 << 16) -> bool:
    """Whether two elements of the view ``t`` share a memory location (an expand, an overlapping unfold).

    Like ``at::has_internal_overlap`` where that one can tell (a zero stride); where it
    cannot, the layout is checked: dims sorted by stride, each stride beyond the reach of
    the smaller ones means no overlap; otherwise the offsets are enumerated (views of more
    than ``exact_up_to`` elements count as overlapping). Symbolic layouts are not checked.
    """
    dims = [(st, n) for n, st in zip(t.shape, t.stride()) if n != 1]
    if not all(isinstance(st, int) and isinstance(n, int) for st, n in dims):
        return False
    if any(st == 0 for st, _ in dims):
        return True
    reach = 0
    for st, n in sorted(dims):
        if st <= reach:
            break
        reach += (n - 1) * st
    else:
        return False
    numel = 1
    for _, n in dims:
        numel *= n
    if numel > exact_up_to:
        return True
    offsets = {0}
    for st, n in dims:
        offsets = {o + i * st for o in offsets for i in range(n)}
    return len(offsets) < numel


def scatter_into_base(base: torch.Tensor, chain: tuple[ViewMeta, ...], new: torch.Tensor) -> torch.Tensor:
    """Note [Mutating a view]: the new value of the root base after ``replay_views(base, chain)`` became ``new``.

    Walk the chain from the outermost view inwards: each step's parent gets the
    inverse of that view applied. The intermediate parents are recomputed by
    replaying the chain (view ops, cheap and functional).
    """
    parents = [base]
    for step in chain[:-1]:
        parents.append(step.replay(parents[-1]))
    # Only these view ops make elements share memory; the layout is looked at only after one of them.
    if any(step.op._schema.name in _MAY_OVERLAP for step in chain) and _has_internal_overlap(chain[-1].replay(parents[-1])):
        expanded = any(step.op._schema.name == "aten::expand" for step in chain)
        raise FunctionalizationError(
            f"in-place write into {'an expanded view (aten.expand)' if expanded else f'a view ({chain[-1].op})'}: "
            "more than one element refers to the same memory location; eager writes such an element once per "
            "element that shows it, a functional program cannot (torch's functionalization refuses it: "
            "'internal overlap')"
        )
    for step, parent in zip(reversed(chain), reversed(parents)):
        new = _inverse_view(step, parent, new)
    return new

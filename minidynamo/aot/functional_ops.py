"""Which ATen ops write, which are views, and the functional twin of each writing op.

Place in the pipeline: read by ``FunctionalTensorMode`` (``functional_tensor.py``) and its
mutation kernels (``functional_mutations.py``) to route an op from its schema alone.
Torch decides this at build time: torchgen reads the same schemas
(``torchgen/gen_functionalization_type.py``: ``Tensor(a!)`` arguments, view ops, the
``NativeFunctionsGroup`` pairing an in-place or ``out=`` op with its functional sibling);
we ask the schemas at run time. Mirrors ``torchgen/gen_functionalization_type.py``
(and ``torchgen/model.py``'s ``NativeFunctionsGroup``), asked at run time instead of build time.
"""

from __future__ import annotations

from typing import Any

import torch

from minidynamo.aot.functional_wrapper import FunctionalizationError

aten = torch.ops.aten



def _is_write(arg_or_ret) -> bool:
    return arg_or_ret.alias_info is not None and arg_or_ret.alias_info.is_write


_view_ops: dict[Any, bool] = {}  # op -> _is_view_op(op): a schema never changes


def _is_view_op(func) -> bool:
    try:
        return _view_ops[func]
    except KeyError:
        pass
    rets = func._schema.returns
    out = _view_ops[func] = bool(rets) and rets[0].alias_info is not None and not rets[0].alias_info.is_write
    return out


def _written_arguments(func, args, kwargs) -> list[tuple[int, Any]]:
    """``(schema position, value)`` of every argument the schema marks ``Tensor(a!)``, positional or keyword."""
    out = []
    for i, a in enumerate(func._schema.arguments):
        if not _is_write(a):
            continue
        if i < len(args):
            out.append((i, args[i]))
        elif a.name in kwargs:
            out.append((i, kwargs[a.name]))
    return out


def _functional_variant(func):
    """``aten.add_.Tensor`` -> ``aten.add.Tensor``; ``aten.transpose_.default`` -> ``aten.transpose.int``."""
    name = func._schema.name.split("::")[1].rstrip("_")
    packet = getattr(aten, name, None)
    if packet is None:
        raise FunctionalizationError(f"no functional variant of {func} (looked for aten.{name})")
    overload = func._overloadname
    if overload in packet.overloads():
        return getattr(packet, overload)
    # Overload names differ (transpose_.default vs transpose.int): match by argument names.
    want = [a.name for a in func._schema.arguments]
    for ov in packet.overloads():
        cand = getattr(packet, ov)
        if [a.name for a in cand._schema.arguments] == want:
            return cand
    raise FunctionalizationError(f"no functional overload of {func} in aten.{name}")


def _out_variant_twin(func):
    """Note [out= ops]: the functional sibling of an ``out=`` overload, found from the schemas alone.

    ``sin.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)`` pairs with
    ``sin.default(Tensor self) -> Tensor``: same name, and the same arguments once
    the written ones are dropped; it returns one value per written argument, in
    order. Torch's codegen pairs them the same way (a ``NativeFunctionsGroup``).
    """
    name = func._schema.name.split("::")[1]
    packet = getattr(aten, name, None)
    want = [(a.name, str(a.type)) for a in func._schema.arguments if not _is_write(a)]
    n_written = sum(_is_write(a) for a in func._schema.arguments)
    for ov in packet.overloads() if packet is not None else ():
        cand = getattr(packet, ov)
        sch = cand._schema
        if any(_is_write(a) for a in sch.arguments) or any(r.alias_info is not None for r in sch.returns):
            continue
        if [(a.name, str(a.type)) for a in sch.arguments] == want and len(sch.returns) == n_written:
            return cand
    raise FunctionalizationError(f"{func}: no functional overload of aten.{name} takes its non-out arguments")


def _contiguous_strides(size) -> list[int]:
    strides, acc = [], 1
    for s in reversed(list(size)):
        strides.append(acc)
        acc *= max(int(s), 1)
    return strides[::-1]


def _with_defaults(func, twin, args, kwargs):
    """``args`` plus the positional arguments ``twin`` requires that the dispatcher dropped.

    The dispatcher omits trailing arguments left at their default (``bernoulli_(p=0.5)``
    arrives as ``bernoulli_(x)``); the functional twin may have no default for them
    (``bernoulli.p``). Only those are filled in, from ``func``'s own defaults.
    """
    args = list(args)
    defaults = {a.name: a for a in func._schema.arguments if a.has_default_value()}
    for i, a in enumerate(twin._schema.arguments):
        if a.kwarg_only or i < len(args) or a.name in kwargs or a.has_default_value():
            continue
        if a.name not in defaults:
            break
        args.append(defaults[a.name].default_value)
    return tuple(args), kwargs

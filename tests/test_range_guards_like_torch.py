"""A symbol's range guard reads as torch's (chapter 15): the shape guards of one dynamic trace, in order.

Torch's ``ShapeEnv.produce_guards_verbose`` (torch/fx/experimental/symbolic_shapes.py) prints the
sizes found equal, then the trace's decisions its value ranges do not settle, then each symbol's
range as one guard (``2 <= L['x'].size()[0] <= 3``), narrowed by ``ShapeEnv._refine_ranges``.
Torch's list is read from its guard tree (the root's ``LAMBDA_GUARD`` leaves, through
``minidynamo._torch_private``), ours from the entry's SHAPE_ENV guards (Note [A symbol's range guard]).
"""

from __future__ import annotations

import warnings

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_guard_tree, dynamo_reset

pytestmark = [pytest.mark.ch15, pytest.mark.usefixtures("real_dynamo")]


def upper_bound(x):
    if x.size(0) > 3:
        return x.sum()
    return x.mean()


def lower_bound(x):
    if x.size(0) <= 3:
        return x.sum()
    return x.mean()


def duck_and_bound(x, y):
    if x.size(0) > 3:
        return x.sum() + y.sum()
    return x + y


def two_sizes(x, y):
    if x.size(0) > y.size(0):
        return x.sum()
    return y.sum()


def plain(x):
    return x * 2


CASES = {
    "upper_bound_from_if": (upper_bound, (torch.ones(2),)),
    "lower_bound_from_if": (lower_bound, (torch.ones(5),)),
    "zero_one_specialization_only": (plain, (torch.ones(3),)),
    "duck_sizing_then_bound": (duck_and_bound, (torch.ones(5), torch.ones(5))),
    "bound_from_another_symbol": (two_sizes, (torch.ones(5), torch.ones(3))),
}


def shape_guards(fn, args) -> tuple[list, list]:
    dynamo_reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(fn, backend="eager", dynamic=True)(*args)
    tree = dynamo_guard_tree(fn.__code__)
    theirs = [line.split("LAMBDA_GUARD: ", 1)[1].split("  #")[0].strip() for line in tree.splitlines()
              if "LAMBDA_GUARD: " in line and "top_saved_tensors_hooks" not in line]
    md.reset()
    f = md.compile(fn, backend="eager", dynamic=True)
    f(*args)
    ours = [g.expr for g in f.cache.entries[0].guards if g.kind == "SHAPE_ENV"]
    md.reset()
    return ours, theirs


@pytest.mark.parametrize("name", list(CASES))
def test_shape_guards_read_as_torchs_in_its_order(name):
    ours, theirs = shape_guards(*CASES[name])
    assert ours == theirs


def test_an_int_with_bounds_reads_as_torchs():
    """An int's range is every int until a decision bounds it: ``0 <= L['i'] <= 3`` after indexing."""
    T = torch.arange(4.0)

    def index_i(x, i):
        return x[i]

    dynamo_reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tf = torch.compile(index_i, backend="eager")
        for i in (0, 1):
            tf(T, i)
    tree = dynamo_guard_tree(index_i.__code__, 0)
    theirs = [line.split("LAMBDA_GUARD: ", 1)[1].split("  #")[0].strip() for line in tree.splitlines()
              if "LAMBDA_GUARD: " in line and "top_saved_tensors_hooks" not in line]
    md.reset()
    f = md.compile(index_i, backend="eager")
    for i in (0, 1):
        f(T, i)
    ours = [g.expr for e in f.cache.entries for g in e.guards if g.kind == "SHAPE_ENV"]
    md.reset()
    assert ours == theirs


def test_a_range_pinned_to_one_value_is_that_size():
    """``if x.size(0) > 2`` traced with 2 leaves ``s0`` one value: torch's ``_refine_ranges`` replaces it by 2, so the
    size is static again and a call with 3 fails the tensor's own size check, as in torch."""
    def pinned(x):
        return x * 2 if x.size(0) > 2 else x - 1

    import sys
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    from test_habits_like_torch import run

    def prog(api):
        f = api.compile(pinned, dynamic=True)
        return [lambda n=n: f(torch.ones(n)) for n in (2, 3, 2)]

    theirs, ours = run(prog, "torch"), run(prog, "ours")
    assert ours["reasons"] == theirs["reasons"]
    assert ours["graphs"] == theirs["graphs"]

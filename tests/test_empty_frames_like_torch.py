"""A frame whose trace makes no graph, against torch 2.13 (chapter 4): per call, which entry ran and the compiles.

torch's ``InstructionTranslator._return`` (torch/_dynamo/symbolic_convert.py) raises
``SkipFrame("No ops traced for the FX graph ...")`` when a frame returns with no call
in its graph (not fullgraph, not a resume prologue, no nn.Module class among its
locals), and ``convert_frame.py``'s ``_compile`` / ``ConvertFrame`` answer it with the
default ``ConvertFrameReturn`` (torch/_dynamo/types.py): ``FrameAction.SKIP`` with
``apply_to_code=True``, so the code is skipped for good, whatever later calls pass;
a frame with no tensor in it (``has_tensor_in_frame``) is skipped the same way. Each
sequence below runs through ``md.compile`` and ``torch.compile`` with the recording
backend of tests/test_cache_like_torch.py; per call we compare (the graphs that ran,
compiles so far), and every result with eager.
"""

from __future__ import annotations

import pytest
import torch

from tests.test_cache_like_torch import _with_eager, both

pytestmark = pytest.mark.ch04


def add_ints(a, b):
    return a + b


def double_or_n(x, n):
    if n > 0:
        return x * 2
    return n


def identity(x):
    return x


def size_plus_one(x):
    return x.size(0) + 1


def calls_ints_only(make):
    f = _with_eager(make(add_ints), add_ints)
    for a, b in ((1, 2), (3, 4), (1, 2)):
        yield f, (a, b)


def calls_no_graph_first_then_graph(make):
    f = _with_eager(make(double_or_n), double_or_n)
    for n in (0, 1, 1, 2):
        yield f, (torch.ones(3), n)


def calls_graph_first_then_no_graph(make):
    f = _with_eager(make(double_or_n), double_or_n)
    for n in (1, 0, 1, 2):
        yield f, (torch.ones(3), n)


def calls_identity(make):
    f = _with_eager(make(identity), identity)
    for n in (3, 3, 4):
        yield f, (torch.ones(n),)


def calls_size_only(make):
    f = _with_eager(make(size_plus_one), size_plus_one)
    for n in (3, 3, 4, 5):
        yield f, (torch.ones(n),)


def calls_fresh_wrapper_after_skip(make):
    f = _with_eager(make(double_or_n), double_or_n)
    yield f, (torch.ones(3), 0)
    g = _with_eager(make(double_or_n), double_or_n)  # a new wrapper of the skipped code
    for n in (1, 2):
        yield g, (torch.ones(3), n)


def calls_fullgraph_no_graph_first(make):
    f = _with_eager(make(double_or_n, fullgraph=True), double_or_n)
    for n in (0, 0, 1, 1):
        yield f, (torch.ones(3), n)


def double_or_none(x, flag):
    if flag:
        return x * 2
    return None


def sum_list(xs, n):
    return xs[0] + n if n else n


def calls_graph_then_no_graph_then_graph(make):
    f = _with_eager(make(double_or_none), double_or_none)
    for flag in (True, False, True, False):
        yield f, (torch.ones(3), flag)


def calls_ints_only_dynamic(make):
    f = _with_eager(make(add_ints, dynamic=True), add_ints)
    for a, b in ((1, 2), (3, 4), (5, 6)):
        yield f, (a, b)


def calls_tensor_in_a_list(make):
    f = _with_eager(make(sum_list), sum_list)
    for n in (0, 1, 2):
        yield f, ([torch.ones(3)], n)


_break = torch._dynamo.graph_break  # a global that is no torch module: int_helper names no torch


def int_helper(a, b):
    _break()
    return a + b


def times_helper(x, n):
    return x * int_helper(n, 1)


def calls_a_callee_without_tensors(make):
    f = _with_eager(make(times_helper), times_helper)
    for n in (1, 2, 3, 1):
        yield f, (torch.ones(3), n)


SEQUENCES = {
    "ints_only": calls_ints_only,
    "no_graph_first_then_graph": calls_no_graph_first_then_graph,
    "graph_first_then_no_graph": calls_graph_first_then_no_graph,
    "identity": calls_identity,
    "size_only": calls_size_only,
    "fresh_wrapper_after_skip": calls_fresh_wrapper_after_skip,
    "fullgraph_no_graph_first": calls_fullgraph_no_graph_first,
    "graph_then_no_graph_then_graph": calls_graph_then_no_graph_then_graph,
    "ints_only_dynamic": calls_ints_only_dynamic,
    "tensor_in_a_list": calls_tensor_in_a_list,
    "callee_without_tensors": calls_a_callee_without_tensors,
}


@pytest.mark.parametrize("name", list(SEQUENCES))
def test_a_frame_without_a_graph_is_treated_as_torch_treats_it(name):
    ours, theirs = both(SEQUENCES[name])
    assert ours == theirs, f"per call (graphs that ran, compiles so far): ours {ours}, torch {theirs}"

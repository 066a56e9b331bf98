"""Exercises of chapter 11 (aliasing and mutation at runtime): how aliases come back, what is written back,
which aliased inputs become a synthetic base.

Place in the pipeline: none; ``notebooks/11_aliasing_and_mutation_at_runtime.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
"""

from __future__ import annotations

import torch

from minidynamo import events
from minidynamo._torch_private import torch_aot_function, torch_collect_metadata, torch_make_boxed_func
from minidynamo.exercises import NotYet, correct

__all__ = ["quiz_mutations", "check_mutated_indices", "solution_mutated_indices",
           "quiz_regen", "quiz_regen_inputs", "check_regen_ways", "solution_regen_ways",
           "quiz_synthetic", "quiz_synthetic_pairs", "torch_graph_inputs", "check_synthetic_pairs",
           "solution_synthetic_pairs"]


def quiz_mutations(a, b, c, d, e, f):
    """Exercise 1: which input indices does the runtime wrapper write back after each call?"""
    b.add_(1)
    e.t_()
    return a + c + d.sum() + f.sum()


def check_mutated_indices(answer) -> str:
    if answer is None:
        raise NotYet("no answer yet: a list of input indices")
    args = [torch.randn(3) for _ in range(3)] + [torch.randn(2, 3) for _ in range(3)]
    args[2] = torch.randn(3)
    meta = torch_collect_metadata(quiz_mutations, *args)
    want = [i for i, m in enumerate(meta.input_info) if m.mutates_data or m.mutates_metadata]
    if list(answer) != want:
        raise NotYet(f"{answer} is not it: a metadata mutation (t_) counts too")
    return correct(f"torch's mutated_inp_runtime_indices is {list(meta.mutated_inp_runtime_indices)}")


def solution_mutated_indices():
    return [1, 4]


def quiz_regen(a, b):
    """Exercise 2: how is each aliased output rebuilt: "view_replay" or "as_strided"?"""
    a.mul_(2)
    return a.view(-1), b.t()


def quiz_regen_inputs():
    base = torch.randn(3, 3)
    # rows 0-1 and 1-2 of one base: they overlap (row 1), and a is mutated: a synthetic base
    return [base[:2], base[1:]], [torch.randn(2, 3), torch.randn(2, 3)]


def check_regen_ways(answer) -> str:
    """``answer``: (ways for aliased inputs, ways for independent inputs), each a list of two strings."""
    if answer is None:
        raise NotYet("no answer yet: two lists of 'view_replay' / 'as_strided'")
    from minidynamo.aot import aot_function

    aliased, independent = quiz_regen_inputs()
    want = []
    for args in (aliased, independent):
        with events.record() as log:
            aot_function(quiz_regen)(*args)
        want.append([e.how for e in log if e.kind == "alias_regen"])
    answer = [list(x) for x in answer]
    if answer != want:
        raise NotYet("not yet: what does a synthetic base do to the view chain of an input?")
    return correct("aliased inputs go through a synthetic base: as_strided; independent inputs: view replay")


def solution_regen_ways():
    return (["as_strided", "as_strided"], ["view_replay", "view_replay"])


def quiz_synthetic(a, b):
    """Exercise 3: for which pairs (a, b) does the compiled graph take one synthetic base instead of two inputs?"""
    a.add_(1)
    return a + b


def quiz_synthetic_pairs() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Pairs of inputs for ``quiz_synthetic``, by name (fresh tensors on every call)."""
    x = torch.arange(12.0).view(3, 4)
    y = torch.arange(16.0).view(4, 4)
    z = torch.arange(8.0)
    return {
        "rows 0-1 and rows 1-2": (x[:2], x[1:]),
        "row 0 and row 2": (x[0], x[2]),
        "even and odd elements": (z[0::2], z[1::2]),
        "top-left and bottom-right 2x2 blocks": (y[:2, :2], y[2:, 2:]),
        "column 1 and row 1": (y[:, 1], y[1]),
        "two separate tensors": (torch.zeros(4), torch.zeros(4)),
    }


def torch_graph_inputs(fn, *args) -> int:
    """How many inputs the real aot_function's forward graph takes for these arguments."""
    graphs = []
    torch_aot_function(fn, lambda gm, _ex: graphs.append(gm) or torch_make_boxed_func(gm))(*args)
    return sum(n.op == "placeholder" for n in graphs[0].graph.nodes)


def check_synthetic_pairs(answer) -> str:
    """``answer``: the set of pair names (keys of ``quiz_synthetic_pairs()``) that get one synthetic base."""
    if answer is None:
        raise NotYet("no answer yet: a set of names from quiz_synthetic_pairs(), e.g. {'row 0 and row 2'}")
    if isinstance(answer, str) or not hasattr(answer, "__iter__"):
        raise NotYet("give a set of names from quiz_synthetic_pairs()")
    names = set(quiz_synthetic_pairs())
    unknown = set(answer) - names
    if unknown:
        raise NotYet(f"not pair names: {sorted(unknown)}; the names are {sorted(names)}")
    want = {k for k in names if torch_graph_inputs(quiz_synthetic, *quiz_synthetic_pairs()[k]) == 1}
    if set(answer) != want:
        missing, extra = sorted(want - set(answer)), sorted(set(answer) - want)
        raise NotYet(
            f"{len(missing)} missing, {len(extra)} too many. Hint: one storage is not enough, and sharing an element "
            "is not needed either: torch merges two inputs unless it can prove they do not overlap, and it proves "
            "that only for disjoint ranges or for matrices whose rows interleave"
        )
    return correct(
        "rows 0-1/1-2 and column 1/row 1 share elements; even/odd share none, but torch cannot prove it "
        "(their ranges interleave, and they are not matrices with contiguous rows), so it merges them too"
    )


def solution_synthetic_pairs():
    return {"rows 0-1 and rows 1-2", "even and odd elements", "column 1 and row 1"}

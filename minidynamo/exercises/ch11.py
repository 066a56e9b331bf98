"""Exercises of chapter 11 (aliasing and mutation at runtime): how aliases come back, what is written back.

Place in the pipeline: none; ``notebooks/11_aliasing_and_mutation_at_runtime.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
"""

from __future__ import annotations

import torch

from minidynamo import events
from minidynamo._torch_private import torch_collect_metadata
from minidynamo.exercises import NotYet, correct

__all__ = ["quiz_mutations", "check_mutated_indices", "solution_mutated_indices",
           "quiz_regen", "quiz_regen_inputs", "check_regen_ways", "solution_regen_ways"]


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

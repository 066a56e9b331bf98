"""Exercises of chapter 10 (joint graph and partitioning): what is saved, who gets a tangent.

Place in the pipeline: none; ``notebooks/10_joint_graph_and_partitioning.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
The checks ask the real ``aot_function`` (the graphs it hands to its compilers).
"""

from __future__ import annotations

import torch

from minidynamo._torch_private import torch_aot_function, torch_make_boxed_func
from minidynamo.exercises import NotYet, correct

__all__ = ["quiz_saved", "quiz_tangents", "check_num_saved", "solution_num_saved",
           "check_num_tangents", "solution_num_tangents"]


def quiz_saved(x, y):
    """Exercise 1: how many tensors does the forward save for the backward?"""
    return (x * y).sin()


def quiz_tangents(x):
    """Exercise 2: how many tangents does the backward graph take?"""
    return x.t(), x * 2, x.sum()


def _torch_backward_inputs(fn, *args):
    graphs = {}

    def compiler(name):
        def compile_(gm, example_inputs):
            graphs[name] = gm
            return torch_make_boxed_func(gm)

        return compile_

    outs = torch_aot_function(fn, compiler("fw"), compiler("bw"))(*args)
    outs = outs if isinstance(outs, (tuple, list)) else [outs]
    torch.autograd.backward([o.sum() for o in outs if o.requires_grad and o.grad_fn is not None])
    names = [n.name for n in graphs["bw"].graph.nodes if n.op == "placeholder"]
    return [n for n in names if not n.startswith("tangents")], [n for n in names if n.startswith("tangents")]


def check_num_saved(answer) -> str:
    if answer is None:
        raise NotYet("no answer yet: an int")
    saved, _ = _torch_backward_inputs(quiz_saved, torch.randn(3, requires_grad=True),
                                      torch.randn(3, requires_grad=True))
    if answer != len(saved):
        raise NotYet(f"{answer} is not it: which values do sin's and mul's backward formulas read?")
    return correct(f"torch saves {', '.join(saved)}: both inputs for mul's backward, mul for sin's")


def solution_num_saved():
    return 3


def check_num_tangents(answer) -> str:
    if answer is None:
        raise NotYet("no answer yet: an int")
    _, tangents = _torch_backward_inputs(quiz_tangents, torch.randn(2, 3, requires_grad=True))
    if answer != len(tangents):
        raise NotYet(f"{answer} is not it: does an output that aliases an input get a tangent?")
    return correct("x.t() aliases the input: no tangent; the other two outputs get one each")


def solution_num_tangents():
    return 2

"""Exercises of chapter 10 (joint graph and partitioning): what is saved, who gets a tangent, what is recomputed.

Place in the pipeline: none; ``notebooks/10_joint_graph_and_partitioning.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
The checks ask the real ``aot_function`` (the graphs it hands to its compilers, and,
for the min-cut exercise, the partition torch's ``min_cut_rematerialization_partition``
makes of torch's own joint graph).
"""

from __future__ import annotations

import torch

from minidynamo._torch_private import (torch_aot_function, torch_aot_keeping_graphs, torch_make_boxed_func,
                                       torch_min_cut_partition)
from minidynamo.exercises import NotYet, correct

__all__ = ["quiz_saved", "quiz_tangents", "quiz_remat", "quiz_remat_inputs", "check_num_saved",
           "solution_num_saved", "check_num_tangents", "solution_num_tangents", "check_recomputed",
           "solution_recomputed", "torch_min_cut_decisions"]


def quiz_saved(x, y):
    """Exercise 1: how many tensors does the forward save for the backward?"""
    return (x * y).sin()


def quiz_tangents(x):
    """Exercise 2: how many tangents does the backward graph take?"""
    return x.t(), x * 2, x.sum()


def quiz_remat(x, w):
    """Exercise 3: which ops does the min-cut partition compute again in the backward?"""
    return ((x @ w).relu() * 3).cos().sum()


def quiz_remat_inputs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(8, 16, generator=g).requires_grad_(), torch.randn(16, 16, generator=g).requires_grad_()]


def _torch_backward_inputs(fn, *args):
    graphs, compiled = torch_aot_keeping_graphs(fn)
    outs = compiled(*args)
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


def torch_min_cut_decisions(fn, *args) -> tuple[list[str], list[str]]:
    """torch's min-cut partition of torch's joint graph of ``fn``: (saved values, ops recomputed in the backward).

    A recomputed op is a backward node that carries the name of a forward node (the
    partitioner copies it into the backward graph under the same name).
    """
    decided = {}

    def partition(joint, _joint_inputs, *, num_fwd_outputs, **kwargs):
        fw, bw = torch_min_cut_partition(joint, num_fwd_outputs=num_fwd_outputs,
                                         static_lifetime_input_indices=kwargs.get("static_lifetime_input_indices"))
        fw_names = {n.name for n in fw.graph.nodes}
        decided["saved"] = [n.name for n in bw.graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]
        decided["recomputed"] = [n.target.overloadpacket.__name__ for n in bw.graph.nodes
                                 if n.op == "call_function" and n.name in fw_names]
        return fw, bw

    compiled = torch_aot_function(fn, lambda gm, _ex: torch_make_boxed_func(gm), partition_fn=partition)
    compiled(*args).sum().backward()
    return decided["saved"], decided["recomputed"]


def check_recomputed(answer) -> str:
    """``answer``: the set of op names (``"relu"``, ``"mul"``, ...) the backward computes again."""
    if answer is None:
        raise NotYet("no answer yet: a set of op names such as {'relu'} (set() if nothing is recomputed)")
    if isinstance(answer, str) or not hasattr(answer, "__iter__"):
        raise NotYet("give a set of op names, e.g. {'relu'}")
    saved, recomputed = torch_min_cut_decisions(quiz_remat, *quiz_remat_inputs())
    if set(answer) != set(recomputed):
        raise NotYet(
            f"{sorted(answer)} is not it: cos's backward needs its input, relu's backward needs relu's output; "
            "which of the two is cheaper to keep, and what can be computed again from it?"
        )
    return correct(
        f"torch saves {', '.join(saved)} and recomputes {', '.join(recomputed)}: relu's output must be kept "
        "for threshold_backward anyway, and mul (relu * 3) is one pointwise op away from it"
    )


def solution_recomputed():
    return {"mul"}

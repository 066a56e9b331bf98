"""Exercises of chapter 05 (graph breaks).

Place in the pipeline: none; ``notebooks/05_graph_breaks.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the convention.

1. ``predict_counts``: predict graph_count and graph_break_count of :func:`two_breaks`
   (checked against md.explain and torch._dynamo.explain).
2. ``break_instruction``: which bytecode instruction breaks the graph at ``if y.sum() > 0``?
3. ``remove_break``: rewrite :func:`clip_branch` so that it compiles to one graph.
"""

from __future__ import annotations

import contextlib
import io

import torch

from minidynamo.exercises import NotYet, correct, counted

__all__ = [
    "two_breaks",
    "clip_branch",
    "check_predict_counts",
    "solution_predict_counts",
    "check_break_instruction",
    "solution_break_instruction",
    "check_remove_break",
    "solution_remove_break",
]


def two_breaks(x):
    x = x * 2
    print("halfway")
    x = x + 1
    if x.sum() > 0:
        return x.relu()
    return x.sigmoid()


def clip_branch(x):
    y = x * 2
    if y.sum() > 0:
        return y + 1
    return y - 1


def _example(sign: float = 1.0):
    return sign * torch.rand(3, 4, generator=torch.Generator().manual_seed(0))


def _quiet():
    return contextlib.redirect_stdout(io.StringIO())


# --- 1. predict_counts -------------------------------------------------------------


def check_predict_counts(answer) -> str:
    """``answer``: (graph_count, graph_break_count) of explaining two_breaks on a positive x."""
    import minidynamo as md
    from minidynamo._torch_private import dynamo_explain, dynamo_reset

    if answer is None:
        raise NotYet("no answer yet: give a tuple (graph_count, graph_break_count)")
    if not (isinstance(answer, tuple) and len(answer) == 2 and all(isinstance(a, int) for a in answer)):
        raise NotYet("give a tuple of two ints: (graph_count, graph_break_count)")
    md.reset()
    with _quiet():
        ours = md.explain(two_breaks, _example())
        dynamo_reset()
        theirs = dynamo_explain(two_breaks, _example())
        dynamo_reset()
    want = (ours.graph_count, ours.graph_break_count)
    if want != (theirs.graph_count, theirs.graph_break_count):
        raise NotYet(f"the package disagrees with torch here ({want} vs {theirs.graph_count, theirs.graph_break_count})")
    if tuple(answer) != want:
        raise NotYet(f"{answer} is not what both Dynamos count; remember graph_break_count = graph_count - 1")
    return correct(f"{want}: before print, between print and the branch, and the branch taken")


def solution_predict_counts():
    # Graph 1: x * 2. print runs eagerly. Graph 2: x + 1 and x.sum() > 0, then the jump
    # is decided eagerly. Graph 3: the branch that runs (relu). 3 graphs, 2 breaks.
    return (3, 2)


# --- 2. break_instruction -------------------------------------------------------------


def check_break_instruction(answer) -> str:
    """``answer``: the opname of the instruction at which clip_branch's graph breaks."""
    import minidynamo as md

    if answer is None:
        raise NotYet("no answer yet: give an opname such as 'CALL'")
    if not isinstance(answer, str):
        raise NotYet(f"give the opname as a str, not a {type(answer).__name__}")
    md.reset()
    reasons = md.explain(clip_branch, _example()).break_reasons
    if not reasons:
        raise NotYet("the package found no graph break in clip_branch (please report this)")
    want = reasons[0].instruction.split()[0]
    if answer.strip().upper() != want:
        raise NotYet(f"{answer!r} is not it: look at the explanation object's .instruction, or dis.dis(clip_branch)")
    return correct(f"{want}: a jump needs a Python bool, and a FakeTensor has no value to give")


def solution_break_instruction():
    import sys

    return "POP_JUMP_FORWARD_IF_FALSE" if sys.version_info < (3, 12) else "POP_JUMP_IF_FALSE"  # 3.12: no direction


# --- 3. remove_break -----------------------------------------------------------------


def check_remove_break(fn) -> str:
    """``fn(x)``: computes what clip_branch computes, with no graph break."""
    import minidynamo as md

    if fn is None:
        raise NotYet("no answer yet: write def clip_where(x): ... without a Python if on a tensor")
    if not callable(fn):
        raise NotYet(f"give a function, not a {type(fn).__name__}")
    for sign in (1.0, -1.0):
        x = _example(sign)
        want = clip_branch(x)
        got = fn(x)
        if not isinstance(got, torch.Tensor) or got.shape != want.shape or not torch.allclose(got, want):
            raise NotYet(f"for a {'positive' if sign > 0 else 'negative'} input the result differs from clip_branch")
        md.reset()
        with _quiet():
            out = md.explain(fn, x)
        if (out.graph_count, out.graph_break_count) != (1, 0):
            raise NotYet(f"expected 1 graph and no break, got {counted(out.graph_count, 'graph')}: {out.break_reasons}")
    return correct("both sides computed, torch.where picks one: one graph, no break")


def solution_remove_break():
    def clip_where(x):
        y = x * 2
        return torch.where(y.sum() > 0, y + 1, y - 1)

    return clip_where

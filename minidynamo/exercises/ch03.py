"""Exercises of chapter 03 (symbolic execution and torch.fx).

Place in the pipeline: none; ``notebooks/03_symbolic_execution_and_fx.ipynb`` calls
these checks. See ``minidynamo/exercises/__init__.py`` for the convention.

1. ``graph_ops``: how many operations does the graph of :func:`exercise_fn` hold?
2. ``fake_ops``: which ATen ops does FakeTensor pass 1 run while tracing it?
3. ``fold_sizes``: write a function whose size arithmetic folds into constants, so
   its graph is a single reshape.
"""

from __future__ import annotations

import torch

from minidynamo.exercises import NotYet, correct, counted

__all__ = [
    "exercise_fn",
    "check_graph_ops",
    "solution_graph_ops",
    "check_fake_ops",
    "solution_fake_ops",
    "check_fold_sizes",
    "solution_fold_sizes",
]


def exercise_fn(x):
    n = x.shape[0] * 2  # a Python int while tracing: no graph node
    y = torch.relu(x) + n
    return y.view(-1).sum()


def _example():
    return torch.randn(3, 4, generator=torch.Generator().manual_seed(0))


def _call_nodes(gm) -> list:
    return [n for n in gm.graph.nodes if n.op in ("call_function", "call_method", "call_module")]


# --- 1. graph_ops --------------------------------------------------------------


def check_graph_ops(answer) -> str:
    """``answer``: the number of operation nodes in the graph md.explain gives for exercise_fn."""
    import minidynamo as md

    if answer is None:
        raise NotYet("no answer yet: how many call_function/call_method nodes does the graph have?")
    if not isinstance(answer, int):
        raise NotYet(f"give an int, not a {type(answer).__name__}")
    out = md.explain(exercise_fn, _example())
    want = len(_call_nodes(out.graphs[0]))
    if answer != want:
        hint = "the shape arithmetic runs in Python at trace time" if answer > want else "count view and sum too"
        raise NotYet(f"{answer} is not right ({hint})")
    return correct(f"{want} ops: relu, add, view, sum; `n` was folded into the constant 6")


def solution_graph_ops():
    # relu, add (with the folded constant 6), view, sum. x.shape[0] * 2 never reaches the graph.
    return 4


# --- 2. fake_ops ---------------------------------------------------------------


def check_fake_ops(answer) -> str:
    """``answer``: the list of ``.op`` of the "op" events with pass_name "dynamo" while explaining exercise_fn."""
    import minidynamo as md
    from minidynamo import events

    if answer is None:
        raise NotYet("no answer yet: record the events of md.explain(exercise_fn, x) and keep the dynamo op names")
    if isinstance(answer, str) or not hasattr(answer, "__iter__"):
        raise NotYet(f"give a list of op names such as 'aten.relu.default', not a {type(answer).__name__}")
    answer = list(answer)
    md.reset()
    with events.record() as log:
        md.explain(exercise_fn, _example())
    want = [e.op for e in log if e.kind == "op" and e.pass_name == "dynamo"]
    for op in ("aten.relu.default", "aten.add.Tensor", "aten.view.default", "aten.sum.default"):
        if op not in want:  # the package itself changed: say so rather than grade the reader
            raise NotYet(f"the package recorded no {op} in pass 'dynamo' (recorded: {want})")
    if answer != want:
        raise NotYet(f"not the recorded list; you gave {answer}, {counted(len(want), 'op')} recorded")
    return correct(f"pass 'dynamo' ran {len(want)} ATen ops on FakeTensors: {want}")


def solution_fake_ops():
    import minidynamo as md
    from minidynamo import events

    md.reset()
    with events.record() as log:
        md.explain(exercise_fn, _example())
    return [e.op for e in log if e.kind == "op" and e.pass_name == "dynamo"]


# --- 3. fold_sizes -------------------------------------------------------------


def check_fold_sizes(fn) -> str:
    """``fn(x)``: reshape a 3-d tensor (a, b, c) to (a, b * c) using x.shape; one graph, one op."""
    import minidynamo as md

    if fn is None:
        raise NotYet("no answer yet: write def flatten_last(x): ... using x.shape")
    if not callable(fn):
        raise NotYet(f"give a function, not a {type(fn).__name__}")
    for shape in ((2, 3, 4), (5, 1, 2)):
        x = torch.randn(*shape)
        want = x.reshape(shape[0], shape[1] * shape[2])
        got = fn(x)
        if not isinstance(got, torch.Tensor) or got.shape != want.shape or not torch.equal(got, want):
            raise NotYet(f"for shape {shape} expected a tensor of shape {tuple(want.shape)} equal to x.reshape(...)")
        md.reset()
        out = md.explain(fn, x)
        if out.graph_count != 1:
            raise NotYet(f"expected one graph, got {out.graph_count} (breaks: {out.break_reasons})")
        ops = _call_nodes(out.graphs[0])
        if len(ops) != 1:
            raise NotYet(f"expected one op in the graph (the reshape), got {[str(n.target) for n in ops]}")
    return correct("x.shape[1] * x.shape[2] is a Python int at trace time; the graph only reshapes")


def solution_fold_sizes():
    def flatten_last(x):
        a, b, c = x.shape
        return x.reshape(a, b * c)

    return flatten_last

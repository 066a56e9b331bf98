"""Exercises of chapter 13 (end to end): the order of the passes, a graph break on purpose.

Place in the pipeline: none; ``notebooks/13_end_to_end.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
The checks run the real pipeline (``md.compile``, ``md.explain``) and eager on the
reader's answer; they hold no answer key of their own.
"""

from __future__ import annotations

import torch

from minidynamo.exercises import NotYet, correct, counted

__all__ = ["check_pass_order", "solution_pass_order", "check_one_graph_break", "solution_one_graph_break"]


def _recorded_pass_order() -> list[str]:
    import minidynamo as md
    from minidynamo import events

    def probe(x, w):
        return (x @ w).relu().sum()

    md.reset()
    x, w = torch.randn(3, 4), torch.randn(4, 2, requires_grad=True)
    with events.record() as log:
        md.compile(probe)(x, w).backward()
    md.reset()
    order = []
    for e in log:
        if e.kind == "pass_begin" and e.pass_name not in order:
            order.append(e.pass_name)
    return order


def check_pass_order(answer) -> str:
    """``answer``: the pass names ("dynamo", "aot_metadata", "aot_joint") in the order they begin."""
    if answer is None:
        raise NotYet("no answer yet: give a list of the three pass names, the first pass first")
    if isinstance(answer, str) or not hasattr(answer, "__iter__"):
        raise NotYet(f"give a list of pass names, not a {type(answer).__name__}")
    answer = list(answer)
    recorded = _recorded_pass_order()
    if sorted(answer) != sorted(recorded):
        raise NotYet(f"the passes are named {sorted(recorded)}; you gave {answer}")
    if answer != recorded:
        first_wrong = next(i for i, (a, r) in enumerate(zip(answer, recorded)) if a != r)
        raise NotYet(f"position {first_wrong}: the event log shows another pass begins there, not {answer[first_wrong]!r}")
    return correct(f"the event log shows {' -> '.join(recorded)}")


def solution_pass_order():
    return ["dynamo", "aot_metadata", "aot_joint"]


def check_one_graph_break(fn) -> str:
    """``fn(x)``: a function of one tensor that compiles into exactly two graphs."""
    import minidynamo as md

    if fn is None or not callable(fn):
        raise NotYet("no answer yet: give a function of one tensor x")
    x = torch.randn(4)
    md.reset()
    try:
        explanation = md.explain(fn, x)
    except Exception as exc:  # the reader's function may not trace at all
        raise NotYet(f"md.explain could not run your function: {type(exc).__name__}: {exc}") from exc
    if explanation.graph_break_count != 1 or explanation.graph_count != 2:
        raise NotYet(
            f"md.explain found {counted(explanation.graph_count, 'graph')} and "
            f"{counted(explanation.graph_break_count, 'break')}; "
            "want 2 graphs and 1 break (a print() between two tensor ops breaks the graph)"
        )
    md.reset()
    expected, got = fn(x.clone()), md.compile(fn)(x.clone())
    md.reset()
    if not torch.allclose(torch.as_tensor(got), torch.as_tensor(expected)):
        raise NotYet("two graphs, but the compiled function's result differs from eager")
    return correct(f"two graphs; the break: {explanation.break_reasons[0].reason}")


def solution_one_graph_break():
    def fn(x):
        y = x.sin()
        print("a print() cannot go into a graph")
        return y + 1

    return fn

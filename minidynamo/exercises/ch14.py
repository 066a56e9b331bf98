"""Exercises of chapter 14 (your own model): count a real model's graphs, remove a break.

Place in the pipeline: none; ``notebooks/14_your_own_model.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
The checks run ``md.explain`` and eager on transformers' GPT-2 tiny (``minidynamo.zoo``);
they hold no answer key of their own.
"""

from __future__ import annotations

import torch

from minidynamo.exercises import NotYet, correct, counted

__all__ = ["check_graph_count", "solution_graph_count", "check_loss_without_a_break",
           "solution_loss_without_a_break"]


def _gpt2():
    from minidynamo import zoo

    model, _, kwargs = zoo.gpt2()
    return model, kwargs["input_ids"]


def _plain_loss(model, ids):
    return model(input_ids=ids, labels=ids).loss


def _graphs(fn, *args) -> "object":
    import minidynamo as md

    md.reset()
    try:
        return md.explain(fn, *args)
    finally:
        md.reset()


def check_graph_count(answer) -> str:
    """``answer``: how many graphs md.explain makes of GPT-2 tiny called with labels (an int)."""
    if answer is None:
        raise NotYet("no answer yet: give an int, the graph_count md.explain reports for the model")
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise NotYet(f"give an int, not a {type(answer).__name__}")
    model, ids = _gpt2()
    found = _graphs(lambda ids: _plain_loss(model, ids), ids).graph_count
    if answer != found:
        hint = "fewer" if answer > found else "more"
        raise NotYet(f"not {answer}: md.explain finds {hint} graphs; run it and read .graph_count, "
                     "or count the entries of .graphs")
    return correct(f"{counted(found, 'graph')}, each sent to AOTAutograd on its own")


def solution_graph_count():
    import minidynamo as md

    model, ids = _gpt2()
    return md.explain(lambda ids: model(input_ids=ids, labels=ids).loss, ids).graph_count


def check_loss_without_a_break(fn) -> str:
    """``fn(model, ids)``: the loss of the chapter's logging step, with no graph break of its own."""
    if fn is None or not callable(fn):
        raise NotYet("no answer yet: give a function fn(model, ids) that returns the loss")
    model, ids = _gpt2()
    baseline = _graphs(lambda ids: _plain_loss(model, ids), ids).graph_count
    try:
        yours = _graphs(lambda ids: fn(model, ids), ids)
    except Exception as exc:  # the reader's function may not run at all
        raise NotYet(f"md.explain could not run your function: {type(exc).__name__}: {exc}") from exc
    own = [r for r in yours.break_reasons if r.function == fn.__code__.co_name]
    if yours.graph_count > baseline or own:
        raise NotYet(f"your step makes {counted(yours.graph_count, 'graph')} (the model alone {baseline}) and breaks in "
                     f"{fn.__code__.co_name} itself {counted(len(own), 'time')}: read .break_reasons for the line of yours "
                     "that breaks, and move that work after the compiled call")
    expected = _plain_loss(model, ids)
    if not isinstance(yours.out, torch.Tensor) or not torch.allclose(yours.out, expected):
        raise NotYet("as many graphs as the model alone, but the result is not the model's loss")
    return correct(f"{counted(yours.graph_count, 'graph')}, as many as the model alone: your code adds no break")


def solution_loss_without_a_break():
    def fn(model, ids):
        return model(input_ids=ids, labels=ids).loss  # log loss.item() after the compiled call

    return fn

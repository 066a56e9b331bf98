"""Exercises of chapter 12 (why three passes): which level sees the backward, break the one-pass design.

Place in the pipeline: none; ``notebooks/12_why_three_passes.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
Every check runs the answer through the real modes or through both pipelines and
eager; nothing is compared with a value copied from our own output.
"""

from __future__ import annotations

import torch

from minidynamo.exercises import NotYet, correct

__all__ = [
    "check_backward_level",
    "solution_backward_level",
    "check_break_one_pass",
    "solution_break_one_pass",
]


# --- 1. which mode sees aten.threshold_backward? -------------------------------------
# For loss = (x @ w).relu().sum(); loss.backward(): answer "function" (a TorchFunctionMode),
# "dispatch" (a TorchDispatchMode) or "both".


def check_backward_level(answer) -> str:
    if answer is None:
        raise NotYet('no answer yet: "function", "dispatch" or "both"')
    if answer not in ("function", "dispatch", "both"):
        raise NotYet(f'answer "function", "dispatch" or "both", not {answer!r}')
    from minidynamo.one_pass import watch_levels

    w = torch.randn(4, 5, requires_grad=True)
    seen = watch_levels(lambda x: (x @ w).relu().sum(), torch.randn(3, 4))
    where = {
        "function": any("threshold_backward" in n for n in seen.function["backward"]),
        "dispatch": "aten.threshold_backward.default" in seen.dispatch["backward"],
    }
    truth = "both" if all(where.values()) else next(k for k, v in where.items() if v)
    if answer != truth:
        raise NotYet(
            f"the modes disagree with {answer!r}. Hint: the autograd engine runs relu's backward formula in C++; "
            "does any Python-level torch function get called?"
        )
    return correct(f"only the {truth} level saw it: the function level saw {seen.function['backward']} and nothing inside")


def solution_backward_level():
    return "dispatch"


# --- 2. break the one-pass design ----------------------------------------------------
# Write f(x) (x: a float tensor of shape (4,)) for which md.compile equals eager on two
# calls, but one_pass_compile does not (a different result, or an error). Return f, and
# the two inputs to call it with.


def check_break_one_pass(answer) -> str:
    if answer is None:
        raise NotYet("no answer yet: return (f, first_input, second_input)")
    try:
        f, x1, x2 = answer
    except (TypeError, ValueError):
        raise NotYet("return a tuple (f, first_input, second_input)") from None
    import minidynamo as md
    from minidynamo.one_pass import one_pass_compile

    def run(fn):
        return [fn(x1.clone()), fn(x2.clone())]

    eager = run(f)
    md.reset()
    three = run(md.compile(f))
    for e, t in zip(eager, three):
        if not torch.allclose(e, t):
            raise NotYet("md.compile (three passes) already differs from eager here; pick a program it gets right")
    try:
        one = run(one_pass_compile(f))
    except Exception as e:  # noqa: BLE001 (any error of the one-pass design is the answer)
        return correct(f"the one-pass design failed with {type(e).__name__}, while three passes equal eager")
    if all(torch.allclose(e, o) for e, o in zip(eager, one)):
        raise NotYet(
            "the one-pass design equals eager on this too. Hint: what does Dynamo know that a dispatcher-level "
            "trace does not? (Python values it guards on, data-dependent branches, inputs the program mutates)"
        )
    return correct("one pass gives a different result: it has no Python-level guards or breaks")



def solution_break_one_pass():
    def f(x):
        if x.shape[0] > 3:  # a Python decision Dynamo guards on; the ATen trace only sees its outcome
            return x * 2
        return x * 3

    return f, torch.ones(4), torch.ones(2)

"""Exercises of chapter 04 (guards and recompiles).

Place in the pipeline: none; ``notebooks/04_guards_and_recompiles.ipynb`` calls these
checks. See ``minidynamo/exercises/__init__.py`` for the convention.

1. ``failing_guard``: which guard fails first when a float32 input becomes float64?
2. ``cache_hit``: find a new input that gives a different result without a retrace.
3. ``cache_limit``: how many entries does a function get before it runs eagerly?
"""

from __future__ import annotations

import warnings

import torch

from minidynamo.exercises import NotYet, correct, counted

__all__ = [
    "FACTOR",
    "Scaler",
    "scale",
    "check_failing_guard",
    "solution_failing_guard",
    "check_cache_hit",
    "solution_cache_hit",
    "check_cache_limit",
    "solution_cache_limit",
]


def scale(x, k=2):
    return x * k + 1


FACTOR = 2  # a global of this module, read by Scaler.apply (the chapter changes it)


class Scaler:
    """A class of another module than the notebook's: its method reads this module's ``FACTOR``."""

    def apply(self, x):
        return x * FACTOR


def _first_input():
    return torch.randn(3, 4, generator=torch.Generator().manual_seed(0))


def _recompile_guards(calls) -> list:
    """Compile ``scale``, make the calls, return the failed guard of each recompile event."""
    import minidynamo as md
    from minidynamo import events

    md.reset()
    compiled = md.compile(scale, backend="eager")
    with events.record() as log, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args in calls:
            compiled(*args)
    return [e.guard for e in log if e.kind == "recompile"]


# --- 1. failing_guard -----------------------------------------------------------


def check_failing_guard(answer) -> str:
    """``answer``: the guard expression (text) that fails when scale(x) is called again with x.double()."""
    if answer is None:
        raise NotYet("no answer yet: give the guard as text, e.g. \"L['x'].shape == (3, 4)\"")
    if not isinstance(answer, str):
        raise NotYet(f"give the guard expression as a str, not a {type(answer).__name__}")
    x = _first_input()
    failed = _recompile_guards([(x,), (x.double(),)])
    if len(failed) != 1:
        raise NotYet(f"the package recorded {counted(len(failed), 'recompile')} instead of 1")
    if answer.replace(" ", "") != failed[0].replace(" ", ""):
        raise NotYet(f"{answer!r} is not the guard that failed; look at the 'recompile' event's guard")
    return correct(f"{failed[0]} failed: the entry was traced for float32 only")


def solution_failing_guard():
    return "L['x'].dtype == torch.float32"


# --- 2. cache_hit ------------------------------------------------------------------


def check_cache_hit(make_input) -> str:
    """``make_input()``: a new x for scale(x) (traced on a float32 (3, 4) input) that reuses the entry."""
    import minidynamo as md
    from minidynamo.symbolic import counters

    if make_input is None:
        raise NotYet("no answer yet: give a function that returns a new input for scale")
    if not callable(make_input):
        raise NotYet(f"give a function returning the input, not a {type(make_input).__name__}")
    md.reset()
    compiled = md.compile(scale, backend="eager")
    first = _first_input()
    out_first = compiled(first)
    traced = counters["frames_traced"]
    x = make_input()
    if not isinstance(x, torch.Tensor):
        raise NotYet(f"make_input() should return a tensor, not a {type(x).__name__}")
    out = compiled(x)
    if counters["frames_traced"] != traced:
        guard = _last_recompile(compiled)
        raise NotYet(f"that input was traced again; the guard that failed: {guard}")
    if not torch.equal(out, scale(x)):
        raise NotYet("the compiled result differs from eager (please report this: it is a bug)")
    if torch.equal(out, out_first):
        raise NotYet("the result is the same as for the first input: change the values")
    return correct("same type, dtype, device, shape, stride and requires_grad: every guard holds, no retrace")


def _last_recompile(compiled) -> str:
    records = compiled.cache.recompiles
    return str(records[-1]) if records else "?"


def solution_cache_hit():
    return lambda: torch.ones(3, 4)


# --- 3. cache_limit -------------------------------------------------------------------


def check_cache_limit(answer) -> str:
    """``answer``: how many distinct k (scale(x, k) with k = 0, 1, 2, ...) get an entry before the frame is run-only.

    Compiled with ``dynamic=False``: with the default (automatic dynamic) the second
    value of ``k`` makes it a SymInt input and one entry serves every later k (chapter 15).
    """
    import minidynamo as md

    if answer is None:
        raise NotYet("no answer yet: call scale(x, k) for k = 0, 1, 2, ... and watch the cache")
    if not isinstance(answer, int):
        raise NotYet(f"give an int, not a {type(answer).__name__}")
    md.reset()
    compiled = md.compile(scale, backend="eager", dynamic=False)
    x = _first_input()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k in range(12):
            compiled(x, k)
    entries = len(compiled.cache.entries)
    if answer != entries:
        raise NotYet(f"{answer} is not the number of entries the cache keeps")
    return correct(f"{entries} entries (md.config.recompile_limit, torch's default too); then the frame is run-only: "
                   "those entries still serve their k, and k = 8, 9, ... run eagerly")


def solution_cache_limit():
    return 8

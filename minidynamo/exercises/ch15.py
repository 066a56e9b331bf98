"""Exercises of chapter 15 (dynamic shapes): predict the entries a size sequence makes, and torch's graphs.

Place in the pipeline: none; ``notebooks/15_dynamic_shapes.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
The checks run the sequence through ``md.compile`` and ``torch.compile``; they hold no
answer key of their own.
"""

from __future__ import annotations

import torch

from minidynamo.exercises import NotYet, correct

__all__ = ["SIZES", "mod8", "check_cache_entries", "solution_cache_entries", "entries_for", "torch_graphs_for"]

SIZES = [8, 16, 24, 12, 32]


def mod8(x):
    if x.size(0) % 8 == 0:
        return x.view(-1, 8, 3).sum(1)
    return x * 2


def entries_for(fn=mod8, sizes=SIZES) -> int:
    """How many cache entries ``md.compile(fn)`` (``dynamic=None``) makes for batches of these sizes."""
    import minidynamo as md

    md.reset()
    compiled = md.compile(fn, backend="eager")
    for n in sizes:
        compiled(torch.randn(n, 3))
    found = len(compiled.cache.entries)
    md.reset()
    return found


def torch_graphs_for(fn=mod8, sizes=SIZES) -> int:
    """How many graphs ``torch.compile(fn)`` hands its backend for the same sizes."""
    graphs = []

    def counting(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch.compiler.reset()
    compiled = torch.compile(fn, backend=counting)
    for n in sizes:
        compiled(torch.randn(n, 3))
    torch.compiler.reset()
    return len(graphs)


def check_cache_entries(answer) -> str:
    """``answer``: how many cache entries ``mod8`` gets for ``SIZES`` under ``dynamic=None`` (an int)."""
    if answer is None:
        raise NotYet("no answer yet: give an int, the number of cache entries md.compile(mod8) makes")
    if isinstance(answer, bool) or not isinstance(answer, int):
        raise NotYet(f"give an int, not a {type(answer).__name__}")
    found = entries_for()
    if answer != found:
        hint = ("the first call is static (8 is a constant of the first graph); which call changes a size, and "
                "which decision does the dynamic trace record?")
        raise NotYet(f"not {answer}: {'fewer' if answer > found else 'more'} entries. Hint: {hint}")
    return correct(f"{found} entries; torch compiles {torch_graphs_for()} graphs for the same sizes")


def solution_cache_entries():
    return entries_for()

"""Could one FakeTensor pass do the work of three? Two experiments that answer it.

Place in the pipeline: beside it, for chapter 12. The real stack runs fake tensors
through the program three times (Dynamo's ``get_fake_value``, AOTAutograd's
``run_functionalized_fw_and_collect_metadata``, its ``make_fx`` joint capture);
mirrors no single PyTorch file, it argues with ``torch/_dynamo/utils.py``,
``torch/_functorch/_aot_autograd/collect_metadata_analysis.py`` and
``graph_capture.py`` together.

1. :func:`watch_levels`: a ``TorchFunctionMode`` (the level Dynamo sees: Python
   calls of torch functions) and a ``TorchDispatchMode`` (below autograd: ATen ops)
   both watch a forward and its backward (Note [The backward is invisible to Dynamo]).
2. :func:`one_pass_compile`: the one-pass design. The frame's tensor ops run once,
   on fake tensors, under autograd, functionalization and a tracer together; at
   the end ``autograd.grad`` is called inside the same trace, so the ATen joint
   graph falls out of the single pass (Note [The one-pass design]).

Note [The backward is invisible to Dynamo]
    ``loss.backward()`` hands the graph autograd recorded to the autograd engine,
    which is C++: it calls each node's backward formula, whose ATen ops enter the
    dispatcher directly. No Python frame runs and no ``torch.*`` function is
    called, so a TorchFunctionMode (and Dynamo, which interprets Python frames)
    sees nothing of the backward; a TorchDispatchMode sees every op. That is why
    the backward graph must be traced at the ATen level, by AOTAutograd.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode

from minidynamo._torch_private import TorchDispatchMode

__all__ = ["LevelWatch", "watch_levels", "one_pass_compile", "OnePassCompiled"]


# --- experiment 1: which level sees the backward ---------------------------------


@dataclass
class LevelWatch:
    """What each level saw, per phase: ``function["forward"]``, ``dispatch["backward"]``, ..."""

    function: dict[str, list[str]] = field(default_factory=lambda: {"forward": [], "backward": []})
    dispatch: dict[str, list[str]] = field(default_factory=lambda: {"forward": [], "backward": []})

    def table(self) -> str:
        rows = [f"{'level':<28}{'forward':>9}{'backward':>10}"]
        for name, seen in (("TorchFunctionMode (Dynamo)", self.function), ("TorchDispatchMode (ATen)", self.dispatch)):
            rows.append(f"{name:<28}{len(seen['forward']):>9}{len(seen['backward']):>10}")
        return "\n".join(rows)


class _FunctionWatcher(TorchFunctionMode):
    def __init__(self, watch: LevelWatch, phase: list[str]):
        super().__init__()
        self.watch, self.phase = watch, phase

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or str(func)
        self.watch.function[self.phase[0]].append(name)
        return func(*args, **(kwargs or {}))


class _DispatchWatcher(TorchDispatchMode):
    def __init__(self, watch: LevelWatch, phase: list[str]):
        super().__init__()
        self.watch, self.phase = watch, phase

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.watch.dispatch[self.phase[0]].append(str(func))
        return func(*args, **(kwargs or {}))


def watch_levels(fn: Callable, *args: Any) -> LevelWatch:
    """Run ``fn(*args)`` then ``.backward()`` on its (scalar) result under both modes at once."""
    watch, phase = LevelWatch(), ["forward"]
    with _DispatchWatcher(watch, phase), _FunctionWatcher(watch, phase):
        out = fn(*args)
    if not (isinstance(out, torch.Tensor) and out.dim() == 0 and out.requires_grad):
        raise ValueError(f"watch_levels: {getattr(fn, '__name__', fn)} must return a scalar that requires grad")
    phase[0] = "backward"
    with _DispatchWatcher(watch, phase), _FunctionWatcher(watch, phase):
        out.backward()  # the function level sees this one call and nothing inside it
    return watch

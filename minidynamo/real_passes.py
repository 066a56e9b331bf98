"""Attribute every real FakeTensor dispatch of ``torch.compile`` to the pass that made it.

Place in the pipeline: beside it, for comparison. minidynamo's own stages report
their passes to ``minidynamo.events``; the real torch does not, so this module
wraps the three places where real torch runs FakeTensors through the program:

- Dynamo (``torch/_dynamo/utils.py: get_fake_value -> run_node``): every dispatch
  during compilation outside the AOT regions below is counted as ``"dynamo"``;
- AOTAutograd's metadata collection (``create_aot_state`` calling
  ``run_functionalized_fw_and_collect_metadata``): ``"aot_metadata"``;
- AOTAutograd's graph capture (``aot_stage1_graph_capture -> make_fx``): ``"aot_joint"``;
- anything else the backend does with fake tensors (re-running metadata
  collection for synthetic bases or duplicates, fakeifying inputs): named after
  where it happened (``"aot_metadata_rerun"``, ``"aot_other"``).

The counts are calls of the real ``FakeTensorMode.__torch_dispatch__``; a
decomposition that FakeTensorMode runs inside an op re-enters it and counts again.

Note [Why torch counts more]
    Measured, not assumed (``RealPassLog.explained``): most of the difference from
    our counts is ``prim.device`` (FakeTensorMode answering ``.device`` through
    ``__torch_dispatch__``: ``dispatch_device=True``), and ``aten.lift_fresh``
    (a ``torch.tensor(...)`` made under the fake mode: all of ``"aot_other"``'s come
    from ``PhiloxStateTracker.reset`` in ``torch/_decomp/decompositions_for_rng.py``,
    which ``create_aot_state`` runs on entering and leaving the tracker; the joint
    pass's one is ``handle_effect_tokens_fn``'s ``torch.tensor([])``). The first compile in a process counts more again: torch's
    FakeTensor dispatch cache is still empty, so meta implementations that run as
    decompositions (``addmm``: ``to``, ``mm``, ``mul``, ``add``) re-enter the mode;
    from the second compile on they are cache hits. What is left after both is a
    few ``detach``/``view`` ops and the backward's own formulas.

Note [Wrapping, not reimplementing]
    This module only observes: it wraps functions for the length of a ``with``
    block and restores them after. Nothing of torch's behaviour changes.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

__all__ = ["RealPassLog", "record_real_passes", "counting_backend"]


@dataclass
class RealPassLog:
    """What the real torch's FakeTensorMode did, per pass."""

    ops: list[tuple[str, str]] = field(default_factory=list)  # (pass name, op name)

    def counts(self) -> dict[str, int]:
        """Op count per pass, in the order the passes first appeared."""
        result: dict[str, int] = {}
        for pass_name, _ in self.ops:
            result[pass_name] = result.get(pass_name, 0) + 1
        return result

    def op_counts(self, pass_name: str) -> Counter:
        return Counter(op for p, op in self.ops if p == pass_name)

    def explained(self, pass_name: str) -> dict[str, int]:
        """Note [Why torch counts more]: a pass's total, its prim.device and lift_fresh, the rest."""
        ops = self.op_counts(pass_name)
        device, lift = ops.get("prim.device.default", 0), ops.get("aten.lift_fresh.default", 0)
        total = sum(ops.values())
        return {"total": total, "prim.device": device, "lift_fresh": lift, "rest": total - device - lift}


_pass_stack: list[str] = []


@contextlib.contextmanager
def _in_pass(name: str) -> Iterator[None]:
    _pass_stack.append(name)
    try:
        yield
    finally:
        _pass_stack.pop()


def _wrap_region(fn: Callable, name: str) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _in_pass(name):
            return fn(*args, **kwargs)

    return wrapper


def _wrap_collect_metadata(factory: Callable, name: str) -> Callable:
    # run_functionalized_fw_and_collect_metadata(fn, ...) returns inner(*args); the pass is inner's call.
    @functools.wraps(factory)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return _wrap_region(factory(*args, **kwargs), name)

    return wrapper


@contextlib.contextmanager
def record_real_passes() -> Iterator[RealPassLog]:
    """Inside the block, log every real FakeTensor dispatch with the pass it belongs to."""
    from minidynamo._torch_private import real_pass_hook_points

    RealFakeTensorMode, aot_autograd, runtime_wrappers, _ = real_pass_hook_points()
    log = RealPassLog()
    original_dispatch = RealFakeTensorMode.__torch_dispatch__

    def counting_dispatch(self, func, types, args=(), kwargs=None):
        log.ops.append((_pass_stack[-1] if _pass_stack else "dynamo", str(func)))
        return original_dispatch(self, func, types, args, kwargs if kwargs is not None else {})

    patches = [
        (RealFakeTensorMode, "__torch_dispatch__", counting_dispatch),
        (aot_autograd, "run_functionalized_fw_and_collect_metadata",
         _wrap_collect_metadata(aot_autograd.run_functionalized_fw_and_collect_metadata, "aot_metadata")),
        (aot_autograd, "aot_stage1_graph_capture", _wrap_region(aot_autograd.aot_stage1_graph_capture, "aot_joint")),
        (runtime_wrappers, "run_functionalized_fw_and_collect_metadata",
         _wrap_collect_metadata(runtime_wrappers.run_functionalized_fw_and_collect_metadata, "aot_metadata_rerun")),
    ]
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    try:
        for obj, name, value in patches:
            setattr(obj, name, value)
        yield log
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)


def counting_backend(name: str = "aot_eager") -> Callable:
    """The real Dynamo backend ``name``, whose own fake-tensor work counts as "aot_other"."""
    from minidynamo._torch_private import real_pass_hook_points

    backend = real_pass_hook_points()[3](name)

    def backend_fn(gm, example_inputs):
        with _in_pass("aot_other"):
            return backend(gm, example_inputs)

    return backend_fn

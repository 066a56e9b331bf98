"""Exercises of chapter 09 (functionalization and metadata): classify outputs, spot mutations, undo a view.

Place in the pipeline: none; ``notebooks/09_functionalization_and_metadata.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
The checks ask the real PyTorch (``run_functionalized_fw_and_collect_metadata``, eager
mutation), never only our answer key.
"""

from __future__ import annotations

import torch

from minidynamo._torch_private import TorchDispatchMode, torch_collect_metadata
from minidynamo.exercises import NotYet, correct

__all__ = [
    "quiz_outputs",
    "quiz_inputs",
    "check_output_types",
    "solution_output_types",
    "check_mutated_inputs",
    "solution_mutated_inputs",
    "check_write_back",
    "solution_write_back",
]


def quiz_outputs(x):
    """Exercise 1: what OutputType does torch give each of these four outputs? (x requires grad)"""
    y = x * 2
    return x.t(), y, y.view(-1), x


def quiz_inputs(a, b, c):
    """Exercise 2: which inputs are mutated, in data or in metadata, and which only under no_grad?"""
    a.t_()
    with torch.no_grad():
        b.mul_(2)
    c[0].zero_()
    return a + b.sum() + c.sum()


def _quiz_inputs_args():
    return [torch.randn(2, 3), torch.randn(3, requires_grad=True), torch.randn(2, 2)]


def check_output_types(answer) -> str:
    """``answer``: four OutputType member names (str), one per output of ``quiz_outputs``."""
    if answer is None:
        raise NotYet("no answer yet: give four names such as 'non_alias', 'alias_of_input', ...")
    meta = torch_collect_metadata(quiz_outputs, torch.randn(3, 4, requires_grad=True))
    want = [o.output_type.name for o in meta.output_info]
    answer = [getattr(a, "name", a) for a in answer]
    if len(answer) != len(want):
        raise NotYet(f"quiz_outputs returns {len(want)} outputs; you gave {len(answer)} names")
    for i, (got, exp) in enumerate(zip(answer, want)):
        if got != exp:
            raise NotYet(f"output {i}: {got!r} is not what torch says (hint: which storage does it live in?)")
    return correct("a view of an input, a fresh tensor, a view of it that alone shares its storage, and the input itself")


def solution_output_types():
    # y.view(-1) is the only output in y's storage besides y itself, and y is a user output:
    # alias_of_intermediate_base_is_user_output (the runtime regenerates it from output 1).
    return ["alias_of_input", "non_alias", "alias_of_intermediate_base_is_user_output", "is_input"]


def check_mutated_inputs(answer) -> str:
    """``answer``: a dict with keys "mutates_data", "mutates_metadata", "under_no_grad", each a set of input indices."""
    if answer is None:
        raise NotYet('no answer yet: {"mutates_data": {...}, "mutates_metadata": {...}, "under_no_grad": {...}}')
    meta = torch_collect_metadata(quiz_inputs, *_quiz_inputs_args())
    want = {
        "mutates_data": {i for i, m in enumerate(meta.input_info) if m.mutates_data},
        "mutates_metadata": {i for i, m in enumerate(meta.input_info) if m.mutates_metadata},
        "under_no_grad": {i for i, m in enumerate(meta.input_info) if m.mutations_under_no_grad_or_inference_mode},
    }
    for key, exp in want.items():
        got = set(answer.get(key, ()))
        if got != exp:
            raise NotYet(f"{key}: {sorted(got)} is not right (hint: does writing into a view mutate the input?)")
    return correct("t_ changes metadata only; a write through a view c[0] is a data mutation of c")


def solution_mutated_inputs():
    return {"mutates_data": {1, 2}, "mutates_metadata": {0}, "under_no_grad": {1}}


class _MutationSpy(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.mutating_ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._schema.is_mutable:
            self.mutating_ops.append(str(func))
        return func(*args, **(kwargs or {}))


def check_write_back(answer) -> str:
    """``answer(base, new)``: base's new value after ``base[1:, 0]`` became ``new``, with no in-place op.

    This is what functionalization does for ``base[1:, 0].copy_(new)``: torch calls
    such functions "reverse view functions" (``*_scatter`` ops).
    """
    if answer is None:
        raise NotYet("no answer yet: write answer(base, new) using slice/select and their *_scatter ops")
    for shape in [(3, 2), (5, 4)]:
        base = torch.randn(*shape)
        new = torch.randn(shape[0] - 1)
        expected = base.clone()
        expected[1:, 0].copy_(new)  # eager, in place
        spy = _MutationSpy()
        with spy:
            got = answer(base.clone(), new)
        if spy.mutating_ops:
            raise NotYet(f"your function mutates ({', '.join(spy.mutating_ops)}); use functional ops only")
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape or not torch.equal(got, expected):
            raise NotYet(f"for a base of shape {shape} the result differs from eager's base[1:, 0].copy_(new)")
    return correct("undo the views from the outside in: select_scatter into the slice, slice_scatter into the base")


def solution_write_back():
    def write_back(base, new):
        column_slice = base[1:]                                      # view 1: slice dim 0
        column_slice = torch.select_scatter(column_slice, new, 1, 0)  # undo view 2: select(1, 0)
        return torch.slice_scatter(base, column_slice, 0, 1)         # undo view 1

    return write_back

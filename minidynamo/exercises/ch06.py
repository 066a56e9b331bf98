"""Exercises of chapter 06 (fake tensors): predict a view, find aliases, avoid data dependence.

Place in the pipeline: none; ``notebooks/06_fake_tensors.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
Every check runs the answer against our FakeTensorMode and torch's, not against a
value copied from our output.
"""

from __future__ import annotations

import torch

from minidynamo.exercises import NotYet, correct

__all__ = [
    "check_view_metadata",
    "solution_view_metadata",
    "check_output_aliases",
    "solution_output_aliases",
    "check_fake_friendly",
    "solution_fake_friendly",
]


# --- 1. predict the metadata of a view --------------------------------------------
# x = torch.empty(4, 6); what are shape, stride and storage_offset of x.t()[1:]?


def _view_truth():
    from minidynamo._torch_private import real_fake_tensor_mode

    mode = real_fake_tensor_mode()
    x = mode.from_tensor(torch.empty(4, 6))
    with mode:
        y = x.t()[1:]
    return (tuple(y.shape), tuple(y.stride()), y.storage_offset())


def check_view_metadata(answer) -> str:
    """``answer``: (shape, stride, storage_offset) of ``x.t()[1:]`` for ``x = torch.empty(4, 6)``."""
    if answer is None:
        raise NotYet("no answer yet: give (shape, stride, storage_offset) as a tuple of three")
    try:
        shape, stride, offset = answer
        got = (tuple(shape), tuple(stride), int(offset))
    except (TypeError, ValueError):
        raise NotYet("give a tuple of three: (shape, stride, storage_offset)") from None
    want = _view_truth()
    for what, g, w in zip(("shape", "stride", "storage_offset"), got, want):
        if g != w:
            hint = {
                "shape": "t() swaps the two sizes; [1:] drops the first row of the result",
                "stride": "t() swaps the strides and copies nothing; slicing keeps strides",
                "storage_offset": "[1:] starts one row later: one row of x.t() is one *stride* away",
            }[what]
            raise NotYet(f"{what} should not be {g}. Hint: {hint}")
    return correct(f"{want}: a view is new metadata over the same storage, and a FakeTensor knows it")


def solution_view_metadata():
    # x: shape (4, 6), stride (6, 1). x.t(): shape (6, 4), stride (1, 6).
    # [1:] skips one step along dim 0, whose stride is 1: offset 1.
    return ((5, 4), (1, 6), 1)


# --- 2. which outputs alias which inputs ------------------------------------------------


def _alias_cases():
    return [
        (lambda x, y: (x.t(), y + 1), (torch.randn(3, 4), torch.randn(3, 4))),
        (lambda x, y: (y[1:], x.view(-1), x.clone()), (torch.randn(3, 4), torch.randn(5))),
        (lambda x, y: (x.add_(1), torch.cat([x, y])), (torch.randn(2), torch.randn(2))),
        (lambda x, y: (y.unsqueeze(0).expand(3, 4), x.reshape(6)), (torch.randn(2, 3), torch.randn(4))),
        (lambda x, y: (x.t().reshape(6),), (torch.randn(2, 3), torch.randn(1))),
    ]


def _alias_truth(fn, reals):
    from minidynamo._torch_private import StorageWeakRef, real_fake_tensor_mode

    mode = real_fake_tensor_mode()
    fakes = [mode.from_tensor(r) for r in reals]
    with mode:
        outs = fn(*fakes)
    storages = [StorageWeakRef(f.untyped_storage()) for f in fakes]
    return [next((i for i, s in enumerate(storages) if s == StorageWeakRef(o.untyped_storage())), None) for o in outs]


def check_output_aliases(output_aliases) -> str:
    """``output_aliases(fn, *reals)``: for each output of ``fn``, the index of the input it
    shares storage with, or None; computed on FakeTensors, without running ``fn`` on data."""
    if output_aliases is None:
        raise NotYet("no answer yet: write output_aliases(fn, *reals) -> list of int or None")
    if not callable(output_aliases):
        raise NotYet(f"output_aliases must be a function, got {type(output_aliases).__name__}")
    for n, (fn, reals) in enumerate(_alias_cases()):
        copies = [r.clone() for r in reals]
        got = output_aliases(fn, *copies)
        if not isinstance(got, (list, tuple)):
            raise NotYet(f"case {n}: return a list (one int or None per output), got {type(got).__name__}")
        if any(not torch.equal(a, b) for a, b in zip(copies, reals)):
            raise NotYet(f"case {n}: the real inputs changed; run fn on FakeTensors, not on the real tensors")
        want = _alias_truth(fn, [r.clone() for r in reals])
        if list(got) != want:
            raise NotYet(f"case {n}: got {list(got)}, but torch's FakeTensorMode says {want}")
    return correct("views and in-place results alias an input; clone, cat and copying reshapes do not")


def solution_output_aliases():
    from minidynamo.fake import FakeTensorMode, shares_storage

    def output_aliases(fn, *reals):
        mode = FakeTensorMode()
        fakes = [mode.from_tensor(r) for r in reals]
        with mode:
            outs = fn(*fakes)
        return [next((i for i, f in enumerate(fakes) if shares_storage(o, f)), None) for o in outs]

    return output_aliases


# --- 3. make a function fake-friendly ------------------------------------------------------


def _original(x):
    return x[x > 0].sum()  # boolean-mask indexing: the output's size depends on the data


def check_fake_friendly(fn) -> str:
    """``fn(x)``: the same value as ``x[x > 0].sum()`` on real tensors, and runs under FakeTensorMode."""
    from minidynamo.fake import DataDependentOutputError, FakeTensorMode

    if fn is None:
        raise NotYet("no answer yet: write fn(x) equal to x[x > 0].sum() that a FakeTensor can run")
    if not callable(fn):
        raise NotYet(f"give a function, got {type(fn).__name__}")
    gen = torch.Generator().manual_seed(6)
    for shape in [(5,), (3, 4), (2, 3, 2)]:
        x = torch.randn(shape, generator=gen)
        got, want = fn(x), _original(x)
        if not isinstance(got, torch.Tensor) or not torch.allclose(got, want, atol=1e-6):
            raise NotYet(f"on a real tensor of shape {shape}: got {got}, want {want}")
    mode = FakeTensorMode()
    fx = mode.from_tensor(torch.randn(3, 4))
    try:
        with mode:
            out = fn(fx)
    except DataDependentOutputError as e:
        raise NotYet(f"still data-dependent under FakeTensorMode: {e.op}. Keep the shape fixed") from None
    if tuple(out.shape) != ():
        raise NotYet(f"the result should be a 0-dim tensor, got shape {tuple(out.shape)}")
    return correct("a fixed-shape rewrite (mask by multiplication or torch.where) traces with no graph break")


def solution_fake_friendly():
    def fn(x):
        return torch.where(x > 0, x, torch.zeros((), dtype=x.dtype)).sum()

    return fn

"""The differential corpus's machinery: a ``Case``, the registry, seeded inputs, and ``same``.

Place in the pipeline: beside ``minidynamo.symbolic``, under the cases of
``dynamo_cases.py`` (the façade that collects them). A case is registered with one of
three decorators named after its chapter: ``@tracing`` (chapter 3), ``@guarded``
(chapter 4, with an ``alt`` input set that must fail a guard) and ``@breaks`` (chapter 5).
Mirrors ``torch/_dynamo/testing.py`` (``same``, ``standard_test``), which PyTorch's
``test/dynamo`` cases share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import torch.nn as nn


@dataclass
class Case:
    """One function of the corpus and how to call it."""

    name: str
    fn: Callable
    inputs: Callable[[], tuple]
    chapter: str
    reset: Callable[[], None] | None = None
    observe: Callable[[], Any] | None = None
    alt: Callable[[], tuple] | None = None  # inputs that fail a guard (chapter 4 cases)
    aot: bool = False  # also in the backend="aot_eager" subset
    tags: tuple = field(default_factory=tuple)

    def make_inputs(self, alt: bool = False) -> tuple:
        if self.reset is not None:
            self.reset()
        return (self.alt if alt else self.inputs)()


CASES: dict[str, Case] = {}


def _register(chapter: str, inputs, *, reset=None, observe=None, alt=None, aot=False):
    def wrap(fn):
        name = fn.__name__
        assert name not in CASES, f"duplicate case {name}"
        CASES[name] = Case(name, fn, inputs, chapter, reset, observe, alt, aot)
        return fn

    return wrap


def tracing(inputs, **kw):
    return _register("ch03", inputs, **kw)


def guarded(inputs, **kw):
    return _register("ch04", inputs, **kw)


def breaks(inputs, **kw):
    return _register("ch05", inputs, **kw)


def T(*shape, seed: int = 0, dtype=torch.float32, requires_grad: bool = False) -> torch.Tensor:
    """A small seeded random tensor (same values every time for the same seed)."""
    g = torch.Generator().manual_seed(seed)
    t = torch.randn(*shape, generator=g)
    if dtype.is_floating_point:
        t = t.to(dtype)
    else:
        t = (t * 10).to(dtype)
    return t.requires_grad_(requires_grad)


def same(a, b, path: str = "out") -> None:
    """Assert that two results are equal: types, tensor metadata and values, recursively."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor), f"{path}: expected a tensor, got {type(b).__name__}"
        assert a.dtype == b.dtype, f"{path}: dtype {b.dtype} != {a.dtype}"
        assert a.shape == b.shape, f"{path}: shape {tuple(b.shape)} != {tuple(a.shape)}"
        assert a.requires_grad == b.requires_grad, f"{path}: requires_grad {b.requires_grad} != {a.requires_grad}"
        torch.testing.assert_close(b.detach(), a.detach(), equal_nan=True, msg=lambda m: f"{path}: {m}")
        return
    assert type(a) is type(b), f"{path}: type {type(b).__name__} != {type(a).__name__}"
    if isinstance(a, nn.Module):
        same(dict(a.state_dict()), dict(b.state_dict()), f"{path}.state_dict()")
        same(_plain_attrs(a), _plain_attrs(b), f"{path}.__dict__")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: length {len(b)} != {len(a)}"
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), f"{path}: keys {list(b)} != {list(a)}"
        for k in a:
            same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, float):
        assert math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6) or (math.isnan(a) and math.isnan(b)), f"{path}: {b} != {a}"
    elif isinstance(a, (int, str, bool, type(None), torch.dtype, torch.device)):
        assert a == b, f"{path}: {b!r} != {a!r}"
    elif hasattr(a, "__dict__"):
        same(_plain_attrs(a), _plain_attrs(b), f"{path}.__dict__")
    else:
        assert a == b, f"{path}: {b!r} != {a!r}"


def _plain_attrs(obj) -> dict:
    return {k: v for k, v in vars(obj).items() if not k.startswith("_") and k != "training"}

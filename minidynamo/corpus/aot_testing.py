"""The AOT corpus's machinery: an ``AOTCase``, the registry, and the seeded input builders.

Place in the pipeline: none; under the cases that ``aot_cases.py`` collects (its docstring
gives the shape of a case and the conventions every case follows). Each case's seed is its
place in ``CASES``, so ``make_inputs`` builds the same values on every call. Mirrors the
case helpers of PyTorch's ``test/functorch/test_aotdispatch.py`` (``verify_aot_autograd``'s
inputs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

_gen = torch.Generator()


@dataclass
class AOTCase:
    name: str
    fn: Callable[..., Any]
    factory: Callable[[], list] = field(repr=False)
    tags: tuple[str, ...] = ()
    seed: int = 0

    def make_inputs(self) -> list:
        _gen.manual_seed(self.seed)
        return list(self.factory())

    @staticmethod
    def grad_inputs(args) -> list[torch.Tensor]:
        """The tensor inputs that require grad, each once (for torch.autograd.grad)."""
        out: list[torch.Tensor] = []
        for a in args:
            if isinstance(a, torch.Tensor) and a.requires_grad and not any(a is b for b in out):
                out.append(a)
        return out


CASES: list[AOTCase] = []


def case(*tags: str, inputs: Callable[[], list], registry: list[AOTCase] | None = None):
    """Register ``fn`` as a case in ``CASES`` (or in ``registry``); its seed is its place there."""
    cases = CASES if registry is None else registry

    def deco(fn):
        cases.append(AOTCase(fn.__name__, fn, inputs, tags, seed=len(cases)))
        return fn

    return deco


# Input builders (all draw from the seeded generator).
def r(*shape: int) -> torch.Tensor:
    """A plain tensor, no grad."""
    return torch.randn(*shape, generator=_gen)


def g(*shape: int) -> torch.Tensor:
    """A leaf that requires grad (must not be mutated outside no_grad)."""
    return torch.randn(*shape, generator=_gen).requires_grad_()


def ng(*shape: int) -> torch.Tensor:
    """A non-leaf that requires grad (may be mutated)."""
    return torch.randn(*shape, generator=_gen).requires_grad_().clone()

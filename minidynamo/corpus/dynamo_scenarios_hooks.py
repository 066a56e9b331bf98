"""Scenarios on nn.Module hooks, the order of its tables, and ``forward`` replaced (see ``dynamo_scenarios``).

Place in the pipeline: part of the scenario corpus. Ported, in our own words, from
PyTorch's test/dynamo/test_modules.py (``test_hooks_inner``, ``test_hooks_outer``,
``test_param_order``, ``test_buffer_order``, ``test_module_order``, ``test_module_patch``,
``test_udo_instance_method_as_hook``).
"""

from __future__ import annotations

import types

import torch
import torch.nn as nn

from .dynamo_scenarios_base import _seeded, scenario

class _Affine(nn.Module):
    def forward(self, x):
        return 2 * x + 1


@scenario("test_modules.py::test_hooks_inner")
def forward_hook_removed_then_replaced(compile):
    m = _Affine()
    handle = m.register_forward_hook(lambda mod, args, out: 2 * out + 1)

    def outer(t):
        return m(t * 2 + 1)

    f = compile(outer)
    f(torch.tensor(1.0, requires_grad=True))
    f(torch.tensor(1.0, requires_grad=True))
    handle.remove()
    f(torch.tensor(1.0, requires_grad=True))
    handle = m.register_forward_hook(lambda mod, args, out: 2 * out + 1)
    f(torch.tensor(1.0))
    m._forward_hooks[handle.id] = lambda mod, args, out: 2 * out + 2  # the same key, a new hook
    f(torch.tensor(1.0))


@scenario("test_modules.py::test_hooks_outer")
def forward_hook_on_the_compiled_module(compile):
    m = _Affine()
    handle = m.register_forward_hook(lambda mod, args, out: 2 * out + 1)
    f = compile(m)
    f(torch.tensor(1.0))
    handle.remove()
    f(torch.tensor(1.0))
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 10,))
    f(torch.tensor(1.0))


class _TwoParams(nn.Module):
    def __init__(self):
        super().__init__()
        self.param1 = nn.Parameter(torch.ones(1))
        self.param2 = nn.Parameter(torch.ones(2))
        self.register_buffer("b1", torch.ones(1) * 3)
        self.register_buffer("b2", torch.ones(2) * 5)


@scenario("test_modules.py::test_param_order / test_buffer_order")
def parameter_and_buffer_order_changed(compile):
    mod = _TwoParams()
    coeffs = [2, 3]

    def fn(x):
        for i, p in enumerate(mod.parameters()):
            x = x + p.sum() * coeffs[i]
        for i, (_, b) in enumerate(mod.named_buffers()):
            x = x + b.sum() * coeffs[i]
        return x

    f = compile(fn)
    f(torch.ones(1))
    mod._parameters["param1"] = mod._parameters.pop("param1")
    f(torch.ones(1))
    mod._buffers["b1"] = mod._buffers.pop("b1")
    f(torch.ones(1))


class _TwoLinears(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(3, 3)
        self.linear2 = nn.Linear(3, 3)


@scenario("test_modules.py::test_module_order")
def submodule_order_changed(compile):
    mod = _seeded(_TwoLinears)
    weight = {mod: 10, mod.linear1: 20, mod.linear2: 30}
    coeffs = [2, 3, 4]

    def fn(x):
        for i, m in enumerate(mod.modules()):
            x = x + weight[m] * coeffs[i]
        for i, (_, m) in enumerate(mod.named_children()):
            x = x + weight[m] * coeffs[i]
        return x

    f = compile(fn)
    f(torch.ones(1))
    mod._modules["linear1"] = mod._modules.pop("linear1")
    f(torch.ones(1))


class _Empty(nn.Module):
    pass


def _minus_one(self, x):
    return x - 1


def _times_three(self, x):
    return x * 3


@scenario("test_modules.py::test_module_patch")
def forward_patched_on_the_instance(compile):
    mod = _Empty()
    mod.forward = types.MethodType(_minus_one, mod)

    def fn(x):
        return mod(x)

    f = compile(fn)
    f(torch.ones(3))
    mod.forward = types.MethodType(_times_three, mod)
    f(torch.ones(3))


class _Square(nn.Module):
    def forward(self, x):
        return x * x


class _HookOwner:
    def __init__(self, module):
        self.module = module
        self.calls = 0
        self.handle = module.register_forward_pre_hook(self.shift, prepend=True, with_kwargs=True)

    def shift(self, module, args, kwargs):
        self.calls += 1
        return (args[0] + 1,), kwargs

    def __call__(self, x):
        return self.module(x)


@scenario("test_modules.py::test_udo_instance_method_as_hook")
def bound_method_as_pre_hook_with_kwargs(compile):
    owner = _HookOwner(_Square())
    f = compile(owner.__call__)  # md.compile takes functions, methods and modules; torch also any callable
    f(torch.zeros(3, 4))
    f(torch.zeros(3, 4))
    f.note(owner.calls)

"""Scenarios on the Python objects a forward reads: properties, closures, partials, kwargs.

Place in the pipeline: part of the scenario corpus (see ``dynamo_scenarios``). Ported, in
our own words, from PyTorch's test/dynamo/test_modules.py (``ModuleProperty``,
``LayerList``, ``TensorList``, ``StringMember``, ``IntArg``) and test_functions.py
(closures, ``functools.partial``, keyword and default arguments), each with a change
between calls that the compiled code must notice (or, for a tensor, simply read anew).
"""

from __future__ import annotations

import enum
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

from .dynamo_scenarios_base import _x, _seeded, scenario


class _WithProperty(nn.Module):
    def __init__(self):
        super().__init__()
        self.base = 1.5
        self.lin = nn.Linear(3, 3)

    @property
    def scale(self):
        return self.base * 2

    def forward(self, x):
        return self.lin(x) * self.scale


@scenario("test_modules.py::ModuleProperty (the attribute a property reads changes)")
def property_over_a_changed_attribute(compile):
    mod = _seeded(_WithProperty)
    f = compile(mod)
    f(_x(2, 3))
    mod.base = -1.0
    f(_x(2, 3))


class _LayerList(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = [nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3)]  # a plain list: not registered

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@scenario("test_modules.py::LayerList (an item of a plain list of modules replaced)")
def plain_list_of_modules_item_replaced(compile):
    mod = _seeded(_LayerList)
    f = compile(mod)
    f(_x(2, 3))
    mod.layers[1] = nn.Tanh()
    f(_x(2, 3))
    mod.layers.pop()
    f(_x(2, 3))


class _TensorTuple(nn.Module):
    def __init__(self):
        super().__init__()
        self.factors = (torch.ones(1, 3) * 2, torch.ones(3, 1) * 3)

    def forward(self, x):
        for t in self.factors:
            x = x * t
        return x


@scenario("test_modules.py::TensorList (a tuple of tensor attributes replaced, same shapes)")
def tuple_of_tensor_attributes_replaced(compile):
    mod = _TensorTuple()
    f = compile(mod)
    f(_x(3, 3))
    mod.factors = (_x(1, 3, seed=1), _x(3, 1, seed=2))
    f(_x(3, 3))
    mod.factors[0].mul_(10)  # in place: the next call reads the new values
    f(_x(3, 3))


class _Mode(enum.Enum):
    SUM = "sum"
    MEAN = "mean"


class _Reducer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.mode = "sum"
        self.kind = _Mode.SUM
        self.temperature = 0.5

    def forward(self, x):
        y = self.lin(x) / self.temperature
        y = y.sum() if self.mode == "sum" else y.mean()
        return y * 2 if self.kind is _Mode.SUM else y


@scenario("test_modules.py::StringMember (a str, an enum and a float attribute changed)")
def string_enum_float_attributes_changed(compile):
    mod = _seeded(_Reducer)
    f = compile(mod)
    f(_x(2, 3))
    mod.mode = "mean"
    f(_x(2, 3))
    mod.kind = _Mode.MEAN
    f(_x(2, 3))
    mod.temperature = 2.0
    f(_x(2, 3))


def _make_counter_pair():
    k = 2

    def scaled(x):
        return x * k

    def set_k(v):
        nonlocal k
        k = v

    return scaled, set_k


@scenario("test_functions.py::test_closure_* (a cell rebound by a sibling closure after compile)")
def closure_cell_rebound_from_outside(compile):
    scaled, set_k = _make_counter_pair()
    f = compile(scaled)
    f(_x(3))
    set_k(5)
    f(_x(3))
    set_k(torch.ones(3) * 7)
    f(_x(3))


def _apply_act(x, act):
    return act(x) + 1


@scenario("test_functions.py::test_partials_* (a new functools.partial with other keywords)")
def partial_keywords_changed(compile):
    f = compile(_apply_act)
    f(_x(4), functools.partial(F.leaky_relu, negative_slope=0.1))
    f(_x(4), functools.partial(F.leaky_relu, negative_slope=0.1))
    f(_x(4), functools.partial(F.leaky_relu, negative_slope=0.3))
    f(_x(4), functools.partial(F.softmax, dim=0))


def _with_kwargs(x, y=None, *, scale=1.0, shift=0):
    out = x * scale + shift
    if y is not None:
        out = out + y
    return out


@scenario("test_modules.py::IntArg / test_functions.py::test_kwargs_* (keywords present, absent, changed)")
def keyword_arguments_vary(compile):
    f = compile(_with_kwargs)
    f(_x(3))
    f(_x(3), scale=2.0)
    f(_x(3), _x(3, seed=1), shift=3)
    f(_x(3), scale=2.0)
    f(_x(3), y=None, scale=2.0, shift=0)


G_WEIGHT = torch.ones(3)


def _global_weight(x):
    return x * G_WEIGHT


@scenario("test_global.py (a global tensor rebound to another shape and dtype)")
def global_tensor_rebound(compile):
    global G_WEIGHT
    G_WEIGHT = torch.ones(3)
    f = compile(_global_weight)
    f(_x(3))
    G_WEIGHT = _x(3, seed=1)
    f(_x(3))
    G_WEIGHT = torch.ones(2, 3)
    f(_x(3))
    G_WEIGHT = torch.ones(3, dtype=torch.float64)
    f(_x(3))


class _GradBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        if x.requires_grad:
            y = y + x * 0.5
        return y, torch.is_grad_enabled()


@scenario("test_ctx_manager.py (the input's requires_grad and grad mode read in forward)")
def requires_grad_and_grad_mode_branches(compile):
    mod = _seeded(_GradBranch)
    f = compile(mod)
    f(_x(2, 3))
    f(_x(2, 3).requires_grad_())
    with torch.no_grad():
        f(_x(2, 3).requires_grad_())
    f(_x(2, 3))


class _ParamSwap(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x).sum(0)


@scenario("test_modules.py (a parameter replaced, then written in place under no_grad)")
def parameter_replaced_and_written(compile):
    mod = _seeded(_ParamSwap)
    f = compile(mod)
    f(_x(2, 3))
    mod.lin.weight = nn.Parameter(torch.zeros(3, 3))
    f(_x(2, 3))
    with torch.no_grad():
        mod.lin.bias.fill_(4.0)
    f(_x(2, 3))
    mod.lin.bias = None
    f(_x(2, 3))


@scenario("test_functions.py::test_closure_* with dynamic=True (the cell's int becomes a tensor)", dynamic=True)
def closure_cell_rebound_dynamic(compile):
    closure_cell_rebound_from_outside(compile)  # the same program, every size symbolic


def _times(x, n):
    return x * n


@scenario("test_recompiles.py::test_automatic_dynamic_tensor_scalar_change with dynamic=True", dynamic=True)
def int_argument_becomes_a_tensor_dynamic(compile):
    f = compile(_times)
    f(_x(3), 2)
    f(_x(3), 3)
    f(_x(3), torch.ones(3) * 4)
    f(_x(3), 5)

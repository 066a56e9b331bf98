"""Scenarios on control state a forward sets or raises: grad mode left off, autocast, raises.

Place in the pipeline: part of the scenario corpus (see ``dynamo_scenarios``). Ported, in
our own words, from PyTorch's test/dynamo/test_ctx_manager.py (autocast blocks, grad mode
set and not restored, ``inference_mode`` as a decorator), test_global.py
(``test_store_global_crossfile_inline``: a helper flips a module flag) and test_misc.py
(an assert or a raise that depends on a Python value changed between calls: the user's
exception must reach the user unchanged).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from .dynamo_scenarios_base import _x, scenario


def _mixed(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
    return y, y.dtype, (y.float() + 1).dtype


@scenario("test_ctx_manager.py::test_autocast_* (an autocast block; then called inside autocast)")
def autocast_block_and_outer_autocast(compile):
    f = compile(_mixed)
    f(_x(2, 3), _x(3, 2, seed=1))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        f(_x(2, 3), _x(3, 2, seed=1))
    f(_x(2, 3), _x(3, 2, seed=1))


def _turns_grad_off(x):
    y = x * 2
    torch.set_grad_enabled(False)  # a learner's bug: never turned back on
    return y + 1


@scenario("test_ctx_manager.py::test_set_grad_enabled (grad mode left off by the function)")
def grad_mode_left_off(compile):
    f = compile(_turns_grad_off)
    try:
        f(_x(3).requires_grad_())
        f.note(torch.is_grad_enabled())
        f(_x(3).requires_grad_())
        f.note(torch.is_grad_enabled())
    finally:
        torch.set_grad_enabled(True)
    f(_x(3).requires_grad_())
    f.note(torch.is_grad_enabled())
    torch.set_grad_enabled(True)


@torch.inference_mode()
def _predict(model, x):
    return model(x).argmax(-1), torch.is_inference_mode_enabled()


@scenario("test_ctx_manager.py::test_inference_mode_* (a decorated predict function)")
def inference_mode_decorated_predict(compile):
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    f = compile(_predict)
    f(model, _x(2, 4))
    f(model, _x(2, 4, seed=1))


FLAG = False


def _set_flag_true():
    global FLAG
    FLAG = True


def _set_flag_false():
    global FLAG
    FLAG = False


def _flip_twice(x):
    _set_flag_true()
    y = x + 1 if FLAG else x - 1
    _set_flag_false()
    return y, FLAG


@scenario("test_global.py::test_store_global_crossfile_inline (helpers flip a module flag)")
def helpers_flip_a_module_flag(compile):
    global FLAG
    FLAG = False
    f = compile(_flip_twice)
    f(_x(2))
    f.note(FLAG)
    FLAG = True
    f(_x(2))
    f.note(FLAG)


class _Checked(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.expected = 4
        self.strict = False

    def forward(self, x):
        assert x.shape[-1] == self.expected, f"expected {self.expected} features, got {x.shape[-1]}"
        if self.strict and x.abs().max() > 10:
            raise ValueError("input out of range")
        return self.lin(x)


@scenario("test_misc.py::test_assert_* (an assert and a raise that depend on attributes changed)")
def assert_and_raise_depend_on_attributes(compile):
    torch.manual_seed(0)
    mod = _Checked()
    f = compile(mod)
    f(_x(2, 4))
    mod.expected = 5
    f(_x(2, 4))  # the user's AssertionError, with its message
    mod.expected = 4
    f(_x(2, 4) * 100)
    mod.strict = True
    f(_x(2, 4) * 100)  # the user's ValueError
    f(_x(2, 4))


def _pick_outputs(x, with_aux):
    out = {"main": x.sum(0)}
    if with_aux:
        out["aux"] = x.mean(0)
        out["scale"] = float(x.abs().max())
    return out


@scenario("test_misc.py::test_dict_return_* (the returned dict's keys depend on a flag)")
def returned_dict_keys_depend_on_a_flag(compile):
    f = compile(_pick_outputs)
    f(_x(3, 2), False)
    f(_x(3, 2), True)
    f(_x(3, 2, seed=1), True)
    f(_x(3, 2), False)

"""Scenarios on nn.Modules whose attributes change between calls (see ``dynamo_scenarios``).

Place in the pipeline: part of the scenario corpus. Ported, in our own words, from
PyTorch's test/dynamo/test_modules.py (``test_nn_module_setattr``, ``test_nn_module_unspec_int_attr``,
``test_guard_on_torch_nn_modules``, ``test_self_mutating1``, ``test_to``,
``test_module_setattr``, ``test_assign_does_not_exist``, ``test_unspecialized_seq``,
``test_attr_precedence``, ``test_no_op_assignment``,
``test_nn_moduledict_contains`` and the module classes its ``make_test`` cases use:
``IsTrainingCheck``, ``HasAttrModule``, ``FnMemberCmp``, ``CfgModule``) and
test_recompiles.py (``test_simple_module_recompile``).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from .dynamo_scenarios_base import _x, _seeded, scenario


class _Var(nn.Module):
    def __init__(self):
        super().__init__()
        self.var = 0


def _plus_var(x, m):
    return x + m.var


@scenario("test_modules.py::test_nn_module_setattr", dynamic=False)
def module_int_attribute_set(compile):
    m = _Var()
    f = compile(_plus_var)
    f(torch.ones(3), m)
    m.var = 1
    f(torch.ones(3), m)
    m.var = 0
    f(torch.ones(3), m)


class _Step(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(4, 4)
        self.step = 10

    def forward(self, x):
        return self.layer(x + 1) + self.step


@scenario("test_modules.py::test_nn_module_unspec_int_attr")
def module_int_attribute_incremented(compile):
    mod = _seeded(_Step)
    f = compile(mod)
    for _ in range(3):
        f(_x(3, 4))
        mod.step += 1


class _Multiplier(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.multiplier = 10

    def forward(self, x):
        return self.linear(x) * self.multiplier


@scenario("test_modules.py::test_guard_on_torch_nn_modules")
def global_module_attribute_changed(compile):
    mod = _seeded(_Multiplier)

    def generate(x, c):
        return mod(x) + c

    f = compile(generate)
    for _ in range(3):
        f(_x(2, 4), 0)
        f(_x(2, 4), 1)
    mod.multiplier = 11
    f(_x(2, 4), 0)


class _SelfMutating(nn.Module):
    def __init__(self, layer):
        super().__init__()
        self.layer = layer
        self.counter = 0

    def forward(self, x):
        result = self.layer(x) + self.counter
        self.counter += 1
        return F.relu(result)


@scenario("test_modules.py::test_self_mutating1")
def self_mutating_modules_share_a_layer(compile):
    shared = _seeded(nn.Linear, 4, 4)
    a, b = compile(_SelfMutating(shared)), compile(_SelfMutating(shared))
    for _ in range(3):
        a(_x(4))
    for _ in range(3):
        b(_x(4))


class _Mock(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("buf0", torch.randn(4, 4))

    def forward(self, x):
        return torch.relu(self.linear(x) + self.buf0)


@scenario("test_modules.py::test_to")
def module_moved_to_float64(compile):
    mod = _seeded(_Mock)
    f = compile(mod)
    f(_x(4, 4))
    f(_x(4, 4))
    mod.to(dtype=torch.float64)
    f(_x(4, 4).double())
    f(_x(4, 4).double())


@scenario("test_modules.py::test_module_setattr / test_unspecialized_seq")
def submodule_attributes_set_inside(compile):
    models = _seeded(nn.Sequential, nn.Linear(3, 3), nn.Dropout(0.5))
    models[0].abc = False

    def run(x):
        models[0].abc = True
        models[1].training = False
        return models(x)

    f = compile(run)
    f(_x(1, 3))
    f.note(models[0].abc)
    f.note(models[1].training)
    models[1].training = True
    models[0].abc = False
    f(_x(1, 3))
    f.note(models[0].abc)


class _AssignsNew(nn.Module):
    def forward(self, x):
        self.text_encoding = x + 1
        return self.text_encoding


@scenario("test_modules.py::test_assign_does_not_exist")
def forward_assigns_a_new_attribute(compile):
    mod = _AssignsNew()
    f = compile(mod)
    out = f(_x(4))
    f.note(mod.text_encoding is out)
    out = f(_x(4, seed=1))
    f.note(mod.text_encoding is out)


class _PrecedenceBase(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = 3

    def forward(self, x, c=4):
        return x * c

    def linear(self, x):
        return x

    def b(self, x):
        raise RuntimeError("shadowed: never called")


class _Precedence(_PrecedenceBase):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(3, 3)
        self.a, self.b, self.scale = 2, 2, 1

    def scale(self, x):
        raise RuntimeError("shadowed: never called")

    def forward(self, x, c=None):
        return self.linear(x) * self.a * self.b * self.scale


@scenario("test_modules.py::test_attr_precedence")
def instance_attributes_shadow_methods(compile):
    mod = _seeded(_Precedence)
    f = compile(mod)
    f(torch.ones(3, 3))
    f(torch.ones(3, 3))
    mod.scale = 3
    f(torch.ones(3, 3))


class _NoOpAssign(nn.Module):
    def __init__(self):
        super().__init__()
        self.buffer = torch.rand(4)

    def forward(self, x):
        x = x + 1
        self.buffer = self.buffer.to(x)
        return self.buffer + x


@scenario("test_modules.py::test_no_op_assignment")
def attribute_reassigned_to_itself(compile):
    mod = _NoOpAssign()

    def foo(m, x):
        return m(x)

    f = compile(foo)
    f(mod, _x(4))
    f(mod, _x(4).half())
    f.note(mod.buffer.dtype)
    f(mod, _x(4))


class _Contains(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def forward(self, x):
        if "foo" in self.heads:
            x = self.heads["foo"](x)
        return x + 1


@scenario("test_modules.py::test_nn_moduledict_contains")
def moduledict_key_added_after_compile(compile):
    heads = nn.ModuleDict({"bar": nn.Identity()})
    m = _Contains(heads)
    f = compile(m)
    f(_x(3))
    heads["foo"] = nn.Tanh()
    f(_x(3))
    del heads["foo"]
    f(_x(3))


class _IsTraining(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(4, 4)
        self.linear2 = nn.Linear(4, 4)

    def forward(self, x):
        mod = self.linear1 if self.training else self.linear2
        return F.relu(mod(x))


@scenario("test_modules.py::IsTrainingCheck / IsEvalCheck")
def training_flag_picks_the_submodule(compile):
    mod = _seeded(_IsTraining)
    f = compile(mod)
    f(_x(2, 4))
    mod.eval()
    f(_x(2, 4))
    mod.train()
    f(_x(2, 4))


class _SimpleDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.dropout = nn.Dropout(0.5)
        self.linear = nn.Linear(6, 1)

    def forward(self, x):
        return self.dropout(self.linear(x))


@scenario("test_recompiles.py::test_simple_module_recompile")
def eval_train_toggled_many_times(compile):
    model = _seeded(_SimpleDropout)
    f = compile(model)
    for i in range(5):
        model.eval()
        f(_x(6))
        model.train()
        torch.manual_seed(i)
        f(_x(6))


class _HasAttr(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.full((4,), 2.0))

    def forward(self, x):
        x = F.relu(x)
        if hasattr(self, "scale"):
            x = x * self.scale
        if hasattr(self, "scale2"):
            x = x * self.scale2
        return x


@scenario("test_modules.py::HasAttrModule (an attribute added after the first call)")
def hasattr_turns_true_after_compile(compile):
    mod = _HasAttr()
    f = compile(mod)
    f(_x(4))
    mod.scale2 = nn.Parameter(torch.full((4,), 3.0))
    f(_x(4))
    del mod.scale2
    f(_x(4))


class _FnMember(nn.Module):
    def __init__(self, activation):
        super().__init__()
        self.linear1 = nn.Linear(4, 4)
        self.activation = activation

    def forward(self, x):
        x = self.linear1(x)
        if self.activation is not None:
            x = self.activation(x)
        if self.activation is None:
            x = torch.sigmoid(x)
        return x


@scenario("test_modules.py::FnMemberCmp (the activation attribute swapped)")
def function_attribute_swapped(compile):
    mod = _seeded(_FnMember, F.relu)
    f = compile(mod)
    f(_x(2, 4))
    mod.activation = None
    f(_x(2, 4))
    mod.activation = torch.tanh
    f(_x(2, 4))


class _Cfg:
    def __init__(self):
        self.val, self.count = 0.5, 3


class _CfgModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = _Cfg()
        self.layer = nn.Linear(4, 4)

    def forward(self, x):
        for _ in range(self.cfg.count):
            x = self.layer(x + self.cfg.val)
        return x


@scenario("test_modules.py::CfgModule (a plain config object changed after compile)")
def config_object_changed(compile):
    mod = _seeded(_CfgModule)
    f = compile(mod)
    f(_x(2, 4))
    mod.cfg.count = 1
    f(_x(2, 4))
    mod.cfg.val = -1.0
    f(_x(2, 4))
    mod.cfg = _Cfg()
    f(_x(2, 4))

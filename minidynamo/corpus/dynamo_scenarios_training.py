"""Scenarios of a training loop: what a learner changes on a compiled model between steps.

Place in the pipeline: part of the scenario corpus (see ``dynamo_scenarios``). Ported, in
our own words, from PyTorch's test/dynamo/test_modules.py (``ParametersModule1`` /
``test_parameters1``: a forward that reads ``requires_grad``; ``test_self_mutating1`` run
past the cache limit; ``test_module_patch`` and ``test_nn_module_setattr`` as a learner
meets them: a head replaced for fine-tuning, a layer appended, dropout's ``p`` changed, a
buffer registered late) and test_repros.py (an optimizer step between compiled calls,
activations kept in a list on the module, a history dict of losses). Every scenario
with a backward notes the gradients, so a wrong backward is caught as a wrong value.
"""

from __future__ import annotations

import collections

import torch
import torch.nn as nn
import torch.nn.functional as F

from .dynamo_helpers import Counting
from .dynamo_scenarios_base import _x, _seeded, scenario


def _grads(model):
    return {n: (None if p.grad is None else p.grad.clone()) for n, p in model.named_parameters()}


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 6)
        self.drop = nn.Dropout(0.0)
        self.head = nn.Linear(6, 3)

    def forward(self, x):
        return self.head(self.drop(torch.relu(self.body(x))))


@scenario("test_modules.py::test_parameters1 (requires_grad flipped: a frozen backbone)", backend="aot_eager")
def backbone_frozen_between_steps(compile):
    model = _seeded(_Net)
    f = compile(model)
    out = f(_x(2, 4))
    out.sum().backward()
    f.note(_grads(model))
    model.zero_grad()
    for p in model.body.parameters():
        p.requires_grad_(False)
    out = f(_x(2, 4, seed=1))
    out.sum().backward()
    f.note(_grads(model))


@scenario("test_repros.py (an SGD step between compiled calls)", backend="aot_eager")
def optimizer_steps_between_calls(compile):
    model = _seeded(_Net)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    f = compile(model)
    for step in range(3):
        opt.zero_grad()
        loss = f(_x(2, 4, seed=step)).pow(2).mean()
        loss.backward()
        opt.step()
        f.note(loss)
    f.note(model)


@scenario("test_modules.py::test_module_patch (the head replaced for fine-tuning)")
def head_replaced_for_fine_tuning(compile):
    model = _seeded(_Net)
    f = compile(model)
    f(_x(2, 4))
    torch.manual_seed(1)
    model.head = nn.Linear(6, 5)
    f(_x(2, 4))
    model.head = nn.Identity()
    f(_x(2, 4))


class _Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


@scenario("test_modules.py::test_modulelist (a layer appended after compile)")
def layer_appended_to_module_list(compile):
    model = _seeded(_Stack)
    f = compile(model)
    f(_x(2, 4))
    torch.manual_seed(1)
    model.layers.append(nn.Linear(4, 4))
    f(_x(2, 4))
    del model.layers[0]
    f(_x(2, 4))


@scenario("test_modules.py::test_nn_module_setattr (dropout's p changed after compile)")
def dropout_probability_changed(compile):
    model = _seeded(_Net)
    f = compile(model)
    torch.manual_seed(3)
    f(_x(2, 4))
    model.drop.p = 0.5
    torch.manual_seed(3)
    f(_x(2, 4))
    model.drop.p = 1.0
    f(_x(2, 4))


class _Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        mask = getattr(self, "mask", None)
        if mask is not None:
            y = y * mask
        return y


@scenario("test_modules.py::HasAttrModule (a buffer registered after the first call)")
def buffer_registered_late(compile):
    model = _seeded(_Masked)
    f = compile(model)
    f(_x(2, 4))
    model.register_buffer("mask", torch.tensor([1.0, 0.0, 1.0, 0.0]))
    f(_x(2, 4))
    model.mask = torch.ones(4)  # a new tensor in the same buffer slot
    f(_x(2, 4))
    model.mask = None
    f(_x(2, 4))


class _Recorder(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.acts = []

    def forward(self, x):
        h = self.lin(x)
        self.acts.append(h.detach())
        return torch.relu(h)


@scenario("test_repros.py (activations appended to a list on the module, read after the call)")
def activations_kept_on_the_module(compile):
    model = _seeded(_Recorder)
    f = compile(model)
    for i in range(3):
        f(_x(2, 4, seed=i))
    f.note(model.acts)
    model.acts.clear()
    f(_x(2, 4))
    f.note(len(model.acts))


HISTORY = collections.defaultdict(list)


def _step_and_log(model, x):
    loss = model(x).pow(2).mean()
    HISTORY["loss"].append(loss.detach())
    HISTORY["steps"].append(len(HISTORY["loss"]))
    return loss


@scenario("test_functions.py::test_defaultdict_* (a global history of losses)")
def global_defaultdict_history(compile):
    HISTORY.clear()
    model = _seeded(_Net)
    f = compile(_step_and_log)
    for i in range(3):
        f(model, _x(2, 4, seed=i))
    f.note(dict(HISTORY))


class _Counter(Counting):
    """``Counting`` whose output reads its counter too, as torch's ``SelfMutatingModule``."""

    def forward(self, x):
        self.calls += 1
        return F.relu(self.lin(x)) + self.calls


@scenario("test_modules.py::test_self_mutating1 (the counter past the cache size limit)")
def counter_attribute_past_the_cache_limit(compile):
    model = _seeded(_Counter)
    f = compile(model)
    for i in range(11):
        f(_x(2, 4, seed=i))
    f.note(model.calls)

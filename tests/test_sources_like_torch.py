"""Sources spelled as torch's: what a guard, a recompile reason and a graph input name, field by field with torch 2.13.

A guard names the value it checks by its source, the expression that reads it again from the
frame (torch/_dynamo/source.py). A learner who compares ``md.compile`` with ``torch.compile``
reads those names in the recompile reasons (``torch._dynamo.utils.guard_failures``) and in the
guard tree (``TORCH_LOGS=guards``). Each program here runs through both systems with
``test_habits_like_torch.run`` (same calls, same recording backend) and must give torch's
results, graphs and recompile reasons exactly; each case also compares the guard trees'
value managers: every (source, type) that torch's tree guards with a manager of a module, a
tensor or a plain value is one of ours and the other way round (torch's extra managers for
``__dict__`` and the ``_modules`` / ``_parameters`` dicts on the way are left out: ours reads
them inside one expression, Note [A module's member is an item of its table], source.py).
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_guard_tree, dynamo_reset
from test_habits_like_torch import run  # tests/ is on sys.path (no package)

pytestmark = [pytest.mark.ch04, pytest.mark.usefixtures("real_dynamo")]

X = torch.arange(8.0).reshape(2, 4)
_MANAGER = re.compile(r"GuardManager: source=(.*?), (?:accessed_by=.*?, )?type=(<class '.*?'>), tag_safe=")
_NOT_COMPARED = ("<class 'dict'>", "<class 'collections.OrderedDict'>", "<class 'module'>")


def managers(tree: str) -> set:
    """(source, type) of each manager of the frame's values, but the dicts on the way (module docstring)."""
    return {m.groups() for m in map(_MANAGER.search, tree.splitlines())
            if m and m.group(1).startswith("L[") and m.group(2) not in _NOT_COMPARED}


def tree_managers(fn, *args) -> tuple[set, set]:
    """Our guard tree's managers and torch's, for one compile of ``fn(*args)``."""
    code = (type(fn).forward if isinstance(fn, torch.nn.Module) else fn).__code__
    dynamo_reset()
    md.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(fn, backend="eager")(*args)
        theirs = dynamo_guard_tree(code)
        dynamo_reset()
        ours = str(md.explain(fn, *args).guards)
    md.reset()
    return managers(ours), managers(theirs)


def same_as_torch(program) -> None:
    theirs, ours = run(program, "torch"), run(program, "ours")
    for field in ("calls", "graphs", "reasons"):
        assert ours[field] == theirs[field], f"{field}:\n ours:  {ours[field]}\n torch: {theirs[field]}"


# --- a module's members: self._modules['block']._modules['drop'], ._parameters['weight'], ._buffers -----


class Inner(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x))


class Outer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Inner()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.ReLU()])
        self.register_buffer("scale", torch.full((4,), 0.5))

    def forward(self, x):
        x = self.block(x)
        for layer in self.layers:
            x = layer(x)
        return x * self.scale


def p_nested_train_flag(api):
    torch.manual_seed(0)
    m = Outer().eval()
    f = api.compile(m)
    yield lambda: f(X)
    m.block.drop.train()
    yield lambda: f(X).shape


def p_modulelist_item_replaced(api):
    torch.manual_seed(0)
    m = Outer().eval()
    f = api.compile(m)
    yield lambda: f(X)
    m.layers[1] = torch.nn.Tanh()
    yield lambda: f(X)


def p_buffer_reshaped(api):
    torch.manual_seed(0)
    m = Outer().eval()
    f = api.compile(m)
    yield lambda: f(X)
    m.scale = torch.ones(1)
    yield lambda: f(X)


def p_nested_param_requires_grad(api):
    torch.manual_seed(0)
    m = Outer().eval()
    f = api.compile(m)
    yield lambda: f(X)
    m.layers[0].bias.requires_grad_(False)
    yield lambda: f(X)


MODULE_PROGRAMS = [p_nested_train_flag, p_modulelist_item_replaced, p_buffer_reshaped, p_nested_param_requires_grad]


@pytest.mark.parametrize("program", MODULE_PROGRAMS, ids=lambda p: p.__name__[2:])
def test_a_modules_members_are_named_as_torchs_in_recompile_reasons(program):
    same_as_torch(program)


def test_a_modules_guard_tree_names_its_members_as_torchs():
    torch.manual_seed(0)
    ours, theirs = tree_managers(Outer().eval(), X)
    assert ours == theirs
    assert ("L['self']._modules['layers']._modules['0']._parameters['weight']",
            "<class 'torch.nn.parameter.Parameter'>") in ours

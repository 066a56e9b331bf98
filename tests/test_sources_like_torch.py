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
from collections import namedtuple

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
            if m and m.group(1).startswith("L[") and m.group(2) not in _NOT_COMPARED
            and not m.group(1).endswith(".__dict__")}  # torch on 3.13 prints a __dict__'s type as NoneType


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


def ordered_roots(fn, *args) -> list:
    """The frame's locals in the order our tree checks them; torch's order is the same (asserted here)."""
    code = (type(fn).forward if isinstance(fn, torch.nn.Module) else fn).__code__
    roots = lambda tree: [m.group(1) for m in map(_MANAGER.search, tree.splitlines())  # noqa: E731
                          if m and re.fullmatch(r"L\['\w+'\]", m.group(1))]
    dynamo_reset()
    md.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(fn, backend="eager")(*args)
        theirs = roots(dynamo_guard_tree(code))
        dynamo_reset()
        ours = roots(str(md.explain(fn, *args).guards))
    md.reset()
    assert ours == theirs
    return ours


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
    assert ordered_roots(Outer().eval(), X) == ["L['x']", "L['self']"]  # a module's guards after the plain locals
    assert ("L['self']._modules['layers']._modules['0']._parameters['weight']",
            "<class 'torch.nn.parameter.Parameter'>") in ours


# --- a namedtuple's items are its fields: p.a, not p[0] ----------------------------------------------------

Span = namedtuple("Span", ["start", "stop", "scale"])


def scaled_span(s):
    # the fields read in their order: ours wraps a tuple's items when it wraps the tuple, torch's when the
    # trace reads each (its items are LazyVariableTrackers), so a duplicate's first source is the first read
    return (s.start - s.stop) * s.scale


def p_namedtuple_field_reshaped(api):
    f = api.compile(scaled_span)
    yield lambda: f(Span(torch.zeros(3), torch.ones(3), 2.0))
    yield lambda: f(Span(torch.zeros(4), torch.ones(4), 2.0))
    yield lambda: f(Span(torch.zeros(3), torch.ones(3), 3.0))


def p_namedtuple_duplicate_field(api):
    """The same tensor in two fields: one input, ``s.start is s.stop`` checked after the managers, as torch's
    DUPLICATE_INPUT lambda guard (Note [A duplicate input is one guard over two sources], output_graph.py)."""
    t = torch.ones(3)
    f = api.compile(scaled_span)
    yield lambda: f(Span(t, t, 2.0))
    yield lambda: f(Span(t, torch.ones(3), 2.0))
    yield lambda: f(Span(torch.ones(5), torch.ones(5), 2.0))
    yield lambda: f(Span(t, t, 2.0))


NAMEDTUPLE_PROGRAMS = [p_namedtuple_field_reshaped, p_namedtuple_duplicate_field]


@pytest.mark.parametrize("program", NAMEDTUPLE_PROGRAMS, ids=lambda p: p.__name__[2:])
def test_a_namedtuples_fields_are_named_as_torchs_in_recompile_reasons(program):
    same_as_torch(program)


def test_a_namedtuples_guard_tree_names_its_fields_as_torchs():
    t = torch.ones(3)
    ours, theirs = tree_managers(scaled_span, Span(t, t, 2.0))
    assert ours == theirs
    assert ("L['s'].start", "<class 'torch.Tensor'>") in ours and not any(s == "L['s'].stop" for s, _ in ours)
    assert "+- LAMBDA_GUARD: L['s'].start is L['s'].stop" in str(md.explain(scaled_span, Span(t, t, 2.0)).guards)


# --- which tensors read through an attribute stay static (torch/_dynamo/utils.py tensor_always_has_static_shape) --


class Masked(torch.nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.mask = torch.ones(n)  # a plain attribute: neither a parameter nor a buffer

    def forward(self, x):
        return x * self.mask


def p_a_user_modules_plain_tensor_changes_size(api):
    """torch keeps parameters, buffers and torch.nn modules' tensors static; this one becomes dynamic."""
    m = Masked(3)
    f = api.compile(m)
    for n in (3, 4, 5):
        m.mask = torch.ones(n)
        yield lambda n=n: f(torch.ones(n))


class Normed(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(3).eval()

    def forward(self, x):
        return self.bn(x)


def p_a_torch_nn_modules_buffer_changes_size(api):
    torch.manual_seed(0)
    m = Normed()
    f = api.compile(m)
    for n in (3, 4, 5):
        m.bn.running_mean = torch.zeros(n)
        m.bn.running_var, m.bn.weight, m.bn.bias = torch.ones(n), torch.nn.Parameter(torch.ones(n)), None
        yield lambda n=n: f(torch.ones(2, n))


def p_a_module_in_a_closure(api):
    """``m`` sorts before ``x`` by name, but torch checks a module's guards after the plain locals
    (Note [Guards in torch's order], guard_codegen.py): the recompile names ``x``, not ``m``'s weight."""
    torch.manual_seed(0)
    m = torch.nn.BatchNorm1d(3).eval()
    f = api.compile(lambda x: m(x))
    for n in (3, 4, 5):
        m.running_mean = torch.zeros(n)
        m.running_var, m.weight, m.bias = torch.ones(n), torch.nn.Parameter(torch.ones(n)), None
        yield lambda n=n: f(torch.ones(2, n))


@pytest.mark.parametrize("program", [p_a_user_modules_plain_tensor_changes_size, p_a_torch_nn_modules_buffer_changes_size,
                                     p_a_module_in_a_closure], ids=lambda p: p.__name__[2:])
def test_tensors_read_through_attributes_are_static_where_torchs_are(program):
    same_as_torch(program)


# --- a function is guarded by its code: G['f'].__code__ (Note [A function is guarded by its code], builder.py) ----


def make_scale(k, offset=0.0):
    def scale(x):
        return x * k + offset
    return scale


def shifted(x, by=1.0):
    return x + by


SCALE = make_scale(2)
SHIFT = shifted


def uses_globals(x):
    return SHIFT(SCALE(x))


def _rebinding(values):
    def program(api):
        global SCALE, SHIFT
        old = SCALE, SHIFT
        f = api.compile(uses_globals)
        try:
            for scale, shift in values:
                def call(scale=scale, shift=shift):
                    global SCALE, SHIFT
                    SCALE, SHIFT = scale, shift
                    return f(torch.ones(3))
                yield call
        finally:
            SCALE, SHIFT = old
    return program


def _shifted_by_two(x, by=2.0):
    return x + by


_same_code_other_default = type(shifted)(shifted.__code__, globals(), "shifted", (2.0,))

GLOBAL_FUNCTION_PROGRAMS = {
    # a new closure of the same code and the same cell: no recompile; another cell value: the cell's guard
    "closure_made_again": _rebinding([(make_scale(2), shifted), (make_scale(2), shifted), (make_scale(3), shifted)]),
    # another function of other code: its __code__'s guard; the same code with another default: the default's
    "function_rebound": _rebinding([(SCALE, shifted), (SCALE, _shifted_by_two), (SCALE, _same_code_other_default),
                                    (SCALE, shifted)]),
}


@pytest.mark.parametrize("name", GLOBAL_FUNCTION_PROGRAMS)
def test_a_global_function_is_guarded_by_its_code_as_torchs(name):
    same_as_torch(GLOBAL_FUNCTION_PROGRAMS[name])


# --- a resume function's stack arguments: ___stack0, ___stack1..., the NULL slots not among them ----------
# (Note [A NULL on the stack is no argument], resume_execution.py)


def a_call_around_a_break(x):
    return torch.mul(x, sum(x.tolist()))  # at the break: [NULL, torch.mul, x, NULL, sum, <list>] (3.13: NULLs above)


def a_keyword_call_around_a_break(x):
    return torch.add(x, sum(x.tolist()), alpha=2)


def _three_calls(fn):
    return lambda api: (lambda f: (lambda: f(torch.arange(4.0)), lambda: f(torch.arange(4.0) - 5),
                                   lambda: f(torch.arange(4.0))))(api.compile(fn))


# the list's guard reads ``___stack3[0]``: torch.mul, x, sum, the list; the NULLs are pushed by the resume function
RESUME_PROGRAMS = {"a_call": _three_calls(a_call_around_a_break),
                   "a_keyword_call": _three_calls(a_keyword_call_around_a_break)}


@pytest.mark.parametrize("name", RESUME_PROGRAMS)
def test_a_resume_functions_stack_arguments_are_numbered_as_torchs(name):
    same_as_torch(RESUME_PROGRAMS[name])

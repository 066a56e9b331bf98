"""Values are what eager sees, and every value the trace reads has a source (so a guard).

Each test runs the same function eagerly, through ``md.compile`` and, where it helps,
through ``torch.compile``, and compares. Covers Note [One object, one tracker]
(builder.py), Note [Dict views are live] (dicts.py), Note [A constant guard is valid
Python] and Note [Global state is one guard] (guards.py), Note [A method is guarded
through its instance] (misc.py), Note [Every module's globals are guarded] (source.py),
Note [A module call is guarded like torch's _call_impl] (nn_module.py) and Note [A
folded torch result is guarded or breaks] (torch.py).
"""

from __future__ import annotations

import warnings

import pytest
import torch

import minidynamo as md
from minidynamo.trace_rules import is_library_file

pytestmark = pytest.mark.ch04


def _same(got, want):
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(got, torch.Tensor):
        torch.testing.assert_close(got, want)
    elif isinstance(got, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        assert got == want, (got, want)


def _all_three(fn, *args):
    """md.compile, torch.compile and eager give the same value."""
    want = fn(*args)
    _same(md.compile(fn, backend="eager")(*args), want)
    torch._dynamo.reset()
    _same(torch.compile(fn, backend="eager")(*args), want)
    torch._dynamo.reset()


class MyTensor(torch.Tensor):
    pass


@pytest.mark.parametrize("make", [lambda: torch.randn(3), lambda: torch.nn.Parameter(torch.randn(3)),
                                  lambda: torch.randn(3).as_subclass(MyTensor)],
                         ids=["tensor", "parameter", "subclass"])
def test_type_and_class_of_an_input_are_its_real_class(make):
    x = make()

    def f(x):
        return x.detach() + 1, type(x) is torch.Tensor, x.__class__ is torch.nn.Parameter, \
            isinstance(x, torch.nn.Parameter), type(x).__name__

    want = f(x)
    got = md.compile(f, backend="eager")(x)
    _same(got[1:], want[1:])
    torch.testing.assert_close(got[0], want[0])


def test_isinstance_parameter_inside_a_module():
    m = torch.nn.Linear(2, 2)

    def f(x):
        return x + 1 if isinstance(m.weight, torch.nn.Parameter) else x - 1

    _all_three(f, torch.ones(2))


def test_torch_size_stays_a_size():
    def f(x):
        s = x.size()
        return x.reshape(s[::-1]), type(s) is torch.Size, s, x.shape[1:]

    _all_three(f, torch.randn(2, 3))


def test_dict_views_are_live():
    def f(d, x):
        keys, values, items = d.keys(), d.values(), d.items()
        d["z"] = x
        return len(keys), list(keys), len(values), [k for k, _ in items], "z" in keys

    want = f({"a": 1, "b": 2}, 3)
    got = md.compile(f, backend="eager")({"a": 1, "b": 2}, 3)
    assert got == want


def test_dict_keys_seen_after_an_insert_in_a_graph():
    def f(x):
        d = {"a": x}
        k = d.keys()
        d["b"] = x * 2
        return [d[key] for key in k]

    _all_three(f, torch.randn(2))


def test_a_str_enum_and_inf_constants_compile_once():
    import enum

    class Action(str, enum.Enum):
        NONE = "none"
        ADD = "add"

    def f(x, a, lo):
        return (x + 1 if a == Action.NONE else x - 1).clamp(min=lo)

    cf = md.compile(f, backend="eager")
    x = torch.randn(3)
    for _ in range(3):
        _same(cf(x, Action.NONE, float("-inf")), f(x, Action.NONE, float("-inf")))
    assert len(cf.cache.entries) == 1, [str(r) for r in cf.cache.recompiles]
    exprs = [g.expr for g in cf.cache.entries[0].guards]
    assert any("L['a'] is ___Action_NONE" in e for e in exprs), exprs
    _same(cf(x, Action.ADD, 0.0), f(x, Action.ADD, 0.0))
    assert len(cf.cache.entries) == 2


def test_global_state_guard_prints_and_names_the_recompile():
    m = torch.nn.Linear(3, 2)
    cm = md.compile(m)
    x = torch.randn(4, 3)
    with torch.no_grad():
        out = cm(x)
    assert out.grad_fn is None
    out = cm(x)  # training after a validation pass: the gradients must flow
    assert out.grad_fn is not None
    out.sum().backward()
    assert m.weight.grad is not None
    (record,) = cm.cache.recompiles
    assert record.guard.kind == "GLOBAL_STATE" and "torch.is_grad_enabled()" in str(record)
    text = str(cm.cache.entries[-1].check)  # most recently used first: the no_grad entry is now last
    assert "torch.is_grad_enabled() is False" in text and "GLOBAL_STATE" in text
    assert "___global_state()" in cm.cache.entries[-1].check.source or \
        "torch.is_grad_enabled()" in cm.cache.entries[-1].check.source


def test_global_state_guard_runs_as_python_without_the_extension():
    from minidynamo.symbolic import tensor_match

    with tensor_match.python_guards():
        f = md.compile(lambda x: x + torch.ones(3), backend="eager")
        x = torch.zeros(3)
        _same(f(x), x + 1)
        assert "___global_state()" not in f.cache.entries[0].check.source
        with torch.no_grad():
            f(x)
    assert len(f.cache.entries) == 2


@pytest.mark.parametrize("fold", [torch.get_num_threads, torch.initial_seed], ids=["num_threads", "initial_seed"])
def test_a_torch_result_no_guard_covers_is_a_graph_break(fold):
    def f(x):
        return x * fold()

    with md.events.record() as log:  # the break comes before any op: no graph, so no break reason (as torch)
        out = md.explain(f, torch.ones(2))
    assert out.graph_break_count >= 0 and any("no guard covers" in e.reason for e in log if e.kind == "graph_break")
    _same(md.compile(f, backend="eager")(torch.ones(2)), f(torch.ones(2)))


def test_a_method_carries_its_source():
    class Counter:
        def step(self, x):
            return x + 1

    c = Counter()
    out = md.explain(lambda x: c.step(x), torch.ones(2))
    exprs = [g.expr for g in out.guards]
    # torch's guard on the lookup, through the instance's source (Note [A method is guarded through its instance])
    assert "not ___dict_contains('step', L['c'].__dict__)" in exprs, exprs  # c: a free variable, a frame local


def test_forward_looked_up_on_the_instance_first():
    m = torch.nn.Linear(2, 2)
    cm = md.compile(m, backend="eager")
    x = torch.ones(2)
    _same(cm(x), m(x))
    m.forward = lambda x: x * 3
    _same(cm(x), x * 3)
    del m.forward
    _same(cm(x), m(x))


def test_a_hook_added_to_a_submodule_recompiles_and_names_the_guard():
    seq = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    cm = md.compile(seq, backend="eager")
    x = torch.ones(2)
    cm(x)
    seq[0].register_forward_hook(lambda mod, inp, out: out * 10)
    _same(cm(x), seq(x))
    (record,) = cm.cache.recompiles
    assert record.guard.kind == "NN_MODULE_CALL" and "L['self']._modules['0']" in record.guard.expr  # torch's spelling


def test_library_code_has_one_definition():
    import inspect

    import minidynamo.interpreter as interp
    from minidynamo.symbolic.variables import functions, torch as torch_vars

    assert is_library_file(torch.__file__) and is_library_file(inspect.__file__)
    assert not is_library_file(__file__)
    assert not hasattr(interp, "_LIBRARY_DIRS") and not hasattr(functions, "_is_skipped_file")
    assert torch_vars.is_library_module.__module__ == "minidynamo.trace_rules"


def test_weight_norm_pre_hook_runs():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = torch.nn.utils.weight_norm(torch.nn.Linear(3, 3))
    cm = md.compile(m, backend="eager")
    x = torch.ones(2, 3)
    _same(cm(x), m(x))
    with torch.no_grad():
        m.weight_g.mul_(3)
    _same(cm(x), m(x))

"""``md.compile`` of any callable, as ``torch.compile`` takes it (Note [md.compile of any callable]).

Each kind of callable a learner hands to the compiler: an object with ``__call__``, a
``functools.partial``, bound methods, a staticmethod / classmethod through the class, a
lambda, builtins (``torch.sin``, ``abs``, ``math.sin``, a tensor's bound ``x.sin``), a class
and a non-callable. Each is run twice (the second call a cache hit) through the real
``torch.compile`` and through ``md.compile``, both with a counting backend: the results
equal eager, and the graph counts equal torch's.
"""

from __future__ import annotations

import functools
import math
import traceback

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_reset

pytestmark = [pytest.mark.usefixtures("real_dynamo"),
              pytest.mark.filterwarnings("ignore:Dynamo does not know how to trace the builtin")]


class Scale:
    def __init__(self, k=2.0):
        self.k = k

    def __call__(self, x):
        return torch.sin(x) * self.k

    def method(self, x):
        return x.cos() + self.k

    @staticmethod
    def st(x):
        return x * 3

    @classmethod
    def cm(cls, x):
        return x - 1


class Printing:
    def __call__(self, x):
        y = x + 1
        print("in __call__")  # a graph break in torch and in ours
        return y * 2


class Shadowing:
    """Attributes with the names of ``OptimizedFunction``'s own: they must not shadow them."""

    def __init__(self):
        self.fn, self.code, self.config, self.cache = "fn", "code", "config", "cache"

    def __call__(self, x):
        return x * 2


class Mod(torch.nn.Module):
    def forward(self, x):
        return x.relu() + 1


def add(x, y):
    return x + y


def _counting():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    return graphs, backend


def _compile_both(make, *args):
    """(torch's graph count, ours), each callable called twice; both results checked against eager."""
    counts = []
    for compile_ in (torch.compile, md.compile):
        dynamo_reset()
        md.reset()
        graphs, backend = _counting()
        obj = make()
        compiled = compile_(obj, backend=backend)
        for _ in range(2):
            torch.testing.assert_close(torch.as_tensor(compiled(*args)), torch.as_tensor(obj(*args)))
        counts.append(len(graphs))
    return tuple(counts)


x = torch.randn(4)

CASES = {
    "object_with_call": (lambda: Scale(), (x,)),
    "partial": (lambda: functools.partial(add, y=x), (x,)),
    "partial_of_callable_object": (lambda: functools.partial(lambda obj, t: obj(t), Scale()), (x,)),
    "bound_method": (lambda: Scale().method, (x,)),
    "module_forward": (lambda: Mod().forward, (x,)),
    "staticmethod_through_class": (lambda: Scale.st, (x,)),
    "classmethod_through_class": (lambda: Scale.cm, (x,)),
    "lambda": (lambda: (lambda t: t * 2), (x,)),
    "torch_sin": (lambda: torch.sin, (x,)),
    "builtin_abs": (lambda: abs, (x,)),
    "math_sin_no_tensor": (lambda: math.sin, (1.0,)),
    "bound_builtin_x_sin": (lambda: x.sin, ()),  # torch: a graph break, eager (0 graphs)
    "graph_break_in_call": (lambda: Printing(), (x,)),
    # the break inside an object called from a compiled frame: that object's frame is compiled too
    "graph_break_in_a_called_object": (lambda: functools.partial(lambda obj, t: obj(t) - 1, Printing()), (x,)),
    "attributes_named_like_ours": (lambda: Shadowing(), (x,)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_same_graphs_as_torch(name, capsys):
    make, args = CASES[name]
    theirs, ours = _compile_both(make, *args)
    assert ours == theirs, f"{name}: torch compiled {theirs} graph(s), minidynamo {ours}"


def test_unbound_tensor_method_compiles_like_torch():
    # ``md.compile(torch.Tensor.sin)``: one graph, as torch (Note [An unbound Tensor method is
    # the method call], symbolic/variables/torch.py)
    theirs, ours = _compile_both(lambda: torch.Tensor.sin, x)
    assert ours == theirs == 1


def test_attribute_change_recompiles_like_torch():
    counts = []
    for compile_ in (torch.compile, md.compile):
        dynamo_reset()
        md.reset()
        graphs, backend = _counting()
        obj = Scale(2.0)
        compiled = compile_(obj, backend=backend)
        torch.testing.assert_close(compiled(x), torch.sin(x) * 2)
        obj.k = 5.0  # read in __call__: guarded through the wrapper's closure, as torch's
        torch.testing.assert_close(compiled(x), torch.sin(x) * 5)
        torch.testing.assert_close(compiled(x), torch.sin(x) * 5)
        counts.append(len(graphs))
    assert counts[1] == counts[0] == 2


def _make_class():
    class Affine:
        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return x * self.k + 1

    return Affine


def test_a_class_compiles_its_instances_calls():
    counts = []
    for compile_ in (torch.compile, md.compile):
        dynamo_reset()
        md.reset()
        graphs, backend = _counting()
        cls = _make_class()
        assert compile_(cls, backend=backend) is cls  # torch returns the class, __call__ compiled
        a, b = cls(2.0), cls(3.0)
        for _ in range(2):
            torch.testing.assert_close(a(x), x * 2 + 1)
            torch.testing.assert_close(b(x), x * 3 + 1)
        counts.append(len(graphs))
    assert counts[1] == counts[0]


def test_a_module_class_compiles_forward():
    counts = []
    for compile_ in (torch.compile, md.compile):
        dynamo_reset()
        md.reset()
        graphs, backend = _counting()

        class M(torch.nn.Module):
            def forward(self, x):
                return x.relu() + 1

        compile_(M, backend=backend)
        m = M()
        for _ in range(2):
            torch.testing.assert_close(m(x), x.relu() + 1)
        counts.append(len(graphs))
    assert counts[1] == counts[0]


def test_a_class_without_call_is_returned_with_a_warning():
    class Plain:
        pass

    with pytest.warns(UserWarning, match=r"md.compile\(.*Plain\): the class has no Python __call__"):
        assert md.compile(Plain) is Plain
    assert "__call__" not in Plain.__dict__


def test_fullgraph_on_an_object_with_call():
    graphs, backend = _counting()
    compiled = md.compile(Scale(), backend=backend, fullgraph=True)
    torch.testing.assert_close(compiled(x), torch.sin(x) * 2)
    assert len(graphs) == 1


def test_explain_of_an_object_with_call():
    assert md.explain(Scale(), x).graph_count == torch._dynamo.explain(Scale())(x).graph_count == 1


def test_the_users_exception_reaches_them_unchanged():
    class Boom:
        def __call__(self, t):
            raise ValueError("the user's own error")

    compiled = md.compile(Boom(), backend="eager")
    with pytest.raises(ValueError, match="the user's own error") as info:
        compiled(x)
    ours = [f.filename for f in traceback.extract_tb(info.value.__traceback__) if "/minidynamo/" in f.filename]
    assert all(f.endswith("/minidynamo/symbolic/eval_frame.py") for f in ours), ours


@pytest.mark.parametrize("value", [3, "text", torch.ones(2), None.__class__.__name__])
def test_a_non_callable_is_a_clear_type_error(value):
    with pytest.raises(AssertionError, match="callable"):
        torch.compile(value)  # torch refuses it too
    with pytest.raises(TypeError, match=rf"md.compile expects a callable .*not {type(value).__name__}"):
        md.compile(value)


def test_plain_functions_take_no_wrapper():
    # the hot path: a function is compiled as it is, no frame in between
    compiled = md.compile(add, backend="eager")
    assert compiled.fn is add
    bound = md.compile(Scale().method, backend="eager")
    assert bound.__func__.fn is Scale.method

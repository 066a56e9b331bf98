"""The graphs our Dynamo hands a backend read as torch's: ``gm.code``, text for text.

Each program is compiled by ``md.compile`` and by ``torch.compile`` with a backend that
records the GraphModules it is handed; the test compares their ``gm.code`` exactly:
placeholder targets and node names from the source (torch/_dynamo/source.py ``name()``
through ``re.sub(r"[^a-zA-Z0-9]+", "_", ...)`` in builder.py ``wrap_tensor``), their type
annotations (``create_graph_input``'s ``type_expr``), their order (the order the trace
wraps its inputs: torch/_dynamo/variables/lazy.py wraps a frame's argument only when it is
first used), and the names of call nodes. A difference kept on purpose is a strict xfail
that says why.
"""

from __future__ import annotations

import contextlib
import io

import pytest
import torch
import torch.nn.functional as F

import minidynamo as md

pytestmark = pytest.mark.ch03


def _record(store):
    def backend(gm, example_inputs):
        store.append(gm)
        return gm.forward

    return backend


def _codes(compile_fn, make, reset):
    reset()
    torch.manual_seed(0)
    fn, calls = make()
    graphs: list = []
    compiled = compile_fn(fn, backend=_record(graphs))
    with contextlib.redirect_stdout(io.StringIO()):
        for args in calls:
            compiled(*args)
    return [gm.code.strip() for gm in graphs]


W = torch.ones(3)  # a global tensor (G['W'])


class Lin(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x).relu()


class WithBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.register_buffer("b", torch.ones(3))

    def forward(self, x):
        return self.lin(x).relu() + self.b


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))

    def forward(self, x):
        return self.body(x)


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(2)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x).tanh()
        return x


class Heads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 2), "b": torch.nn.Linear(3, 2)})

    def forward(self, x):
        return self.heads["a"](x) * self.heads["b"](x)


class OwnParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(3))
        self.plain = torch.full((3,), 2.0)

    def forward(self, x):
        return x * self.scale + self.plain


class ConvBN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 2, 3)
        self.bn = torch.nn.BatchNorm2d(2)

    def forward(self, x):
        return self.bn(self.conv(x))


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 3, bias=False)
        self.b = torch.nn.Linear(3, 3, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


class Helper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def helper(self, x):
        return x * self.w

    def forward(self, x):
        return self.helper(x).sum()


def _g(a, b):
    return b.sum() + a


def _t(*shape):
    return torch.randn(*shape)


def _module(cls, *shape):
    def make():
        m = cls().eval()
        return m, [(_t(*shape),)]

    return make


def _fn(fn, *arg_makers):
    def make():
        return fn, [tuple(a() for a in arg_makers)]

    return make


def _dyn_marked():
    x = _t(4, 3)
    torch._dynamo.mark_dynamic(x, 0)
    md.mark_dynamic(x, 0)
    return (lambda t: (t * 2).sum(0)), [(x,)]


def _closure():
    c = torch.ones(3)

    def f(x):
        return x + c

    return f, [(_t(3),)]


def _graph_break(x):
    y = x.sin()
    print("break")
    return y.cos()


def _stored_locals(x):
    input = x.relu()  # noqa: A001 - a builtin's name: fx renames the node input_1
    y = input * 2
    y = y + 1
    z = y
    return z.sum()


def _inlined_closure(x):
    w = x.cos()

    def inner(y):
        return y * w

    return inner(x.sin())


def _cond(x):
    return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))


def _two_sizes(x):
    return x.relu() * 2


PROGRAMS = {
    "add": _fn(lambda x, y: x + y, lambda: _t(3), lambda: _t(3)),
    "methods": _fn(lambda x, y: x.sin() + y.cos(), lambda: _t(3), lambda: _t(3)),
    "constants": _fn(lambda x: x * 2 + 1, lambda: _t(3)),
    "unused_arg": _fn(lambda x, y: y.exp(), lambda: _t(3), lambda: _t(3)),
    "second_used_first": _fn(lambda x, y: x + y.sum(), lambda: _t(3), lambda: _t(3)),
    "inlined_function": _fn(lambda x, y: _g(x, y), lambda: _t(3), lambda: _t(3)),
    "global_tensor": _fn(lambda x: x * W, lambda: _t(3)),
    "closure": _closure,
    "list_of_tensors": _fn(lambda xs: xs[0] + xs[1] * xs[2], lambda: [_t(3), _t(3), _t(3)]),
    "dict_of_tensors": _fn(lambda d: d["a"] - d["b"], lambda: {"a": _t(3), "b": _t(3)}),
    "tuple_arg": _fn(lambda t: t[1].relu() + t[0], lambda: (_t(3), _t(3))),
    "repeated_ops": _fn(lambda x: x + 1 + 2 + 3, lambda: _t(3)),
    "getitem_split": _fn(lambda x: x.split(2)[0] + x.split(2)[1], lambda: _t(4)),
    "view_index": _fn(lambda x: x.view(-1)[0] + x[1, 2], lambda: _t(2, 3)),
    "functional": _fn(lambda x: F.softmax(F.relu(x), dim=-1), lambda: _t(2, 3)),
    "inplace": _fn(lambda x: x.clone().add_(1).mul_(2), lambda: _t(3)),
    "torch_fns": _fn(lambda x, y: torch.cat([x, y]).sum(), lambda: _t(3), lambda: _t(3)),
    "module_linear": _module(Lin, 2, 3),
    "module_buffer": _module(WithBuffer, 2, 3),
    "nested_sequential": _module(Nested, 2, 3),
    "module_list": _module(Stack, 2, 3),
    "module_dict": _module(Heads, 2, 3),
    "own_parameter": _module(OwnParam, 3),
    "conv_bn": _module(ConvBN, 1, 2, 5, 5),
    "tied_weights": _module(Tied, 2, 3),
    "module_method": _module(Helper, 3),
    "module_as_argument": lambda: ((lambda m, x: m(x) * 2), [(Lin(), _t(2, 3))]),
    "graph_break": _fn(_graph_break, lambda: _t(3)),
    "mark_dynamic": _dyn_marked,
    "automatic_dynamic": lambda: (_two_sizes, [(_t(2),), (_t(5),)]),
    "int_argument": lambda: ((lambda x, n: x * n), [(_t(3), 2), (_t(3), 3)]),
    "float_argument": lambda: ((lambda x, scale: x * scale), [(_t(3), 2.0), (_t(3), 3.0)]),
    "stored_locals": _fn(_stored_locals, lambda: _t(3)),
    "inlined_closure": _fn(_inlined_closure, lambda: _t(3)),
    "batchnorm_training": lambda: (torch.nn.BatchNorm1d(3), [(_t(4, 3),)]),
    "cond": _fn(_cond, lambda: _t(3)),
}

_LAZY_ITEMS = ("torch wraps each item of a list or tuple argument lazily (builder.py wrap_listlike makes a "
               "LazyVariableTracker per item), so an item's placeholder comes when the item is first used; ours "
               "wraps every item when the list is first read, so the items' placeholders keep the list's order")
XFAIL: dict[str, str] = {
    "list_of_tensors": _LAZY_ITEMS,
    "tuple_arg": _LAZY_ITEMS,
    "batchnorm_training": ("torch.compile of a torch.nn module whose forward trace_rules skip (OptimizedModule._initialize, "
                           "torch/_dynamo/eval_frame.py) compiles external_utils.wrap_inline(module): its sources are "
                           "L['fn'] and L['args'][0]; ours compiles type(m).forward: L['self'], L['input']"),
}


def _reset_torch():
    torch._dynamo.reset()


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=XFAIL[n], strict=True))
                                  if n in XFAIL else n for n in PROGRAMS])
def test_graph_code_like_torch(name):
    make = PROGRAMS[name]
    theirs = _codes(torch.compile, make, _reset_torch)
    ours = _codes(md.compile, make, md.reset)
    assert theirs, "torch compiled no graph: the program tests nothing"
    assert ours == theirs

"""Learner habits that used to trip our tracer, each checked against ``torch.compile``.

Every case runs through the real ``torch.compile`` and through ``md.compile``, both with a
counting backend that records each graph's call targets: the graphs (how many, and the
ops in each) must be torch's, and both results must equal eager. Cases:

* unbound ``torch.Tensor`` methods called with the tensor first (``torch.Tensor.sin(x)``,
  Note [An unbound Tensor method is the method call] in symbolic/variables/torch.py);
* the attributes of what ``md.compile`` returns, for a function, a callable object, a
  ``functools.partial``, a builtin (``functools.wraps``-like, as torch's wrapper);
* more habits ported in our own words from PyTorch's test/dynamo (test_misc.py,
  test_functions.py, test_repros.py).
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_reset

pytestmark = [pytest.mark.usefixtures("real_dynamo")]


def _target_name(target):
    if target is torch.set_grad_enabled or target is torch._C._set_grad_enabled:
        return "set_grad_enabled"  # torch records the C function, ours the Python one: the same switch
    return target if isinstance(target, str) else getattr(target, "__name__", repr(target))


def _run(compile_, fn, args):
    """Compile ``fn`` with a counting backend and call it on fresh copies of ``args``."""
    dynamo_reset()
    md.reset()
    graphs = []

    def backend(gm, example_inputs):
        # torch records nn.Module.__init__'s usage logging (``torch._C._log_api_usage_once``)
        # when the trace builds a module: a call with no value, not an op
        graphs.append([_target_name(n.target) for n in gm.graph.nodes if n.op.startswith("call")
                       and _target_name(n.target) != "_log_api_usage_once"])
        return gm.forward

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compile_(fn, backend=backend)(*_fresh(args))
    return graphs, out, [str(w.message) for w in caught]


def _fresh(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def _assert_same(a, b):
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for p, q in zip(a, b):
            _assert_same(p, q)
    elif isinstance(a, torch.Tensor):
        torch.testing.assert_close(b, a)
    else:
        assert a == b


def compare(fn, *args):
    """Torch's graphs and ours (counts and op targets) and both results against eager."""
    theirs, t_out, _ = _run(torch.compile, fn, args)
    ours, m_out, messages = _run(md.compile, fn, args)
    eager = fn(*_fresh(args))
    _assert_same(eager, t_out)
    _assert_same(eager, m_out)
    assert ours == theirs, f"{fn.__name__}: torch's graphs {theirs}, ours {ours}"
    return ours, messages


x6 = torch.randn(6)
y6 = torch.randn(6)


# --- 1. unbound torch.Tensor methods -------------------------------------------------

def tensor_sin(x):
    return torch.Tensor.sin(x) + 1


def tensor_add(x, y):
    return torch.Tensor.add(x, y) * 2


def tensor_add_kwarg(x, y):
    return torch.Tensor.add(x, y, alpha=2)


def tensor_view(x):
    return torch.Tensor.view(x, 2, 3).sum(0)


def tensor_size(x):
    return x * torch.Tensor.size(x)[0]


def tensor_size_dim(x):
    return x * torch.Tensor.size(x, 0)


def tensor_add_inplace(x):
    y = x * 1
    torch.Tensor.add_(y, 1)
    return y


def tensor_mul_inplace_on_input(x):
    torch.Tensor.mul_(x, 2)
    return x


def tensor_dim_branch(x):
    return torch.Tensor.neg(x) if torch.Tensor.dim(x) == 1 else x


def tensor_getitem(x):
    return torch.Tensor.__getitem__(x, 0) * 2


def tensor_dunder_add(x, y):
    return torch.Tensor.__add__(x, y)


def type_of_x_method(x):
    return type(x).sin(x)


def getattr_on_class(x):
    return getattr(torch.Tensor, "cos")(x)


RELU = torch.Tensor.relu


def method_descriptor_global(x):
    return RELU(x) + 1


def map_over_descriptor(x, y):
    return list(map(torch.Tensor.sin, [x, y]))


def descriptor_as_sort_key(x, y):
    return sorted([x, y[:3]], key=torch.Tensor.numel)[0] + 1


def tensor_reshape_keyword(x):
    return torch.Tensor.reshape(x, shape=(3, 2))


def tensor_to_dtype(x):
    return torch.Tensor.to(x, torch.float64)


def tensor_numel_len(x):
    return x * torch.Tensor.numel(x) + torch.Tensor.__len__(x)


DESCRIPTOR_CASES = [tensor_sin, tensor_add, tensor_add_kwarg, tensor_view, tensor_size, tensor_size_dim,
                    tensor_add_inplace, tensor_mul_inplace_on_input, tensor_dim_branch, tensor_getitem,
                    tensor_dunder_add, type_of_x_method, getattr_on_class, method_descriptor_global,
                    map_over_descriptor, descriptor_as_sort_key, tensor_reshape_keyword, tensor_to_dtype,
                    tensor_numel_len]

def assert_same_type_error(fn, *args):
    """``fn(*args)`` raises the same TypeError eagerly, under torch.compile and under ours."""
    errors = []
    for compile_ in (lambda f, backend: f, torch.compile, md.compile):
        dynamo_reset()
        md.reset()
        with pytest.raises(TypeError) as info:
            compile_(fn, backend="eager")(*args)
        errors.append(str(info.value))
    assert errors[0] == errors[1] == errors[2]


@pytest.mark.parametrize("fn", DESCRIPTOR_CASES, ids=lambda f: f.__name__)
def test_unbound_tensor_method_traced_as_torch(fn):
    args = (x6, y6) if fn.__code__.co_argcount == 2 else (x6,)
    graphs, _ = compare(fn, *args)
    assert len(graphs) == 1  # torch makes one graph of each: so must we


def test_unbound_tensor_method_on_a_non_tensor_raises_the_users_error():
    def bad(x):
        return torch.Tensor.add(2, x)

    assert_same_type_error(bad, x6)


# --- 2. what md.compile returns carries the wrapped callable's attributes ------------

class Doubler:
    """Doubles its input."""

    def __init__(self):
        self.factor = 2.0
        self.label = "double"

    def __call__(self, x):
        return x * self.factor


def documented(x):
    """Adds one."""
    return x + 1


documented.tag = "a function attribute"


def _decorated():
    def deco(f):
        @functools.wraps(f)
        def wrapper(x):
            return f(x) * 3
        return wrapper

    @deco
    def inner_fn(x):
        return x - 1
    return inner_fn


CALLABLES = {
    "function": lambda: documented,
    "lambda": lambda: (lambda x: x.cos()),
    "callable_object": Doubler,
    "partial": lambda: functools.partial(torch.add, other=1.0),
    "builtin": lambda: torch.sin,
    "functools_wraps_decorated": _decorated,
}
ATTRIBUTES = ["__name__", "__qualname__", "__doc__", "__module__", "tag", "factor", "label", "func", "args"]


def _observed(compiled, original):
    seen = {a: (hasattr(compiled, a), getattr(compiled, a, None)) for a in ATTRIBUTES}
    wrapped = getattr(compiled, "__wrapped__", None)
    # torch's wrapper of a callable object wraps ``wrap_inline``'s frame, which wraps the object
    seen["__wrapped__"] = "original" if wrapped is original else (
        "frame around original" if getattr(wrapped, "__wrapped__", None) is original else repr(wrapped))
    return seen


@pytest.mark.parametrize("name", list(CALLABLES))
def test_compiled_callable_has_torchs_attributes(name):
    original = CALLABLES[name]()
    theirs = _observed(torch.compile(original, backend="eager"), original)
    ours = _observed(md.compile(original, backend="eager"), original)
    assert ours == theirs


@pytest.mark.parametrize("attr", ["fn", "code", "config", "cache"])
def test_function_attribute_named_like_the_wrappers_own_still_compiles(attr):
    # a function attribute named like one of OptimizedFunction's own used to replace it
    # (``f.code = ...`` made md.compile fail with an internal TypeError)
    def f(x):
        return x.sin() * 2

    setattr(f, attr, "the user's value")
    graphs, _ = compare(f, x6)
    assert len(graphs) == 1


# --- 3. habits ported from PyTorch's test/dynamo -------------------------------------

import operator  # noqa: E402 - used by the cases of this section only

x46 = torch.randn(4, 6)
y46 = torch.randn(4, 6)


def itemgetter_of_a_list(x):
    return operator.itemgetter(0, 2)(list(x))[1] * 2


def itemgetter_of_a_dict(x):
    return operator.itemgetter("a")({"a": x, "b": 2}) * 3


def itemgetter_as_sort_key(x):
    pairs = [(3, x), (1, x * 2)]
    return sorted(pairs, key=operator.itemgetter(0))[0][1]


def attrgetter_of_a_tensor(x, y):
    return operator.attrgetter("T")(x) @ y


def attrgetter_dotted_and_many(x):
    shape, ndim = operator.attrgetter("shape", "ndim")(x)
    return x * shape[0] * ndim * operator.attrgetter("shape.__len__")(x)()


def methodcaller_with_arguments(x):
    return operator.methodcaller("sum", 0)(x) + operator.methodcaller("mean", dim=1, keepdim=True)(x).sum()


def attrgetter_mapped(x, y):
    return sum(map(operator.attrgetter("ndim"), [x, y])) * x


def unused_items_of_a_split(x):
    first, *_ = x.split(2, dim=1)
    return first + 1


def unused_values_of_max(x):
    return x.max(dim=1, keepdim=True).values + x.sort(dim=-1).indices.float()


def unused_subscript(x):
    x[0]
    return x.sin()


HABIT_CASES = [itemgetter_of_a_list, itemgetter_of_a_dict, itemgetter_as_sort_key, attrgetter_of_a_tensor,
               attrgetter_dotted_and_many, methodcaller_with_arguments, attrgetter_mapped,
               unused_items_of_a_split, unused_values_of_max, unused_subscript]


@pytest.mark.parametrize("fn", HABIT_CASES, ids=lambda f: f.__name__)
def test_ported_habit_traced_as_torch(fn):
    args = (x46, y46) if fn.__code__.co_argcount == 2 else (x46,)
    graphs, _ = compare(fn, *args)
    assert len(graphs) == 1


@pytest.mark.parametrize("make", [lambda: operator.itemgetter(), lambda: operator.attrgetter(1),
                                  lambda: operator.methodcaller(2)], ids=["no_item", "attr_not_str", "name_not_str"])
def test_operator_getter_refused_raises_the_users_type_error(make):
    def fn(x):
        return make()(x)

    assert_same_type_error(fn, x46)


def mask_subscript_then_more(x):
    y = x + 1
    z = y[y > 0]  # a data-dependent shape: the graph breaks here, and resumes after it
    return z * 2


def mask_subscript_returned(x):
    return x[x > 0]


def mask_subscript_in_a_with_block(x):
    with torch.no_grad():
        y = (x * 2)[x > 0]
    return y.sum() + 1


@pytest.mark.parametrize("fn", [mask_subscript_then_more, mask_subscript_returned], ids=lambda f: f.__name__)
def test_data_dependent_subscript_breaks_between_graphs_as_torch(fn):
    graphs, _ = compare(fn, x46)
    assert graphs  # the work before the subscript is a graph, as in torch, not an eager frame


def test_data_dependent_subscript_in_a_with_block_runs_in_the_blocks_grad_mode():
    # the ops of each graph differ in where grad mode is switched (a resume function inside
    # a ``with`` block, with a call break as well): the graph count and the results are torch's
    x = x46.clone().requires_grad_()
    theirs, t_out, _ = _run(torch.compile, mask_subscript_in_a_with_block, (x,))
    ours, m_out, _ = _run(md.compile, mask_subscript_in_a_with_block, (x,))
    eager = mask_subscript_in_a_with_block(x)
    assert len(ours) == len(theirs) == 2
    for out in (t_out, m_out):
        torch.testing.assert_close(out, eager)
        assert out.requires_grad == eager.requires_grad  # the subscript ran under no_grad


# --- walking a module tree (test_modules.py habits) ----------------------------------

class _Tree(torch.nn.Module):
    def __init__(self):
        super().__init__()
        shared = torch.nn.Linear(6, 6)
        self.lin = torch.nn.Linear(6, 6)
        self.layers = torch.nn.ModuleList([shared, torch.nn.Linear(6, 6), shared])  # shared: listed once
        self.acts = torch.nn.ModuleDict({"a": torch.nn.ReLU(), "b": torch.nn.Tanh()})

    def forward(self, x):
        return self.lin(x)


TREE = _Tree()


def count_modules_and_children(x):
    # used to count only the direct children in ``modules()`` (4, not 8): a silently wrong result
    return x * len(list(TREE.modules())) + len(list(TREE.children()))


def named_modules_names(x):
    names = [name for name, _ in TREE.named_modules()]
    return x * len(names) + len("/".join(names))


def named_children_calls(x):
    for name, child in TREE.named_children():
        if name == "lin":
            x = child(x)
    return x


def sum_of_linear_weights(x):
    return x + sum([m.weight.sum() for m in TREE.modules() if isinstance(m, torch.nn.Linear)])


@pytest.mark.parametrize("fn", [count_modules_and_children, named_modules_names, named_children_calls,
                                sum_of_linear_weights], ids=lambda f: f.__name__)
def test_module_tree_walk_as_torch(fn):
    graphs, _ = compare(fn, x46)
    assert len(graphs) == 1


SEQ = torch.nn.Sequential(torch.nn.Linear(6, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))


def sequential_slice_called(x):
    return SEQ[:2](x) + SEQ[0](x)


def sequential_slice_negative(x):
    return SEQ[-1:](x.relu())


def sequential_slice_iterated(x):
    for mod in SEQ[::2]:
        x = mod(x) if x.shape[-1] == 6 else x
    return x


def sequential_slice_len_and_type(x):
    part = SEQ[1:]
    return x * len(part) if isinstance(part, torch.nn.Sequential) else x


@pytest.mark.parametrize("fn", [sequential_slice_called, sequential_slice_negative, sequential_slice_iterated,
                                sequential_slice_len_and_type], ids=lambda f: f.__name__)
def test_sequential_slice_as_torch(fn):
    # ``seq[:2]`` used to make the whole frame run eagerly ("slicing a module container")
    graphs, _ = compare(fn, x46)
    assert len(graphs) == 1

"""Constructs from code nobody here wrote (issue 11): each compared with eager and with
``torch._dynamo.explain``'s graph and break counts.

``x.new(size)``, a mapping built from an iterator, torch's legacy tensor-type classes,
defaultdict / deque / OrderedDict made in the trace, ``islice`` over an iterator, a
grad-mode decorator on a nested function, a stateless ``nn.Module`` built in the trace.
"""

from __future__ import annotations

import collections
import functools
import itertools
import typing

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_explain

pytestmark = [pytest.mark.filterwarnings("error:minidynamo. tracing"), pytest.mark.usefixtures("real_dynamo")]


def counts(fn, *args):
    """Ours and torch's (graph_count, number of breaks) on the same call."""
    ours, theirs = md.explain(fn, *args), dynamo_explain(fn, *args)
    return ours, theirs


# -- Tensor.new: a torch.Size means a shape, a list means data ----------------------------

def new_from_size_of(x, y):
    return x.new(y.size())


def new_from_shape_of(x, y):
    return x.new(y.shape)


def new_from_literal_size(x, y):
    return x.new(torch.Size([y.shape[0], 3]))


def new_from_ints(x, y):
    return x.new(4, 2)


def new_from_data(x, y):
    return x.new([1.0, 2.0]) * 2


@pytest.mark.parametrize("fn", [new_from_size_of, new_from_shape_of, new_from_literal_size, new_from_ints])
def test_tensor_new_with_a_size_is_a_shape(fn):
    # values are uninitialized: compare what is defined, shape / dtype / device
    x, y = torch.randn(2, 3, dtype=torch.float64), torch.randn(5, 8)
    expected = fn(x, y)
    got = md.compile(fn, backend="eager")(x, y)
    assert (got.shape, got.dtype, got.device) == (expected.shape, expected.dtype, expected.device)
    ours, theirs = counts(fn, x, y)
    assert ours.graph_count == theirs.graph_count
    assert len(ours.break_reasons) == len(theirs.break_reasons)


def test_tensor_new_with_data_is_data():
    x, y = torch.randn(2, 3), torch.randn(5, 8)
    torch.testing.assert_close(md.compile(new_from_data, backend="eager")(x, y), new_from_data(x, y))


def test_tensor_new_with_an_empty_size_is_0d():
    def fn(x):
        return x.new(torch.Size([])).shape

    x = torch.randn(3)
    assert md.compile(fn, backend="eager")(x) == fn(x) == torch.Size([])


# -- a mapping built from an iterator (our loop-iterator object must not look like a mapping)

def ordered_from_iter(x):
    return collections.OrderedDict(iter([("a", x), ("b", x + 1)]))


def dict_from_iter(x):
    return dict(iter([("a", x), ("b", x + 1)]))


def update_from_iter(x):
    d = {"z": x}
    d.update(iter([("a", x * 2)]))
    return d


@pytest.mark.parametrize("fn", [ordered_from_iter, dict_from_iter, update_from_iter])
def test_mapping_from_an_iterator(fn):
    x = torch.randn(3)
    expected = fn(x)
    got = md.compile(fn, backend="eager")(x)
    assert type(got) is type(expected) and list(got) == list(expected)
    for k in expected:
        torch.testing.assert_close(got[k], expected[k])


def test_loop_iterator_across_a_break_into_a_mapping():
    # the rest of a for-loop's iterator is carried over a graph break, then fed to OrderedDict
    def fn(x):
        it = iter([("a", x), ("b", x * 3)])
        first = next(it)
        print("break", end="")
        return first[1] + 1, collections.OrderedDict(it)

    x = torch.randn(3)
    expected = fn(x)
    got = md.compile(fn, backend="eager")(x)
    torch.testing.assert_close(got[0], expected[0])
    assert list(got[1]) == ["b"]
    torch.testing.assert_close(got[1]["b"], expected[1]["b"])


# -- legacy tensor-type classes and typing hints are plain constants ------------------------

def to_half_tensor_type(x):
    return x.type(torch.HalfTensor) * 2


def to_double_tensor_type(x):
    return x.type(torch.DoubleTensor) + 1


def branch_on_float_tensor_class(x):
    return x + 1 if isinstance(x, torch.FloatTensor) else x - 1


def branch_on_double_tensor_class(x):
    return x + 1 if isinstance(x, torch.DoubleTensor) else x - 1


def annotate_any(x):
    return torch.jit.annotate(typing.Any, x) + 1


def annotate_tensor(x):
    return torch.jit.annotate(torch.Tensor, x * 2)


@pytest.mark.parametrize("fn", [to_half_tensor_type, to_double_tensor_type, branch_on_float_tensor_class,
                                branch_on_double_tensor_class, annotate_any, annotate_tensor])
def test_class_constants_compile(fn):
    x = torch.randn(3)
    expected = fn(x)
    got = md.compile(fn, backend="eager")(x)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected)
    ours, theirs = counts(fn, x)
    assert ours.graph_count == theirs.graph_count == 1
    assert len(ours.break_reasons) == len(theirs.break_reasons) == 0


# -- objects made inside the trace: plain classes, named tuples ----------------------------

class Box:
    def __init__(self, value, scale=2):
        self.value = value
        self.scale = scale

    def scaled(self):
        return self.value * self.scale


class LabeledBox(Box):
    def __init__(self, value, label):
        super().__init__(value, scale=3)
        self.label = label


Pair = collections.namedtuple("Pair", "left right")
Triple = collections.namedtuple("Triple", "a b c", defaults=[10])


class SummedPair(Pair):
    def total(self):
        return self.left + self.right


def boxes_compared(x):
    p, q = Box(x), Box(x)
    return p.scaled() + 1, p is q, p == q, p != q, p == p


def subclass_with_super_init(x):
    b = LabeledBox(x, "z")
    return b.scaled() + len(b.label)


def box_escapes(x):
    return Box(x + 1, scale=4)


def pair_fields(x):
    p = Pair(x, right=x * 2)
    return p.left + p.right, p[1]


def triple_default(x):
    t = Triple(x, 2)
    return t.a * t.b + t.c


def pair_escapes(x):
    return Pair(x + 1, 3)


def namedtuple_subclass_method(x):
    return SummedPair(x, x * 3).total()


@pytest.mark.parametrize("fn", [boxes_compared, subclass_with_super_init, pair_fields, triple_default,
                                namedtuple_subclass_method])
def test_objects_made_in_the_trace(fn):
    x = torch.randn(3)
    expected = fn(x)
    got = md.compile(fn, backend="eager")(x)
    torch.testing.assert_close(got, expected)
    ours, theirs = counts(fn, x)
    assert ours.graph_count == theirs.graph_count == 1
    assert len(ours.break_reasons) == len(theirs.break_reasons) == 0


def test_a_new_object_escaping_the_graph_keeps_its_attributes():
    x = torch.randn(3)
    got, expected = md.compile(box_escapes, backend="eager")(x), box_escapes(x)
    assert type(got) is Box and got.scale == expected.scale == 4
    torch.testing.assert_close(got.value, expected.value)
    pair, expected_pair = md.compile(pair_escapes, backend="eager")(x), pair_escapes(x)
    assert type(pair) is Pair and pair.right == 3
    torch.testing.assert_close(pair.left, expected_pair.left)


def test_class_with_its_own_eq_still_falls_back_cleanly():
    class Loud:
        def __init__(self, v):
            self.v = v

        def __eq__(self, other):
            return True

    def fn(x):
        return x + 1, Loud(x) == Loud(x)

    x = torch.randn(3)
    got = md.compile(fn, backend="eager")(x)  # a user __eq__ is not inlined: a graph break
    assert got[1] is True
    torch.testing.assert_close(got[0], fn(x)[0])



# -- small reads: a tensor's class name, a backend flag --------------------------------------

def class_name_of_tensor(x):
    return x.__class__.__name__, type(x).__name__, x + 1


def branch_on_tf32(x):
    return x + 1 if torch.backends.cuda.matmul.allow_tf32 else x - 1


def test_tensor_class_name():
    x = torch.randn(3)
    got, expected = md.compile(class_name_of_tensor, backend="eager")(x), class_name_of_tensor(x)
    assert got[:2] == expected[:2] == ("Tensor", "Tensor")
    torch.testing.assert_close(got[2], expected[2])
    ours, theirs = counts(class_name_of_tensor, x)
    assert ours.graph_count == theirs.graph_count == 1


def test_allow_tf32_is_read_as_a_guarded_constant():
    x = torch.randn(3)
    ours, theirs = counts(branch_on_tf32, x)
    assert ours.graph_count == theirs.graph_count == 1
    assert len(ours.break_reasons) == len(theirs.break_reasons) == 0
    compiled = md.compile(branch_on_tf32, backend="eager")
    before = torch.backends.cuda.matmul.allow_tf32
    try:
        for flag in (before, not before, before):
            torch.backends.cuda.matmul.allow_tf32 = flag
            torch.testing.assert_close(compiled(x), branch_on_tf32(x))  # the flag's guard recompiles
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


class Namespace:
    pass


def attrs_on_an_empty_object(x):
    ns = Namespace()
    ns.h = x * 2
    ns.k = 3
    return ns.h + ns.k


def empty_object_escapes(x):
    ns = Namespace()
    ns.h = x + 1
    return ns


def test_object_of_a_class_without_init():
    x = torch.randn(3)
    torch.testing.assert_close(md.compile(attrs_on_an_empty_object, backend="eager")(x), attrs_on_an_empty_object(x))
    ours, theirs = counts(attrs_on_an_empty_object, x)
    assert ours.graph_count == theirs.graph_count == 1
    assert len(ours.break_reasons) == len(theirs.break_reasons) == 0
    got = md.compile(empty_object_escapes, backend="eager")(x)
    assert type(got) is Namespace
    torch.testing.assert_close(got.h, x + 1)


# -- collections.defaultdict / deque / OrderedDict made in the trace ----------------------

def assert_same(got, expected):
    """Equal structure, equal values; tensors compared with assert_close (strings allowed)."""
    assert type(got) is type(expected), (type(got), type(expected))
    if isinstance(got, torch.Tensor):
        torch.testing.assert_close(got, expected)
    elif isinstance(got, (list, tuple, collections.deque)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e)
    elif isinstance(got, dict):
        assert list(got) == list(expected)
        for k in got:
            assert_same(got[k], expected[k])
    else:
        assert got == expected


def defaultdict_fromkeys_then_setdefault(x):
    d = collections.defaultdict.fromkeys("ab", "z")  # its default_factory is None
    d["a"] = 1
    d.setdefault("c", 10)
    d.setdefault("d")
    return (x + d["a"] + d["c"]) if d["d"] is None else x


def defaultdict_of_lists(x):
    d = collections.defaultdict(list)
    d["a"].append(x)
    d["a"].append(x * 2)
    d["b"]  # a missing key read with [] is created, as __missing__ does
    return sum(d["a"]) + len(d), "b" in d, d.get("zz"), d.default_factory is list


def defaultdict_from_pairs(x):
    d = collections.defaultdict(int, [("a", 1)], b=2)
    d["c"] += 3
    return x * (d["a"] + d["b"] + d["c"]), sorted(d)


def deque_methods(x):
    d = collections.deque([x, x + 1])
    d.append(x + 2)
    d.appendleft("first")
    d.extendleft([1, 2])  # reversed, as CPython inserts one at a time on the left
    d.extend([x * 3])
    d[1] = "set"
    tail = d.pop()
    head = d.popleft()
    d2 = d.copy()
    d2.clear()
    return list(d), tail, head, len(d2), d.count("set")


def test_deque_rotate():
    # torch breaks on deque.rotate (not traced there); here it is traced: compared with eager
    def fn(x):
        d = collections.deque([x, 1, 2, x + 1])
        d.rotate(3)
        d.rotate(-1)
        d.rotate()
        return list(d)

    x = torch.randn(2)
    assert_same(md.compile(fn, backend="eager")(x), fn(x))


def bounded_deque(x):
    d = collections.deque([x, x + 1, x + 2], maxlen=2)  # keeps the last two
    d.append(x * 10)  # drops from the left
    d.appendleft(x - 1)  # drops from the right
    return list(d), d.maxlen


def ordered_dict_call(x):
    d = collections.OrderedDict([("b", x), ("a", 2)], c=3)
    d["d"] = x + 1
    return list(d.keys()), d["b"] + d["d"]


@pytest.mark.parametrize("fn", [defaultdict_fromkeys_then_setdefault, defaultdict_of_lists, defaultdict_from_pairs,
                                deque_methods, bounded_deque, ordered_dict_call])
def test_stdlib_containers_made_in_the_trace(fn):
    x = torch.randn(3)
    assert_same(md.compile(fn, backend="eager")(x), fn(x))
    ours, theirs = counts(fn, x)
    assert ours.graph_count == theirs.graph_count == 1
    assert len(ours.break_reasons) == len(theirs.break_reasons) == 0


def test_containers_made_in_the_trace_escape_as_their_class():
    def fn(x):
        dd = collections.defaultdict(list)
        dd["k"].append(x + 1)
        dq = collections.deque([x, 1], maxlen=3)
        od = collections.OrderedDict(a=x * 2)
        return dd, dq, od

    x = torch.randn(2)
    dd, dq, od = md.compile(fn, backend="eager")(x)
    e_dd, e_dq, e_od = fn(x)
    assert type(dd) is collections.defaultdict and dd.default_factory is list
    dd["new"].append(1)  # still a working defaultdict
    assert type(dq) is collections.deque and dq.maxlen == e_dq.maxlen == 3
    assert type(od) is collections.OrderedDict and list(od) == list(e_od)
    torch.testing.assert_close(dd["k"], e_dd["k"])
    torch.testing.assert_close(list(dq), list(e_dq))


def deque_argument(d, x):
    d.append(x + 1)
    d.appendleft(3)
    return d[0] * x


def test_a_deque_argument_is_written_back_and_guarded():
    x = torch.ones(2)
    compiled = md.compile(deque_argument, backend="eager")
    for maxlen in (None, 2):
        ours, eager = collections.deque([1, 2], maxlen), collections.deque([1, 2], maxlen)
        for _ in range(3):  # the length changes every call: guarded, so each call is right
            torch.testing.assert_close(compiled(ours, x), deque_argument(eager, x))
            assert len(ours) == len(eager) and ours.maxlen == eager.maxlen
            torch.testing.assert_close(list(ours), list(eager))


def deque_across_a_break(x):
    d = collections.deque([x])
    d.append(x + 1)
    print("graph break")
    d.appendleft(x * 2)
    return list(d)


def test_a_deque_across_a_graph_break(capsys):
    x = torch.randn(3)
    torch.testing.assert_close(md.compile(deque_across_a_break, backend="eager")(x), deque_across_a_break(x))
    ours, theirs = counts(deque_across_a_break, x)
    assert ours.graph_count == theirs.graph_count and len(ours.break_reasons) == len(theirs.break_reasons)


# -- itertools.islice over an iterator is lazy -------------------------------------------

def islice_over_chain(a, b):
    tmp1, tmp2 = [a + 1, a + 2], [b + 3, b + 4]
    x, y = list(itertools.islice(itertools.chain(tmp1, tmp2), 1, 3))
    z = next(itertools.islice(tmp1, 1, None))
    return x - y / z


def islice_leaves_the_iterator_where_eager_does(a, b):
    it = iter([a, a + 1, a + 2, b, b + 1])
    first = list(itertools.islice(it, 2))
    stepped = itertools.islice(it, 0, None, 2)
    one = next(stepped)
    return first, one, list(it)


def islice_over_a_generator(a, b):
    gen = (a * i for i in range(5))
    head = list(itertools.islice(gen, 1, 3))
    return head, next(gen)


@pytest.mark.parametrize("fn", [islice_over_chain, islice_leaves_the_iterator_where_eager_does,
                                islice_over_a_generator])
def test_islice_over_an_iterator(fn):
    a, b = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(md.compile(fn, backend="eager")(a, b), fn(a, b))
    ours, theirs = counts(fn, a, b)
    assert ours.graph_count == theirs.graph_count == 1
    assert len(ours.break_reasons) == len(theirs.break_reasons) == 0


def islice_across_a_break(x):
    it = iter([x, x + 1, x + 2, x + 3, x + 4, x + 5])
    s = itertools.islice(it, 1, None, 2)
    a = next(s)
    print("graph break")
    b = next(s)
    return a, b, list(it), list(s)


def test_an_iterator_shared_with_an_islice_across_a_break(capsys):
    # the resume function takes items from the carried iterator; the eager islice over
    # it must see them taken (Note [A carried iterator is advanced in place])
    x = torch.arange(3.0)
    torch.testing.assert_close(md.compile(islice_across_a_break, backend="eager")(x), islice_across_a_break(x))


def test_list_of_an_iterator_consumes_it():
    def fn(x):
        it = iter([x, x + 1, x + 2])
        a, b = list(it), list(it)
        nums = iter([1, 2, 3])
        return len(a), len(b), sum(nums), tuple(nums)

    x = torch.randn(2)
    assert md.compile(fn, backend="eager")(x) == fn(x) == (3, 0, 6, ())


# -- @torch.no_grad() on a nested function ------------------------------------------------

def no_grad_decorated_inner(x):
    @torch.no_grad()
    def augment(x):
        return (x + 1) * 2

    return augment(x), x * 2


def enable_grad_inside_no_grad(x):
    @torch.enable_grad()
    def g(x):
        return x.sin()

    with torch.no_grad():
        return g(x), x.cos()


@pytest.mark.parametrize("fn", [no_grad_decorated_inner, enable_grad_inside_no_grad])
def test_grad_mode_decorator_on_a_nested_function(fn):
    x = torch.randn(3, requires_grad=True)
    got, expected = md.compile(fn, backend="eager")(x), fn(x)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
        assert (g.requires_grad, g.grad_fn is None) == (e.requires_grad, e.grad_fn is None)
    ours, theirs = counts(fn, x)
    assert ours.graph_count == theirs.graph_count == 1
    assert len(ours.break_reasons) == len(theirs.break_reasons) == 0


def test_a_decorated_function_escaping_keeps_its_grad_mode(capsys):
    def fn(x):
        @torch.no_grad()
        def augment(x):
            return x * 2

        y = augment(x)
        print("graph break")
        return augment(y) + x, augment

    x = torch.randn(3, requires_grad=True)
    (got, aug), (expected, e_aug) = md.compile(fn, backend="eager")(x), fn(x)
    torch.testing.assert_close(got, expected)
    assert got.requires_grad == expected.requires_grad
    assert aug(x).requires_grad is e_aug(x).requires_grad is False
    assert torch.is_grad_enabled()


# -- an nn.Module built inside the trace ---------------------------------------------------

class StatelessPair(torch.nn.Module):  # no __init__ of its own: nn.Module's
    def forward(self, x, y):
        out = torch.nn.ReLU()(torch.cat((x, y), dim=1))
        return torch.nn.LeakyReLU(0.1)(out - 0.5)


def call_module_through_partial(x, y):
    return functools.partial(lambda mod, x, y: mod(x, y), mod=StatelessPair())(x=x, y=y)


def call_bound_forward_through_partial(x, y):
    return functools.partial(lambda mod, x, y: mod(x, y), mod=StatelessPair().forward)(x=x, y=y)


def softmax_and_dropout_made_here(x, y):
    return torch.nn.Dropout(0.0)(x) + torch.nn.Softmax(dim=-1)(y)


@pytest.mark.parametrize("fn", [call_module_through_partial, call_bound_forward_through_partial,
                                softmax_and_dropout_made_here])
def test_a_stateless_module_made_in_the_trace(fn):
    x, y = torch.randn(4, 3), torch.randn(4, 3)
    torch.testing.assert_close(md.compile(fn, backend="eager")(x, y), fn(x, y))
    ours, theirs = counts(fn, x, y)
    assert ours.graph_count == theirs.graph_count == 1
    assert len(ours.break_reasons) == len(theirs.break_reasons) == 0


def test_a_module_with_parameters_made_in_the_trace_draws_the_same_numbers():
    # built for real while tracing it would draw random numbers eager draws later:
    # it is a graph break, and the generator is left where it was
    def fn(x):
        return torch.nn.Linear(3, 2)(x) * 2

    x = torch.randn(4, 3)
    torch.manual_seed(0)
    got = md.compile(fn, backend="eager")(x)
    torch.manual_seed(0)
    torch.testing.assert_close(got, fn(x))


def test_a_module_made_in_the_trace_escapes_as_a_module(capsys):
    def fn(x):
        m = torch.nn.LeakyReLU(0.2)
        a = m(x)
        print("graph break")
        return a + m(x), m, m

    x = torch.randn(3)
    got, m1, m2 = md.compile(fn, backend="eager")(x)
    torch.testing.assert_close(got, fn(x)[0])
    assert type(m1) is torch.nn.LeakyReLU and m1.negative_slope == 0.2 and m1 is m2

"""Constructs from code nobody here wrote (issue 11): each compared with eager and with
``torch._dynamo.explain``'s graph and break counts.

``x.new(size)``, a mapping built from an iterator, torch's legacy tensor-type classes.
"""

from __future__ import annotations

import collections
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

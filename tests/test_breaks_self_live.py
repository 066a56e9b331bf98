"""Graph breaks in methods (``self`` live after the break) and zero-argument ``super()``.

Issue 11, item 6. Every case runs eagerly, through ``md.compile`` (twice: the second
call reuses the cache) and through ``torch._dynamo.explain``; results must equal
eager's, and graph/break counts must equal torch's. Cases are written after the
shapes of PyTorch's ``test/dynamo/test_modules.py`` and ``test_repros.py`` (a print in
``forward``, recurrent modules, a transformer layer, ``super().forward``), in our own
words.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest
import torch
import torch.nn as nn

import minidynamo as md
from minidynamo._torch_private import dynamo_explain

from _helpers import quiet  # tests/ is on sys.path (no package)

pytestmark = [pytest.mark.ch05, pytest.mark.usefixtures("real_dynamo")]


class PrintShape(nn.Module):
    """The first graph break every learner tries: print(h.shape) inside forward."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        h = self.fc1(x).relu()
        print(h.shape)
        return self.fc2(h)


class BreakThenAttr(nn.Module):
    """After the break, self's attributes and a buffer are read again."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("scale", torch.tensor(2.0))
        self.bias_on = True

    def forward(self, x):
        y = self.fc(x)
        torch._dynamo.graph_break()
        if self.bias_on:
            y = y + self.scale
        return y * self.scale


class BreakOnTensorBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 0:
            return self.fc(h)
        return self.fc(-h)


class BreakInSubmodule(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = PrintShape()
        self.out = nn.Linear(3, 2)

    def forward(self, x):
        return self.out(self.inner(x)).sigmoid()


class ItemBreak(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x)
        k = h.abs().max().item()
        return self.fc(h / k)


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).tanh()


class SuperForward(Base):
    def forward(self, x):
        return super().forward(x) * 2


class SuperAfterBreak(Base):
    def forward(self, x):
        y = x + 1
        print("before super")
        return super().forward(y) - 1


class SuperBreakInside(Base):
    def forward(self, x):
        return super().forward(x.cos()) + torch.tensor(x.sum().item())


class SuperTwoLevels(SuperForward):
    def forward(self, x):
        return super().forward(x) + 1


class SelfMethodBreak(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def helper(self, h):
        print("helper")
        return h * 3

    def forward(self, x):
        return self.helper(self.fc(x)) + self.fc.bias


class PlainObject:
    """Not a module: a method of a plain object, self live after the break."""

    def __init__(self):
        self.w = torch.ones(4)

    def method(self, x):
        y = x * self.w
        print("plain")
        return y + self.w


def _lstm():
    return nn.LSTM(4, 3)


def _gru():
    return nn.GRU(4, 3, num_layers=2)


def _rnn():
    return nn.RNN(4, 3)


def _encoder():
    return nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0).eval()


def _decoder():
    return nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0).eval()


SEQ = lambda: (torch.randn(5, 2, 4),)  # noqa: E731
SEQ8 = lambda: (torch.randn(5, 2, 8),)  # noqa: E731
ROWS = lambda: (torch.randn(3, 4),)  # noqa: E731

MODULE_CASES = {
    "print_shape_in_forward": (PrintShape, ROWS),
    "break_then_self_attrs": (BreakThenAttr, ROWS),
    "tensor_branch_in_forward": (BreakOnTensorBranch, ROWS),
    "break_in_submodule_forward": (BreakInSubmodule, ROWS),
    "item_in_forward": (ItemBreak, ROWS),
    "super_forward_top_frame": (SuperForward, ROWS),
    "super_after_break": (SuperAfterBreak, ROWS),
    "super_with_break_inside": (SuperBreakInside, ROWS),
    "super_two_levels": (SuperTwoLevels, ROWS),
    "self_method_breaks": (SelfMethodBreak, ROWS),
    "lstm": (_lstm, SEQ),
    "gru_two_layers": (_gru, SEQ),
    "rnn": (_rnn, SEQ),
    "transformer_encoder_layer": (_encoder, SEQ8),
}


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, atol=1e-6)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _build(name):
    make, inputs = MODULE_CASES[name]
    torch.manual_seed(0)
    return make(), inputs


@pytest.mark.parametrize("name", list(MODULE_CASES))
def test_module_with_break_matches_eager_without_internal_error(name):
    m, inputs = _build(name)
    compiled = md.compile(m, backend="eager")
    for _ in range(2):  # the second call runs the cached entries
        torch.manual_seed(1)
        args = inputs()
        with quiet():
            expected = m(*args)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an internal error would warn and fall back: fail instead
            with contextlib.redirect_stdout(io.StringIO()):
                out = compiled(*args)
        assert _same(expected, out), name


def _counts(explain_fn, fn, args):
    with quiet():
        e = explain_fn(fn, *args)
    return e.graph_count, e.graph_break_count


# ours differs from torch on these, each for the reason given (strict: a fix must remove it)
COUNT_DIFFERENCES = {
    "lstm": "torch._dynamo runs the nn.RNN family eagerly (0 graphs, graph_break_count -1); ours traces "
    "their forward into one graph (values equal eager's)",
    "gru_two_layers": "as lstm",
    "rnn": "as lstm",
}


@pytest.mark.parametrize("name", [n for n in MODULE_CASES])
def test_module_counts_match_torch(name):
    m, inputs = _build(name)
    torch.manual_seed(1)
    args = inputs()
    theirs = _counts(dynamo_explain, m, args)
    md.reset()
    ours = _counts(md.explain, m, args)
    if name in COUNT_DIFFERENCES:
        assert ours != theirs, f"{name} now agrees with torch: remove it from COUNT_DIFFERENCES"
        pytest.xfail(f"{ours} vs torch {theirs}: {COUNT_DIFFERENCES[name]}")
    assert ours == theirs, f"{name}: ours {ours}, torch {theirs}"


def test_plain_method_break_with_self_live():
    obj = PlainObject()
    x = torch.randn(4)
    compiled = md.compile(obj.method, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        assert torch.equal(compiled(x), obj.method(x))
        assert torch.equal(compiled(x), obj.method(x))


def test_local_named_self_in_a_plain_function():
    def f(x):
        self = x + 1
        print("break")
        return self * 2

    x = torch.randn(3)
    with contextlib.redirect_stdout(io.StringIO()):
        assert torch.equal(md.compile(f, backend="eager")(x), f(x))


def test_super_without_arguments_at_top_level_is_not_a_break_site():
    """super() itself must never be run by the transformed function (a different frame)."""

    class A:
        def g(self, x):
            return x + 1

    class B(A):
        def g(self, x):
            s = super()
            print("break between super() and its use")
            return s.g(x) * 2

    b, x = B(), torch.randn(3)
    with quiet():
        assert torch.equal(md.compile(b.g, backend="eager")(x), b.g(x))

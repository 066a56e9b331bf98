"""``Tensor.retain_grad`` breaks at the attribute, as torch's, against torch.

torch/_dynamo/variables/tensor.py ``method_attr_retain_grad``: reading ``y.retain_grad``
is the break ("Tensor.retain_grad() with AOTDispatcher"), not its call. With fewer than two
ops before it there is no checkpoint and the frame runs eagerly (the held-out set's
``p_retain_grad``); with two, the graph is cut there. Graphs, breaks, gb types, lines
(the held-out sets' ``compare``) and the gradient retained, against eager.
"""

from __future__ import annotations

import pytest
import torch

import minidynamo as md
from test_breaks_like_torch_heldout import compare  # tests/ is on sys.path

pytestmark = [pytest.mark.ch05, pytest.mark.usefixtures("real_dynamo")]


def r_two_ops_before(x):
    y = x * 2
    z = y.sin()
    z.retain_grad()
    return z + 1


def r_read_then_called(x):
    y = x * 2
    z = y.sin()
    f = z.retain_grad
    f()
    return (z + 1).cos()


PROGRAMS = {name: fn for name, fn in dict(globals()).items() if name.startswith("r_")}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_retain_grad_breaks_like_torch(name):
    mine, theirs = compare(name, PROGRAMS, set(PROGRAMS), __file__)
    assert mine == theirs, f"ours (graphs, breaks, gb types, lines) {mine} != torch's {theirs}"


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_retain_grad_gradients_like_eager(name):
    fn = PROGRAMS[name]
    x = torch.randn(4, requires_grad=True)
    fn(x).sum().backward()
    expected = x.grad.clone()
    x.grad = None
    md.reset()
    md.compile(fn, backend="aot_eager")(x).sum().backward()
    torch.testing.assert_close(x.grad, expected)

"""Chapter 16's symbol map: for each symbol, ours and torch's agree on what it is and what bounds it."""

import pytest
import torch

from minidynamo.widgets.symbol_map import plot_symbol_map, symbol_map

pytestmark = pytest.mark.ch16


def mixed(x, n):
    k = n.sum().item()
    torch._check(k >= 1)
    torch._check(k < 50)
    return x[:, :2] * k + x.shape[0]


def two_items(x, n):
    a = n[0].item()
    b = n[1].item()
    torch._check(b <= 9)
    return x * a + b


def unchecked(x, n):
    return x * n.sum().item()


def nonzero_rows(x, n):
    idx = (x > 0).nonzero()
    return idx.sum() + n.sum().item()


@pytest.mark.parametrize("fn, dims", [(mixed, {0: 0}), (two_items, {}), (unchecked, {0: 0}), (nonzero_rows, {})],
                         ids=["mixed", "two_items", "unchecked", "nonzero"])
def test_symbols_agree_with_torch(fn, dims, real_dynamo):
    m = symbol_map(fn, torch.randn(6, 3), torch.tensor([2, 3]), dynamic_dims=dims)

    def key(rows):  # both name a backed size after a hash of its source (s77: Note [A symbol's name])
        return [(r.symbol, r.kind, r.came_from, r.example, r.lo, r.hi, len(r.facts)) for r in rows]

    assert key(m.ours) == key(m.torch)
    assert any(r.kind == "unbacked" for r in m.ours)
    for o, t in zip(m.ours, m.torch):  # the fact that set a bound: "torch._check(u0 >= 1)" / "torch._check(k >= 1)"
        assert o.lo_why.split("(")[0] == t.lo_why.split("(")[0]


def test_plot_and_repr():
    import matplotlib

    matplotlib.use("Agg")
    m = symbol_map(mixed, torch.randn(6, 3), torch.tensor([2, 3]), dynamic_dims={0: 0})
    fig = plot_symbol_map(m)
    assert len(fig.axes) == 2
    text = repr(m)
    assert "u0    unbacked  from Tensor.item()" in text and "0/1 specialization" in text

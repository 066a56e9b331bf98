"""Unbacked symbols against torch 2.13: ``.item()``, data-dependent sizes, ``torch._check``, ``mark_unbacked``.

Each program runs under both configs (``capture_scalar_outputs``,
``capture_dynamic_output_shape_ops``) on and off, through our Dynamo and torch's: graph and
break counts, and the unbacked symbols (``u0``, ``zuf0``) that the graphs' values carry, must
be equal; results equal eager. A decision on an unbacked symbol that nothing settles raises
``GuardOnDataDependentSymNode`` in the ShapeEnv and is a graph break in Dynamo, as in torch.
"""

from __future__ import annotations

import warnings

import pytest
import sympy
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_explain, dynamo_recorded_graphs
from minidynamo.shapes.symbolic_shapes import GuardOnDataDependentSymNode, ShapeEnv

pytestmark = pytest.mark.ch16


def unbacked_symbols(gm) -> list[str]:
    """The unbacked symbols in ``gm``'s values (torch's and ours spell them ``u0``, ``zuf0``)."""
    found = set()
    for n in gm.graph.nodes:
        v = n.meta.get("example_value")
        vals = list(v.shape) if isinstance(v, torch.Tensor) else [v]
        for s in vals:
            if isinstance(s, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                found |= {str(x) for x in s.node.expr.free_symbols if str(x).startswith(("u", "zuf"))}
    return sorted(found)


def item_float(x, n):
    return x * n.sum().item()


def item_int_sized(x, n):
    k = (n * 2).sum().item()
    torch._check_is_size(k)
    return torch.zeros(k) + x.sum()


def item_branch(x, n):
    k = (n * 2).sum().item()
    if k > 3:
        return x + 1
    return x - 1


def item_checked_branch(x, n):
    k = (n * 2).sum().item()
    torch._check(k >= 2)
    torch._check(k < 100)
    if k > 1:  # settled by the range [2, 99]: no question, no break
        return x + k
    return x - 1


def nonzero_rows(x, n):
    return x.nonzero() + n.sum()


def mask_index(x, n):
    return x[x > 0].sum() * n.sum()


def masked_select(x, n):
    return x.masked_select(x > 0).exp() * 2


def tolist_pair(x, n):
    a, b = (n * 2).tolist()
    return x * a + b


PROGRAMS = [item_float, item_int_sized, item_branch, item_checked_branch, nonzero_rows, mask_index, masked_select,
            tolist_pair]


def _args():
    g = torch.Generator().manual_seed(0)
    return torch.randn(6, generator=g), torch.tensor([4, 1])


@pytest.mark.parametrize("capture", [False, True], ids=["default", "capture"])
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_graphs_and_unbacked_symbols_match_torch(fn, capture, real_dynamo):
    import torch._dynamo

    flags = dict(capture_scalar_outputs=capture, capture_dynamic_output_shape_ops=capture)
    with torch._dynamo.config.patch(**flags), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch._check_is_size's deprecation
        theirs = dynamo_explain(fn, *_args())
        their_graphs = dynamo_recorded_graphs(fn, *_args())
    with md.config.patch(**flags), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ours = md.explain(fn, *_args())
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count)
    assert [unbacked_symbols(g) for g in ours.graphs] == [unbacked_symbols(g) for g in their_graphs]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_results_equal_eager(fn, backend):
    with md.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = md.compile(fn, backend=backend)
        for x, n in (_args(), (torch.randn(6).abs(), torch.tensor([7, 0]))):
            torch.testing.assert_close(compiled(x, n), fn(x, n))


def _times_two(x):
    return x * 2


def _size_branch(x):
    if x.shape[0] > 2:
        return x + 1
    return x - 1


@pytest.mark.parametrize("fn", [_times_two, _size_branch], ids=lambda f: f.__name__)
def test_mark_unbacked_matches_torch(fn, real_dynamo):
    from minidynamo._torch_private import dynamo_mark_unbacked

    x, y = torch.randn(5, 3), torch.randn(5, 3)
    dynamo_mark_unbacked(x, 0)
    md.mark_unbacked(y, 0)
    try:
        theirs = dynamo_explain(fn, x)
        their_counts = (theirs.graph_count, theirs.graph_break_count)
        their_syms = [unbacked_symbols(g) for g in dynamo_recorded_graphs(fn, x)]
    except Exception as e:  # torch refuses outright: so must we
        their_counts, their_syms = type(e).__name__, None
    ours = md.explain(fn, y)
    if their_syms is None:
        pytest.fail(f"torch raised {their_counts}; ours traced {ours.graph_count} graphs")
    assert (ours.graph_count, ours.graph_break_count) == their_counts
    assert [unbacked_symbols(g) for g in ours.graphs] == their_syms
    compiled = md.compile(fn, backend="eager")
    for t in (y, torch.randn(1, 3), torch.randn(0, 3)):  # no 0/1 specialization: one entry serves all
        torch.testing.assert_close(compiled(t), fn(t))


# --- the ShapeEnv alone ------------------------------------------------------------------------


def test_unbacked_questions_raise_unless_settled():
    env = ShapeEnv()
    u = env.create_unbacked_symint("test", 0, 5)
    assert str(u) == "u0" and not u.node.has_hint()
    assert bool(u >= 0) and bool(u <= 5)  # the range settles these
    with pytest.raises(GuardOnDataDependentSymNode, match=r"Could not guard on data-dependent expression u0 > 2"):
        bool(u > 2)
    env.defer_runtime_assert(u.node.expr >= 3, "torch._check(u0 >= 3)")
    assert bool(u > 2) and env.value_ranges()[sympy.Symbol("u0", integer=True)] == (3, 5)
    assert env.guards == []  # facts, not guards: nothing is checked before the graph runs
    f = env.create_unbacked_symfloat("test")
    assert str(f) == "zuf0"


def _asserts(gm) -> list[str]:
    return [n.args[1] for n in gm.graph.nodes if n.target is torch.ops.aten._assert_scalar.default]


def item_one_check(x, n):
    k = (n * 2).sum().item()
    torch._check(k >= 2)
    return x + k


@pytest.mark.parametrize("fn", [nonzero_rows, mask_index, masked_select, item_one_check, item_int_sized],
                         ids=lambda f: f.__name__)
def test_runtime_asserts_match_torch(fn, real_dynamo):
    """The ranges of data-dependent sizes and the facts of torch._check are asserted in the graph, as
    torch's runtime_assert.py does."""
    import torch._dynamo

    flags = dict(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True)
    with torch._dynamo.config.patch(**flags):
        theirs = dynamo_recorded_graphs(fn, *_args())
    with md.config.patch(**flags):
        ours = md.explain(fn, *_args()).graphs
    assert [_asserts(g) for g in ours] == [_asserts(g) for g in theirs]
    assert any(_asserts(g) for g in ours)


def test_runtime_assert_of_a_marked_size_matches_torch(real_dynamo):
    from minidynamo._torch_private import dynamo_mark_unbacked

    x, y = torch.randn(5, 3), torch.randn(5, 3)
    dynamo_mark_unbacked(x, 0)
    md.mark_unbacked(y, 0)
    assert [_asserts(g) for g in md.explain(_times_two, y).graphs] == \
        [_asserts(g) for g in dynamo_recorded_graphs(_times_two, x)]


# --- more programs of one tensor: sizes from data, scalars used as sizes, int() and bool items ----------


def rows_as_int(x):
    n = x.nonzero().size(0)
    return x[:n] * 2


def unique_plus(x):
    return torch.unique(x) + 1


def arange_of_item(x):
    return torch.arange((x > 0).sum().item()) * 2


def range_of_item(x):
    return sum(i for i in range((x > 0).sum().item()))


def bool_item_branch(x):
    return x + 1 if (x > 0).all().item() else x - 1


def int_of_tensor(x):
    return x * int((x > 0).sum())


def full_of_max(x):
    return torch.full((3,), x.max().item())


def zeros_checked(x):
    k = (x > 0).sum().item()
    torch._check_is_size(k)
    torch._check(k <= x.numel())
    return x.new_zeros(k).sum() + x.narrow(0, 0, 2).sum()


ONE_ARG = [rows_as_int, unique_plus, arange_of_item, range_of_item, bool_item_branch, int_of_tensor, full_of_max,
           zeros_checked]
X = torch.tensor([1., -2., 3., 4., -5., 6.])


@pytest.mark.parametrize("capture", [False, True], ids=["default", "capture"])
@pytest.mark.parametrize("fn", ONE_ARG, ids=lambda f: f.__name__)
def test_one_arg_programs_match_torch(fn, capture, real_dynamo):
    import torch._dynamo

    flags = dict(capture_scalar_outputs=capture, capture_dynamic_output_shape_ops=capture)
    with torch._dynamo.config.patch(**flags), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = dynamo_explain(fn, X)
        their_syms = [unbacked_symbols(g) for g in dynamo_recorded_graphs(fn, X)]
    with md.config.patch(**flags), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = md.explain(fn, X)
        assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count)
        assert [unbacked_symbols(g) for g in ours.graphs] == their_syms
        for backend in ("eager", "aot_eager"):
            md.reset()
            out, ref = md.compile(fn, backend=backend)(X), fn(X)
            assert torch.equal(out, ref) if isinstance(ref, torch.Tensor) else out == ref

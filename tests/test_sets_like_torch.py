"""Sets while tracing, against torch's: graphs, breaks and results (variables/sets.py).

Each program runs through ``torch._dynamo.explain`` and ``md.explain`` with the held-out
sets' ``compare`` (graphs, breaks, each break's registry ``gb_type``, each break's line in
this file), then through ``torch.compile`` and ``md.compile`` (backend "eager") and eager:
the results must be equal, and each graph's calls (targets, in order) the same as torch's.
torch's side is torch/_dynamo/variables/sets.py (``SetVariable``, ``FrozensetVariable``).
"""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_explain_with_gb_types  # noqa: F401 (compare's oracle)
from test_breaks_like_torch_heldout import compare  # tests/ is on sys.path

pytestmark = [pytest.mark.ch05, pytest.mark.usefixtures("real_dynamo")]


def s_literal_of_tensors(x):
    y = x + 1
    s = {x, y}
    s.add(x)  # a tensor hashes by identity: still two
    return len(s), x in s, (x * 2) in s


def s_empty_then_add(x):
    s = set()
    s.add(x)
    s.add(x.sin())
    total = 0
    for t in s:
        total = total + t.sum()
    return len(s), total


def s_constants_in(x):
    names = {"relu", "gelu"}
    if "relu" in names:
        x = x.relu()
    return x + len(names)


def s_discard_and_remove(x):
    y = x * 2
    s = {x, y, 3}
    s.discard(x)
    s.remove(3)
    s.discard(7)
    return len(s), y in s, x in s


def s_remove_missing_raises(x):
    s = {1, 2}
    try:
        s.remove(5)
    except KeyError:
        return x + 1
    return x - 1


def s_iterate_tensors(x):
    s = {x, x.cos()}
    out = x
    for t in s:
        out = out + t
    return out


def s_union_operator(x):
    a = {x, 1}
    b = {x.exp(), 2}
    u = a | b
    total = 0
    for t in u:
        if isinstance(t, torch.Tensor):
            total = total + t.sum()
    return len(u), total


def s_intersection_of_tensors(x):
    y = x.abs()
    a = {x, y}
    b = {y}
    c = a & b
    return len(c), y in c, x in c


def s_intersection_of_constants(x):
    a = {1, 2, 3}
    c = a & {2, 3, 4}
    return x * len(c), a.isdisjoint({7, 8}), a.intersection([3], (3, 1))


def s_difference_and_xor(x):
    y = x + 3
    a = {x, y, 1}
    b = {y, 2}
    return len(a - b), len(a ^ b), x in (a - b)


def s_inplace_update(x):
    s = {1}
    s |= {2, 3}
    s -= {1}
    s.update([x])
    return len(s), x * len(s)


def s_set_of_a_list(x):
    s = set([1, 2, 2, 3])
    return x * len(s)


def s_set_of_shape(x):
    dims = set(x.shape)
    return x + len(dims)


def s_issubset_and_compare(x):
    a = {1, 2}
    b = {1, 2, 3}
    return x + int(a.issubset(b)) + int(a <= b) + int(a == {2, 1}) + int(b.isdisjoint({7}))


def s_frozenset_of_tensors(x):
    y = x.neg()
    f = frozenset([x, y])
    return len(f), x in f


def s_frozenset_constant(x):
    allowed = frozenset({"sum", "mean"})
    return x.sum() if "sum" in allowed else x.mean()


def s_comprehension(x):
    s = {i * 2 for i in range(4)}
    return x + sum(s)


def s_comprehension_of_tensors(x):
    parts = [x, x + 1, x]
    s = {p for p in parts}
    return len(s)


def s_pop_clear(x):
    s = {5}
    v = s.pop()
    s.add(x)
    s.clear()
    return x * v, len(s)


def s_copy_independent(x):
    a = {x}
    b = a.copy()
    b.add(x + 1)
    return len(a), len(b)


def s_unhashable_item_raises(x):
    try:
        {x, [1]}  # noqa: B018 - eager's TypeError, caught
    except TypeError:
        return x + 1
    return x


def s_sorted_constants(x):
    s = {3, 1, 2}
    return x * sorted(s)[0] + list(sorted(s))[-1]


def s_returned_set_of_constants(x):
    return x + 1, {1, 2}


def s_break_then_set(x):
    s = {x}
    y = x.sum()
    print("break")
    s.add(y)
    return len(s), y * 2


def s_guards_on_a_global_set(x):
    return x + len(_GLOBAL_SET)


def s_add_to_a_global_set(x):
    _SEEN.add("step")
    _SEEN.discard("never")
    return x * len(_SEEN)


_GLOBAL_SET = {1, 2, 3}
_SEEN = {"start"}

PROGRAMS = {name: fn for name, fn in dict(globals()).items() if name.startswith("s_")}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_set_program_breaks_like_torch(name):
    mine, theirs = compare(name, PROGRAMS, set(), __file__)
    assert mine == theirs, f"ours (graphs, breaks, gb types, lines) {mine} != torch's {theirs}"


def _calls(graphs) -> list[list]:
    return [[str(n.target) for n in g.graph.nodes if n.op in ("call_function", "call_method")] for g in graphs]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_set_program_graphs_like_torch(name):
    fn = PROGRAMS[name]
    x = torch.randn(4)
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch._dynamo.reset()
        theirs = torch._dynamo.explain(fn)(x)
        md.reset()
        ours = md.explain(fn, x)
    assert _calls(ours.graphs) == _calls(theirs.graphs)


def _leaves(value) -> list:
    if isinstance(value, (tuple, list)):
        return [v for item in value for v in _leaves(item)]
    return [value]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_set_program_results_like_torch(name):
    fn = PROGRAMS[name]
    torch.manual_seed(0)
    x = torch.randn(4)
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = fn(x)
        torch._dynamo.reset()
        theirs = torch.compile(fn, backend="eager")(x)
        md.reset()
        ours = md.compile(fn, backend="eager")(x)
    for got in (theirs, ours):
        for g, e in zip(_leaves(got), _leaves(expected), strict=True):
            if isinstance(e, torch.Tensor):
                torch.testing.assert_close(g, e)
            else:
                assert g == e and type(g) is type(e)


_WATCHED: set = set()


def _len_of_watched(x):
    return x + len(_WATCHED)


def test_a_global_set_that_changes_recompiles_like_torch():
    """An empty set too: its guard compares with a copy, not with the user's set itself."""
    from _helpers import Counter

    counts = []
    for compile_fn, reset in ((torch.compile, torch._dynamo.reset), (md.compile, md.reset)):
        reset()
        _WATCHED.clear()
        counter, x = Counter(), torch.zeros(2)
        compiled = compile_fn(_len_of_watched, backend=counter)
        results = [compiled(x)]
        _WATCHED.add("a")
        results.append(compiled(x))
        results.append(compiled(x))
        _WATCHED.discard("a")
        results.append(compiled(x))
        assert [r.tolist() for r in results] == [[0.0, 0.0], [1.0, 1.0], [1.0, 1.0], [0.0, 0.0]]
        counts.append(counter.frame_count)
    assert counts[1] == counts[0]


def _sizes_in_a_set(x):
    s = {x.shape[0], 4}
    return x * len(s)


def test_a_symbolic_size_in_a_set_is_specialized_like_torch():
    """torch's HashableTracker specializes a SymInt item (hashable.py specialize_symnode): a guard on its value.

    The second size makes the dim dynamic (automatic dynamic); the set then fixes it again."""
    from _helpers import Counter

    counts = []
    for compile_fn, reset in ((torch.compile, torch._dynamo.reset), (md.compile, md.reset)):
        reset()
        counter = Counter()
        compiled = compile_fn(_sizes_in_a_set, backend=counter)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for n in (4, 5, 6, 5):
                x = torch.ones(n)
                torch.testing.assert_close(compiled(x), _sizes_in_a_set(x))
        counts.append(counter.frame_count)
        # ours traced it dynamic as torch's, not by the fallback to static sizes after a failed trace
        assert not [w for w in caught if "dynamic-shape trace" in str(w.message)]
    assert counts[1] == counts[0]

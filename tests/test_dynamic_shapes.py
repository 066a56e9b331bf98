"""Dynamic shapes, differential against torch: a corpus of functions called with a sequence of sizes.

For each case, the same size sequence goes through ``torch.compile(backend="eager")``
and ``md.compile(backend="eager")``; we compare the number of graphs compiled, the
number of cache entries (recompiles + 1), the dims the last graph has symbolic, and
the shape guards (decisions on sizes, over the inputs' sources). Every result is
compared with eager, also under the default ``aot_eager`` backend (Note [AOT
backends specialize per size]). Unit tests of the ShapeEnv compare its symbolic
output sizes with torch's ShapeEnv on the same ops.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import pytest
import sympy
import torch

import minidynamo as md
from minidynamo import _torch_private as tp
from minidynamo.fake import FakeTensorMode
from minidynamo.fake.symbolic_shapes import ShapeEnv, _canonical, is_symbolic

pytestmark = pytest.mark.ch15


# --- the corpus -----------------------------------------------------------------------

W = torch.randn(3, 4)
W48 = torch.randn(48, 2)
LIN = torch.nn.Linear(3, 2)


@dataclasses.dataclass
class Case:
    fn: Callable
    inputs: Callable[[Any], tuple]  # size -> args
    sizes: list
    dynamic: Any = None
    mark: Callable | None = None  # (args, mark_dynamic, mark_static) -> None, before each call


def _x(n):
    return (torch.randn(n, 3),)


def pointwise(x):
    return x * 2 + 1


def size_mul(x):
    return x * x.size(0)


def shape_arith(x):
    return x.view(x.shape[0] * 3) + 1


def branch_on_size(x):
    if x.size(0) > 4:
        return x + 1
    return x - 1


def mod8(x):
    if x.size(0) % 8 == 0:
        return x.view(-1, 8, 3).sum(1)
    return x * 2


def two_inputs(x, y):
    return x + y


def broadcast_one(x):
    return x + torch.ones(1, 3)


def matmul(x):
    return x @ W


def cat_sum(x):
    return torch.cat([x, x]).sum(0)


def slice_rows(x):
    return x[1:] * 2


def batch_mean(x):
    return x.mean(0) + x.sum(1).mean()


def square_softmax(x):
    return x.softmax(-1) @ x


def both_dims(x):
    return (x * 3).sum(1, keepdim=True) / x.size(1)


def zeros_factory(x):
    return torch.zeros(x.size(0), 2) + x[:, :2]


def flatten_matmul(img):
    return img.flatten(1) @ W48


def numel_scale(x):
    return x / x.numel()


def expand_to_batch(x):
    return torch.ones(1, 3).expand(x.size(0), 3) * x


def linear_relu(x):
    return torch.relu(LIN(x))


def reshape_halves(x):
    a, b = x.reshape(2, -1).unbind(0)
    return a * b


def size_compare_eq(x, y):
    if x.size(0) == y.size(0):
        return x * y
    return x.sum() + y.sum()


CASES: dict[str, Case] = {
    "pointwise": Case(pointwise, _x, [2, 3, 4, 5, 6]),
    "size_mul": Case(size_mul, _x, [2, 3, 4, 5]),
    "shape_arith": Case(shape_arith, _x, [2, 3, 4]),
    "branch_on_size": Case(branch_on_size, _x, [3, 5, 6, 2, 7, 4]),
    "mod8": Case(mod8, _x, [8, 16, 24, 12, 32]),
    "two_inputs": Case(two_inputs, lambda n: (torch.randn(n, 3), torch.randn(n, 3)), [2, 3, 4]),
    "broadcast_one": Case(broadcast_one, _x, [1, 2, 3, 4]),
    "matmul": Case(matmul, _x, [2, 3, 4, 5]),
    "cat_sum": Case(cat_sum, _x, [2, 3, 4]),
    "slice_rows": Case(slice_rows, _x, [3, 4, 5]),
    "batch_mean": Case(batch_mean, _x, [2, 3, 4]),
    "square_softmax": Case(square_softmax, lambda n: (torch.randn(n, n),), [2, 3, 4, 5]),
    "both_dims": Case(both_dims, lambda nm: (torch.randn(*nm),), [(2, 3), (4, 5), (6, 7), (3, 2)]),
    "zeros_factory": Case(zeros_factory, _x, [2, 3, 4]),
    "flatten_matmul": Case(flatten_matmul, lambda n: (torch.randn(n, 3, 4, 4),), [2, 3, 4]),
    "numel_scale": Case(numel_scale, _x, [2, 3, 4]),
    "expand_to_batch": Case(expand_to_batch, _x, [2, 3, 4]),
    "linear_relu": Case(linear_relu, _x, [2, 3, 4, 5]),
    "reshape_halves": Case(reshape_halves, lambda n: (torch.randn(2 * n),), [2, 3, 4]),
    "size_compare_eq": Case(size_compare_eq, lambda n: (torch.randn(n, 3), torch.randn(n + n % 2, 3)),
                            [2, 3, 4, 5]),
    "dynamic_true": Case(pointwise, _x, [2, 3, 4], dynamic=True),
    "dynamic_true_branch": Case(branch_on_size, _x, [3, 5, 6], dynamic=True),
    "dynamic_false": Case(pointwise, _x, [2, 3, 4, 5], dynamic=False),
    "cache_limit_static": Case(pointwise, _x, list(range(2, 13)), dynamic=False),
    "mark_dynamic": Case(size_mul, _x, [2, 3, 4], mark=lambda args, dyn, st: dyn(args[0], 0)),
    "mark_static": Case(pointwise, _x, [2, 3, 4], mark=lambda args, dyn, st: st(args[0], 0)),
    "one_then_many": Case(pointwise, _x, [1, 1, 2, 3]),
}


# --- running one side ---------------------------------------------------------------------


@dataclasses.dataclass
class Run:
    graphs: int
    entries: int
    dynamic_dims: frozenset
    shape_guards: frozenset
    outputs: list


def _dims_and_names(gm, source_of) -> tuple[frozenset, dict]:
    """Symbolic dims of the graph's tensor inputs, as ``L['x'].size()[0]``; and symbol -> first source."""
    dims, names = set(), {}
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        v = n.meta.get("example_value")
        src = source_of(n)
        if isinstance(v, torch.Tensor) and src is not None:
            for i, s in enumerate(v.shape):
                if isinstance(s, torch.SymInt) and s.node.maybe_as_int() is None:
                    name = f"{src}.size()[{i}]"
                    dims.add(name)
                    expr = s.node.expr
                    if isinstance(expr, sympy.Symbol):
                        names.setdefault(expr, name)
    return frozenset(dims), names


def _comparable(exprs, names: dict) -> frozenset:
    """Guards over sources: each symbol renamed after where it was read, one spelling per guard."""
    rename = {s: sympy.Symbol(n.replace("'", "").replace("[", "_").replace("]", "_").replace(".", "_")
                              .replace("(", "").replace(")", ""), integer=True, positive=True)
              for s, n in names.items()}
    from minidynamo.fake.symbolic_shapes import FloorDiv

    out = set()
    for e in exprs:
        e = e.replace(lambda a: type(a).__name__ == "FloorDiv", lambda a: FloorDiv(*a.args))  # torch's -> ours
        if not e.free_symbols <= set(rename):
            continue  # a symbol of no input (not comparable)
        out.add(str(_canonical(e.xreplace(rename))))
    return frozenset(out)


def _torch_source(n):
    ga = n.meta.get("grapharg")
    name = getattr(getattr(ga, "source", None), "name", None)
    return name() if callable(name) else name


def run_torch(case: Case) -> Run:
    tp.dynamo_reset()
    graphs, last = [], {}

    def backend(gm, example_inputs):  # read at compile time: torch drops the example values later
        graphs.append(gm)
        dims, names = _dims_and_names(gm, _torch_source)
        env = tp.tracing_shape_env()
        last.update(dims=dims, guards=_comparable([g.expr for g in env.guards], names) if env else frozenset())
        return gm.forward

    outs = _calls(case, torch.compile(case.fn, backend=backend, dynamic=case.dynamic),
                  tp.dynamo_mark_dynamic, tp.dynamo_mark_static)
    entries = len(tp.dynamo_cache_entries(case.fn.__code__))
    return Run(len(graphs), entries, last.get("dims", frozenset()), last.get("guards", frozenset()), outs)


def _calls(case: Case, compiled, mark_dynamic, mark_static) -> list:
    import warnings

    torch.manual_seed(0)
    outs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in case.sizes:
            args = case.inputs(n)
            if case.mark:
                case.mark(args, mark_dynamic, mark_static)
            outs.append(compiled(*args))
    return outs


def run_ours(case: Case, backend="eager") -> Run:
    md.reset()
    graphs, last = [], {}

    def counting(gm, example_inputs):
        graphs.append(gm)
        dims, names = _dims_and_names(gm, lambda n: n.meta.get("source"))
        env = _env_of(gm)
        last.update(dims=dims, guards=_comparable([g.expr for g in env.guards], names) if env else frozenset())
        return gm.forward

    compiled = md.compile(case.fn, backend=counting if backend == "eager" else backend, dynamic=case.dynamic)
    outs = _calls(case, compiled, md.mark_dynamic, md.mark_static)
    return Run(len(graphs), len(compiled.cache.entries), last.get("dims", frozenset()),
               last.get("guards", frozenset()), outs)


def _env_of(gm):
    for n in gm.graph.nodes:
        v = n.meta.get("example_value")
        if n.op == "placeholder" and isinstance(v, torch.SymInt):
            return v.node.shape_env
    return None


def _eager(case: Case) -> list:
    torch.manual_seed(0)
    outs = []
    for n in case.sizes:
        outs.append(case.fn(*case.inputs(n)))
    return outs


@functools.lru_cache(maxsize=None)
def torch_run(name: str) -> Run:
    return run_torch(CASES[name])


@functools.lru_cache(maxsize=None)
def our_run(name: str) -> Run:
    return run_ours(CASES[name])


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, atol=1e-5)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


# Where we knowingly differ from torch (each still equal to eager).
KNOWN_DIFFERENCES: dict[str, str] = {}


# --- tests ------------------------------------------------------------------------------


# the default backend on a sample (each AOT compile per size costs ~0.3 s on two cores)
AOT_SAMPLE = ["size_mul", "branch_on_size", "mod8", "two_inputs", "linear_relu", "flatten_matmul", "reshape_halves"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_results_equal_eager(name):
    case = CASES[name]
    expected = _eager(case)
    assert all(_same(o, e) for o, e in zip(our_run(name).outputs, expected)), "eager backend"


@pytest.mark.parametrize("name", AOT_SAMPLE)
def test_results_equal_eager_aot_eager(name):
    case = CASES[name]
    aot = run_ours(case, backend="aot_eager")
    assert all(_same(o, e) for o, e in zip(aot.outputs, _eager(case)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_counts_against_torch(name):
    ours, theirs = our_run(name), torch_run(name)
    if name in KNOWN_DIFFERENCES and (ours.graphs, ours.entries) != (theirs.graphs, theirs.entries):
        pytest.xfail(KNOWN_DIFFERENCES[name])
    assert (ours.graphs, ours.entries) == (theirs.graphs, theirs.entries)
    assert ours.dynamic_dims == theirs.dynamic_dims


def agreement() -> dict:
    counts = [n for n in CASES if (our_run(n).graphs, our_run(n).entries) == (torch_run(n).graphs, torch_run(n).entries)]
    dims = [n for n in CASES if our_run(n).dynamic_dims == torch_run(n).dynamic_dims]
    with_guards = [n for n in CASES if our_run(n).shape_guards or torch_run(n).shape_guards]
    guards = [n for n in with_guards if our_run(n).shape_guards == torch_run(n).shape_guards]
    return {"cases": len(CASES), "counts_equal": len(counts), "dims_equal": len(dims),
            "cases_with_shape_guards": len(with_guards), "shape_guards_equal": len(guards),
            "counts_differ": sorted(set(CASES) - set(counts)),
            "guards_differ": sorted(set(with_guards) - set(guards))}


def test_corpus_agreement_at_least_90_percent():
    a = agreement()
    assert a["cases"] >= 20
    assert a["counts_equal"] / a["cases"] >= 0.9, a
    assert a["dims_equal"] / a["cases"] >= 0.9, a


def test_shape_guards_printed_and_readable():
    """The entry's shape guards are Python over the inputs' sizes, true for the inputs traced."""
    md.reset()
    f = md.compile(mod8, backend="eager", dynamic=True)
    f(torch.randn(16, 3))
    guards = [g for g in f.cache.entries[0].guards if g.kind == "SHAPE_ENV"]
    exprs = [g.expr for g in guards]
    assert "L['x'].size()[0] >= 2" in exprs
    assert "L['x'].size()[0] % 8 == 0" in exprs
    x = torch.randn(16, 3)
    for g in guards:
        assert eval(g.expr, {"L": {"x": x}})  # noqa: S307
    assert not f.cache.entries[0].check({"x": torch.randn(12, 3)}, {})
    assert f.cache.entries[0].check({"x": torch.randn(24, 3)}, {})


def test_recompile_event_names_the_dynamic_dim():
    from minidynamo import events

    md.reset()
    f = md.compile(pointwise, backend="eager")
    with events.record() as log:
        f(torch.randn(2, 3))
        f(torch.randn(3, 3))
        f(torch.randn(4, 3))
    recompiles = [e for e in log if e.kind == "recompile"]
    assert len(recompiles) == 1
    assert recompiles[0].dynamic == ["L['x'].size()[0]"]
    assert "now dynamic: L['x'].size()[0]" in str(f.cache.recompiles[0])


def test_graph_takes_symint_inputs_like_torch():
    md.reset()
    f = md.compile(size_mul, backend="eager", dynamic=True)
    f(torch.randn(5, 3))
    gm = f.cache.entries[0].graphs[0]
    ph = [n for n in gm.graph.nodes if n.op == "placeholder"]
    assert isinstance(ph[0].meta["example_value"], torch.SymInt)
    assert ph[0].meta["source"] == "L['x'].size()[0]"
    assert "s0 : torch.SymInt" in gm.code
    theirs = run_torch(Case(size_mul, _x, [5], dynamic=True))
    assert theirs.dynamic_dims == our_run_dims(f)


def our_run_dims(f):
    gm = f.cache.entries[-1].graphs[-1]
    return _dims_and_names(gm, lambda n: n.meta.get("source"))[0]


def test_zero_one_specialization_recorded():
    md.reset()
    f = md.compile(pointwise, backend="eager", dynamic=True)
    f(torch.randn(1, 3))
    guards = f.cache.entries[0].guards
    assert not any(g.kind == "SHAPE_ENV" and "size()[0]" in g.expr for g in guards)  # dim 1 (size 3) has one
    assert any("L['x'].size()[0] == 1" in g.expr for g in guards)
    f(torch.randn(5, 3))
    assert len(f.cache.entries) == 2  # 1 stayed static; 5 gets a symbol


# --- the ShapeEnv against torch's, op by op -----------------------------------------------

OPS = {
    "mul": lambda x: x * 2, "cat": lambda x: torch.cat([x, x]), "view": lambda x: x.reshape(-1),
    "sum1": lambda x: x.sum(1), "t": lambda x: x.t(), "slice": lambda x: x[1:],
    "matmul": lambda x: x @ torch.ones(3, 4), "unsqueeze_expand": lambda x: x.unsqueeze(0).expand(2, -1, -1),
    "split_last": lambda x: x.split(2)[-1],
}


@pytest.mark.parametrize("op", sorted(OPS))
def test_symbolic_sizes_like_torch(op):
    env = ShapeEnv()
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    mode.shape_env = env
    x = mode.from_tensor(torch.randn(5, 3), dynamic_dims=(0,), source="L['x']")
    with mode:
        ours = OPS[op](x)
    theirs = _torch_symbolic(OPS[op], torch.randn(5, 3))
    ours_s = [str(s).replace("s0", "S") for s in ours.shape]
    assert ours_s == theirs
    assert all(is_symbolic(s) or isinstance(s, int) for s in ours.shape)


def _torch_symbolic(fn, t):
    out, sym = tp.torch_symbolic_run(fn, t, dynamic_dims=(0,))
    return [str(s).replace(str(sym[0]), "S") for s in out.shape]


def _max_size(x):
    return x * max(x.size(0), 3)  # max() of a SymInt is a graph break here: the size is rebuilt after it


def _interp(x):
    return torch.nn.functional.interpolate(x[None], scale_factor=2)


def test_size_live_at_a_graph_break_is_rebuilt_from_the_inputs():
    md.reset()
    f = md.compile(_max_size, backend="eager", dynamic=True)
    for n in (2, 4, 5):
        x = torch.randn(n, 3)
        assert torch.equal(f(x), _max_size(x))
    assert "L['x'].size()[0]" in f.cache.entries[0].transformed_source


def test_failed_dynamic_trace_is_retried_static_with_a_warning():
    md.reset()
    f = md.compile(_interp, dynamic=True)
    with pytest.warns(UserWarning, match="traced again with static sizes"):
        x = torch.randn(4, 3)
        assert torch.allclose(f(x), _interp(x))
    x = torch.randn(5, 3)
    assert torch.allclose(f(x), _interp(x))
    assert not any(g.kind == "SHAPE_ENV" for e in f.cache.entries for g in e.guards)


# --- hypothesis: random size sequences, results always eager's ------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_HYPO_FNS = [pointwise, size_mul, branch_on_size, mod8, cat_sum, slice_rows, zeros_factory, numel_scale]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(fn=st.sampled_from(_HYPO_FNS), sizes=st.lists(st.integers(min_value=1, max_value=20), min_size=1, max_size=6),
       dynamic=st.sampled_from([None, True, False]))
def test_random_size_sequences_match_eager(fn, sizes, dynamic):
    case = Case(fn, _x, sizes, dynamic=dynamic)
    ours = run_ours(case)
    assert all(_same(o, e) for o, e in zip(ours.outputs, _eager(case)))
    assert ours.entries <= len(set(sizes))

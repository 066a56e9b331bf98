"""AOTAutograd over SymInts (issue 16): one AOT compile per dynamic graph, right for every size.

Each case runs a function over a sequence of sizes through ``md.compile(..., backend=...)``
and through ``torch.compile`` with torch's ``aot_module_simplified`` behind a counting
backend that keeps the forward and backward graphs. Compared: results and gradients
against eager for every size; the number of AOT compiles; the number of SymInt inputs
of the forward and backward graphs (torch's backward takes saved sizes as inputs too).
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import minidynamo as md
import minidynamo.aot as mini_aot
from minidynamo import events
from minidynamo._torch_private import dynamo_reset, torch_aot_module_simplified, torch_make_boxed_func

pytestmark = pytest.mark.ch15


def _sym_placeholders(gm) -> int:
    """SymInt inputs of a Dynamo graph (ours and torch's keep the fake value as ``example_value``)."""
    return sum(1 for n in gm.graph.nodes if n.op == "placeholder" and isinstance(n.meta.get("example_value"), torch.SymInt))


def _sym_inputs(gm) -> int:
    return sum(1 for n in gm.graph.nodes if n.op == "placeholder" and isinstance(n.meta.get("val"), torch.SymInt))


def _run_torch(fn, inputs_per_size, dynamic):
    """torch.compile with torch's AOTAutograd (default partition), graphs kept; (outputs, grads, compiles, fw, bw)."""
    dynamo_reset()
    fws, bws, compiles = [], [], []

    def fw(gm, ex):
        fws.append(gm)
        return torch_make_boxed_func(gm.forward)

    def bw(gm, ex):
        bws.append(gm)
        return torch_make_boxed_func(gm.forward)

    def backend(gm, ex):
        compiles.append(gm)
        return torch_aot_module_simplified(gm, ex, fw, bw, keep_inference_input_mutations=True)

    compiled = torch.compile(fn, backend=backend, dynamic=dynamic)
    outs = [_run(compiled, args) for args in inputs_per_size]
    return outs, len(compiles), fws, bws, compiles


def _run_ours(fn, inputs_per_size, dynamic, backend="aot_eager_default_partition"):
    md.reset()
    arts = []
    orig = mini_aot.aot_module_simplified

    def keeping(gm, ex, *a, **k):
        out = orig(gm, ex, *a, **k)
        out.dynamo_graph = gm
        arts.append(out)
        return out

    mini_aot.aot_module_simplified = keeping
    try:
        compiled = md.compile(fn, backend=backend, dynamic=dynamic)
        with events.record() as log, warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback warning, no silent eager
            outs = [_run(compiled, args) for args in inputs_per_size]
    finally:
        mini_aot.aot_module_simplified = orig
    assert not [e for e in log if e.kind in ("aot_symbolic_failed", "aot_specialized")]
    return outs, arts


def _clone(args):
    return [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]


def _run(fn, args):
    args = _clone(args)
    out = fn(*args)
    outs = out if isinstance(out, tuple) else (out,)
    loss = sum(o.float().sum() for o in outs if isinstance(o, torch.Tensor) and o.requires_grad)
    grads = []
    if isinstance(loss, torch.Tensor):
        loss.backward()
        grads = [a.grad for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    return [o.detach() if isinstance(o, torch.Tensor) else o for o in outs], grads, [
        a.detach() for a in args if isinstance(a, torch.Tensor)]


def _check_eager(fn, inputs_per_size, results):
    for args, (outs, grads, after) in zip(inputs_per_size, results):
        e_outs, e_grads, e_after = _run(fn, args)
        for a, b in zip(outs, e_outs):
            assert torch.allclose(a, b, atol=1e-5), (a.shape, b.shape)
            if isinstance(a, torch.Tensor):
                assert a.shape == b.shape and a.stride() == b.stride()
        for a, b in zip(grads, e_grads):
            assert (a is None) == (b is None) and (a is None or torch.allclose(a, b, atol=1e-5))
        for a, b in zip(after, e_after):  # input mutations written back
            assert torch.allclose(a, b, atol=1e-5)


W = torch.randn(12, 5)


def mlp(x, w):
    return torch.relu(x @ w).sum(1)


def view_computed(x, w):
    return x.view(x.size(0), -1) @ w


def mutate_input(x, y):
    x.add_(1)
    return (x * y).sum(0)


def aliased_view(x):
    return x.view(-1, 2), x * 2


def mean_dynamic(x):
    return x.mean(0) + x.sum(0)


def expand_saved(x, y):
    return (x.sum(1, keepdim=True).expand(x.size(0), 4) * y).mean()


def _inputs(case, n):
    g = torch.Generator().manual_seed(n)
    r = lambda *s, grad=True: torch.randn(*s, generator=g).requires_grad_(grad)  # noqa: E731
    return {
        "mlp": lambda: [r(n, 12), W.clone().requires_grad_(True)],
        "view_computed": lambda: [r(n, 3, 4), W.clone().requires_grad_(True)],
        "mutate_input": lambda: [r(n, 3, grad=False), r(n, 3)],
        "aliased_view": lambda: [r(n, 4, grad=False)],
        "mean_dynamic": lambda: [r(n, 3)],
        "expand_saved": lambda: [r(n, 3), r(n, 4)],
    }[case]()


CASES = {"mlp": mlp, "view_computed": view_computed, "mutate_input": mutate_input, "aliased_view": aliased_view,
         "mean_dynamic": mean_dynamic, "expand_saved": expand_saved}
SIZES = [3, 5, 8]


@pytest.mark.parametrize("case,dynamic", [(c, None) for c in sorted(CASES)] + [("mlp", True), ("mutate_input", True)])
def test_one_aot_compile_per_graph_like_torch(case, dynamic):
    fn = CASES[case]
    inputs = [_inputs(case, n) for n in SIZES]
    ours, arts = _run_ours(fn, inputs, dynamic)
    _check_eager(fn, inputs, ours)
    theirs, t_compiles, t_fws, t_bws, t_dynamo = _run_torch(fn, inputs, dynamic)
    _check_eager(fn, inputs, theirs)
    assert len(arts) == t_compiles
    # The last compile is the dynamic one. Its forward takes every SymInt input of Dynamo's graph
    # (torch's too; how many Dynamo lifts is Dynamo's business), and its backward takes saved sizes
    # where torch's does. (Torch traces a size expression where it is computed, ours where it is
    # used, so a size like s0*4 may be saved by torch's forward but recomputed in our backward.)
    art, gm = arts[-1].artifacts, arts[-1].dynamo_graph
    fw = art.partition.fw_module if art.partition is not None else art.fw_module
    assert getattr(arts[-1], "symbolic", False) == (_sym_inputs(t_fws[-1]) > 0)
    assert _sym_inputs(fw) == _sym_placeholders(gm) > 0
    assert _sym_inputs(t_fws[-1]) == _sym_placeholders(t_dynamo[-1])
    if art.partition is not None:
        assert (_sym_inputs(art.partition.bw_module) > 0) == (_sym_inputs(t_bws[-1]) > 0)


def test_min_cut_backend_one_compile_for_twenty_sizes():
    sizes = list(range(2, 22))
    inputs = [_inputs("mlp", n) for n in sizes]
    ours, arts = _run_ours(mlp, inputs, None, backend="aot_eager")
    _check_eager(mlp, inputs, ours)
    assert len(arts) == 2  # the static first size, then one symbolic graph for the 19 others (torch: the same)
    assert getattr(arts[-1], "symbolic", False)


def test_failed_symbolic_trace_falls_back_per_size(monkeypatch):
    # The programs our symbolic AOT used to refuse (an in-place view of an input, ``x.t_()``) now
    # graph-break in Dynamo as torch's do, so the symbolic trace is made to fail here: the
    # fallback's contract (one static compile per size, results equal eager) is what is tested.
    import minidynamo.aot.aot_autograd as aot_autograd

    def refuse(*args, **kwargs):
        raise aot_autograd.SymbolicAOTFailed("simulated: a construct the symbolic trace does not handle")

    monkeypatch.setattr(aot_autograd, "_compile_symbolic", refuse)

    def f(x):
        x.mul_(3)  # an input mutation, written back per size
        return x * 2

    md.reset()
    compiled = md.compile(f, backend="aot_eager", dynamic=True)
    with events.record() as log:
        for n in (3, 4, 6):
            x = torch.randn(n, 5)
            xe = x.clone()
            out = compiled(x)
            assert torch.equal(out, f(xe)) and torch.equal(x, xe)
    assert any(e.kind == "aot_symbolic_failed" for e in log)
    assert sum(e.kind == "aot_specialized" for e in log) == 3


@settings(max_examples=8, deadline=None)
@given(st.lists(st.integers(2, 40), min_size=2, max_size=6))
def test_random_sizes_match_eager(sizes):
    inputs = [_inputs("expand_saved", n) for n in sizes]
    ours, arts = _run_ours(expand_saved, inputs, True)
    _check_eager(expand_saved, inputs, ours)
    # every Dynamo graph (a size equal to a static one, 3 or 4, duck-sizes and recompiles) is traced once, symbolically
    assert arts and all(getattr(a, "symbolic", False) for a in arts)


def sqrt_of_size(x):
    return x / math.sqrt(x.size(0))


def test_symbolic_float_argument_compiles_once():
    """``x / math.sqrt(x.size(0))``: a SymFloat argument becomes graph nodes (Note [A SymFloat argument
    becomes nodes too], sym_tracing.py), so one symbolic compile serves every size, as torch's. Ours
    computes the root with ``torch._sym_sqrt``; torch 2.13's Dynamo turns the float into a tensor
    first (``tensorify_python_scalars``: ``aten.sqrt`` of a ``scalar_tensor``), so its graph holds
    ``aten.sqrt``: the graphs differ, the compile counts must not."""
    inputs = [[torch.randn(n, 2, requires_grad=True)] for n in (3, 4, 9)]
    ours, arts = _run_ours(sqrt_of_size, inputs, True)  # no aot_symbolic_failed, no fallback warning
    _check_eager(sqrt_of_size, inputs, ours)
    _, compiles, fws, _, _ = _run_torch(sqrt_of_size, inputs, True)
    assert len(arts) == compiles == 1 and arts[0].symbolic
    targets = lambda gm: {n.target for n in gm.graph.nodes if n.op == "call_function"}  # noqa: E731
    assert torch._sym_sqrt in targets(arts[0].artifacts.fw_module)
    assert torch.ops.aten.sqrt.default in targets(fws[0])


def mutated_then_viewed(x):
    x.add_(1)
    return x.view(-1, 2)


def half_of_mutated(x, w):
    x.mul_(2)
    return x[: x.size(0) // 2] @ w, x.transpose(0, 1)


def view_of_intermediate(x):
    y = x * 2
    return y.view(-1), y


@pytest.mark.parametrize("fn,make", [
    (mutated_then_viewed, lambda n: [torch.randn(n, 4)]),
    (half_of_mutated, lambda n: [torch.randn(n, 4), torch.randn(4, 3, requires_grad=True)]),
    (view_of_intermediate, lambda n: [torch.randn(n, 4, requires_grad=True)]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_aliases_and_write_backs_use_each_calls_sizes(fn, make):
    """Note [Sizes per call]: views regenerated and mutations written back with the call's sizes, not the trace's."""
    inputs = [make(n) for n in (2, 4, 6, 10)]
    ours, arts = _run_ours(fn, inputs, None, backend="aot_eager")
    _check_eager(fn, inputs, ours)
    assert len(arts) == 2 and getattr(arts[-1], "symbolic", False)
    for args, (outs, _, _) in zip(inputs, ours):
        e_outs = fn(*_clone(args))
        e_outs = e_outs if isinstance(e_outs, tuple) else (e_outs,)
        assert [o.storage_offset() for o in outs] == [o.storage_offset() for o in e_outs]

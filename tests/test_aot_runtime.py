"""Runtime wrappers: every case of the shared AOT corpus through our aot_function vs eager.

Compared field by field (``assert_same_as_eager``): outputs (values, layout,
requires_grad), the inputs after the call (values, layout: data and metadata
mutations, version bumps), which outputs are inputs / views / share memory with
which inputs and outputs, and gradients. Gradients are taken with respect to the
*leaves* behind the inputs: an input that is mutated is a different autograd node
after the call in eager and in compiled code alike (torch's AOT tests do the same).
"""

from __future__ import annotations

import pytest
import torch

from minidynamo.corpus.aot_cases import CASES, CASES_BY_NAME
from minidynamo import events
from minidynamo.aot import aot_function
from minidynamo.aot.runtime_wrappers import WRAPPER_WORK

pytestmark = pytest.mark.ch11


# -- the comparison ---------------------------------------------------------------


def leaves_behind(args) -> list[torch.Tensor]:
    """The leaf tensors requiring grad that the inputs were computed from (before the call)."""
    out, seen_fns = [], set()

    def add(t):
        if not any(t is o for o in out):
            out.append(t)

    def walk(fn):
        if fn is None or fn in seen_fns:
            return
        seen_fns.add(fn)
        if hasattr(fn, "variable"):
            add(fn.variable)
        for nxt, _ in fn.next_functions:
            walk(nxt)

    for a in args:
        if isinstance(a, torch.Tensor) and a.requires_grad:
            if a.is_leaf:
                add(a)
            else:
                walk(a.grad_fn)
    return out


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _storage(t: torch.Tensor):
    return t.untyped_storage().data_ptr() if t.numel() > 0 else None


def alias_relations(args, outs) -> list[tuple]:
    """Which returned tensor is / is a view of / shares memory with which input or output."""
    inputs = [a for a in args if isinstance(a, torch.Tensor)]
    rel = []
    for j, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            continue
        rel.append(("is_view", j, o._base is not None))
        for i, a in enumerate(inputs):
            rel.append(("is_input", j, i, o is a))
            rel.append(("shares_input", j, i, _storage(o) is not None and _storage(o) == _storage(a)))
        for k, o2 in enumerate(outs[:j]):
            if isinstance(o2, torch.Tensor):
                rel.append(("shares_output", j, k, _storage(o) is not None and _storage(o) == _storage(o2)))
    return rel


def _same_tensor(x: torch.Tensor, y: torch.Tensor, what: str) -> None:
    assert isinstance(y, torch.Tensor), f"{what}: eager gave a tensor, compiled gave {type(y).__name__}"
    assert x.shape == y.shape, f"{what}: shape {tuple(x.shape)} vs {tuple(y.shape)}"
    assert x.stride() == y.stride(), f"{what}: stride {x.stride()} vs {y.stride()}"
    assert x.storage_offset() == y.storage_offset(), f"{what}: storage_offset"
    assert x.dtype == y.dtype, f"{what}: dtype"
    assert x.requires_grad == y.requires_grad, f"{what}: requires_grad {x.requires_grad} vs {y.requires_grad}"
    torch.testing.assert_close(y.detach(), x.detach(), equal_nan=True, msg=lambda m: f"{what}: {m}")


def run_and_compare(fn, make_inputs, compiled_fn=None, *, check_grads: bool = True, alias_oracle=None):
    """Run ``fn`` eagerly and compiled on fresh identical inputs; assert everything matches.

    ``alias_oracle`` (for the few cases listed in ``TORCH_DIFFERS_FROM_EAGER``): the
    aliasing and version bumps are compared with this function (real torch's
    aot_function) instead of eager. Returns the event log of the compiled call.
    """
    compiled_fn = compiled_fn or aot_function(fn)
    if alias_oracle is not None:
        args_o = make_inputs()
        outs_o = _as_tuple(alias_oracle(*args_o))
    args_e, args_c = make_inputs(), make_inputs()
    leaves_e, leaves_c = leaves_behind(args_e), leaves_behind(args_c)
    versions_c = [a._version if isinstance(a, torch.Tensor) else None for a in args_c]
    before_e = [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in args_e]
    outs_e = _as_tuple(fn(*args_e))
    args_e_saved, outs_e_saved = args_e, outs_e
    with events.record() as log:
        outs_c = _as_tuple(compiled_fn(*args_c))

    assert len(outs_e) == len(outs_c), f"{len(outs_e)} outputs vs {len(outs_c)}"
    for j, (x, y) in enumerate(zip(outs_e, outs_c)):
        if isinstance(x, torch.Tensor):
            _same_tensor(x, y, f"output {j}")
        else:
            assert type(x) is type(y) and x == y, f"output {j}: {x!r} vs {y!r}"
    for i, (x, y) in enumerate(zip(args_e, args_c)):
        if isinstance(x, torch.Tensor):
            _same_tensor(x, y, f"input {i} after the call")
    for i, (x, y) in enumerate(zip(args_e, args_c)):
        # An input whose data eager changed must have been written in place (its version bumped).
        if isinstance(x, torch.Tensor) and x.shape == before_e[i].shape and not torch.equal(x.detach(), before_e[i]):
            assert y._version > versions_c[i], f"input {i}: eager mutated it, compiled did not write it back in place"
    if alias_oracle is not None:
        args_e, outs_e = args_o, outs_o
    assert alias_relations(args_e, outs_e) == alias_relations(args_c, outs_c), "alias relations differ"
    if alias_oracle is not None:
        args_e, outs_e = args_e_saved, outs_e_saved

    if check_grads:
        def differentiable(t):
            # A view made under no_grad inherits requires_grad but has no grad_fn: not differentiable.
            return isinstance(t, torch.Tensor) and t.requires_grad and (t.grad_fn is not None or t._base is None)

        def targets(args, outs):
            return [o for o in outs if differentiable(o)] + [a for a in args if differentiable(a)]

        te, tc = targets(args_e, outs_e), targets(args_c, outs_c)
        assert len(te) == len(tc)
        if te and leaves_e:
            gen = torch.Generator().manual_seed(0)
            gos = [torch.randn(t.shape, generator=gen, dtype=t.dtype) for t in te]
            ge = torch.autograd.grad(te, leaves_e, gos, allow_unused=True)
            gc = torch.autograd.grad(tc, leaves_c, gos, allow_unused=True)
            for k, (x, y) in enumerate(zip(ge, gc)):
                assert (x is None) == (y is None), f"grad of leaf {k}: {x} vs {y}"
                if x is not None:
                    torch.testing.assert_close(y, x, msg=lambda m: f"grad of leaf {k}: {m}")
    return log


# -- every case ---------------------------------------------------------------------

# Where real torch's aot_function does not reproduce eager's aliasing either, ours is
# compared with torch's (values and gradients still with eager):
# * outputs of type unsafe_view_alias (torch's Note [Intermediate Bases Optimization]):
#   the only alias of an intermediate is returned through aten._unsafe_view, so it is
#   not a view, where eager's is;
# * the cases below.
TORCH_DIFFERS_FROM_EAGER = {
    "outmut_metadata_of_intermediate": "b.t_() on an intermediate: the graph returns aten.t(b), a view of a "
    "graph-internal tensor, so the output has a ._base where eager's has none",
}


def _differs_from_eager(case) -> bool:
    from minidynamo.aot import OutputType, collect_metadata

    if case.name in TORCH_DIFFERS_FROM_EAGER:
        return True
    meta = collect_metadata(case.fn, *case.make_inputs())
    return any(o.output_type is OutputType.unsafe_view_alias for o in meta.output_info)


def _torch_oracle(fn):
    from minidynamo._torch_private import torch_aot_function, torch_make_boxed_func

    compiled = torch_aot_function(fn, lambda gm, ex: torch_make_boxed_func(gm))

    def call(*args):
        out = compiled(*args)
        return tuple(out) if isinstance(out, list) else out  # torch returns a list for a tuple

    return call


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_matches_eager(case):
    oracle = _torch_oracle(case.fn) if _differs_from_eager(case) else None
    compiled = aot_function(case.fn)
    for _ in range(2):  # the second call takes the cached hot path
        run_and_compare(case.fn, case.make_inputs, compiled, alias_oracle=oracle)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_matches_eager_as_aot_eager(case):
    """The configuration of ``backend="aot_eager"``: min-cut partition, input mutations kept in the graph."""
    from minidynamo.aot.min_cut_partition import min_cut_rematerialization_partition

    oracle = _torch_oracle(case.fn) if _differs_from_eager(case) else None
    compiled = aot_function(case.fn, partition_fn=min_cut_rematerialization_partition,
                            keep_inference_input_mutations=True)
    for _ in range(2):
        run_and_compare(case.fn, case.make_inputs, compiled, alias_oracle=oracle)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_matches_eager_inference(case):
    """The same under no_grad: the inference path (no joint graph, no CompiledFunction)."""

    def make_inputs():
        return case.make_inputs()

    compiled = aot_function(case.fn)
    oracle = _torch_oracle(case.fn) if case.name in TORCH_DIFFERS_FROM_EAGER else None
    with torch.no_grad():
        run_and_compare(case.fn, make_inputs, compiled, check_grads=False, alias_oracle=oracle)
    assert "inference" in compiled.artifacts.wrappers


# -- alias regeneration: which way, per kind -------------------------------------------


def _regens(log):
    return [(e.output_type, e.how) for e in log if e.kind == "alias_regen"]


def test_alias_of_input_is_view_replayed():
    def fn(a):
        return a.t()[1:], a * 2

    log = run_and_compare(fn, lambda: [torch.randn(3, 4, generator=torch.Generator().manual_seed(0))])
    assert ("alias_of_input", "view_replay") in _regens(log)


def test_alias_of_intermediate_is_view_replayed():
    def fn(a):
        b = a * 2
        return b.view(-1), b.t()

    log = run_and_compare(fn, lambda: [torch.randn(3, 4, generator=torch.Generator().manual_seed(0)).requires_grad_()])
    kinds = _regens(log)
    assert ("alias_of_intermediate_save_as_output", "view_replay") in kinds
    assert ("alias_of_intermediate", "view_replay") in kinds


def test_alias_of_intermediate_base_is_user_output():
    def fn(a):
        b = a * 2
        return b, b[0]

    log = run_and_compare(fn, lambda: [torch.randn(3, 4, generator=torch.Generator().manual_seed(0)).requires_grad_()])
    assert ("alias_of_intermediate_base_is_user_output", "view_replay") in _regens(log)


def test_synthetic_base_outputs_use_as_strided():
    def fn(a, b):
        a.mul_(2)
        return a.view(-1), b + 1

    def make_inputs():
        base = torch.randn(3, 3, generator=torch.Generator().manual_seed(0))
        return [base[:2], base[1:]]  # rows 0-1 and 1-2: they overlap in row 1

    compiled = aot_function(fn)
    log = run_and_compare(fn, make_inputs, compiled)
    assert _regens(log) == [("alias_of_input", "as_strided")]
    assert any(w.startswith("synthetic base") for w in compiled.artifacts.wrappers)


def test_no_synthetic_base_for_views_that_do_not_overlap():
    """torch's merge_view_inputs: one storage, but ``x[0]`` and ``x[1]`` share no element."""

    def fn(a, b):
        a.mul_(2)
        return a + b

    def make_inputs():
        base = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))
        return [base[0], base[1]]

    compiled = aot_function(fn)
    run_and_compare(fn, make_inputs, compiled)
    assert not any(w.startswith("synthetic base") for w in compiled.artifacts.wrappers)


@pytest.mark.parametrize("meta_op", ["t_", "unsqueeze_"])
def test_aliased_inputs_one_only_metadata_mutated(meta_op):
    """Two aliased inputs, one metadata-mutated only: torch makes no synthetic base and accepts it."""
    import warnings

    from minidynamo.aot.aot_autograd import AOTFallbackWarning

    def fn(a, b):
        getattr(a, meta_op)(*([0] if meta_op == "unsqueeze_" else []))
        return a * 2, b + 1

    def make_inputs():
        base = torch.randn(3, 3, generator=torch.Generator().manual_seed(0))
        return [base, base.view(-1)]

    compiled = aot_function(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AOTFallbackWarning)
        run_and_compare(fn, make_inputs, compiled)
    assert not compiled.artifacts.fallback


def test_as_strided_fallback_when_replay_does_not_match():
    # A view chain that replays to the wrong layout (the base's layout changed) falls back.
    from minidynamo.aot.runtime_wrappers import gen_alias_from_base
    from minidynamo.aot.schemas import ViewMeta

    base = torch.randn(4, 4)
    target = base.t()[1:]
    chain = (ViewMeta(torch.ops.aten.slice.Tensor, (0, 1, 4)),)  # misses the transpose
    with events.record() as log:
        out = gen_alias_from_base(base, target, False, chain)
    assert [e.how for e in log if e.kind == "alias_regen"] == ["as_strided"]
    assert out.stride() == target.stride() and torch.equal(out, target)


def test_aliased_outputs_get_no_gradient_and_tensor_alias_boxes():
    from minidynamo.aot.schemas import TensorAlias

    def fn(a):
        return a.view(-1), a.sin()

    compiled = aot_function(fn)
    a = torch.randn(3, 4, requires_grad=True)
    view, s = compiled(a)
    meta = compiled.artifacts.meta
    assert meta.aliased_out_indices == [0]
    assert compiled.artifacts.joint.tangent_mask == [False, True]
    # The view's grad_fn is the view replayed in the wrapper, not the CompiledFunction.
    assert type(view.grad_fn).__name__ == "ViewBackward0"
    assert "CompiledFunction" in type(s.grad_fn).__name__
    (view.sum() + s.sum()).backward()
    torch.testing.assert_close(a.grad, torch.ones(3, 4) + a.detach().cos())
    # Inside, the autograd.Function returns the alias in an opaque box.
    raw = compiled.artifacts.compiled_function.apply(torch.randn(3, 4, requires_grad=True))
    assert isinstance(raw[0], TensorAlias) and isinstance(raw[1], torch.Tensor)


# -- per-call work does not grow with the inputs nobody mutates --------------------------


def _many_inputs_fn(*xs):
    xs[0].add_(1)
    xs[1].mul_(2)
    xs[2].t_()
    return xs[3] + xs[-1]


@pytest.mark.parametrize("n", [200, 400])
def test_wrapper_work_counts_only_mutated_inputs(n):
    gen = torch.Generator().manual_seed(0)
    args = [torch.randn(2, 2, generator=gen) for _ in range(n)]
    compiled = aot_function(_many_inputs_fn)
    compiled(*args)  # compile
    WRAPPER_WORK.clear()
    compiled(*args)
    # Three write-backs, nothing else touched per input: the same for 200 and 400 inputs.
    assert dict(WRAPPER_WORK) == {"input_mutation": 3}
    assert compiled.artifacts.meta.mutated_inp_runtime_indices == [0, 1, 2]


# -- md.compile(backend="aot_eager"): Dynamo's graph through the whole pipeline ------------


def test_md_compile_aot_eager_runs_forward_and_backward():
    import minidynamo as md

    def f(x, w):
        y = torch.nn.functional.linear(x, w).relu()
        return y.sum(), y.view(-1)

    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(3, 4, generator=gen, requires_grad=True), torch.randn(5, 4, generator=gen, requires_grad=True)
    md.reset()
    with events.record() as log:
        s, v = md.compile(f, backend="aot_eager")(x, w)
    (s + v.sum()).backward()
    gx, gw = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    s2, v2 = f(x, w)
    (s2 + v2.sum()).backward()
    torch.testing.assert_close((s, v, gx, gw), (s2, v2, x.grad, w.grad))
    passes = [e.pass_name for e in log if e.kind == "pass_begin"]
    assert passes.count("dynamo") == 1 and passes.count("aot_metadata") == 1 and passes.count("aot_joint") == 1


# Note [The backward frees what it has read] (compilers.py): the boxed backward must not
# change what autograd computes or refuses.


def _saved_heavy(x, w):
    h = (x @ w).relu()
    return (h.sin() * h).sum()


def test_boxed_backward_with_retain_graph_runs_twice_like_eager():
    x, w = torch.randn(8, 8), torch.randn(8, 8, requires_grad=True)
    out = aot_function(_saved_heavy)(x, w)
    out.backward(retain_graph=True)
    out.backward()
    w2 = w.detach().clone().requires_grad_()
    ref = _saved_heavy(x, w2)
    ref.backward(retain_graph=True)
    ref.backward()
    torch.testing.assert_close(w.grad, w2.grad)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        ref.backward()


def test_boxed_backward_graph_frees_each_input_after_its_last_use():
    # A saved activation must die while the backward still runs (as eager frees each node's
    # saved tensors), not when the graph returns: the graph takes one list, empties it, and
    # drops each input after its last use. A probe node in the middle sees which are still alive.
    import weakref

    import torch.fx as fx

    from minidynamo.aot.aot_autograd import _boxed_graph

    alive_at_probe = []

    refs = []  # read through the closure: fx copies list arguments of a node

    def probe(x):
        alive_at_probe.append([r() is not None for r in refs])
        return x

    graph = fx.Graph()
    a, b = graph.placeholder("a"), graph.placeholder("b")
    first = graph.call_function(torch.ops.aten.sin.default, (a,))  # a's last use
    mid = graph.call_function(probe, (first,))
    graph.output(graph.call_function(torch.ops.aten.mul.Tensor, (mid, b)))  # b's last use, after the probe
    run = _boxed_graph(fx.GraphModule(torch.nn.Module(), graph))
    ta, tb = torch.randn(4), torch.randn(4)
    expected = ta.sin() * tb
    refs += [weakref.ref(ta), weakref.ref(tb)]
    args = [ta, tb]
    del ta, tb
    out = run(args)
    assert args == []
    assert alive_at_probe == [[False, True]]
    torch.testing.assert_close(out, expected)

"""The one-pass experiment: equal to eager on the benchmark workloads, then each failure, shown against eager
and the three-pass pipeline (md.compile with aot_eager), as a concrete difference."""

from __future__ import annotations

import pytest
import torch

import minidynamo as md
from minidynamo import events
from minidynamo.bench import _BUILDERS
from minidynamo.one_pass import ONE_PASS, one_pass_compile

pytestmark = pytest.mark.ch12


def _grads(fn, inputs, params):
    for p in params:
        p.grad = None
    for x in inputs:
        x.grad = None
    out = fn(*inputs)
    out.sum().backward()
    return out.detach(), [p.grad.clone() for p in params] + [x.grad.clone() for x in inputs if x.requires_grad]


@pytest.mark.parametrize("name", ["mlp", "transformer_block", "pointwise_chain"])
def test_one_pass_equals_eager_on_benchmark_workloads(name):
    torch.manual_seed(0)
    workload = _BUILDERS[name](True)
    inputs = [x.requires_grad_(True) for x in workload.make_inputs()]
    compiled = one_pass_compile(workload.fn)
    params = [p for _, _, p in compiled.params]
    with events.record() as log:
        out, grads = _grads(compiled, inputs, params)
    ref_out, ref_grads = _grads(workload.fn, inputs, params)
    torch.testing.assert_close(out, ref_out)
    assert len(grads) == len(ref_grads) > 0
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r)
    # One FakeTensor pass, and it holds the backward: the joint graph has more ops than the forward pass alone.
    assert {e.pass_name for e in log if e.kind == "op"} == {ONE_PASS}
    assert compiled.num_traces == 1
    assert len(list(compiled.bw_module.graph.nodes)) > 2


def test_three_passes_make_more_fake_ops_than_one():
    torch.manual_seed(0)
    workload = _BUILDERS["mlp"](True)
    (x,) = workload.make_inputs()
    md.reset()
    with events.record() as three:
        md.compile(workload.fn)(x).backward()
    with events.record() as one:
        one_pass_compile(workload.fn)(x).backward()
    count = lambda log: sum(1 for e in log if e.kind == "op")  # noqa: E731
    passes = {e.pass_name for e in three if e.kind == "op"}
    assert passes == {events.DYNAMO, events.AOT_METADATA, events.AOT_JOINT}
    assert count(one) < count(three)


# --- failures: each runs eager, the three-pass pipeline and the one-pass design ------------------------


def test_failure_mutated_input_needs_clone_before_trace():
    """Pass 2 tells the joint trace that x is mutated, so it clones x first; one pass cannot know: wrong grad."""

    def f(x):
        x.mul_(2)
        return x.sin()

    a = torch.randn(3, requires_grad=True, generator=torch.Generator().manual_seed(0))

    def grad_of(fn):
        a.grad = None
        fn(a * 1).sum().backward()
        return a.grad.clone()

    md.reset()
    eager, three, one = grad_of(f), grad_of(md.compile(f)), grad_of(one_pass_compile(f))
    torch.testing.assert_close(three, eager)
    assert not torch.allclose(one, eager)
    torch.testing.assert_close(one * 2, eager)  # the d(2x)/dx of the mutation is lost


def test_failure_output_aliasing_a_mutated_input_is_not_regenerated():
    """Pass 2 learns the output aliases the input; the runtime wrapper regenerates the view. One pass returns a copy."""

    def f(x):
        x.add_(1)
        return x.view(-1)

    def run(fn):
        x = torch.zeros(2, 3)
        out = fn(x)
        out.add_(1)  # writes through the view into x, in eager
        return out._base is x, x.sum().item()

    md.reset()
    eager, three, one = run(f), run(md.compile(f)), run(one_pass_compile(f))
    assert eager == three == (True, 12.0)
    assert one == (False, 6.0)


def test_failure_data_dependent_branch_cannot_be_traced():
    """Dynamo breaks the graph at the data-dependent `if` and runs on; one pass on fake tensors has no value."""
    from minidynamo import fake

    def f(x):
        if x.sum() > 0:
            return x.sin()
        return x.cos()

    x = torch.ones(3)
    md.reset()
    torch.testing.assert_close(md.compile(f)(x), f(x))
    with pytest.raises(fake.DataDependentOutputError):
        one_pass_compile(f)(x)


def test_failure_no_python_guards():
    """A Python branch on a shape is guarded by Dynamo (recompile); the ATen-level trace only saw sin."""

    def f(x):
        if x.shape[0] > 2:
            return x.sin()
        return x.cos()

    def run(fn):
        fn(torch.ones(4))
        return fn(torch.ones(2))

    md.reset()
    eager, three, one = run(f), run(md.compile(f)), run(one_pass_compile(f))
    torch.testing.assert_close(three, eager)
    torch.testing.assert_close(one, torch.ones(2).sin())
    assert not torch.allclose(one, eager)


def test_failure_python_side_effects_run_once():
    """Dynamo replays a list.append on every call; below the dispatcher it happened once, at trace time."""
    calls: list[int] = []

    def f(x):
        calls.append(1)
        return x + 1

    def run(fn):
        calls.clear()
        fn(torch.ones(2))
        fn(torch.ones(2))
        return len(calls)

    md.reset()
    assert run(f) == run(md.compile(f)) == 2
    assert run(one_pass_compile(f)) == 1


def test_failure_aliased_inputs_need_a_synthetic_base():
    """Two inputs viewing one storage: pass 2 finds that one is mutated and they alias, so AOTAutograd traces
    on their common (synthetic) base; one pass wraps each input alone, and the other never sees the write."""

    def f(a, b):
        a.add_(1)
        return b * 2

    def run(fn):
        base = torch.zeros(4)
        out = fn(base[:2], base[1:3])
        return out.tolist(), base.tolist()

    md.reset()
    eager, three, one = run(f), run(md.compile(f)), run(one_pass_compile(f))
    assert eager == three == ([2.0, 0.0], [1.0, 1.0, 0.0, 0.0])
    assert one == ([0.0, 0.0], [1.0, 1.0, 0.0, 0.0])


# --- the merged design: Dynamo's interpreter kept, AOT's passes 2 and 3 merged ----------

from minidynamo.one_pass import MergedStats, merged_backend  # noqa: E402


def _both_designs(fn, make_args, run):
    """run(compiled_fn, args) under eager, the three-pass pipeline and the merged design."""
    results, stats = {}, MergedStats()
    for label, backend in (("eager", None), ("three", "aot_eager"), ("merged", merged_backend(stats))):
        md.reset()
        torch.manual_seed(0)
        args = make_args()
        compiled = fn if backend is None else md.compile(fn, backend=backend)
        results[label] = run(compiled, args)
    return results, stats


def _out_and_grads(f, args):
    out = f(*args)
    out.sum().backward()
    return [out.detach()] + [a.grad for a in args if a.is_leaf and a.requires_grad]


def _same(a, b):
    return len(a) == len(b) and all(torch.allclose(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("name", ["mlp", "transformer_block", "pointwise_chain"])
def test_merged_design_equals_eager_and_saves_the_metadata_pass(name):
    torch.manual_seed(0)
    workload = _BUILDERS[name](True)
    xs = [x.requires_grad_(True) for x in workload.make_inputs()]
    counts = {}
    for label, backend in (("three", "aot_eager"), ("merged", merged_backend(stats := MergedStats()))):
        md.reset()
        with events.record() as log:
            out = md.compile(workload.fn, backend=backend)(*xs)
            out.sum().backward()
        torch.testing.assert_close(out, workload.fn(*xs))
        counts[label] = sum(e.kind == "op" for e in log)
        per_pass = {p for p in (e.pass_name for e in log if e.kind == "op")}
        assert per_pass == ({"dynamo", "aot_metadata", "aot_joint"} if label == "three" else {"dynamo", ONE_PASS})
    assert stats.merged == 1 and stats.clones >= 1  # every input requiring grad is cloned up front
    assert counts["merged"] < counts["three"]


def test_merged_design_mutated_input_needs_no_pass_2_when_every_grad_input_is_cloned():
    def mutates(x):
        x.mul_(2)
        return x.sin()

    def run(f, args):
        (a,) = args
        f(a * 1).sum().backward()
        return [a.grad]

    results, stats = _both_designs(mutates, lambda: [torch.randn(3, requires_grad=True)], run)
    assert _same(results["three"], results["eager"]) and _same(results["merged"], results["eager"])
    assert stats.merged == 1 and stats.clones == 1


def test_merged_design_keeps_eagers_error_for_an_in_place_op_on_a_leaf():
    def f(w):
        w.add_(1)
        return w * 2

    def run(g, args):
        try:
            g(*args)
        except RuntimeError as e:
            return str(e)
        return "no error"

    results, _ = _both_designs(f, lambda: [torch.randn(3, requires_grad=True)], run)
    assert "leaf Variable" in results["eager"]
    assert results["three"] == results["eager"] == results["merged"]


def test_merged_design_defers_aliased_inputs_before_tracing():
    def aliased_inputs(a, b):
        a.add_(1)
        return b * 2

    def run(f, args):
        base = torch.zeros(4)
        out = f(base[:2], base[1:3])
        return [out, base]

    results, stats = _both_designs(aliased_inputs, lambda: [], run)
    assert _same(results["merged"], results["eager"]) and _same(results["three"], results["eager"])
    assert stats.deferred_before == 1 and stats.merged == 0  # known from the real inputs, nothing traced


# An input's metadata mutation (``x.t_()``) was a second case here: Dynamo now graph-breaks on an
# in-place view of a graph input as torch's does, so neither design's AOT sees one.
@pytest.mark.parametrize("case", ["output_aliases_input"])
def test_merged_design_wastes_its_trace_on_what_only_the_end_of_the_forward_knows(case):
    def alias_out(x):
        x.add_(1)
        return x.view(-1)

    fn = alias_out

    def run(f, args):
        (x,) = args
        out = f(x)
        return [out.clone(), x.clone(), torch.tensor(tuple(x.shape))]

    results, stats = _both_designs(fn, lambda: [torch.randn(2, 3)], run)
    assert _same(results["merged"], results["eager"]) and _same(results["three"], results["eager"])
    assert stats.deferred_after == 1 and stats.merged == 0


def test_merged_design_keeps_dynamos_graph_breaks_guards_and_side_effects():
    calls = []

    def f(x):
        calls.append(1)
        if x.sum() > 0:  # a graph break
            x = x.sin()
        if x.shape[0] > 2:  # a guard
            return x.cos()
        return x.tan()

    def run(g, args):
        calls.clear()
        outs = [g(torch.ones(4, requires_grad=True)), g(torch.ones(2, requires_grad=True))]
        return [o.detach() for o in outs] + [torch.tensor(float(len(calls)))]

    results, stats = _both_designs(f, lambda: [], run)
    assert _same(results["merged"], results["eager"]) and _same(results["three"], results["eager"])
    assert stats.merged >= 2


@pytest.mark.slow  # ~15 s: real Dynamo compiles the backward graph
def test_compiled_autograd_is_dynamo_tracing_the_backward_at_backward_time():
    """Chapter 12's caveat to 'the backward never runs Python', checked against torch."""
    from minidynamo._torch_private import compiled_autograd_enabled, dynamo_reset

    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    dynamo_reset()
    w = torch.randn(4, 5, requires_grad=True)
    loss = (torch.randn(3, 4) @ w).relu().sum()
    assert not graphs
    with compiled_autograd_enabled(torch.compile(backend=keep)):
        loss.backward()
    dynamo_reset()
    targets = {str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"}
    assert len(graphs) == 1 and any("ReluBackward0" in t for t in targets) and w.grad is not None

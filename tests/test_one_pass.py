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

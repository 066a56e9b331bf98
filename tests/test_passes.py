"""The three FakeTensor passes, live: PassTimeline, ours vs real torch per pass, the backward's visibility."""

from __future__ import annotations

import pytest
import torch

import minidynamo as md
from minidynamo import events

pytestmark = pytest.mark.ch12


def _f(x, w):
    y = x @ w
    z = y.relu()
    return z.sum()


def _inputs():
    torch.manual_seed(0)
    return torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)


def test_pass_timeline_updates_live_in_every_pass():
    from minidynamo.widgets import PassTimeline

    md.reset()
    timeline = PassTimeline()
    changes: list[str | None] = []
    # A state change of the widget's trait, seen as the frontend would see it, tagged with the pass running then.
    timeline.live.observe(lambda change: changes.append(events.current_pass()), names="value")
    with timeline.watch():
        out = md.compile(_f)(*_inputs())
    during = [p for p in changes if p is not None]
    for name in (events.DYNAMO, events.AOT_METADATA, events.AOT_JOINT):
        assert during.count(name) >= 1, f"no live update during pass {name}: {during}"
    # Every op event redrew the widget while its pass was running.
    assert len(during) == sum(timeline.counts().values())
    assert torch.equal(out, _f(*_inputs()))


def test_pass_timeline_steps_through_every_op_and_lights_the_line():
    from minidynamo.widgets import PassTimeline

    md.reset()
    with events.record() as log:
        md.compile(_f)(*_inputs())
    timeline = PassTimeline.from_events(log)
    counts = timeline.counts()
    assert list(counts) == [events.DYNAMO, events.AOT_METADATA, events.AOT_JOINT]
    assert timeline.stepper is not None and len(timeline.stepper.steps) == sum(counts.values())
    # The relu of line 2 of _f is lit in the dynamo, metadata and joint columns at once.
    relu_step = next(i for i, op in enumerate(timeline._all_ops) if op.op == "aten.relu.default")
    page = timeline.stepper.steps[relu_step]
    assert page.count("background:") >= 3
    timeline.go(relu_step)
    assert "aten.relu.default" in repr(timeline)
    assert repr(timeline) == repr(PassTimeline.from_events(log).go(relu_step))
    # The joint pass has the backward ops the forward passes do not.
    joint_ops = [op.op for op in timeline.passes[events.AOT_JOINT]]
    assert "aten.threshold_backward.default" in joint_ops
    assert "aten.threshold_backward.default" not in [op.op for op in timeline.passes[events.DYNAMO]]


def test_ours_and_torch_make_the_same_passes():
    from minidynamo._torch_private import dynamo_reset
    from minidynamo.real_passes import counting_backend, record_real_passes

    md.reset()
    with events.record() as log:
        md.compile(_f)(*_inputs())
    ours = [e.pass_name for e in log if e.kind == "pass_begin"]
    dynamo_reset()
    with record_real_passes() as real:
        torch.compile(_f, backend=counting_backend())(*_inputs())
    theirs = real.counts()
    assert ours == [events.DYNAMO, events.AOT_METADATA, events.AOT_JOINT]
    for name in ours:
        assert theirs.get(name, 0) > 0, (name, theirs)
    # The joint pass sees the backward too: it dispatches more ops than the forward-only passes, in both.
    for counts in (theirs, {p: sum(1 for e in log if e.kind == "op" and e.pass_name == p) for p in ours}):
        assert counts[events.AOT_JOINT] > counts[events.AOT_METADATA]


def test_backward_is_visible_only_below_autograd():
    from minidynamo.one_pass import watch_levels

    torch.manual_seed(0)
    w = torch.randn(4, 5, requires_grad=True)

    def f(x):
        return (x @ w).relu().sum()

    seen = watch_levels(f, torch.randn(3, 4))
    # The Python (TorchFunctionMode) level sees the forward's calls, and of the backward only its entry.
    assert "TensorBase.matmul" in seen.function["forward"]
    assert seen.function["backward"] == ["Tensor.backward"]
    # The dispatch level sees every ATen op of the backward, run by the C++ autograd engine.
    assert {"aten.threshold_backward.default", "aten.mm.default"} <= set(seen.dispatch["backward"])
    assert len(seen.dispatch["backward"]) > len(seen.dispatch["forward"])
    assert w.grad is not None


def test_count_passes_ours_torch_and_one_pass():
    from minidynamo.widgets.pass_plots import count_passes, counts_table, plot_passes

    counts = count_passes(_f, _inputs)
    for system in ("ours", "torch"):
        assert all(counts[system].get(p, 0) > 0 for p in (events.DYNAMO, events.AOT_METADATA, events.AOT_JOINT))
    # The single pass does the joint pass's work, so it has no fewer ops than the forward alone.
    assert counts["ours"][events.DYNAMO] < counts["one_pass"]["one_pass"] < sum(counts["ours"].values())
    assert "aot_joint" in counts_table({"f": counts})
    fig = plot_passes({"f": counts})
    assert len(fig.axes[0].patches) == 8  # 3 passes x (ours, torch), naive one pass, merged AOT pass
    merged = counts["merged"]
    assert set(merged) == {events.DYNAMO, "one_pass"} and merged[events.DYNAMO] == counts["ours"][events.DYNAMO]
    assert sum(merged.values()) < sum(counts["ours"].values())  # merging AOT's two passes saves fake ops


def test_aot_forward_ops_carry_dynamo_source_lines():
    """Note [AOT ops carry Dynamo's source lines]: one user line, lit in all three passes."""
    import inspect

    def f(x, w):
        y = x @ w
        z = y.relu()
        return z.sum()

    first = inspect.getsourcelines(f)[1]
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 5, requires_grad=True)
    md.reset()
    with events.record() as log:
        md.compile(f, backend="aot_eager")(x, w)
    ops = [e for e in log if e.kind == "op"]
    by_pass = {p: [(e.op, e.line) for e in ops if e.pass_name == p] for p in ("dynamo", "aot_metadata", "aot_joint")}
    assert ("aten.mm.default", first + 1) in by_pass["dynamo"]
    assert ("aten.relu.default", first + 2) in by_pass["dynamo"]
    # the metadata pass is the forward again: the same ops on the same lines
    assert by_pass["aot_metadata"] == by_pass["dynamo"]
    forward = len(by_pass["dynamo"])
    assert by_pass["aot_joint"][:forward] == by_pass["dynamo"]
    backward = by_pass["aot_joint"][forward:]
    assert backward and all(line is None for _, line in backward)  # autograd's ops have no user line

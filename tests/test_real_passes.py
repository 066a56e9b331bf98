"""Attributing the real torch.compile's FakeTensor dispatches to passes (minidynamo.real_passes)."""

import pytest
import torch

from minidynamo import events
from minidynamo._torch_private import dynamo_reset, real_pass_hook_points, silence_dynamo_logs
from minidynamo.real_passes import counting_backend, record_real_passes

pytestmark = pytest.mark.ch12


def f(x, w):
    return torch.relu(x @ w).sum()


def _inputs():
    torch.manual_seed(0)
    return torch.randn(4, 8), torch.randn(8, 3, requires_grad=True)


def test_real_compile_makes_the_three_passes_and_hooks_are_removed():
    silence_dynamo_logs()
    dynamo_reset()
    real_mode = real_pass_hook_points()[0]
    before = real_mode.__torch_dispatch__
    with record_real_passes() as log:
        torch.compile(f, backend=counting_backend())(*_inputs()).backward()
    counts = log.counts()
    for name in ("dynamo", "aot_metadata", "aot_joint"):
        assert counts.get(name, 0) > 0, counts
    # The joint pass traces the backward too: it sees the relu's backward, the others do not.
    assert log.op_counts("aot_joint")["aten.threshold_backward.default"] == 1
    assert log.op_counts("dynamo")["aten.threshold_backward.default"] == 0
    assert real_mode.__torch_dispatch__ is before


def test_ours_and_torch_make_the_same_main_passes_with_the_same_compute_ops():
    import minidynamo as md

    silence_dynamo_logs()
    dynamo_reset()
    md.reset()
    with record_real_passes() as real:
        torch.compile(f, backend=counting_backend())(*_inputs()).backward()
    with events.record() as log:
        md.compile(f, backend="aot_eager")(*_inputs()).backward()
    ours_passes = [e.pass_name for e in log if e.kind == "pass_begin"]
    for name in ("dynamo", "aot_metadata", "aot_joint"):
        assert name in ours_passes
    compute = ("aten.mm.default", "aten.relu.default")
    ours_joint = [e.op for e in log if e.kind == "op" and e.pass_name == "aot_joint"]
    for op in compute:
        assert (op in ours_joint) == (real.op_counts("aot_joint")[op] > 0), op


def test_torchs_extra_per_pass_counts_are_device_queries_and_lift_fresh():
    """Note [Why torch counts more], measured on the MLP after a warm-up compile (FakeTensor cache)."""
    from collections import Counter

    import minidynamo as md
    from minidynamo import events
    from minidynamo._torch_private import dynamo_reset
    from minidynamo.bench import _BUILDERS, _call
    from minidynamo.real_passes import counting_backend, record_real_passes

    for attempt in range(2):  # the first compile in a process fills torch's FakeTensor cache
        torch.manual_seed(0)
        workload = _BUILDERS["mlp"](True)
        dynamo_reset()
        with record_real_passes() as real:
            _call(torch.compile(workload.fn, backend=counting_backend()), workload.make_inputs(), workload.backward)
    dynamo_reset()
    md.reset()
    with events.record() as log:
        _call(md.compile(workload.fn), workload.make_inputs(), workload.backward)
    ours = Counter(e.op for e in log if e.kind == "op" and e.pass_name == "dynamo")
    theirs = real.op_counts("dynamo")
    assert theirs["prim.device.default"] > 0
    del theirs["prim.device.default"]
    assert theirs == ours  # Dynamo's pass: the same ops, plus device queries
    other = real.explained("aot_other")
    assert other["total"] == other["lift_fresh"] > 0  # the backend's fakeification: lift_fresh only
    for name in ("aot_metadata", "aot_joint"):  # most of the difference, not all of it
        e, n_ours = real.explained(name), sum(1 for x in log if x.kind == "op" and x.pass_name == name)
        assert e["total"] > n_ours and e["prim.device"] + e["lift_fresh"] > (e["total"] - n_ours) / 2, (name, e, n_ours)

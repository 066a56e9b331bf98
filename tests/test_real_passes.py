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

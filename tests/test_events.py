"""The event log: what it records (against real torch's dispatch) and what recording costs.

Notes [Events are formatted when read] and [The log is a tape until read] (events.py):
recording keeps raw snapshots and builds Events and their strings when the log is read.
"""

from __future__ import annotations

import gc

import torch

from minidynamo import events
from minidynamo._torch_private import TorchDispatchMode
from minidynamo.fake import FakeTensorMode
from minidynamo.symbolic.guards import GuardSet
from minidynamo.symbolic.source import LocalSource


def _program(x, y):
    a = x.t()
    a.mul_(2)
    parts = torch.split(y, 2)
    b = parts[0].view(-1) + parts[1].reshape(-1)
    x.unsqueeze_(0)
    return a.sum() + b.sum() + x.sum()


def _op_rows(log):
    return [(e.op, e.input_shapes, e.output_shapes, e.output_aliases_input, e.mutates) for e in log if e.kind == "op"]


def _tensors(x) -> list:
    if isinstance(x, torch.Tensor):
        return [x]
    return [t for y in x for t in _tensors(y)] if isinstance(x, (list, tuple)) else []


class _RealRecorder(TorchDispatchMode):
    """Real torch on real tensors: each op as the fake mode reports it (the oracle)."""

    def __init__(self):
        super().__init__()
        self.rows = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        flat_in, flat_out = _tensors((args, list((kwargs or {}).values()))), _tensors([out])
        ins = [t.untyped_storage().data_ptr() for t in flat_in]
        self.rows.append((
            str(func),
            [tuple(t.shape) for t in flat_in],
            [tuple(t.shape) for t in flat_out],
            [next((i for i, s in enumerate(ins) if s == o.untyped_storage().data_ptr()), None) for o in flat_out],
            func._schema.is_mutable,
        ))
        return out


def test_op_events_match_real_torch_dispatch():
    torch.manual_seed(0)
    x, y = torch.randn(3, 4), torch.randn(4, 5)
    real, rx, ry = _RealRecorder(), x.clone(), y.clone()
    with real:
        _program(rx, ry)

    mode = FakeTensorMode()
    fx, fy = mode.from_tensor(x), mode.from_tensor(y)
    with events.record() as log, mode:
        _program(fx, fy)
    assert _op_rows(log) == real.rows
    assert any(r[3] == [0] for r in real.rows) and any(r[4] for r in real.rows)  # views and mutations were seen


def test_a_guard_source_is_printed_only_when_read():
    printed = []

    class CountingSource(LocalSource):
        def name(self):
            printed.append(1)
            return super().name()

    with events.record() as log:
        GuardSet().add(CountingSource("x"), "TYPE_MATCH", "type(L['x']) is int", "a test")
        assert printed == []
        (guard,) = [e for e in log if e.kind == "guard"]
    assert guard.source == "L['x']" and guard.details["guard_kind"] == "TYPE_MATCH" and len(printed) == 1
    assert guard.source == "L['x']" and len(printed) == 1  # formatted once


def test_the_log_reads_as_a_list_inside_and_after_the_block_and_nested():
    seen = []
    with events.subscribe(seen.append), events.record() as outer:
        events.emit("guard", source="a", line=7)
        with events.record() as inner, events.pass_scope("p"):
            events.emit("recompile", function="f")
            assert [e.kind for e in inner] == ["pass_begin", "recompile"]
            assert len(outer) == 3 and outer[0].line == 7 and outer[-1].function == "f" and outer[-1].pass_name == "p"
        events.emit("graph_break", reason="r")
        assert bool(inner) and len(inner) == 3
    assert [e.kind for e in outer] == ["guard", "pass_begin", "recompile", "pass_end", "graph_break"]
    assert [e.seq for e in seen] == [e.seq for e in outer] and [e.kind for e in seen] == [e.kind for e in outer]
    assert [e.details for e in seen] == [e.details for e in outer]
    assert outer[1:3] == list(inner)[:2] and outer[2] in inner
    assert not events.is_recording()


def _collect() -> None:
    # Twice: CPython untracks a tuple of plain values during a collection, and a tuple of
    # such tuples (an event's shapes) only once its inner tuples are untracked, which can
    # take a second one (on 3.13 a third of them after one collection, none after two).
    gc.collect()
    gc.collect()


def test_recording_keeps_no_new_object_per_op_for_the_collector():
    # Thousands of tracked objects kept per compile tipped CPython into full collections of
    # the whole process (Note [The log is a tape until read]); one per op would show here.
    mode = FakeTensorMode()
    fx = mode.from_tensor(torch.randn(3, 4))
    with events.record() as log, mode:
        fx + 1  # warm: kernels, caches
        _collect()
        before = len(gc.get_objects())
        for _ in range(500):
            fx.t()
        _collect()
        after = len(gc.get_objects())
    assert after - before < 100, after - before
    assert len([e for e in log if e.op == "aten.t.default"]) == 500


def test_ops_per_pass_counts_the_same_before_and_after_the_log_is_read():
    mode = FakeTensorMode()
    fx = mode.from_tensor(torch.randn(3, 4))
    with events.record() as log:
        with events.pass_scope("a"), mode:
            fx.t().sin()
        with events.pass_scope("b"), mode:
            fx.cos()
    unread = events.ops_per_pass(log)
    assert list.__len__(log) == 0  # counted off the tape: no Event was made
    by_hand: dict = {}
    for e in log:
        if e.kind == "op":
            by_hand[e.pass_name] = by_hand.get(e.pass_name, 0) + 1
    assert unread == by_hand == events.ops_per_pass(log) == events.ops_per_pass(list(log)) == {"a": 2, "b": 1}

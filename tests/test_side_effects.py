"""Side effects on objects that outlive the frame (chapter 5): replayed once, in order."""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

import minidynamo as md

# an internal tracing error must fail these tests, not fall back to eager quietly
pytestmark = [pytest.mark.ch05, pytest.mark.filterwarnings("error:minidynamo. tracing")]

CALLS = 0


def appends(x, log):
    log.append(x.sum())
    log.append("done")
    return x * 2


def sets_attr(x, obj):
    obj.count = obj.count + 1
    obj.last = x * 3
    return x + obj.count


def writes_global(x):
    global CALLS
    CALLS = CALLS + 1
    return x * CALLS


def mutates_then_breaks(x, log):
    log.append(1)
    print("break")  # the eager print must see the list already appended to
    log.append(len(log))
    return x + 1


def dict_update(x, d):
    d["y"] = x + 1
    d.pop("drop")
    return x


class Obj:
    def __init__(self):
        self.count = 0
        self.last = None


class Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.fc(x) * self.calls


def test_list_append_replayed_once():
    cf = md.compile(appends, backend="eager")
    x = torch.ones(2)
    for _ in range(2):  # first call traces, second runs the cache
        log, expected_log = [], []
        torch.testing.assert_close(cf(x, log), appends(x, expected_log))
        assert len(log) == 2 and log[1] == "done"
        torch.testing.assert_close(log[0], expected_log[0])


def test_attribute_set_replayed_once():
    cf = md.compile(sets_attr, backend="eager")
    obj, ref = Obj(), Obj()
    x = torch.ones(2)
    for _ in range(3):
        out = cf(x, obj)
        expected = sets_attr(x, ref)
        torch.testing.assert_close(out, expected)
        assert obj.count == ref.count
        torch.testing.assert_close(obj.last, ref.last)


def test_global_write_replayed_once():
    global CALLS
    CALLS = 0
    cf = md.compile(writes_global, backend="eager")
    x = torch.ones(2)
    outs = [cf(x) for _ in range(3)]
    assert CALLS == 3
    for i, out in enumerate(outs, 1):
        torch.testing.assert_close(out, x * i)


def test_side_effects_before_a_break_are_visible_to_the_eager_part():
    cf = md.compile(mutates_then_breaks, backend="eager")
    log = []
    with contextlib.redirect_stdout(io.StringIO()):
        cf(torch.ones(2), log)
        expected = []
        mutates_then_breaks(torch.ones(2), expected)
    assert log == expected == [1, 1]


def test_dict_mutation_replayed():
    cf = md.compile(dict_update, backend="eager")
    d = {"drop": 1, "keep": 2}
    x = torch.ones(2)
    cf(x, d)
    assert list(d) == ["keep", "y"]
    torch.testing.assert_close(d["y"], x + 1)


def test_module_attribute_counter():
    model, ref = Counter(), Counter()
    ref.load_state_dict(model.state_dict())
    cm = md.compile(model, backend="eager")
    x = torch.ones(1, 2)
    for _ in range(3):
        torch.testing.assert_close(cm(x), ref(x))
    assert model.calls == ref.calls == 3

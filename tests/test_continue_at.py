"""Note [The rest of a frame as real bytecode]: the rest of a frame after a checkpoint, run by CPython.

The bytecode copy (``minidynamo/bytecode/continue_at.py``) is checked against the function it
copies, run from each statement at which a trace can stop (an empty stack, outside any try
block); then a frame that stops at a checkpoint, as GPT-2's ``loss_function`` property makes
``forward`` do, against eager and against torch: results, graphs, breaks, and the frames the rest
calls compiled through the hook (torch's rest runs in CPython too, ``step_graph_break``).
"""

from __future__ import annotations

import dis
import traceback
import types

import pytest
import torch

import minidynamo as md
from minidynamo.bytecode.continue_at import MARK, continue_at, rest_function

from _helpers import Counter

K = 10


def many_statements(a, b, *args, c=3, **kw):
    x = a + b
    y = x * c
    try:
        z = y + K
    except ZeroDivisionError:
        z = -1
    for i in range(3):
        z += i
    w = [q * 2 for q in range(z % 5)]  # no cell: the comprehension reads no local of ours
    if z > 1000:
        raise ValueError(f"big {z}")
    return x, y, z, w, args, kw


def _outer(n):
    def reads_n(t):
        s = t + n
        u = s * 2
        return u - n
    return reads_n


def maybe_unbound(a):
    b = a + 1
    if a > 5:
        c = 1
    return c + b


def _line_start(fn, rel: int) -> int:
    """The offset of the first instruction of the function's line ``rel`` (0: the ``def``)."""
    line = fn.__code__.co_firstlineno + rel
    return min(i.offset for i in dis.get_instructions(fn) if i.positions.lineno == line and i.opname != "NOP")


def test_every_checkpoint_of_a_function_runs_to_the_same_result():
    args, kw = (7,), {"k": 1}
    want = many_statements(1, 2, *args, **kw)
    x, y = 3, 9
    # the lines with an empty stack outside the try block and the loop: where a trace may stop
    for rel in (1, 2, 7, 9, 10, 12):
        offset = _line_start(many_statements, rel)
        # the locals eager holds when it reaches that line
        values = {"a": 1, "b": 2, "c": 3, "args": args, "kw": kw}
        if rel >= 2:
            values["x"] = x
        if rel >= 3:
            values["y"] = y
        if rel >= 7:  # after the try statement, before the loop
            values["z"] = y + K
        if rel >= 9:  # after the loop
            values.update(z=want[2], i=2)
        if rel >= 10:
            values["w"] = want[3]
        rest = continue_at(many_statements.__code__, offset, frozenset(values))
        assert rest is not None and rest.co_qualname.endswith(MARK)
        fn, call_args = rest_function(rest, globals(), values)
        assert fn(*call_args) == want, (offset, rel)


def test_free_variables_and_an_unbound_local():
    reads_n = _outer(4)
    rest = continue_at(reads_n.__code__, _line_start(reads_n, 3), frozenset({"u", "n"}))
    fn, args = rest_function(rest, globals(), {"u": 14, "n": 4})
    assert fn(*args) == reads_n(3)
    rest = continue_at(maybe_unbound.__code__, _line_start(maybe_unbound, 4), frozenset({"a", "b"}))  # c unbound
    fn, args = rest_function(rest, globals(), {"a": 1, "b": 2})
    with pytest.raises(UnboundLocalError) as caught:
        fn(*args)
    with pytest.raises(UnboundLocalError) as eager:
        maybe_unbound(1)
    assert str(caught.value) == str(eager.value)


def test_a_raise_in_the_rest_names_the_users_line():
    offset = _line_start(many_statements, 10)  # the `if z > 1000` line
    rest = continue_at(many_statements.__code__, offset, frozenset({"z", "x", "y", "w", "args", "kw"}))
    fn, args = rest_function(rest, globals(), {"z": 5000, "x": 1, "y": 2, "w": [], "args": (), "kw": {}})
    with pytest.raises(ValueError, match="big 5000") as caught:
        fn(*args)
    last = traceback.extract_tb(caught.value.__traceback__)[-1]
    assert (last.name, last.line) == ("many_statements", 'raise ValueError(f"big {z}")')


def test_the_rest_shares_the_frames_cells():
    """Each cell keeps its slot as a free variable of the copy: the rest writes the very cell a
    function made before the checkpoint reads (Note [A resume function receives the frame's cells])."""
    def has_cell(x):
        y = x + 1
        f = lambda: y  # noqa: E731
        y = y * 10
        return f()

    rest = continue_at(has_cell.__code__, _line_start(has_cell, 3), frozenset({"f"}))
    assert rest.co_cellvars == () and rest.co_freevars == ("y",)
    cell = types.CellType(5)
    lam = next(c for c in has_cell.__code__.co_consts if isinstance(c, types.CodeType))
    f = types.FunctionType(lam, globals(), "<lambda>", None, (cell,))
    fn, args = rest_function(rest, globals(), {"f": f}, {"y": cell})
    assert fn(*args) == 50 and cell.cell_contents == 50


def test_a_parameter_that_is_a_cell_or_a_generator_is_left_to_the_interpreter():
    def param_cell(x):
        y = x + 1
        return (lambda: x)() + y

    def gen(x):
        yield x

    assert continue_at(param_cell.__code__, _line_start(param_cell, 2), frozenset({"y"})) is None
    assert continue_at(gen.__code__, 2, frozenset({"x"})) is None


# --- a frame that stops at a checkpoint: the rest in CPython, its callees through the hook -------------


class _Loud:
    calls = 0

    @property
    def scale(self):
        print("", end="")  # a break inside the getter: `forward` cannot resume after LOAD_ATTR
        return 2


def _helper(t):
    return t.cos() + 1


def stops_at_a_property(x, obj):
    y = x.sin() + x.exp()  # two calls: a checkpoint may cut here (torch's is_non_empty_graph)
    z = y * obj.scale
    w = _helper(z)  # a frame the rest calls: compiled through the hook, as torch's
    return w - 1


@pytest.mark.parametrize("system", ["md", "torch"])
def test_the_rest_after_a_checkpoint_equals_eager_and_torch(system):
    x = torch.randn(4)
    counter = Counter()
    if system == "torch":
        torch._dynamo.reset()
        compiled = torch.compile(stops_at_a_property, backend=counter)
    else:
        md.reset()
        compiled = md.compile(stops_at_a_property, backend=counter)
    for _ in range(3):
        torch.testing.assert_close(compiled(x, _Loud()), stops_at_a_property(x, _Loud()))
    # torch: the graph before the checkpoint, and _helper's frame, compiled by the frame its rest calls
    assert counter.frame_count == 2, (system, counter.frame_count)


def test_the_rest_runs_as_copied_bytecode_not_on_our_interpreter(monkeypatch):
    from minidynamo.symbolic.resume_execution import ResumeFunction

    interpreted = []
    monkeypatch.setattr(ResumeFunction, "run_eagerly", lambda self, L: interpreted.append(self) or 1 / 0)
    md.reset()
    compiled = md.compile(stops_at_a_property, backend="eager")
    x = torch.randn(4)
    for _ in range(2):
        torch.testing.assert_close(compiled(x, _Loud()), stops_at_a_property(x, _Loud()))
    assert not interpreted
    assert "___eager_rest_at_" in compiled.cache.entries[0].transformed_source

"""Resume functions that receive the frame's cells, as torch's do.

torch's ``ContinueExecutionCache.generate`` (torch/_dynamo/resume_execution.py) makes a frame's
cell and free variables the resume function's free variables, and ``create_call_resume_at``
(torch/_dynamo/symbolic_convert.py) hands it the frame's own cells as its closure: a function
made before a graph break and the rest of the frame after it share one cell (a class whose
method reads the class's name, a ``nonlocal`` counter, a lambda that must see a later
assignment). Ours: Note [A resume function receives the frame's cells]
(minidynamo/symbolic/resume_execution.py).

Each program runs through real torch (``torch._dynamo.explain``) and ``md.explain``: graphs,
breaks, registry gb_types and user lines (the first held-out set's ``compare``); then the
compiled result against eager, twice (the second call runs the cached entries).
"""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

import minidynamo as md
from test_breaks_like_torch_heldout import compare  # tests/ is on sys.path
from _helpers import strict_xfails  # tests/ is on sys.path


def c_class_reads_its_own_name(x):
    class Acc:
        def __init__(self, t):
            self.t = t

        def double(self):
            return Acc(self.t * 2)

    return Acc(x).double().t + 1


def c_class_body_reads_a_local(x):
    scale = 3

    class Scaler:
        factor = scale

        def apply(self, t):
            return t * self.factor

    return Scaler().apply(x) + scale


def c_nonlocal_counter_after_a_break(x):
    n = 0

    def bump():
        nonlocal n
        n += 1

    y = x.sin()
    print("break")
    bump()
    bump()
    return y * n


def c_lambda_sees_a_later_assignment(x):
    k = 1
    get = lambda: k  # noqa: E731
    y = x.cos()
    print("break")
    k = 3
    return y * get()


def c_cell_across_two_breaks(x):
    total = 0

    def add(v):
        nonlocal total
        total += v

    y = x * 2
    add(1)
    print("one")
    y = y + total
    add(2)
    print("two")
    add(3)
    return y * total


def _make_reader():
    base = torch.ones(4)
    step = 2

    def reader(x):
        nonlocal step
        y = x + base
        print("break")
        step = step + 1
        out = y * step
        step = step - 1  # as it was: each call alike
        return out

    return reader


c_free_variable_written_after_a_break = _make_reader()


class _Loud:
    @property
    def scale(self):
        print("", end="")  # a break inside the getter: the frame cannot resume after LOAD_ATTR
        return 2


_LOUD = _Loud()


def _rest_of_the_frame_runs_with_its_cells(x):
    k = 2
    get = lambda: k  # noqa: E731
    y = x.sin() + x.exp()  # two ops: a checkpoint may cut here (torch's is_non_empty_graph)
    z = y * _LOUD.scale
    k = 5
    return z + get()


PROGRAMS = {name: fn for name, fn in dict(globals()).items() if name.startswith("c_")}

# Where we still differ from torch, and why (each a strict xfail).
KNOWN: dict[str, str] = {}


@pytest.mark.parametrize("name", strict_xfails(PROGRAMS, KNOWN))
def test_resume_with_cells_breaks_like_torch(name):
    mine, theirs = compare(name, PROGRAMS, set(), __file__)
    assert mine == theirs, f"ours (graphs, breaks, gb types, lines) {mine} != torch's {theirs}"


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_resume_with_cells_runs_like_eager(name):
    fn = PROGRAMS[name]
    torch.manual_seed(0)
    x = torch.randn(4)
    with contextlib.redirect_stdout(io.StringIO()):
        expected = fn(x)
        md.reset()
        compiled = md.compile(fn, backend="aot_eager")
        first, second = compiled(x), compiled(x)
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(second, expected)


def test_the_resume_function_receives_the_cell_itself():
    """The transformed code passes the frame's cells as ``___closure`` and the nested function
    holds the same cell; the resume function's guards read the contents as ``L['k']``, as torch's
    resume function's f_locals show a free variable's contents."""
    md.reset()
    torch.manual_seed(0)
    compiled = md.compile(c_lambda_sees_a_later_assignment, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        compiled(torch.randn(4))
    (entry,) = compiled.cache.entries
    source = entry.transformed_source
    assert "___closure=(___cell_" in source
    cell = source.split("___closure=(")[1].split(",")[0]
    assert f"({cell},)" in source.split("___make_function")[1], source  # the lambda's closure: the same cell
    resume = next(r for r in compiled.config.resumes.values() if r.code is c_lambda_sees_a_later_assignment.__code__)
    assert resume.cell_names == ("k",)


def test_a_nonlocal_write_reaches_the_users_cell():
    """The rest of the frame writes the cell the nested function holds: eager's value after the call."""
    def outer(x):
        count = 0

        def bump():
            nonlocal count
            count += 1
            return count

        y = x + 1
        print("break")
        bump()
        return y, bump

    md.reset()
    with contextlib.redirect_stdout(io.StringIO()):
        y, bump = md.compile(outer, backend="eager")(torch.ones(2))
    assert bump() == 2  # the cell the compiled frame wrote (1), then this call


def test_a_free_variable_written_after_a_break_is_the_users_cell():
    """The compiled function's own free variables arrive as its ``__closure__`` cells: a write
    after the break lands in the cell the user's other closures share."""
    def make():
        step = 2

        def reader(x):
            nonlocal step
            y = x + 1
            print("break")
            step = step + 1
            return y * step

        return reader, lambda: step

    reader, peek = make()
    md.reset()
    compiled = md.compile(reader, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        first, second = compiled(torch.ones(2)), compiled(torch.ones(2))
    assert peek() == 4
    torch.testing.assert_close((first, second), (torch.full((2,), 6.0), torch.full((2,), 8.0)))


def test_the_rest_after_a_checkpoint_runs_as_bytecode_with_the_cells(monkeypatch):
    """Note [The rest of a frame as real bytecode] with cells: CPython runs the rest, the lambda
    made before the checkpoint reads the cell the rest assigns; our interpreter is not used."""
    from minidynamo.symbolic.resume_execution import ResumeFunction

    interpreted = []
    monkeypatch.setattr(ResumeFunction, "run_eagerly", lambda self, L: interpreted.append(self) or 1 / 0)
    md.reset()
    compiled = md.compile(_rest_of_the_frame_runs_with_its_cells, backend="eager")
    x = torch.randn(4)
    for _ in range(2):
        torch.testing.assert_close(compiled(x), _rest_of_the_frame_runs_with_its_cells(x))
    assert not interpreted
    source = compiled.cache.entries[0].transformed_source
    assert "___eager_rest_at_" in source and "___closure=(" in source, source

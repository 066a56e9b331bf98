"""A view input is fakified through its base, as torch's (chapter 15).

Torch makes the fake of an input that is a view (``x[1:]``, ``x.t()``, ``x.view(...)``) by
faking its ``_base`` first, under the source ``L['x']._base``, and then replaying the view on
that fake as ``as_strided`` (torch/_subclasses/meta_utils.py ``MetaConverter.meta_tensor``,
``view_from_base``). Dynamo decides the base's dynamic dims as an input of its own
(torch/_dynamo/variables/builder.py ``_automatic_dynamic``: ``view_base_context``) and tracks
the base as an input (``VariableBuilder.wrap_tensor``: ``wrap_to_fake_tensor_and_record(value._base,
source=AttrSource(source, "_base"))``), so a learner sees the base's sizes in the symbols
(``s`` hashed from ``L['x']._base.size()[0]``, duck-sized with the view's) and in the shape
guards (``L['x']._base.size()[0] == L['x'].size()[1]``), and two views of one base share it.

Each program runs through ``torch.compile`` and ``md.compile`` with a recording backend; the
test compares exactly: each graph's ``gm.code`` and its nodes' sizes and strides as text
(test_symbol_names_like_torch.py's ``_graph_symbols``), per cache entry the shape guards, the
recompile reasons in order, and the number of graphs. Nothing is renamed before comparing.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo import events
from minidynamo._torch_private import (
    dynamo_cache_entries,
    dynamo_config_patch,
    dynamo_guard_failures,
    dynamo_mark_dynamic,
    dynamo_reset,
)
from test_symbol_names_like_torch import _graph_symbols, _lambda_guards, _strip  # tests/ is on sys.path

pytestmark = [pytest.mark.ch15, pytest.mark.usefixtures("real_dynamo")]


def _recording(graphs: list):
    def backend(gm, example_inputs):
        graphs.append((gm.code.strip(), _graph_symbols(gm)))
        return gm.forward
    return backend


def run_torch(prog) -> dict:
    fn, calls, compile_kw, code = prog()
    dynamo_reset()
    graphs: list = []
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        compiled = torch.compile(fn, backend=_recording(graphs), **compile_kw)
        torch.manual_seed(0)
        outs = [compiled(*make(dynamo_mark_dynamic)) for make in calls]
    entries = sorted(dynamo_cache_entries(code), key=lambda e: e.compile_id.frame_compile_id)
    guards = [_lambda_guards(str(e.guard_manager)) for e in entries]
    reasons = [_strip(r) for r in dynamo_guard_failures(code)]
    dynamo_reset()
    return {"graphs": graphs, "guards": guards, "reasons": reasons, "outs": outs}


def run_ours(prog) -> dict:
    fn, calls, compile_kw, code = prog()
    md.reset()
    graphs: list = []
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), events.record() as log:
        warnings.simplefilter("ignore")
        compiled = md.compile(fn, backend=_recording(graphs), **compile_kw)
        torch.manual_seed(0)
        outs = [compiled(*make(md.mark_dynamic)) for make in calls]
    entries = sorted(compiled.cache.entries, key=lambda e: int(e.compile_id.split("/")[-1]))
    guards = [[g.expr for g in e.guards if g.kind == "SHAPE_ENV"] for e in entries]
    reasons = [_strip(r) for e in log if e.kind == "recompile" for r in e.details.get("reasons") or []]
    md.reset()
    return {"graphs": graphs, "guards": guards, "reasons": reasons, "outs": outs}


# --- the programs ---------------------------------------------------------------------------
# Each returns (fn, calls, compile kwargs, the code whose cache entries are read); a call is a
# function of mark_dynamic (torch's or ours) returning the arguments, made fresh for each system.

PROGRAMS: dict = {}


def program(fn):
    PROGRAMS[fn.__name__] = fn
    return fn


def _calls(*makers):
    return [lambda mark, m=m: m() for m in makers]


def scale(x):
    return x * 2


def add(x, y):
    return x + y


def sums(x, y):
    return x.sum() + y.sum()


@program
def slice_dynamic_true():
    """``x[1:]`` of a 1-D base: the base's size gets a symbol of its own (only guarded by its range)."""
    return scale, _calls(lambda: (torch.arange(6.0)[1:],)), {"dynamic": True}, scale.__code__


@program
def rows_of_a_matrix_dynamic_true():
    """``x[2:]`` of a (6, 4) base: the view's columns are the base's (one symbol), its offset a symbol."""
    return scale, _calls(lambda: (torch.arange(24.0).view(6, 4)[2:],)), {"dynamic": True}, scale.__code__


@program
def transpose_automatic_dynamic():
    """A transposed input whose sizes change: the second graph's symbols and guards come through the base."""
    return (scale, _calls(lambda: (torch.randn(3, 5).t(),), lambda: (torch.randn(4, 6).t(),),
                          lambda: (torch.randn(5, 7).t(),)), {}, scale.__code__)


@program
def as_strided_input():
    """An ``as_strided`` view: overlapping-free but not dense, its strides symbols of their own."""
    return (scale, _calls(lambda: (torch.arange(30.0).as_strided((3, 4), (6, 1), 2),)), {"dynamic": True},
            scale.__code__)


@program
def reshaped_view_dynamic_true():
    """``x.view(3, 4)`` of a 1-D base of 12: the base's size and the view's are different symbols."""
    return scale, _calls(lambda: (torch.arange(12.0).view(3, 4),)), {"dynamic": True}, scale.__code__


@program
def view_as_real_of_a_complex_base():
    """``view_as_real``: the complex base is read as real first, then the view replayed (its sizes duck-sized
    against the base's)."""
    def make():
        return (torch.view_as_real(torch.complex(torch.arange(5.0), torch.ones(5))),)
    return scale, _calls(make), {"dynamic": True}, scale.__code__


@program
def two_views_of_one_base():
    """``b[:4]`` and ``b[4:]``: both fakes are views of one fake base; its size is guarded once."""
    def make():
        b = torch.arange(10.0)
        return b[:4], b[4:]
    return sums, _calls(make), {"dynamic": True}, sums.__code__


@program
def a_tensor_and_its_transpose():
    """``f(b, b.t())``: the view's base is the other input; its sizes name the base's symbols."""
    def make():
        b = torch.randn(3, 5)
        return b, b.t()
    return sums, _calls(make), {"dynamic": True}, sums.__code__


@program
def a_transpose_then_its_base():
    """``f(b.t(), b)``: the view comes first, so the base's symbols are named from ``L['x']._base``; the base
    input reuses its fake (one object) and its sizes are guarded equal to them."""
    def make():
        b = torch.randn(3, 5)
        return b.t(), b
    return sums, _calls(make), {"dynamic": True}, sums.__code__


@program
def a_tensor_and_its_slice_automatic_dynamic():
    """``f(b, b[1:])`` with sizes that change: the second graph's symbols for both, through one base."""
    def make(n):
        def call():
            b = torch.arange(float(n))
            return b, b[1:]
        return call
    return sums, _calls(make(6), make(8), make(9)), {}, sums.__code__


class Holder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(8))


HOLDER = Holder()


@program
def slice_of_a_parameter():
    """A slice of a parameter: the base (a parameter) stays static, the slice is dynamic."""
    def make():
        return (HOLDER.w[2:],)
    return scale, _calls(make), {"dynamic": True}, scale.__code__


@program
def static_base_marked_view():
    """Only the view's dim 0 is marked dynamic: the base's sizes stay static (and unguarded)."""
    def make(mark):
        v = torch.randn(6, 4)[:, 1:]
        mark(v, 0)
        return (v,)
    return scale, [make], {}, scale.__code__


@program
def view_changes_base_changes():
    """Automatic dynamic: ``x[1:]`` of 10, then of 12, then of 14: one recompile, then reuse."""
    return (scale, _calls(lambda: (torch.arange(10.0)[1:],), lambda: (torch.arange(12.0)[1:],),
                          lambda: (torch.arange(14.0)[1:],)), {}, scale.__code__)


@program
def base_changes_view_stays():
    """Automatic dynamic: ``x[:4]`` of 10, then of 12: the view is the same, no recompile."""
    return (scale, _calls(lambda: (torch.arange(10.0)[:4],), lambda: (torch.arange(12.0)[:4],)), {},
            scale.__code__)


def mul_n(x, n):
    return x * n


@program
def base_changes_view_stays_other_input_recompiles():
    """``x[:4]`` of 10, 12, 14 with an int that changes: the recompile (for the int) finds the base's size changed,
    so the base is dynamic while the view stays static: only the base's range is guarded."""
    return (mul_n, _calls(lambda: (torch.arange(10.0)[:4], 1), lambda: (torch.arange(12.0)[:4], 2),
                          lambda: (torch.arange(14.0)[:4], 3)), {}, mul_n.__code__)


@program
def a_view_then_no_view():
    """The graph for ``x[1:]`` guards ``L['x']._base``; a tensor that is no view fails it (``_base`` is None), and
    the recompile reason is the exception's text, as torch's."""
    return (scale, _calls(lambda: (torch.arange(6.0)[1:],), lambda: (torch.arange(5.0),),
                          lambda: (torch.arange(7.0)[1:],)), {"dynamic": True}, scale.__code__)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_view_inputs_like_torch(name):
    theirs = run_torch(PROGRAMS[name])
    ours = run_ours(PROGRAMS[name])
    assert theirs["graphs"], "torch compiled no graph: the program tests nothing"
    assert [g[0] for g in ours["graphs"]] == [g[0] for g in theirs["graphs"]]  # gm.code
    assert [g[1] for g in ours["graphs"]] == [g[1] for g in theirs["graphs"]]  # sizes and strides as text
    assert ours["guards"] == theirs["guards"]
    assert ours["reasons"] == theirs["reasons"]
    for a, b in zip(ours["outs"], theirs["outs"]):
        torch.testing.assert_close(a, b)


# --- the AOT side: view inputs mutated, aliased, or needing gradients -------------------------------


def _add_in_place(x):
    x.add_(1)
    return x * 2


def _mul_first(a, b):
    a.mul_(2)
    return a.sum() + b.sum()


def _square_sum(x):
    return (x * x).sum()


def _write_base_read_transpose(b, bt):
    b.add_(1)
    return bt * 2


def _slice(n):
    base = torch.arange(float(n))
    return base, (base[1:],)


def _halves(n):
    base = torch.arange(float(n))
    return base, (base[:4], base[4:])


def _slice_of_leaf(n):
    w = torch.arange(float(n), requires_grad=True)
    return w, (w[2:],)


def _matrix_and_transpose(n):
    b = torch.arange(float(3 * n)).view(3, n)
    return b, (b, b.t())


AOT_CASES = {
    "mutated_slice": (_add_in_place, _slice),
    "mutated_view_aliasing_another": (_mul_first, _halves),
    "slice_of_a_leaf_backward": (_square_sum, _slice_of_leaf),
    "mutated_base_read_through_its_transpose": (_write_base_read_transpose, _matrix_and_transpose),
}


@pytest.mark.parametrize("dynamic", [True, None])
@pytest.mark.parametrize("case", list(AOT_CASES))
def test_view_inputs_through_aot_eager(case, dynamic):
    """Through AOTAutograd (``aot_eager``), with a symbolic graph (``dynamic=True``) or automatic dynamic after
    the second size: the outputs, the base the views share (written in place) or its gradient, as eager's;
    as many cache entries as torch's."""
    fn, make = AOT_CASES[case]
    results, entries = {}, {}
    for system in ("eager", "ours", "torch"):
        md.reset()
        dynamo_reset()
        compiled = {"eager": fn, "ours": md.compile(fn, backend="aot_eager", dynamic=dynamic),
                    "torch": torch.compile(fn, backend="aot_eager", dynamic=dynamic)}[system]
        got = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for n in (6, 7, 9):
                base, args = make(n)
                out = compiled(*args)
                if base.requires_grad:
                    out.backward()
                    got.append(base.grad.clone())
                else:
                    got.append((out, base.clone()))
        results[system] = got
        entries[system] = len(compiled.cache.entries) if system == "ours" else \
            len(dynamo_cache_entries(fn.__code__)) if system == "torch" else None
    md.reset()
    dynamo_reset()
    torch.testing.assert_close(results["ours"], results["eager"])
    assert entries["ours"] == entries["torch"]

"""Graph breaks (chapter 5): counts against torch._dynamo.explain, resume functions, fullgraph.

Differential: every count is compared with the real ``torch._dynamo.explain`` on the
same function and inputs; every result with eager.
"""

from __future__ import annotations

import contextlib
import io

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_explain
from minidynamo.symbolic import counters
from minidynamo.symbolic.exc import FullGraphError, GraphBreak

# an internal tracing error must fail these tests, not fall back to eager quietly
pytestmark = [pytest.mark.ch05, pytest.mark.filterwarnings("error:minidynamo. tracing"),
              pytest.mark.usefixtures("real_dynamo")]


def helper_branch(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def helper_print(x):
    y = x.cos()
    print("in helper")
    return y.sin()


def calls_helper_with_branch(x):
    y = x * 2
    z = helper_branch(y)
    return z * 3


def prints_in_middle(x):
    y = x + 1
    print("hello")
    return y * 2


def prints_first(x):
    print("start")
    return x.relu()


def item_break(x):
    n = x.sum().item()
    return x * n


def data_dependent(x):
    y = x.exp()
    if y.mean() > 1:
        return y - 1
    return y + 1


def calls_helper_print(x, k: int):
    a = x * k
    b = helper_print(a)
    return a + b


def break_in_loop(x):
    for i in range(3):
        x = x + i
        print(i)
    return x


def explicit_graph_break(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


def no_tensor_ops(x):
    return x


def unsupported_opcode_after_work(x):
    y = x * 2
    with open(__file__) as fh:  # BEFORE_WITH on a file: not traceable
        fh.readline()
    return y + 1


def loop_calls_helper(x):
    for i in range(2):  # a break in a loop: Dynamo skips this frame but compiles helper_print
        x = helper_print(x) + i
        print(i)
    return x


CASES = {
    "skipped_frame_still_compiles_callees": (loop_calls_helper, lambda: (torch.randn(3),)),
    "helper_with_branch": (calls_helper_with_branch, lambda: (torch.randn(4),)),
    "print_middle": (prints_in_middle, lambda: (torch.randn(3),)),
    "print_first": (prints_first, lambda: (torch.randn(3),)),
    "item": (item_break, lambda: (torch.randn(3),)),
    "data_dependent_if": (data_dependent, lambda: (torch.randn(5),)),
    "helper_print": (calls_helper_print, lambda: (torch.randn(2), 3)),
    "break_in_loop": (break_in_loop, lambda: (torch.randn(2),)),
    "explicit_graph_break": (explicit_graph_break, lambda: (torch.randn(2),)),
    "no_tensor_ops": (no_tensor_ops, lambda: (torch.randn(2),)),
    "unsupported_opcode": (unsupported_opcode_after_work, lambda: (torch.randn(2),)),
}


def _quiet():
    return contextlib.redirect_stdout(io.StringIO())


@pytest.mark.parametrize("name", list(CASES))
def test_counts_match_real_dynamo_and_results_match_eager(name):
    fn, make = CASES[name]
    torch.manual_seed(0)
    args = make()
    with _quiet():
        expected = fn(*args)
        ours = md.explain(fn, *args)
        real = dynamo_explain(fn, *args)
        compiled = md.compile(fn, backend="eager")
        first, second = compiled(*args), compiled(*args)
    assert (ours.graph_count, ours.graph_break_count) == (real.graph_count, real.graph_break_count)
    torch.testing.assert_close(ours.out, expected)
    torch.testing.assert_close(first, expected)
    torch.testing.assert_close(second, expected)


def test_helper_with_branch_is_four_graphs_three_breaks():
    with _quiet():
        out = md.explain(calls_helper_with_branch, torch.ones(4))
    assert (out.graph_count, out.graph_break_count) == (4, 3)
    functions = [r.function for r in out.break_reasons]
    assert functions == ["helper_branch", "helper_branch"]  # the call in the caller, the jump in the callee
    assert "data-dependent" in out.break_reasons[-1].reason


def test_explanation_object_has_instruction_line_reason_hint():
    with _quiet():
        out = md.explain(prints_in_middle, torch.randn(2))
    (reason,) = out.break_reasons
    assert isinstance(reason, GraphBreak)
    assert reason.instruction.startswith("CALL")
    assert reason.lineno == prints_in_middle.__code__.co_firstlineno + 2
    assert "print" in reason.reason and reason.hint
    assert 'print("hello")' in reason.source


def test_transformed_source_calls_graph_then_break_then_resume():
    cf = md.compile(prints_in_middle, backend="eager")
    with _quiet():
        cf(torch.randn(2))
    src = cf.cache.entries[0].transformed_source
    lines = [ln.strip() for ln in src.splitlines()]
    assert lines[1].startswith("___graph_out = ___compiled_fn_")
    assert lines[2].startswith("___r = print('hello')")
    assert lines[3].startswith("return ___resume_at_")


def test_steady_state_runs_no_bytecode_across_breaks():
    cf = md.compile(calls_helper_with_branch, backend="eager")
    x = torch.ones(4)
    cf(x)
    counters.clear()
    torch.testing.assert_close(cf(x), calls_helper_with_branch(x))
    assert counters["instructions"] == 0
    torch.testing.assert_close(cf(-x), calls_helper_with_branch(-x))  # the other branch: traced once
    counters.clear()
    cf(-x)
    assert counters["instructions"] == 0


def test_fullgraph_raises_at_first_break():
    cf = md.compile(prints_in_middle, backend="eager", fullgraph=True)
    with pytest.raises(FullGraphError, match=r"print") as info:
        cf(torch.randn(2))
    assert info.value.explanation.lineno == prints_in_middle.__code__.co_firstlineno + 2
    with pytest.raises(FullGraphError, match="data-dependent"):
        md.compile(calls_helper_with_branch, fullgraph=True)(torch.randn(2))


def test_graph_break_events():
    with md.events.record() as log, _quiet():
        md.compile(prints_in_middle, backend="eager")(torch.randn(2))
    breaks = [e for e in log if e.kind == "graph_break"]
    assert len(breaks) == 1 and breaks[0].instruction.startswith("CALL")
    ops = [e for e in log if e.kind == "op"]
    assert ops and all(e.pass_name == "dynamo" for e in ops)
    assert {e.line for e in ops} >= {prints_in_middle.__code__.co_firstlineno + 1}


class Holder:
    def __init__(self):
        self.tmp = 1


def deletes_attr(x, obj):
    y = x * 2
    del obj.tmp  # DELETE_ATTR: torch traces it, a side effect done after the graph
    return y + 1


_DOOMED = 1


def deletes_global(x):
    global _DOOMED
    y = x * 2
    z = y + 1
    del _DOOMED  # DELETE_GLOBAL: no handler; after two calls torch cuts at the last clean instruction
    _DOOMED = 1
    return z - 1


def test_del_of_an_attribute_is_traced_as_a_side_effect():
    x = torch.randn(3)
    real = dynamo_explain(deletes_attr, x, Holder())
    obj = Holder()
    ours = md.explain(deletes_attr, x, obj)
    assert (ours.graph_count, len(ours.break_reasons)) == (real.graph_count, len(real.break_reasons)) == (1, 0)
    assert not hasattr(obj, "tmp")
    torch.testing.assert_close(ours.out, x * 2 + 1)
    assert "delattr(L['obj'], 'tmp')" in ours.entries[0].transformed_source
    compiled = md.compile(deletes_attr, backend="eager")
    for _ in range(2):
        obj = Holder()
        torch.testing.assert_close(compiled(x, obj), x * 2 + 1)
        assert not hasattr(obj, "tmp")


def test_unsupported_instruction_cuts_at_last_clean_point():
    x = torch.randn(3)
    real = dynamo_explain(deletes_global, x)
    ours = md.explain(deletes_global, x)
    assert ours.graph_count == real.graph_count == 1
    torch.testing.assert_close(ours.out, x * 2)
    src = ours.entries[0].transformed_source
    assert "___eager_rest_at_" in src and "runs eagerly" in src
    compiled = md.compile(deletes_global, backend="eager")
    for _ in range(2):
        torch.testing.assert_close(compiled(x), x * 2)
        assert _DOOMED == 1


_logged: list = []


def _logs_the_item(x):
    loss = (x * 2).sum()
    _logged.append(loss.item())  # breaks at .item(); the resume function gets _logged.append on its stack
    return loss * 1.0


def test_a_containers_bound_method_on_the_resume_stack_is_traced_as_torch_traces_it():
    """``lst.append`` left on the stack by a break is called on the list (a side effect), no second break.

    torch: ``bound_builtin_method_descriptor`` / ``BoundBuiltinMethodVariable`` (variables/builder.py).
    """
    from minidynamo._torch_private import dynamo_reset

    x = torch.randn(3)
    dynamo_reset()
    theirs = dynamo_explain(_logs_the_item, x)
    md.reset()
    ours = md.explain(_logs_the_item, x)
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count)
    assert len(ours.break_reasons) == len(theirs.break_reasons) == 1, [str(r) for r in ours.break_reasons]
    _logged.clear()
    md.reset()
    compiled = md.compile(_logs_the_item, backend="eager")
    compiled(x), compiled(x)
    assert _logged == [(x * 2).sum().item()] * 2, "each call appends once, as eager does"


def _t_of_input(x):
    y = x * 2
    x.t_()  # an in-place view of a graph input
    return y.sum() + x


def _resize_of_intermediate(x):
    y = x + 1
    y.resize_(2)
    return y * 2


def _set_of_input(x, y):
    z = x * 2
    x.set_(y)
    return z.sum() + x


def _t_of_intermediate(x):
    y = x * 2
    y.t_()  # an intermediate: traced, by torch too
    return y + 1


@pytest.mark.parametrize("fn,make", [(_t_of_input, lambda: (torch.randn(2, 3, generator=torch.Generator().manual_seed(0)),)),
                                     (_resize_of_intermediate, lambda: (torch.arange(4.0),)),
                                     (_set_of_input, lambda: (torch.zeros(3), torch.arange(3.0))),
                                     (_t_of_intermediate, lambda: (torch.randn(2, 3, generator=torch.Generator().manual_seed(0)),))],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_resize_and_inplace_views_of_inputs_break_as_in_torch(fn, make):
    """torch/_dynamo/variables/tensor.py: method_resize_, and var_getattr's DelayGraphBreakVariable
    for an inplace_view method of a graph input (chapter 11, section 13)."""
    from minidynamo._torch_private import dynamo_reset

    dynamo_reset()
    theirs = dynamo_explain(fn, *make())
    md.reset()
    ours = md.explain(fn, *make())
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count)
    args_e, args_c = make(), make()
    md.reset()
    torch.testing.assert_close(md.compile(fn, backend="eager")(*args_c), fn(*args_e))
    for a, b in zip(args_c, args_e):
        assert a.shape == b.shape and torch.equal(a, b)

"""A graph break inside ``torch.autocast`` / ``torch.inference_mode`` blocks, against torch's.

torch resumes inside the block: the graph before the break leaves the context, the call
runs eagerly inside it, and the resume function re-enters it (symbolic_convert.py
``create_call_resume_at``, resume_execution.py ``setup_fn_target_values``). Ours:
Note [A resume function re-enters autocast and inference_mode] (variables/ctx_manager.py).
Each program: graphs, breaks, each break's registry ``gb_type`` and line (the held-out
sets' ``compare``), each graph's calls, and the results (dtype included) and the context
state after the call, against ``torch.compile`` and eager.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import pytest
import torch

import minidynamo as md
from test_breaks_like_torch_heldout import compare  # tests/ is on sys.path

pytestmark = [pytest.mark.ch05, pytest.mark.usefixtures("real_dynamo")]


def c_autocast_two_ops_each_side(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = x.view(2, 2)
        y = torch.mm(a, a).relu()
        print("inside")
        z = torch.mm(y, y).sum()
    return z * 2


def c_autocast_disabled(x):
    with torch.autocast("cpu", enabled=False):
        y = torch.mm(x.view(2, 2), x.view(2, 2))
        torch._dynamo.graph_break()
        z = torch.mm(y, y)
    return z


def c_autocast_two_breaks(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.mm(x.view(2, 2), x.view(2, 2))
        torch._dynamo.graph_break()
        y = torch.mm(y, y)
        torch._dynamo.graph_break()
        z = torch.mm(y, y)
    return z


def c_no_grad_then_autocast(x):
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.mm(x.view(2, 2), x.view(2, 2))
            torch._dynamo.graph_break()
            z = torch.mm(y, y)
    return z, z.requires_grad


def c_autocast_then_no_grad(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.no_grad():
            y = torch.mm(x.view(2, 2), x.view(2, 2))
            torch._dynamo.graph_break()
            z = torch.mm(y, y)
        w = torch.mm(z, z)
    return w


def c_inference_mode_ops_after(x):
    with torch.inference_mode():
        y = x.sin()
        print("inside")
        z = y.cos()
    return z + 1


def c_inference_mode_false_inside(x):
    with torch.inference_mode():
        y = x * 3
        with torch.inference_mode(False):
            torch._dynamo.graph_break()
            z = y + 1
    return z


def c_autocast_break_in_a_loop(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.mm(x.view(2, 2), x.view(2, 2))
        for _ in range(2):
            torch._dynamo.graph_break()
            y = torch.mm(y, y)
    return y


def c_resume_runs_eagerly(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.mm(x.view(2, 2), x.view(2, 2))
        torch._dynamo.graph_break()
        for i in range(2):  # a break in a loop: this resume function runs eagerly, inside the block
            print(i)
        z = torch.mm(y, y)
    return z


PROGRAMS = {name: fn for name, fn in dict(globals()).items() if name.startswith("c_")}


def _quiet():
    stack = contextlib.ExitStack()
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


def _state():
    return (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"), torch.is_inference_mode_enabled(),
            torch.is_grad_enabled())


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_break_inside_a_context_like_torch(name):
    mine, theirs = compare(name, PROGRAMS, set(), __file__)
    assert mine == theirs, f"ours (graphs, breaks, gb types, lines) {mine} != torch's {theirs}"


def _name(target) -> str:
    # ours records torch.set_grad_enabled where torch records torch._C._set_grad_enabled (ctx_manager.py)
    return getattr(target, "__name__", str(target)).lstrip("_")


def _calls(graphs) -> list[list]:
    return [[_name(n.target) for n in g.graph.nodes if n.op in ("call_function", "call_method")] for g in graphs]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_break_inside_a_context_graphs_like_torch(name):
    fn, x = PROGRAMS[name], torch.randn(4)
    with _quiet():
        torch._dynamo.reset()
        theirs = torch._dynamo.explain(fn)(x)
        md.reset()
        ours = md.explain(fn, x)
    assert _calls(ours.graphs) == _calls(theirs.graphs)


def _leaves(value) -> list:
    return [v for item in value for v in _leaves(item)] if isinstance(value, (tuple, list)) else [value]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_break_inside_a_context_results_like_torch(name, backend):
    fn = PROGRAMS[name]
    torch.manual_seed(0)
    x = torch.randn(4, requires_grad=True)
    before = _state()
    with _quiet():
        expected = fn(x)
        torch._dynamo.reset()
        theirs = torch.compile(fn, backend=backend)(x)
        md.reset()
        compiled = md.compile(fn, backend=backend)
        ours = [compiled(x), compiled(x)]  # the second call runs the cached entries
    assert _state() == before  # every block left as it was entered
    for got in (theirs, *ours):
        for g, e in zip(_leaves(got), _leaves(expected), strict=True):
            if isinstance(e, torch.Tensor):
                torch.testing.assert_close(g, e)  # dtype included: bfloat16 where autocast ran the op
            else:
                assert g == e


def test_an_exception_in_the_call_leaves_the_block():
    def boom():
        raise ValueError("user's")

    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.mm(x.view(2, 2), x.view(2, 2))
            print("break")
            boom_or_not(y)
            return torch.mm(y, y)

    calls = []

    def boom_or_not(y):
        calls.append(y.dtype)
        torch._dynamo.graph_break()
        if len(calls) > 1:
            boom()

    x = torch.randn(4)
    before = _state()
    with _quiet():
        compiled = md.compile(fn, backend="eager")
        compiled(x)
        with pytest.raises(ValueError, match="user's"):
            compiled(x)
    assert _state() == before
    assert calls == [torch.bfloat16, torch.bfloat16]  # the eager call ran inside the block

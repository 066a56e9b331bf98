"""Property-based tests of the symbolic interpreter: random programs, compiled vs eager.

Place in the pipeline: checks ``minidynamo.symbolic`` through ``md.compile`` and
``md.explain`` (chapters 3 and 4).

Two generators, both writing Python source that is ``exec``'d into a function:

* straight-line tensor programs: a sequence of pointwise, unary, binary and
  (keepdim) reduction ops over two small tensors. Compiled equals eager, and the
  whole program is one graph with no breaks.
* control flow on Python values: an int ``n`` and a bool ``flag`` decide branches
  and loop counts around tensor ops. Compiled equals eager for two input sets; the
  second call traces again exactly when a guarded Python value changed.

The real counterpart: PyTorch's Dynamo has no hypothesis tests; minitorch's
shared strategies are the model for the style.
"""

from __future__ import annotations

import itertools
import linecache

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minidynamo as md

from minidynamo.corpus.dynamo_cases import T, same

pytestmark = pytest.mark.ch03

SETTINGS = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_names = itertools.count()


def make_function(src: str, name: str):
    """exec ``src`` (which defines ``name``) with a linecache entry, so tracebacks show the lines."""
    filename = f"<hypothesis-{next(_names)}>"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    namespace = {"torch": torch}
    exec(compile(src, filename, "exec"), namespace)
    return namespace[name]


# --- straight-line tensor programs --------------------------------------------

UNARY = [
    "torch.sin({a})",
    "torch.cos({a})",
    "torch.tanh({a})",
    "torch.sigmoid({a})",
    "torch.relu({a})",
    "{a}.abs()",
    "{a}.neg()",
    "({a} * 2.5)",
    "({a} + 1)",
    "({a} - 0.5)",
    "{a}.clamp(-1, 1)",
    "torch.exp({a}.clamp(max=3))",
    "{a}.sum(dim=0, keepdim=True)",
    "{a}.mean(dim=-1, keepdim=True)",
    "{a}.amax(dim=-1, keepdim=True)",
    "{a}.sum()",
    "{a}.t().t()",
    "{a}.expand(3, 4).reshape(-1).reshape(3, 4)",
]
BINARY = [
    "({a} + {b})",
    "({a} - {b})",
    "({a} * {b})",
    "torch.maximum({a}, {b})",
    "torch.minimum({a}, {b})",
    "torch.where({a} > {b}, {a}, {b})",
    "({a} / ({b}.abs() + 1))",
]


@st.composite
def straight_line_programs(draw):
    n_ops = draw(st.integers(1, 8))
    lines = ["def prog(x, y):"]
    names = ["x", "y"]
    for i in range(n_ops):
        if draw(st.booleans()):
            template = draw(st.sampled_from(UNARY))
            expr = template.format(a=draw(st.sampled_from(names)))
        else:
            template = draw(st.sampled_from(BINARY))
            expr = template.format(a=draw(st.sampled_from(names)), b=draw(st.sampled_from(names)))
        names.append(f"v{i}")
        lines.append(f"    v{i} = {expr}")
    returns = draw(st.sampled_from(["last", "pair", "sum"]))
    if returns == "last":
        lines.append(f"    return {names[-1]}")
    elif returns == "pair":
        lines.append(f"    return {names[-1]}, {names[-2]}")
    else:
        lines.append(f"    return {names[-1]} + x")
    return "\n".join(lines) + "\n"


@SETTINGS
@given(src=straight_line_programs())
def test_straight_line_programs_compile_to_one_graph(src):
    prog = make_function(src, "prog")
    x, y = T(3, 4, seed=1), T(3, 4, seed=2)
    expected = prog(x, y)
    md.reset()
    out = md.compile(prog, backend="eager")(x, y)
    same(expected, out, f"output of\n{src}")
    md.reset()
    explained = md.explain(prog, x, y)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), src


# --- control flow on Python values --------------------------------------------

TENSOR_STEPS = ["x = x + {k}", "x = x * {k}", "x = torch.sin(x) + {k}", "x = x.relu() - {k}", "x = x.cumsum(0) * 0.5"]
CONDITIONS = ["flag", "not flag", "n > {k}", "n % 2 == 0", "flag and n > {k}", "flag or n == {k}", "n in (1, 3, 5)"]


@st.composite
def control_flow_programs(draw):
    """A function of (x, n, flag) whose branches and loop trips depend on n and flag."""
    small = st.integers(0, 4)
    step = lambda: draw(st.sampled_from(TENSOR_STEPS)).format(k=draw(small))  # noqa: E731
    cond = lambda: draw(st.sampled_from(CONDITIONS)).format(k=draw(small))  # noqa: E731
    lines = ["def prog(x, n, flag):", "    if flag:", f"        {step()}", "    for i in range(n):", f"        {step()}"]
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["if", "ifelse", "for", "while", "ternary", "step"]))
        if kind == "if":
            lines += [f"    if {cond()}:", f"        {step()}"]
        elif kind == "ifelse":
            lines += [f"    if {cond()}:", f"        {step()}", "    else:", f"        {step()}"]
        elif kind == "for":
            lines += [f"    for i in range(n % {draw(st.integers(1, 3))} + 1):", f"        {step()}", "        x = x + i"]
        elif kind == "while":
            lines += ["    k = 0", f"    while k < n and k < {draw(st.integers(1, 3))}:", f"        {step()}", "        k += 1"]
        elif kind == "ternary":
            lines += [f"    x = x * 2 if {cond()} else x - 1"]
        else:
            lines += [f"    {step()}"]
    lines.append("    return x")
    return "\n".join(lines) + "\n"


@pytest.mark.ch04
@SETTINGS
@given(
    src=control_flow_programs(),
    first=st.tuples(st.integers(0, 5), st.booleans()),
    second=st.tuples(st.integers(0, 5), st.booleans()),
)
def test_control_flow_on_python_values(src, first, second):
    from minidynamo.symbolic import counters

    prog = make_function(src, "prog")
    x = T(3, 4, seed=3)
    md.reset()
    compiled = md.compile(prog, backend="eager")
    same(prog(x, *first), compiled(x, *first), f"first call {first} of\n{src}")
    traced = counters["frames_traced"]
    assert traced >= 1
    same(prog(x, *second), compiled(x, *second), f"second call {second} of\n{src}")
    if first == second:
        assert counters["frames_traced"] == traced, f"the same call traced again:\n{src}"
    else:
        # Both n and flag decide control flow, so both are guarded: a change recompiles.
        assert counters["frames_traced"] > traced, f"{first} -> {second} did not recompile:\n{src}"
    # Back to the first inputs: the first entry is still cached.
    before = counters["frames_traced"]
    same(prog(x, *first), compiled(x, *first), f"third call {first} of\n{src}")
    assert counters["frames_traced"] == before, f"returning to {first} traced again:\n{src}"

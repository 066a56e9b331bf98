"""The symbolic interpreter's core (chapter 3): graphs, fake values, events, backends, API.

Differential: each graph is compared with the one the real Dynamo captures for the same
function (the sequence of call targets), each result with eager.
"""

from __future__ import annotations

import operator

import pytest
import torch
import torch.nn.functional as F

import minidynamo as md
from minidynamo._torch_private import dynamo_explain
from minidynamo.symbolic import counters

# an internal tracing error must fail these tests, not fall back to eager quietly
pytestmark = [pytest.mark.ch03, pytest.mark.filterwarnings("error:minidynamo. tracing"),
              pytest.mark.usefixtures("real_dynamo")]


def straight_line(x, y):
    z = x @ y.t()
    z = torch.relu(z) + 1
    return F.softmax(z * x.shape[0], dim=-1).sum(0)


def python_control_flow(x, n, mode):
    for i in range(n):
        x = x * 2 if i % 2 else x + 1
    if mode == "double":
        x = x * 2
    parts = [x[i] for i in range(x.shape[0])]
    return torch.stack(parts).mean(), {"n": n, "shape": tuple(x.shape)}


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)
        self.register_buffer("scale", torch.full((4,), 0.5))

    def forward(self, x):
        return self.norm(F.gelu(self.fc(x))) * self.scale + x


def _targets(gm) -> list[str]:
    def name(t):
        if isinstance(t, str):
            return t  # call_method
        return getattr(t, "__name__", str(t))

    return [name(n.target) for n in gm.graph.nodes if n.op.startswith("call")]


@pytest.mark.parametrize(
    "fn, make",
    [
        (straight_line, lambda: (torch.randn(3, 4), torch.randn(5, 4))),
        (python_control_flow, lambda: (torch.randn(3, 2), 3, "double")),
    ],
    ids=["straight_line", "python_control_flow"],
)
def test_graph_matches_real_dynamo(fn, make):
    args = make()
    ours = md.explain(fn, *args)
    real = dynamo_explain(fn, *args)
    assert ours.graph_count == real.graph_count == 1
    assert _targets(ours.graphs[0]) == _targets(real.graphs[0])
    expected = fn(*args)
    got = md.compile(fn, backend="eager")(*args)
    torch.testing.assert_close(got, expected)


def test_module_is_inlined_and_parameters_are_inputs():
    torch.manual_seed(0)
    block = Block()
    x = torch.randn(2, 4)
    ours = md.explain(block, x)
    real = dynamo_explain(block, x)
    assert ours.graph_count == real.graph_count == 1
    assert _targets(ours.graphs[0]) == _targets(real.graphs[0])
    placeholders = [n.meta["source"] for n in ours.graphs[0].graph.nodes if n.op == "placeholder"]
    # torch's spelling (Note [A module's member is an item of its table], source.py): each placeholder's target is
    # its source's text made an identifier, and those are torch's targets
    assert "L['self']._modules['fc']._parameters['weight']" in placeholders
    assert "L['self']._buffers['scale']" in placeholders
    targets = lambda gm: sorted(n.target for n in gm.graph.nodes if n.op == "placeholder")  # noqa: E731
    assert targets(ours.graphs[0]) == targets(real.graphs[0])
    torch.testing.assert_close(md.compile(block, backend="eager")(x), block(x))


def test_every_tensor_op_runs_once_on_fake_tensors_under_pass_dynamo():
    x, y = torch.randn(3, 4), torch.randn(5, 4)
    compiled = md.compile(straight_line, backend="eager")
    with md.events.record() as log:
        compiled(x, y)
    ops = [e for e in log if e.kind == "op"]
    assert ops and {e.pass_name for e in ops} == {"dynamo"}
    first = straight_line.__code__.co_firstlineno
    assert {e.line for e in ops} == {first + 1, first + 2, first + 3}
    assert "aten.mm.default" in {e.op for e in ops}
    begins = [e for e in log if e.kind == "pass_begin" and e.pass_name == "dynamo"]
    assert len(begins) == 1
    with md.events.record() as log:
        compiled(x, y)  # cached: no fake op at all
    assert not [e for e in log if e.kind == "op"]


def test_custom_backend_gets_graph_module_and_real_inputs():
    seen = []

    def backend(gm, example_inputs):
        seen.append((gm, example_inputs))
        return gm.forward

    x, y = torch.randn(3, 4), torch.randn(5, 4)
    out = md.compile(straight_line, backend=backend)(x, y)
    torch.testing.assert_close(out, straight_line(x, y))
    (gm, inputs), = seen
    assert isinstance(gm, torch.fx.GraphModule)
    # in the order the trace first used them: ``x @ y.t()`` reads ``y`` (its ``.t``) first
    # (torch/_dynamo/variables/lazy.py); torch's backend gets the same
    assert inputs[0] is y and inputs[1] is x
    theirs = []
    torch._dynamo.reset()
    torch.compile(straight_line, backend=lambda gm, ex: theirs.append(ex) or gm.forward)(x, y)
    assert [id(t) for t in theirs[0] if isinstance(t, torch.Tensor)] == [id(y), id(x)]


def test_api_forms():
    @md.compile
    def f(x):
        return x + 1

    @md.compile(backend="eager")
    def g(x):
        return x * 2

    x = torch.randn(2)
    torch.testing.assert_close(f(x), x + 1)
    torch.testing.assert_close(g(x), x * 2)
    with pytest.raises(ValueError, match="Invalid backend"):
        md.compile(lambda x: x, backend="nope")


def test_sizes_fold_to_constants():
    def f(x):
        n = x.shape[0] * x.size(1) + x.dim()  # 2 * 3 + 2
        return x.reshape(n // 4, -1)

    out = md.explain(f, torch.randn(2, 3))
    (gm,) = out.graphs
    reshape = [n for n in gm.graph.nodes if n.op == "call_method"][0]
    assert reshape.args[1:] == (2, -1)


def test_user_exceptions_propagate_as_in_eager():
    def f(x):
        return x @ x  # (2, 3) @ (2, 3): a shape error

    with pytest.raises(RuntimeError):
        md.compile(f, backend="eager")(torch.randn(2, 3))

    def g(x, d):
        return x + d["missing"]

    with pytest.raises(KeyError):
        md.compile(g, backend="eager")(torch.randn(2), {})


def test_counters_reset():
    md.compile(straight_line, backend="eager")(torch.randn(3, 4), torch.randn(5, 4))
    assert counters["instructions"] > 0
    md.reset()
    assert not counters


def test_operator_targets_are_python_operators():
    def f(x):
        return -(x + 1) * 2

    (gm,) = md.explain(f, torch.randn(2)).graphs
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets == [operator.add, operator.neg, operator.mul]


def test_lambdas_and_unary_operators():
    f = lambda x: -(~(x > 0)).float() + (+x)  # noqa: E731
    x = torch.randn(3)
    torch.testing.assert_close(md.compile(f, backend="eager")(x), f(x))

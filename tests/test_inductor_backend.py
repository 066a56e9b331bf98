"""``md.compile(backend="inductor")`` against eager and against ``torch.compile(backend="inductor")``.

Our Dynamo and our AOTAutograd in front, torch's Inductor behind (minidynamo/compile_fx.py).
Each program runs three ways on copies of the same module and inputs: eager, ours, and
torch's Inductor; outputs, gradients, buffers and mutated inputs must be equal (float32
tolerance for compiled code), and no graph of ours may fall back to eager. Each Inductor
compile writes and builds C++ (seconds on 2 cores): programs are small and few.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import minidynamo as md
from minidynamo._torch_private import inductor_graphs_recorder, torch_aot_keeping_graphs
from minidynamo.aot import aot_function
from minidynamo.aot.aot_autograd import AOTFallbackWarning
from minidynamo.compile_fx import inductor_decompositions

pytestmark = pytest.mark.ch17

# torch's tolerance for compiled float32 code (torch.testing.assert_close's float32 defaults,
# loosened as torch's own Inductor tests do for reductions reordered by fusion).
TOL = dict(rtol=1e-4, atol=1e-5)


@pytest.fixture(autouse=True)
def _fresh():
    md.reset()
    torch._dynamo.reset()
    yield
    md.reset()
    torch._dynamo.reset()


@pytest.fixture
def inductor_calls(monkeypatch):
    """How many graphs torch's compile_fx_inner compiles while ours runs (forward, backward, inference)."""
    import torch._inductor.compile_fx as cfx

    seen: list[str] = []
    real = cfx.compile_fx_inner

    def counting(gm, example_inputs, *args, **kwargs):
        seen.append("backward" if kwargs.get("is_backward") else
                    "inference" if kwargs.get("is_inference") else "forward")
        return real(gm, example_inputs, *args, **kwargs)

    monkeypatch.setattr(cfx, "compile_fx_inner", counting)
    return seen


def _state(model: torch.nn.Module, args: tuple, out) -> dict:
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return {"out": out, "grads": grads, "buffers": {n: b.clone() for n, b in model.named_buffers()},
            "args": [a.clone() if isinstance(a, torch.Tensor) else a for a in args]}


def _run(model: torch.nn.Module, make_args, compile_with, *, train: bool, calls: int = 1) -> dict:
    torch.manual_seed(0)
    args = make_args()
    fn = compile_with(model)
    for _ in range(calls):
        if train:
            out = fn(*args)
            (out if isinstance(out, torch.Tensor) else sum(o.sum() for o in out)).sum().backward()
        else:
            with torch.no_grad():
                out = fn(*args)
    return _state(model, args, out)


def _assert_equal(a: dict, b: dict, what: str) -> None:
    torch.testing.assert_close(a["out"], b["out"], **TOL, msg=lambda m: f"{what}: outputs differ: {m}")
    assert a["grads"].keys() == b["grads"].keys(), what
    for k in a["grads"]:
        torch.testing.assert_close(a["grads"][k], b["grads"][k], **TOL, msg=lambda m: f"{what}: grad {k}: {m}")
    for k in a["buffers"]:
        torch.testing.assert_close(a["buffers"][k], b["buffers"][k], **TOL, msg=lambda m: f"{what}: buffer {k}: {m}")
    for x, y in zip(a["args"], b["args"]):
        torch.testing.assert_close(x, y, **TOL, msg=lambda m: f"{what}: mutated input: {m}")


def three_ways(make_model, make_args, *, train: bool, calls: int = 1) -> dict:
    """Eager, ours and torch's Inductor on copies of one module; returns ours (checked against both)."""
    torch.manual_seed(0)
    base = make_model()
    base.train(train)
    eager = _run(copy.deepcopy(base), make_args, lambda m: m, train=train, calls=calls)
    # no graph of ours may run eagerly: the warning becomes an error, and suppress_errors=False
    # lets it reach the test instead of turning the frame eager with a warning of its own
    with warnings.catch_warnings(), md.config.patch(suppress_errors=False):
        warnings.simplefilter("error", AOTFallbackWarning)
        ours = _run(copy.deepcopy(base), make_args, lambda m: md.compile(m, backend="inductor"), train=train,
                    calls=calls)
    theirs = _run(copy.deepcopy(base), make_args, lambda m: torch.compile(m, backend="inductor"), train=train,
                  calls=calls)
    _assert_equal(ours, eager, "ours vs eager")
    _assert_equal(ours, theirs, "ours vs torch's inductor")
    return ours


# --- programs -------------------------------------------------------------------------------


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Attention(torch.nn.Module):
    def __init__(self, dim=8):
        super().__init__()
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        return self.proj(att @ v)


class Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = torch.nn.LayerNorm(8)

    def forward(self, x):
        return self.ln(x) * 2


class ConvBN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class MutatesInputs(torch.nn.Module):
    def forward(self, x, y):
        x.add_(1)                 # an input mutated
        y[:, 0].mul_(2)           # a view of an input mutated
        return x * y.sum()


def _x():
    return (torch.randn(4, 8),)


def test_mlp_training(inductor_calls):
    three_ways(MLP, _x, train=True, calls=2)
    assert inductor_calls == ["forward", "backward"]  # compiled once: the second call reuses it


def test_mlp_inference(inductor_calls):
    three_ways(MLP, _x, train=False)
    assert inductor_calls == ["inference"]


def test_attention_training():
    three_ways(Attention, lambda: (torch.randn(2, 5, 8),), train=True)


def test_layer_norm_training():
    three_ways(Norm, _x, train=True)


@pytest.mark.slow
@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_conv_batch_norm(train):
    ours = three_ways(ConvBN, lambda: (torch.randn(2, 3, 6, 6),), train=train)
    if train:  # the running statistics were updated, as eager's
        assert not torch.equal(ours["buffers"]["bn.running_mean"], torch.zeros(4))


class ConvPoolResidual(torch.nn.Module):
    """A view of a value the backward computes from channels_last saved activations.

    Inductor's layout optimization makes the convs' outputs channels_last; the backward is
    compiled for that layout (graph_compile's Note [Saved activations in the forward's
    layout]), so the residual's gradient (a conv backward plus the tangent) is channels_last
    there, and the max-pool backward's decomposition views it as ``(N*C, H*W)``: valid for
    the strides the graph was traced with, which its values keep (resnet18 fell back here).
    """

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        p = F.max_pool2d(F.relu(self.c1(x)), 3, 2, 1)
        return p + self.c2(p)


def test_backward_views_channels_last_saved_values():
    three_ways(ConvPoolResidual, lambda: (torch.randn(2, 3, 8, 8),), train=True)


def test_mutated_inputs_and_views():
    ours = three_ways(MutatesInputs, lambda: (torch.randn(3, 4), torch.randn(3, 4)), train=False)
    assert len(ours["args"]) == 2


def test_graph_break_two_graphs(inductor_calls):
    def f(x):
        y = torch.sin(x) * 2
        print("break")
        return torch.cos(y) + 1

    x = torch.randn(6)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AOTFallbackWarning)
        with torch.no_grad():
            ours = md.compile(f, backend="inductor")(x)
    torch.testing.assert_close(ours, f(x), **TOL)
    torch.testing.assert_close(ours, torch.compile(f, backend="inductor")(x), **TOL)
    assert inductor_calls == ["inference", "inference"]


def test_dynamic_batch_sizes():
    """Four batch sizes: outputs equal eager; Inductor compiles as many graphs for ours as for torch's.

    Dynamo marks the batch dimension dynamic at the second size, as torch's does; the symbolic
    graph then reaches Inductor once for every later size (Note [Our symbols in Inductor's ShapeEnv]).
    """
    counts = {}
    for system, compile_fn in (("ours", lambda m: md.compile(m, backend="inductor")),
                               ("torch", lambda m: torch.compile(m, backend="inductor"))):
        torch.manual_seed(0)
        m = MLP()
        compiled = compile_fn(m)
        with inductor_graphs_recorder() as seen, torch.no_grad():
            for n in (2, 3, 5, 7):
                x = torch.randn(n, 8)
                torch.testing.assert_close(compiled(x), m(x), **TOL)
        counts[system] = [kind for kind, _, _ in seen]
    assert counts["ours"] == counts["torch"] == ["inference", "inference"]


def test_refused_graph_runs_eagerly_with_a_warning(monkeypatch):
    """An op Inductor cannot lower: a warning naming the graph and the op; eager's result."""
    import torch._inductor.config as iconfig
    import torch._inductor.lowering as lowering

    def refuse(*args, **kwargs):
        raise NotImplementedError("refused for the test")

    monkeypatch.setitem(lowering.lowerings, torch.ops.aten.atan2.default, refuse)

    def f(x, y):
        return torch.atan2(x, y) + 1

    x, y = torch.randn(3), torch.randn(3)
    with iconfig.patch(fx_graph_cache=False), pytest.warns(AOTFallbackWarning) as record, torch.no_grad():
        out = md.compile(f, backend="inductor")(x, y)
    torch.testing.assert_close(out, f(x, y))
    message = str(record[0].message)
    assert "Inductor refused the inference graph" in message and "aten.atan2" in message, message


# --- decompositions= as torch passes them ------------------------------------------------


def _fw_ops(gm) -> list[str]:
    return sorted(str(n.target) for n in gm.graph.nodes if n.op == "call_function")


@pytest.mark.parametrize("table", ["inductor", "silu_only"])
def test_decompositions_match_torch_aot_function(table):
    """The same table given to ours and to torch's aot_function: the same forward and backward ops."""
    from torch._decomp import get_decompositions

    decomps = inductor_decompositions() if table == "inductor" else get_decompositions([torch.ops.aten.silu])

    def fn(x, w):
        return F.silu(x @ w).log_softmax(-1)

    x, w = torch.randn(3, 4), torch.randn(4, 5, requires_grad=True)
    graphs, theirs = torch_aot_keeping_graphs(fn, decompositions=decomps)
    theirs(x, w).sum().backward()
    ours_graphs = {}

    def keep(name):
        def compiler(gm, example_inputs):
            ours_graphs[name] = gm
            return gm
        return compiler

    ours = aot_function(fn, keep("fw"), keep("bw"), decompositions=decomps)
    ours(x, w).sum().backward()
    assert _fw_ops(ours_graphs["fw"]) == _fw_ops(graphs["fw"])
    assert _fw_ops(ours_graphs["bw"]) == _fw_ops(graphs["bw"])
    if table == "silu_only":
        assert "aten.silu.default" not in _fw_ops(ours_graphs["fw"])
        assert "aten.sigmoid.default" in _fw_ops(ours_graphs["fw"])

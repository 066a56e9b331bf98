"""Dynamo + AOTAutograd on every device the machine has: cpu, meta, and cuda when there is one.

Issue 29: the joint trace made its tangents with ``torch.empty(shape, dtype=...)`` and no
device, so every training graph over cuda inputs fell back to eager ("inputs on different
devices ['cpu', 'cuda:0']"), and nothing in CI saw it. Note [Tests on every device]
(tests/_helpers.py): meta inputs whose outputs are not 0-dim fail the same way on a
machine without a GPU. Each case runs eager and ``md.compile`` on fresh, identical inputs
and compares outputs, gradients and the inputs afterwards (mutations): values where the
device holds them, and on every device shapes, strides, dtypes, devices and
``requires_grad``; and no warning at all (an ``AOTFallbackWarning`` means eager ran, and
values would then be equal for the wrong reason). ``pytest -m cuda`` runs only the cuda ones.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from _helpers import DEVICES

import minidynamo as md
from minidynamo import check_device, events

pytestmark = pytest.mark.parametrize("device", DEVICES)


# ---------------------------------------------------------------- programs

def mlp(x, w1, b1, w2):
    return torch.relu(x @ w1 + b1) @ w2


def rms_norm(x, w):
    return F.rms_norm(x, (x.shape[-1],), w)


def Block():  # the block python -m minidynamo.check_device compiles, at width 8
    return check_device.Block(d=8)


chapter13_model = check_device.chapter13_model  # notebooks/13_end_to_end.ipynb's model, seeded


# ---------------------------------------------------------------- the comparison

def _make(device, *shapes, grad=True):
    torch.manual_seed(0)
    return [torch.randn(*s, device=device, requires_grad=grad) for s in shapes]


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _tensors(item)]
    return []


def _same(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    assert (a.shape, a.dtype, a.device) == (b.shape, b.dtype, b.device), what
    assert a.stride() == b.stride() or a.numel() <= 1, f"{what}: strides {a.stride()} vs {b.stride()}"
    assert a.requires_grad == b.requires_grad, f"{what}: requires_grad"
    if a.device.type != "meta":
        torch.testing.assert_close(a, b, msg=lambda m: f"{what}: {m}")


def _backward(outs) -> None:
    outs = [o for o in _tensors(outs) if o.requires_grad]
    if outs:
        sum(o.float().sum() for o in outs).backward()


def check(fn, make_inputs, *, grad_of=None, compile_kwargs=None, backward=_backward, mark=None):
    """Eager vs md.compile on identical inputs: outputs, grads, inputs after; no warning; AOT ran.

    ``make_inputs()`` returns (args, leaves): the call's arguments and the tensors whose
    ``.grad`` to compare (by default the args themselves). ``mark(args)`` marks dynamic dims.
    """
    e_args, e_leaves = make_inputs()
    e_out = fn(*e_args)
    backward(e_out)
    c_args, c_leaves = make_inputs()
    if mark is not None:
        mark(c_args)
    compiled = md.compile(fn, **(compile_kwargs or {}))
    with warnings.catch_warnings(record=True) as caught, events.record() as log:
        warnings.simplefilter("always")
        c_out = compiled(*c_args)
        backward(c_out)
    assert not caught, [f"{w.category.__name__}: {w.message}" for w in caught]
    assert any(e.kind == "pass_begin" and e.pass_name == "aot_joint" for e in log), "AOTAutograd never traced"
    # a dynamic graph whose symbolic AOT trace failed is compiled per size, silently (backends.py)
    assert not [e.details for e in log if e.kind == "aot_symbolic_failed"]
    eo, co = _tensors(e_out), _tensors(c_out)
    assert len(eo) == len(co)
    for i, (a, b) in enumerate(zip(co, eo)):
        _same(a, b, f"output {i}")
    for i, (a, b) in enumerate(zip(c_args, e_args)):
        if isinstance(a, torch.Tensor):
            _same(a.detach(), b.detach(), f"input {i} after the call")
    for i, (a, b) in enumerate(zip(c_leaves, e_leaves)):
        if b.grad is None and a.grad is not None:  # reached only through an unused output: a compiled
            assert a.device.type == "meta" or not a.grad.any(), a.grad  # function (torch's too) gives zeros
            continue
        assert (a.grad is None) == (b.grad is None), f"grad of leaf {i}: {a.grad} vs {b.grad}"
        if a.grad is not None:
            _same(a.grad, b.grad, f"grad of leaf {i}")
    return compiled


def _args(device, *shapes, grad=True):
    def make():
        ts = _make(device, *shapes, grad=grad)
        return ts, ts
    return make


# ---------------------------------------------------------------- training and inference

def test_mlp_forward_and_backward(device):
    check(mlp, _args(device, (4, 8), (8, 16), (16,), (16, 3)))


def test_mlp_inference(device):
    with torch.no_grad():
        check(mlp, _args(device, (4, 8), (8, 16), (16,), (16, 3), grad=False))


def test_rms_norm_forward_and_backward(device):
    check(rms_norm, _args(device, (2, 5, 8), (8,)))


def _module_case(device, build, *shapes):
    def make():
        torch.manual_seed(0)
        model = build().to(device)
        xs = [torch.randn(*s, device=device) for s in shapes]
        return [model, *xs], list(model.parameters())
    return make


def test_chapter13_model(device):
    def step(model, x, target):
        return F.mse_loss(model(x), target)
    check(step, _module_case(device, chapter13_model, (5, 4), (5, 2)))


def test_transformer_block(device):
    check(lambda m, x: m(x), _module_case(device, Block, (2, 3, 8)))


def test_transformer_block_dynamic(device):
    # dynamic=True: the sizes a backward view reads are nodes of the joint graph (sym_size, mul), which
    # the min-cut partitioner must be able to save or recompute (aot/sym_tracing.py, SymTracker._call)
    check(lambda m, x: m(x), _module_case(device, Block, (2, 3, 8)), compile_kwargs={"dynamic": True})


# ---------------------------------------------------------------- the runtime wrappers

def test_input_mutation(device):
    def f(x, w):
        x.mul_(2)  # x requires no grad: written back by the runtime wrapper (or kept in the graph)
        return x @ w

    def make():
        torch.manual_seed(0)
        x, w = torch.randn(3, 4, device=device), torch.randn(4, 2, device=device, requires_grad=True)
        return [x, w], [w]
    check(f, make)


def test_aliased_outputs(device):
    def f(x, w):
        y = x @ w
        return y, y.view(-1), x.t()  # an intermediate's alias, and an alias of an input

    check(f, _args(device, (3, 4), (4, 5)))


def test_unused_output_gets_a_zero_tangent(device):
    # Autograd passes None for an output the loss does not use; the backward graph gets zeros
    # in its place (compiled_function.py), which must be on the output's device.
    def f(x, w):
        return x @ w, torch.sin(x) * 2

    check(f, _args(device, (3, 4), (4, 5)), backward=lambda outs: outs[0].sum().backward())


def test_none_grad_becomes_zeros_on_the_outputs_device(device, monkeypatch):
    # With aot/config.py's compile_mutated_saved_intermediates, a forward that mutates an
    # intermediate autograd saved gets no materialized grads (compiled_function.py's
    # _checking_stale_saved): the output the loss does not use arrives as None, and the
    # backward makes its zeros (here z's: the loss is y), which must be on the output's device.
    import minidynamo.aot.config as aot_config

    monkeypatch.setattr(aot_config, "compile_mutated_saved_intermediates", True)

    def f(x, w):
        y = x.sin()
        z = y * w  # mul saves y for w's gradient
        y.add_(1)
        return z, y

    check(f, _args(device, (3, 4), (3, 4)), backward=lambda outs: outs[1].sum().backward())


@pytest.mark.parametrize("common_base", [True, False], ids=["one_base", "two_bases_one_storage"])
def test_synthetic_base(device, common_base):
    # Two inputs that are overlapping views of one storage, one of them mutated: one synthetic base.
    # Without a common ._base (one view made through base.detach()) the synthetic base is a new tensor
    # set_ to that storage (runtime_wrappers.py, torch's synthetic_base.set_), on its device.
    def f(a, b, w):
        a.mul_(2)
        return (a + b) * w

    def make():
        torch.manual_seed(0)
        base = torch.randn(3, 4, device=device)
        w = torch.randn(4, device=device, requires_grad=True)
        first = base[:2] if common_base else base.detach()[:2]
        return [first, base[1:], w], [w]
    check(f, make)


# ---------------------------------------------------------------- dynamic sizes

def test_dynamic_true(device):
    compiled = check(mlp, _args(device, (4, 8), (8, 16), (16,), (16, 3)), compile_kwargs={"dynamic": True})
    torch.manual_seed(1)
    x = torch.randn(7, 8, device=device, requires_grad=True)
    w1, b1, w2 = _make(device, (8, 16), (16,), (16, 3))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(x, w1, b1, w2)
        out.sum().backward()
    assert not caught, [str(w.message) for w in caught]
    assert out.shape == (7, 3) and out.device.type == device and x.grad.shape == (7, 8)


def test_mark_dynamic(device):
    check(rms_norm, _args(device, (6, 8), (8,)), mark=lambda args: md.mark_dynamic(args[0], 0))


# ---------------------------------------------------------------- chapter 12's one-pass alternative

def test_one_pass_compile(device):
    # one_pass.py makes its own tangent placeholders, and zeros for a None grad: on the output's device.
    from minidynamo.one_pass import one_pass_compile

    def f(x, w1, b1, w2):
        h = mlp(x, w1, b1, w2)
        return h, h.sin()

    e_args, c_args = _make(device, (4, 8), (8, 16), (16,), (16, 3)), _make(device, (4, 8), (8, 16), (16,), (16, 3))
    e_out, c_out = f(*e_args), one_pass_compile(f)(*c_args)
    e_out[0].sum().backward()
    c_out[0].sum().backward()  # the second output's grad is None: zeros on its device
    for i, (a, b) in enumerate(zip(c_out, e_out)):
        _same(a, b, f"output {i}")
    for i, (a, b) in enumerate(zip(c_args, e_args)):
        _same(a.grad, b.grad, f"grad of input {i}")

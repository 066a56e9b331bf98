"""Our decomposition table against torch's: numerics, op sets, and the fused RMSNorm story."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from minidynamo import decompositions as D
from minidynamo import dispatch
from minidynamo.simulated_kernels import simulated_fused_kernels
from minidynamo._torch_private import torch_core_aten_decompositions, torch_decomposition_table, torch_get_decompositions

pytestmark = pytest.mark.ch08

aten = torch.ops.aten


def _samples():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, generator=g)
    w = torch.randn(5, generator=g)
    return {
        aten.silu.default: [(x,)],
        aten.gelu.default: [(x,), (x, {"approximate": "tanh"})],
        aten.addmm.default: [(torch.randn(4, generator=g), torch.randn(3, 2, generator=g), torch.randn(2, 4, generator=g))],
        aten.mse_loss.default: [(x, x.flip(0)), (x, x.flip(0), 0), (x, x.flip(0), 2)],
        aten._fused_rms_norm.default: [(x, [5], w, 1e-5), (x, [3, 5], None, None)],
        aten._fused_rms_norm_backward.default: [
            (x.cos(), x, [5], torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5), w, [True, True]),
            (x.cos(), x, [5], torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5), None, [True, False]),
        ],
    }


SAMPLES = _samples()


def test_every_entry_has_samples_and_a_torch_counterpart():
    table = torch_decomposition_table()
    assert set(SAMPLES) == set(D.decomposition_table)
    assert all(op in table for op in D.decomposition_table)


def _split(args):
    """A sample is positional args, optionally ending in a dict of keyword args."""
    if args and isinstance(args[-1], dict):
        return args[:-1], args[-1]
    return args, {}


def _close(a, b):
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a.shape == b.shape and torch.allclose(a, b, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("op", list(SAMPLES), ids=str)
def test_ours_matches_torch_decomposition_and_eager(op):
    theirs = torch_decomposition_table()[op]
    for sample in SAMPLES[op]:
        args, kwargs = _split(sample)
        ours = D.decomposition_table[op](*args, **kwargs)
        ref = theirs(*args, **kwargs)
        if op is aten._fused_rms_norm.default:
            # torch's rstd keeps the reduced dims; both return (output, rstd).
            assert _close(ours, tuple(ref))
        else:
            assert _close(ours, ref), (op, args[1:])
        if op is not aten._fused_rms_norm_backward.default:  # no CPU kernel to compare with
            assert _close(ours, op(*args, **kwargs))


@pytest.mark.parametrize("op", list(SAMPLES), ids=str)
def test_ops_used_are_a_subset_of_torchs(op):
    # Op-set-wise: the ATen ops our decomposition calls are among those torch's calls
    # (ignoring dtype casts and layout copies, which ours skips for float32).
    ignore = {"aten.to.dtype", "aten.clone.default", "aten._to_copy.default", "aten.view.default"}
    equivalent = {
        "aten.pow.Tensor_Scalar": "aten.mul.Tensor",
        "aten.div.Tensor": "aten.mul.Tensor",
        "aten.mean.dim": "aten.sum.dim_IntList",  # mean = sum / n
    }
    for sample in SAMPLES[op]:
        args, kwargs = _split(sample)
        ours, _, _ = D.ops_run(lambda *a: D.decomposition_table[op](*a, **kwargs), *args)
        theirs, _, _ = D.ops_run(lambda *a: torch_decomposition_table()[op](*a, **kwargs), *args)
        norm = lambda ops: {equivalent.get(o, o) for o in ops} - ignore  # noqa: E731
        assert norm(ours) <= norm(theirs) | {"aten.mul.Tensor", "aten.add.Tensor"}, (op, ours, theirs)


def test_get_decompositions():
    got = D.get_decompositions([aten.silu, aten._fused_rms_norm_backward.default])
    assert set(got) == {aten.silu.default, aten._fused_rms_norm_backward.default}
    with pytest.raises(KeyError, match="no decomposition"):
        D.get_decompositions([aten.sin.default])
    with pytest.raises(TypeError, match="OpOverload"):
        D.register_decomposition(aten.sin)


def _rms(x, w):
    return F.rms_norm(x, (4,), w, 1e-5)


def _inputs(device="cpu"):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 4, generator=g).to(device).requires_grad_()
    w = torch.randn(4, generator=g).to(device).requires_grad_()
    return x, w


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_rms_norm_decomposes_before_autograd_without_a_fused_kernel(device):
    # The dispatcher's evidence: no kernel at this backend, so AutogradX gets the CIA kernel.
    backend = {"cpu": "CPU", "meta": "Meta"}[device]
    assert backend not in dispatch.kernels_for(aten._fused_rms_norm.default)
    assert dispatch.computed_kernel(aten._fused_rms_norm.default, "Autograd" + backend)[0] == "math kernel"
    ops, _, _ = D.ops_run(_rms, *_inputs(device), backward=True)
    assert not any("fused_rms_norm" in op for op in ops)


def test_rms_norm_with_a_simulated_fused_kernel_keeps_the_backward_op():
    x, w = _inputs()
    _rms(x, w).sum().backward()
    eager = (x.grad.clone(), w.grad.clone())
    with simulated_fused_kernels("CPU"):
        assert "CPU" in dispatch.kernels_for(aten._fused_rms_norm.default)
        assert dispatch.computed_kernel(aten._fused_rms_norm.default, "AutogradCPU")[0] == "autograd kernel"
        for table, expect_bwd in [(None, True), (D.decomposition_table, False), (torch_get_decompositions([aten._fused_rms_norm_backward]), False)]:
            x.grad = w.grad = None
            ops, decomposed, _ = D.ops_run(_rms, x, w, table=table, backward=True)
            fwd_table = table is not None and aten._fused_rms_norm.default in table
            assert ("aten._fused_rms_norm.default" in ops) != fwd_table
            assert ("aten._fused_rms_norm_backward.default" in ops) == expect_bwd
            assert ("aten._fused_rms_norm_backward.default" in decomposed) == (not expect_bwd)
            assert _close((x.grad, w.grad), eager)
    # The registration is gone after the block.
    assert "CPU" not in dispatch.kernels_for(aten._fused_rms_norm.default)


def test_torch_compile_tables_decompose_fused_rms_norm_backward():
    # Evidence from torch's own tables: the core ATen set decomposes it.
    assert aten._fused_rms_norm_backward.default in torch_core_aten_decompositions()


def test_decompose_implicit_under_inference_mode():
    # With no autograd keys a CIA op reaches the Python key whole; make_fx's rule decomposes it.
    with torch.inference_mode():
        x = torch.randn(2, 4)
        plain, _, _ = D.ops_run(lambda t: F.rms_norm(t, (4,)), x)
        ops, decomposed, _ = D.ops_run(lambda t: F.rms_norm(t, (4,)), x, decompose_implicit=True)
    assert plain == ["aten.rms_norm.default"]
    assert "aten.rms_norm.default" in decomposed and "aten.rsqrt.default" in ops


def _aot_backward_ops(x, w, decompositions):
    from minidynamo._torch_private import torch_aot_function

    graphs = {}

    def fw(gm, _):
        return gm

    def bw(gm, _):
        graphs["bw"] = gm
        return gm

    torch_aot_function(_rms, fw, bw, decompositions=decompositions)(x, w).sum().backward()
    return {str(n.target) for n in graphs["bw"].graph.nodes if n.op == "call_function"}


AOT_EXPECT = {"cpu": False, "meta": True, "simulated": True, "meta+inductor table": False, "simulated+inductor table": False}


@pytest.mark.parametrize("setup", sorted(AOT_EXPECT))
def test_real_aot_agrees_with_ops_run(setup):
    # torch's AOTAutograd backward graph contains _fused_rms_norm_backward exactly when
    # our Python-key observation (ops_run, with the Python dispatcher on as AOT has it)
    # says the backward runs it. On meta it does: torch registers its decomposition as
    # a py_impl Meta kernel of _fused_rms_norm, which only the Python dispatcher sees.
    import contextlib

    from minidynamo._torch_private import torch_inductor_decompositions

    device = "meta" if setup.startswith("meta") else "cpu"
    sim = simulated_fused_kernels("CPU") if setup.startswith("simulated") else contextlib.nullcontext()
    table = torch_inductor_decompositions() if setup.endswith("table") else {}
    with sim:
        ours, _, _ = D.ops_run(_rms, *_inputs(device), table=table, backward=True, python_dispatcher=True)
        theirs = _aot_backward_ops(*_inputs(device), table)
    fused = "aten._fused_rms_norm_backward.default"
    assert (fused in ours) == (fused in theirs) == AOT_EXPECT[setup]


def test_meta_python_kernel_is_the_evidence():
    table = dispatch.kernels_for(aten._fused_rms_norm.default)
    assert "Meta" not in table  # the C++ dispatcher: no Meta kernel, CIA fills Meta
    assert "Meta" in table.python_dispatcher  # the Python dispatcher: torch._decomp's function


@pytest.mark.slow
def test_fake_cuda_rms_norm_report_uses_our_fake_tensor():
    from minidynamo.fake.cuda_demo import fake_cuda_rms_norm_report

    report = fake_cuda_rms_norm_report()
    assert "our fake cuda tensor's keys:" in report and "AutogradCUDA" in report
    # made outside the mode, so it is a fake cuda tensor, not a fake cpu one (issue 29)
    assert "requires_grad, the tensor: cuda:0 requires_grad True" in report
    if torch.version.cuda is None:  # a CPU-only wheel: autograd meets the fake cuda leaf and aborts
        assert "no grad, SIMULATION stand-in CUDA kernel: ['aten._fused_rms_norm.default']" in report
        assert "with requires_grad: the process aborted" in report
    elif not torch.cuda.is_available():  # a CUDA build on a machine with no usable driver (CI's 3.12/3.13
        # wheels): the fake cuda backward reaches the CUDA runtime, which cannot start, and aborts
        assert "the process aborted" in report
    else:  # a CUDA build with a GPU runs both fused ops
        assert "'aten._fused_rms_norm.default'" in report and "'aten._fused_rms_norm_backward.default'" in report
        assert "with requires_grad: forward and backward survived" in report


def test_rms_norm_decomposes_before_the_python_key_whether_or_not_it_requires_grad():
    """requires_grad adds no key: the composite kernel runs at AutogradCPU for both tensors."""
    fn = lambda t: F.rms_norm(t, (4,))  # noqa: E731
    with_grad = D.ops_run(fn, torch.randn(2, 4, requires_grad=True))[0]
    plain = D.ops_run(fn, torch.randn(2, 4))[0]
    assert with_grad == plain and "aten.rms_norm.default" not in plain
    assert dispatch.torch_table_entry(torch.ops.aten.rms_norm.default, "AutogradCPU")[0] == "math kernel"

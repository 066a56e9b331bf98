"""minidynamo.dispatch against the real dispatcher: key sets, observed traces, kernel tables."""

from __future__ import annotations

import itertools

import pytest
import torch

from minidynamo import dispatch
from minidynamo._torch_private import (
    DispatchKey,
    DispatchKeySet,
    EnablePreDispatch,
    TorchDispatchMode,
    dispatch_has_computed_kernel_for_dispatch_key,
    dispatch_has_kernel_for_dispatch_key,
    dispatch_keys,
    dispatch_tls_local_exclude_set,
    dispatch_tls_local_include_set,
    real_fake_tensor_class,
    real_fake_tensor_mode,
    to_functional_tensor,
)

pytestmark = pytest.mark.ch07

aten = torch.ops.aten


def names(keyset) -> tuple[str, ...]:
    """Oracle: a torch DispatchKeySet as names, highest priority first (str lists lowest first)."""
    text = str(keyset)
    inner = text[text.index("(") + 1 : text.rindex(")")]
    return tuple(reversed([n for n in inner.split(", ") if n]))


def real_effective(t) -> tuple[str, ...]:
    """Oracle: what the dispatcher computes for a call on t: (tensor | TLS include) - TLS exclude."""
    return names((dispatch_keys(t) | dispatch_tls_local_include_set()) - dispatch_tls_local_exclude_set())


def _fake_cuda():
    mode = real_fake_tensor_mode()
    return real_fake_tensor_class()(mode, torch.empty(2, 3, device="meta"), torch.device("cuda"))


def _inference():
    with torch.inference_mode():
        return torch.randn(2, 3)


def _mini_fake():
    try:
        from minidynamo.fake import FakeTensorMode
    except ImportError as exc:  # pragma: no cover - minidynamo.fake is another chapter's work
        pytest.skip(f"minidynamo.fake not importable: {exc}")
    return FakeTensorMode().from_tensor(torch.randn(2, 3))


TENSOR_KINDS = {
    "plain": lambda: torch.randn(2, 3),
    "requires_grad": lambda: torch.randn(2, 3, requires_grad=True),
    "meta": lambda: torch.empty(2, 3, device="meta"),
    "inference": _inference,
    "fake": lambda: real_fake_tensor_mode().from_tensor(torch.randn(2, 3)),
    "fake_cuda": _fake_cuda,
    "mini_fake": _mini_fake,
    "functional": lambda: to_functional_tensor(torch.randn(2, 3)),
    "conj": lambda: torch.randn(2, dtype=torch.complex64).conj(),
    "neg": lambda: torch.randn(2, dtype=torch.complex64).conj().imag,
}


@pytest.mark.parametrize("kind", sorted(TENSOR_KINDS))
def test_tensor_keys_match_dispatch_keys(kind):
    t = TENSOR_KINDS[kind]()
    assert dispatch.tensor_keys(t) == names(dispatch_keys(t))
    assert dispatch.keys(t, tls=False) == names(dispatch_keys(t))


@pytest.mark.parametrize("kind", sorted(TENSOR_KINDS))
def test_keys_with_tls_match_dispatcher(kind):
    t = TENSOR_KINDS[kind]()
    assert dispatch.keys(t) == real_effective(t)


class _Passthrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


SITUATIONS = {
    "default": lambda: _nullctx(),
    "dispatch_mode": _Passthrough,
    "fake_mode": real_fake_tensor_mode,
    "inference_mode": torch.inference_mode,
    "autocast_cpu": lambda: torch.autocast("cpu"),
    "pre_dispatch": lambda: EnablePreDispatch(),
    "functionalization": lambda: _functionalization(),
}


def _functionalization():
    import contextlib

    from minidynamo._torch_private import disable_functionalization, enable_functionalization

    @contextlib.contextmanager
    def ctx():
        enable_functionalization(reapply_views=True)
        try:
            yield
        finally:
            disable_functionalization()

    return ctx()


def _nullctx():
    import contextlib

    return contextlib.nullcontext()


@pytest.mark.parametrize("situation", sorted(SITUATIONS))
def test_tls_sets_match_dispatcher(situation):
    t = torch.randn(2)
    with SITUATIONS[situation]():
        real_included = set(names(dispatch_tls_local_include_set()))
        real_excluded = set(names(dispatch_tls_local_exclude_set()))
        assert set(dispatch.tls_included()) == real_included
        # Ours lists every per-backend autograd key; torch prints the functionality once.
        assert set(dispatch.tls_excluded()) >= real_excluded
        assert dispatch.keys(t) == real_effective(t)


def test_requires_grad_adds_no_key():
    assert dispatch.tensor_keys(torch.randn(2)) == dispatch.tensor_keys(torch.randn(2, requires_grad=True))


def test_priority_order_matches_dispatcher():
    # For every pair of keys torch's Python enum knows (per-backend ones on CPU), the
    # dispatcher's highest-priority key is the one our PRIORITY ranks higher.
    known = [k for k in dispatch.PRIORITY if hasattr(DispatchKey, k)]
    known = [k for k in known if not any(k.endswith(b) and k != b for b in dispatch.BACKENDS if b != "CPU")]
    known = [k for k in known if k not in {b for b in dispatch.BACKENDS if b != "CPU"}]
    assert len(known) > 20
    for a, b in itertools.combinations(known, 2):
        ks = DispatchKeySet(getattr(DispatchKey, a)) | DispatchKeySet(getattr(DispatchKey, b))
        want = ks.highestPriorityTypeId().name
        assert dispatch.order([a, b])[0] == want, (a, b)


def test_keys_bad_input():
    with pytest.raises(TypeError, match="torch.Tensor"):
        dispatch.tensor_keys([1, 2])
    with pytest.raises(NotImplementedError, match="layout"):
        dispatch.tensor_keys(torch.randn(2, 2).to_sparse())
    with pytest.raises(ValueError, match="unknown dispatch key"):
        dispatch.order(["NoSuchKey"])


# --- trace: what really ran ------------------------------------------------------


@pytest.fixture
def probe():
    with dispatch.probe() as p:
        yield p


def _observed_forward(tr):
    return [s.key for s in tr if s.phase == "forward" and not s.inferred]


def test_trace_plain(probe):
    tr = dispatch.trace(probe, torch.randn(3))
    assert _observed_forward(tr) == ["Autograd", "ADInplaceOrView", "CPU"]
    assert tr.error is None and torch.equal(tr.output, tr.output)


def test_first_kernel_gets_the_dispatchers_key_set(probe):
    # The key set the dispatcher handed the first kernel = our keys minus the op's fallthroughs.
    x = torch.randn(3)
    tr = dispatch.trace(probe, x)
    op = "minidynamo_probe::probe"
    skipped = {k for k in dispatch.keys(x) if (dispatch.computed_kernel(op, k) or ("",))[0] == "fallthrough"}
    assert skipped == {"BackendSelect"}
    ours = tuple(k for k in dispatch.keys(x) if k not in skipped)
    assert tr[0].keyset == ours


def test_trace_mode_puts_python_after_autograd_and_its_snapshot_first(probe):
    tr = dispatch.trace(probe, torch.randn(3), mode=True)
    assert _observed_forward(tr) == ["PythonTLSSnapshot", "Autograd", "ADInplaceOrView", "Python", "CPU"]
    off = dispatch.trace(probe, torch.randn(3), mode=False)
    assert "Python" not in _observed_forward(off)


def test_trace_changes_when_a_registration_is_removed(probe):
    x = torch.randn(3)
    before = _observed_forward(dispatch.trace(probe, x))
    probe.remove("ADInplaceOrView")
    after = _observed_forward(dispatch.trace(probe, x))
    assert before == ["Autograd", "ADInplaceOrView", "CPU"] and after == ["Autograd", "CPU"]
    probe.remove("CPU")
    broken = dispatch.trace(probe, x)
    assert broken[-1].key == "error" and "CPU" in broken[-1].handler
    assert isinstance(broken.error, NotImplementedError)


def test_trace_inference_tensor_skips_autograd(probe):
    assert _observed_forward(dispatch.trace(probe, _inference())) == ["ADInplaceOrView", "CPU"]


def test_trace_fake_tensor_goes_python_then_meta(probe):
    tr = dispatch.trace(probe, real_fake_tensor_mode().from_tensor(torch.randn(3)))
    assert _observed_forward(tr) == ["PythonTLSSnapshot", "Autograd", "ADInplaceOrView", "Python", "Meta"]
    assert "FakeTensorMode" in [s for s in tr if s.key == "Python"][0].handler


def test_trace_functional_and_pre_dispatch(probe):
    tr = dispatch.trace(probe, to_functional_tensor(torch.randn(3)))
    assert _observed_forward(tr) == ["Autograd", "ADInplaceOrView", "Functionalize", "CPU"]
    tr = dispatch.trace(probe, torch.randn(3), pre_dispatch=True)
    assert _observed_forward(tr)[0] == "PreDispatch"


def test_observed_order_follows_priority(probe):
    # Independent of our table: each step's key set (given by the real dispatcher)
    # shrinks, and the key that ran is the highest of the set it received.
    tr = dispatch.trace(probe, torch.randn(3), mode=False)
    for step in tr:
        if step.keyset:
            ran = step.keyset[0]
            assert ran == step.key or ran.startswith(step.key)  # "AutogradCPU" for the Autograd alias


def test_trace_backward_hooks(probe):
    x = torch.randn(3, requires_grad=True)
    tr = dispatch.trace(probe, x, backward=True)
    back = [s.handler for s in tr if s.phase == "backward"]
    assert len(back) == 3 and "ProbeBackward" in back[0]
    assert torch.equal(x.grad, torch.full((3,), 2.0))


def _real_order(t) -> tuple[str, ...]:
    """Oracle: torch's own key set for a call on t under a TorchDispatchMode, highest first."""
    with TorchDispatchMode():
        return real_effective(t)


ATEN_CALLS = {
    "sin_plain_mode": (torch.sin, lambda: torch.randn(3, requires_grad=True), (), True),
    "mul_plain_mode": (torch.mul, lambda: torch.randn(3, requires_grad=True), (2.0,), True),
    "sin_torch_fake": (torch.sin, lambda: real_fake_tensor_mode().from_tensor(torch.randn(3, requires_grad=True)), (), False),
    "sin_mini_fake": (torch.sin, lambda: _mini_fake_rg(), (), False),
}


def _mini_fake_rg():
    from minidynamo.fake import FakeTensorMode

    return FakeTensorMode().from_tensor(torch.randn(3, requires_grad=True))


@pytest.mark.parametrize("case", sorted(ATEN_CALLS))
def test_trace_aten_op_order_matches_torch(case):
    """The autograd kernel of an aten op reports where it ran: above the Python key, as in torch."""
    fn, make, rest, mode = ATEN_CALLS[case]
    x = make()
    tr = dispatch.trace(fn, x, *rest, mode=mode)
    ran = tr.handler_keys()
    assert not any(s.inferred for s in tr), tr
    assert ran == ["AutogradCPU", "Python"], tr
    # torch: the order of the keys that ran is the order of torch's own key set for this call
    real = _real_order(x) if mode else names(dispatch_keys(x))
    assert [k for k in real if k in ran] == ran
    # torch: AutogradCPU holds an autograd kernel for the op, Python the backend fallback
    name = fn.__name__
    assert dispatch.computed_kernel(getattr(aten, name).default if name == "sin" else aten.mul.Tensor, "AutogradCPU")[0] == "autograd kernel"
    # torch: the Node the kernel reported building is the output's grad_fn
    assert type(tr.output.grad_fn).__name__ in tr.steps[0].handler


def test_trace_aten_op_without_autograd_has_no_autograd_step():
    """The step can fail to appear: below autograd (and for a tensor that needs no grad) no Node is built."""
    from minidynamo._torch_private import AutoDispatchBelowAutograd

    x = torch.randn(3, requires_grad=True)

    def below(t):
        with AutoDispatchBelowAutograd():
            return torch.sin(t)

    tr = dispatch.trace(below, x, mode=True)
    assert tr.handler_keys() == ["Python"] and tr.output.grad_fn is None
    assert dispatch.trace(torch.sin, torch.randn(3), mode=True).handler_keys() == ["Python"]


def test_trace_marks_a_grad_fn_nobody_reported_as_inferred(monkeypatch):
    import importlib

    trace_module = importlib.import_module("minidynamo.dispatch.trace")
    monkeypatch.setattr(trace_module, "_report_node", lambda key: None)
    tr = dispatch.trace(torch.mul, torch.randn(2, requires_grad=True), 2.0, mode=True)
    assert [s.key for s in tr if not s.inferred] == ["Python"]
    assert [s for s in tr if s.inferred][0].key == "AutogradCPU"


def test_only_one_probe_at_a_time(probe):
    with pytest.raises(RuntimeError, match="already open"):
        dispatch.probe()


# --- kernels_for: the dispatcher's tables -------------------------------------------

OPS = [
    aten.add.Tensor,
    aten.sin.default,
    aten.rms_norm.default,
    aten._fused_rms_norm.default,
    aten._fused_rms_norm_backward.default,
    aten.native_layer_norm.default,
    aten.silu.default,
    aten.linear.default,
]
KEYS = [
    "CPU",
    "CUDA",
    "Meta",
    "CompositeImplicitAutograd",
    "CompositeExplicitAutograd",
    "CompositeExplicitAutogradNonFunctional",
    "Autograd",
]


@pytest.mark.parametrize("op", OPS, ids=str)
def test_kernels_for_matches_has_kernel(op):
    table = dispatch.kernels_for(op)
    for key in KEYS:
        assert (key in table) == dispatch_has_kernel_for_dispatch_key(op.name(), getattr(DispatchKey, key)), key


@pytest.mark.parametrize("op", OPS, ids=str)
def test_computed_kernel_matches_has_computed_kernel(op):
    for key in ["CPU", "Meta", "AutogradCPU", "AutogradMeta", "AutogradCUDA"]:
        entry = dispatch.computed_kernel(op, key)
        has = dispatch_has_computed_kernel_for_dispatch_key(op.name(), key)
        assert (entry is not None) == has, key


def _sampled_aten_ops():
    from minidynamo._torch_private import dispatch_get_all_op_names

    names_ = sorted(n for n in dispatch_get_all_op_names() if n.startswith("aten::"))
    return [n for i, n in enumerate(names_) if i % 37 == 0] + [op.name() for op in OPS]


RULE_KEYS = [
    "CPU", "CUDA", "Meta", "XLA", "Lazy", "MPS", "AutogradCPU", "AutogradCUDA", "AutogradMeta", "AutogradXLA",
    "AutogradLazy", "Python", "PythonTLSSnapshot", "Functionalize", "ADInplaceOrView", "BackendSelect",
    "AutocastCPU", "AutocastCUDA", "PreDispatch", "Conjugate", "Negative", "ZeroTensor", "Tracer",
    "FuncTorchBatched", "PythonDispatcher",
]  # fmt: skip


def test_computed_kernel_rule_matches_torchs_table():
    """Our rule, computed from the registrations, against torch's computed table, ~100 ops x 25 keys."""
    ops = _sampled_aten_ops()
    assert len(ops) > 80
    for name in ops:
        for key in RULE_KEYS:
            ours, theirs = dispatch.computed_kernel(name, key), dispatch.torch_table_entry(name, key)
            assert (ours and ours[0]) == (theirs and theirs[0]), (name, key, ours, theirs)
            if ours and ours[1] != "fallback":
                assert ours[1] == theirs[1], (name, key, ours, theirs)


def test_computed_kernel_rule_sends_autograd_to_math_only_without_a_backend_kernel():
    # _fused_rms_norm: CompositeImplicitAutograd, and in this build no CPU kernel -> math at AutogradCPU
    assert dispatch.computed_kernel(aten._fused_rms_norm.default, "AutogradCPU")[0] == "math kernel"
    # sin: a CPU kernel and an Autograd kernel -> the autograd kernel
    assert dispatch.computed_kernel(aten.sin.default, "AutogradCPU")[0] == "autograd kernel"
    with pytest.raises(ValueError, match="dense backend keys"):
        dispatch.computed_kernel(aten.sin.default, "SparseCPU")


def test_kernels_for_fused_rms_norm_backward_has_no_cpu_kernel():
    table = dispatch.kernels_for(aten._fused_rms_norm_backward.default)
    assert "CPU" not in table and "Meta" in table and "CompositeImplicitAutograd" not in table


def test_kernels_for_bad_input():
    with pytest.raises(TypeError, match="OpOverloadPacket"):
        dispatch.kernels_for(aten.add)
    with pytest.raises(ValueError, match="no operator"):
        dispatch.kernels_for("aten::no_such_op")


# --- the widget: steps drawn from trace -----------------------------------------------


def test_explorer_steps_come_from_trace():
    from minidynamo.widgets.dispatch_explorer import DispatchKeyExplorer, explore

    keys, tr = explore(mode=True, requires_grad=True)
    widget = DispatchKeyExplorer(mode=True, requires_grad=True)
    assert widget.stepper.labels == ["the call"] + [s.key for s in tr]
    assert keys == dispatch.keys(torch.randn(2, requires_grad=True)) or "Python" in keys
    first = repr(widget)
    assert repr(DispatchKeyExplorer(mode=True, requires_grad=True)) == first  # deterministic
    widget.boxes["mode"].value = False  # toggling the mode re-runs the trace
    assert "Python" not in widget.stepper.labels
    assert widget.stepper.labels == ["the call", "Autograd", "ADInplaceOrView", "CPU"]
    widget.next()
    assert "step 2/4" in repr(widget)
    assert widget.snapshot_html().count("<li>") == 4


def test_explorer_reports_an_impossible_combination():
    from minidynamo.widgets.dispatch_explorer import DispatchKeyExplorer

    widget = DispatchKeyExplorer(inference=True, requires_grad=True)
    assert "cannot require grad" in widget.message


def test_trace_with_our_fake_tensor(probe):
    fake = _mini_fake()
    tr = dispatch.trace(probe, fake)
    observed = _observed_forward(tr)
    assert observed[:3] == ["PythonTLSSnapshot", "Autograd", "ADInplaceOrView"]
    assert set(observed[3:]) == {"Python", "Meta"}  # our mode reports after its Meta kernel returned
    assert any("minidynamo FakeTensorMode" in s.handler for s in tr)


def test_explorer_uses_our_fake_and_functional_tensors():
    from minidynamo.aot.functional_tensor import FunctionalTensor
    from minidynamo.fake import FakeTensor
    from minidynamo.widgets.dispatch_explorer import _make_tensor, explore

    x, under = _make_tensor({"requires_grad": True, "fake": True, "functional": True, "torch_functional": False, "inference": False})
    assert isinstance(x, FunctionalTensor) and isinstance(under.from_fun(x), FakeTensor)
    keys, tr = explore(functional=True)
    assert "Python" in keys and "Functionalize" not in keys  # ours sits at the Python key
    assert any("minidynamo FunctionalTensorMode" in s.handler and s.key == "Python" for s in tr)
    keys, tr = explore(torch_functional=True)
    assert "Functionalize" in keys and "Python" not in keys  # torch's: the C++ Functionalize key
    assert "Functionalize" in tr.handler_keys()
    keys, tr = explore(fake=True)
    assert any("minidynamo FakeTensorMode" in s.handler for s in tr)

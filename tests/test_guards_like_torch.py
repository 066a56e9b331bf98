"""Guards that keep a compiled entry sound, against torch 2.13 on the same call sequences (issue 26).

Each test runs one call sequence three ways: eagerly, through ``md.compile`` and
through ``torch.compile``, both with a backend that counts the graphs it is handed.
Results must equal eager's; how many graphs each system compiled (one per
recompile here) must equal torch's. The sequences change what no argument shows:
which tensors alias, the global state torch's ``GlobalStateGuard`` keeps
(torch/csrc/dynamo/guards.cpp), the torch-function mode stack and the default device
(``TORCH_FUNCTION_STATE`` / ``DEFAULT_DEVICE`` in torch/_dynamo/guards.py), a class
attribute read through ``cls``, the RNG state, ``requires_grad_()`` on an intermediate.
"""

from __future__ import annotations

import abc
import contextlib
import sys
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo.interpreter import run as vm_run

from _helpers import Counter
from _helpers import setting as _setting  # tests/ is on sys.path (no package)

pytestmark = [pytest.mark.ch04]


def _compiled(fn, system: str, **kwargs):
    counter = Counter()
    if system == "torch":
        torch._dynamo.reset()
        return torch.compile(fn, backend=counter, **kwargs), counter
    md.reset()
    return md.compile(fn, backend=counter, **kwargs), counter


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.device == b.device and a.dtype == b.dtype and (
            a.device.type == "meta" or torch.equal(a, b))
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def run_sequence(fn, calls, **compile_kwargs) -> dict:
    """``calls``: (context manager factory or None, args) per call. -> {system: graphs compiled}; results checked."""
    counts = {}
    for system in ("torch", "md"):
        cf, counter = _compiled(fn, system, **compile_kwargs)
        for i, (ctx, args) in enumerate(calls):
            with (ctx() if ctx else contextlib.nullcontext()):
                expected = fn(*args)
                got = cf(*args)
            if system == "md":
                assert _same(got, expected), (i, got, expected)
        counts[system] = counter.frame_count
    return counts


# --- aliasing: every pair of tensor inputs (NO_TENSOR_ALIASING) ------------------------------


def test_identity_of_two_inputs_is_guarded_even_when_nothing_is_written():
    def g(a, b):
        return a + 100 if a is b else a + b

    x, y, z = torch.ones(2), torch.full((2,), 2.0), torch.full((2,), 3.0)
    counts = run_sequence(g, [(None, (x, y)), (None, (z, z)), (None, (x, y)), (None, (y, y))])
    assert counts["md"] == counts["torch"] == 2


def test_parameters_are_left_out_of_the_aliasing_guard():
    """Torch skips parameters (``skip_no_tensor_aliasing_guards_on_parameters``): passing one twice reuses."""
    p = torch.nn.Parameter(torch.ones(2))

    def g(a, b):
        return a * b

    with torch.no_grad():
        counts = run_sequence(g, [(None, (p, torch.ones(2))), (None, (torch.ones(2), torch.ones(2)))])
    assert counts["md"] == counts["torch"]


# --- torch.Size under dynamic shapes ------------------------------------------------------------


def test_shape_under_dynamic_is_a_torch_size():
    def shapes(x):
        return x.shape, x.size(), x.shape[1:], x.stride()

    for system in ("torch", "md"):
        cf, _ = _compiled(shapes, system, dynamic=True)
        got = cf(torch.ones(5, 3))
        assert _same(got, shapes(torch.ones(5, 3))), (system, got)
        assert type(got[0]) is torch.Size and type(got[3]) is tuple


def test_exception_message_with_a_symbolic_shape_reads_like_eager():
    def msg(x):
        try:
            raise ValueError(f"bad {x.shape}")
        except ValueError as e:
            return str(e)

    for system in ("torch", "md"):
        cf, _ = _compiled(msg, system, dynamic=True)
        assert cf(torch.ones(5)) == "bad torch.Size([5])"


# --- Python 3.12/3.13: an inlined comprehension's variable that is a cell (PEP 709) --------------


def closures_after_a_comprehension_that_captured_i():
    captured = [lambda: i for i in range(3)]  # i is a cell of this function from here on
    defaults = [lambda i=i: i for i in range(3)]  # this comprehension's i is a plain value
    return [g() for g in captured], [g() for g in defaults]


def comprehension_cell_then_outer_i():
    later = [lambda: i for i in range(3)]
    i = 10
    return [g() for g in later], i


@pytest.mark.parametrize("fn", [closures_after_a_comprehension_that_captured_i, comprehension_cell_then_outer_i])
def test_comprehension_cells_in_the_interpreter_and_compiled(fn):
    """Runs on 3.11, 3.12 and 3.13 (CI): on 3.12+ the slot of ``i`` holds a cell (Note [A comprehension's ...])."""
    expected = fn()
    assert vm_run(fn) == expected, sys.version_info[:2]
    md.reset()
    assert md.compile(fn, backend="eager")() == expected


# --- global state: torch's GlobalStateGuard fields ---------------------------------------------




_MATMUL = torch.backends.cuda.matmul
GLOBAL_STATE_TOGGLES = {
    "grad_mode": torch.no_grad,
    "default_dtype": lambda: _setting(torch.get_default_dtype, torch.set_default_dtype, torch.float64),
    "deterministic": lambda: _setting(torch.are_deterministic_algorithms_enabled, torch.use_deterministic_algorithms,
                                      True),
    "autocast_cpu": lambda: torch.autocast("cpu", dtype=torch.bfloat16),
    "allow_tf32": lambda: _setting(lambda: _MATMUL.allow_tf32, lambda v: setattr(_MATMUL, "allow_tf32", v), True),
    "allow_fp16_reduce": lambda: _setting(lambda: _MATMUL.allow_fp16_reduced_precision_reduction,
                                          lambda v: setattr(_MATMUL, "allow_fp16_reduced_precision_reduction", v), False),
    "allow_bf16_reduce": lambda: _setting(lambda: _MATMUL.allow_bf16_reduced_precision_reduction,
                                          lambda v: setattr(_MATMUL, "allow_bf16_reduced_precision_reduction", v), False),
    "num_threads": lambda: _setting(torch.get_num_threads, torch.set_num_threads, 1),
    "disable_torch_function_subclass": torch._C.DisableTorchFunctionSubclass,
    "disable_torch_function": torch._C.DisableTorchFunction,
    "autocast_cache": lambda: _setting(torch.is_autocast_cache_enabled, torch.set_autocast_cache_enabled, False),
}


@pytest.mark.parametrize("toggle", list(GLOBAL_STATE_TOGGLES))
def test_a_global_state_toggle_recompiles_in_both(toggle):
    def f(x):
        return torch.add(x, 1) * 2

    x = torch.ones(2)
    ctx = GLOBAL_STATE_TOGGLES[toggle]
    counts = run_sequence(f, [(None, (x,)), (ctx, (x,)), (None, (x,)), (ctx, (x,))])
    assert counts["md"] == counts["torch"] == 2, counts


def test_global_state_guard_lists_torchs_fields():
    """Every field of torch's ``GlobalStateGuard`` has a GLOBAL_STATE guard of ours."""
    from minidynamo._torch_private import dynamo_global_state_fields

    fields = dynamo_global_state_fields()
    md.reset()
    guards = md.explain(lambda x: x + 1, torch.ones(2)).guards
    text = " ".join(g.expr for g in guards if g.kind == "GLOBAL_STATE")
    ours = {
        "grad_mode": "is_grad_enabled", "autocast_state": "___autocast_state", "default_dtype": "get_default_dtype",
        "deterministic_algorithms": "___deterministic_algorithms",
        "deterministic_algorithms_warn_only": "___deterministic_algorithms", "allow_tf32": "allow_tf32",
        "allow_fp16_reduce": "___cublas_reduced_precision", "allow_bf16_reduce": "___cublas_reduced_precision",
        "num_threads": "get_num_threads", "torch_function": "___torch_function_state",
        "torch_function_all_disabled": "___torch_function_state",
    }
    assert fields <= set(ours), fields - set(ours)  # a field torch added that this test does not know
    assert all(ours[f] in text for f in fields), [f for f in fields if ours[f] not in text]


# --- the torch-function mode stack and the default device ---------------------------------------


class _Doubler(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * 2 if func is torch.add else out


def test_a_torch_function_mode_pushed_between_calls_recompiles():
    def f(x):
        return torch.add(x, 1) * 2

    x = torch.ones(2)
    counts = run_sequence(f, [(None, (x,)), (_Doubler, (x,)), (None, (x,))])
    assert counts["md"] == counts["torch"] == 2


@pytest.mark.parametrize("devices", [("meta",), ("meta", "cpu")])
def test_set_default_device_between_calls(devices):
    """``torch.set_default_device`` pushes a DeviceContext; 'cpu' after 'meta' keeps the mode, changes the device."""

    def make():
        return torch.ones(2) + 1

    def decided(x):
        t = torch.ones(2)
        return x + 1 if t.device.type == "cpu" else x + 2

    for fn, args in ((make, ()), (decided, (torch.ones(2, device="cpu"),))):
        counts = {}
        for system in ("torch", "md"):
            cf, counter = _compiled(fn, system)
            try:
                assert _same(cf(*args), fn(*args))
                for device in devices:
                    torch.set_default_device(device)
                    assert _same(cf(*args), fn(*args)), (system, device)
            finally:
                torch.set_default_device(None)
            assert _same(cf(*args), fn(*args))
            counts[system] = counter.frame_count
        assert counts["md"] == counts["torch"] == 1 + len(devices), (fn.__name__, counts)


# --- a class attribute read through cls -----------------------------------------------------------


class _Scaled:
    K = 2

    @classmethod
    def scale(cls, x):
        return x * cls.K

    def apply(self, x):
        return self.scale(x)


class _Scaled2(_Scaled):
    pass


def test_classmethod_reading_cls_attribute_recompiles_when_it_changes():
    def through_instance(x, obj):
        return obj.apply(x)

    def through_class(x):
        return _Scaled.scale(x)

    x = torch.ones(2)
    for fn, args in ((through_instance, lambda: (x, _Scaled())), (through_class, lambda: (x,))):
        counts = {}
        for system in ("torch", "md"):
            _Scaled.K = 2
            cf, counter = _compiled(fn, system)
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    for k in (2, 5, 5):
                        _Scaled.K = k
                        assert _same(cf(*args()), fn(*args())), (system, fn.__name__, k)
            finally:
                _Scaled.K = 2
            # traced, not run eagerly after an error of ours (a frame that fell back can count 2 as well)
            assert not [w for w in caught if "internal error" in str(w.message)], (system, fn.__name__)
            counts[system] = counter.frame_count
        assert counts["md"] == counts["torch"] == 2, (fn.__name__, counts)


# --- a method of a class with a metaclass (abc.ABC) replaced between calls --------------------------


class _AbstractScale(abc.ABC):
    @abc.abstractmethod
    def factor(self): ...

    def apply(self, x):
        return x * self.factor()


class _Three(_AbstractScale):
    def factor(self):
        return 3


class _LoudMeta(type):
    def __getattribute__(cls, name):  # a metaclass that reads class attributes itself
        return type.__getattribute__(cls, name)


class _Loud(metaclass=_LoudMeta):
    def factor(self):
        return 3

    def apply(self, x):
        return x * self.factor()


@pytest.mark.parametrize("cls,base", [(_Three, _AbstractScale), (_Loud, _Loud)], ids=["abc", "own_getattribute"])
def test_method_replaced_on_a_class_with_a_metaclass_recompiles(cls, base):
    """Note [A class attribute guard without inspect], for ``abc.ABCMeta`` classes too: replacing the
    method on the class (then ``apply`` on its base) fails the guard, and each call equals eager.

    torch 2.13 serves its first entry after ``cls.factor`` is replaced (it returns ``x * 3`` where eager
    returns ``x * 5``, for a plain class as for these: one compile in all), so this compares ours with
    eager, not with torch.
    """
    def fn(x):
        return cls().apply(x)  # an object made in the frame: its class's methods are guarded

    x = torch.ones(2)
    saved = [(k, name, vars(k)[name]) for k in {cls, base} for name in ("factor", "apply") if name in vars(k)]
    try:
        cf, counter = _compiled(fn, "md")
        for step in range(3):
            if step == 1:
                cls.factor = lambda self: 5
            if step == 2:
                base.apply = lambda self, x: x - self.factor()
            assert _same(cf(x), fn(x)), step
            if cls is _Three:  # ABCMeta leaves __mro__ and __dict__ to type: dict lookups, no inspect
                source = cf.cache.entries[0].check.source
                assert "getattr_static" not in source and "__mro__ is" in source, source
    finally:
        for k, name, value in saved:
            setattr(k, name, value)
    assert counter.frame_count == 3


# --- the RNG state, as torch: get/set_rng_state are graph breaks ------------------------------------


def test_rng_state_read_and_rewound_inside_the_function():
    def rewind(x):
        s = torch.get_rng_state()
        a = torch.rand(3)
        torch.set_rng_state(s)
        b = torch.rand(3)
        return a, b, x + 1

    x = torch.ones(1)
    torch.manual_seed(3)
    expected = rewind(x)
    graphs = {}
    for system in ("torch", "md"):
        cf, counter = _compiled(rewind, system)
        torch.manual_seed(3)
        got = cf(x)
        assert all(torch.equal(g, e) for g, e in zip(got, expected)), system
        graphs[system] = counter.frame_count
    assert graphs["md"] == graphs["torch"]
    md.reset()
    reasons = " ".join(str(r) for r in md.explain(rewind, x).break_reasons)
    assert "marked as skipped" in reasons and "rng_state" in reasons


# --- requires_grad_() on an intermediate that is returned: a graph break, as torch -----------------


def test_requires_grad_intermediate_returned_breaks_and_backward_works():
    def make_leaf(x):
        y = x * 2
        y.requires_grad_()
        return y

    grads = {}
    graphs = {}
    for system in ("torch", "md"):
        cf, counter = _compiled(make_leaf, system)
        out = cf(torch.ones(2))
        assert out.requires_grad and out.is_leaf
        out.sum().backward()  # the caller's backward: raised before (issue 26)
        grads[system] = out.grad
        graphs[system] = counter.frame_count
    assert torch.equal(grads["md"], grads["torch"])
    assert graphs["md"] == graphs["torch"]
    md.reset()
    reasons = " ".join(str(r) for r in md.explain(make_leaf, torch.ones(2)).break_reasons)
    assert "requires_grad_() intermediate leaked as output" in reasons


def test_requires_grad_intermediate_detached_before_return_stays_one_graph():
    def detached(x):
        y = x * 2
        y.requires_grad_()
        return (y * 3).detach()

    md.reset()
    assert md.explain(detached, torch.ones(2)).graph_break_count == 0
    torch._dynamo.reset()
    assert torch._dynamo.explain(detached)(torch.ones(2)).graph_break_count == 0

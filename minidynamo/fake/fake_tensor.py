"""FakeTensor: a tensor with metadata and no data.

Place in the pipeline: under every tracing pass. The symbolic interpreter (pass
1, "dynamo"), AOT metadata collection (pass 2, "aot_metadata") and AOT joint
tracing (pass 3, "aot_joint") all run the user's ops on FakeTensors to learn the
shapes, strides, dtypes, devices and aliasing of the results without computing
anything. Every op run here reports an ``"op"`` event to ``minidynamo.events``.

Mirrors ``FakeTensor`` of ``torch/_subclasses/fake_tensor.py`` (3700 lines, the mode
included); the mode that runs ops on fakes is ``fake_mode.py`` (``FakeTensorMode``), the
converter ``converter.py``, the op cache ``dispatch_cache.py``: each imports this
module, which imports none of them.

Note [FakeTensor is a meta tensor that lies about its device]
    A FakeTensor is made with ``Tensor._make_subclass(cls, elem, ...)`` from a
    tensor ``elem`` on the ``meta`` device, exactly as the real one. The new
    tensor *shares elem's storage* (a meta storage: a size, no memory), so two
    fakes alias exactly when their meta storages are one: ``untyped_storage()``
    identity, ``_base`` and ``_is_view()`` all work through the ordinary
    autograd machinery. ``dispatch_device=True`` makes ``.device`` a question
    asked to Python (``prim.device``), which we answer with the fake device
    ("cpu", or "cuda" on a machine with no GPU); ``device_for_backend_keys``
    gives the tensor that device's dispatch keys (AutogradCUDA, CUDA, ...), so
    the dispatcher treats it like a real tensor of that device above the
    Python key.

    The other way, ``_make_wrapper_subclass``, makes a tensor with no storage of
    its own that holds the meta tensor in a field. It is simpler to explain, but
    then aliasing must be answered from the inner tensors by hand, and in-place
    metadata changes (``t_()``, ``as_strided_()``) would have to be copied out to
    the wrapper after every op. Torch uses wrapper subclasses for
    FunctionalTensor and DTensor, and ``_make_subclass`` for FakeTensor.
"""

from __future__ import annotations

import torch

from minidynamo._torch_private import StorageWeakRef, disabled_torch_function_impl

__all__ = [
    "FakeTensor",
    "FakeTensorError",
    "DataDependentOutputError",
    "UnsupportedOperatorError",
    "MixedFakeTensorError",
    "shares_storage",
]

# --- errors ---------------------------------------------------------------------


class FakeTensorError(RuntimeError):
    """Base class of the errors a FakeTensorMode raises on purpose."""


class DataDependentOutputError(FakeTensorError):
    """The op's output (its value or its shape) depends on data a fake does not have.

    Torch raises DataDependentOutputException (``item``, ``_local_scalar_dense``)
    or DynamicOutputShapeException (``nonzero``, ``masked_select``, ``unique``);
    Dynamo turns either into a graph break, and so does our symbolic interpreter.
    """

    def __init__(self, op: str, dynamic_shape: bool = False):
        self.op = op
        self.dynamic_shape = dynamic_shape  # torch's DynamicOutputShapeException (its shape, not only its value)
        super().__init__(
            f"{op}: its output depends on the data of its inputs, and a FakeTensor has no data "
            "(a tracer turns this into a graph break)"
        )


class UnsupportedOperatorError(FakeTensorError):
    """The op has no Meta kernel, so there is no way to compute its output metadata."""

    def __init__(self, op: str, detail: str = ""):
        self.op = op
        super().__init__(f"{op}: no Meta kernel, so FakeTensorMode cannot run it" + (f" ({detail})" if detail else ""))


class MixedFakeTensorError(FakeTensorError):
    """An op got a real tensor beside fakes, or fakes from two different modes."""


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors (real or fake) alias: one storage under both.

    ``data_ptr()`` cannot tell for fakes: every meta storage has address 0. The
    storage object's identity can (torch uses ``StorageWeakRef`` the same way).
    """
    return StorageWeakRef(a.untyped_storage()) == StorageWeakRef(b.untyped_storage())


# --- flattening op arguments (ATen args nest only lists and tuples; kwargs is a dict) --


def _walk_tensors(x, out: list) -> None:
    for y in x:
        if isinstance(y, torch.Tensor):
            out.append(y)
        elif isinstance(y, (list, tuple)):
            _walk_tensors(y, out)


def _flat_tensors(args, kwargs) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    _walk_tensors(args, out)
    if kwargs:
        _walk_tensors(kwargs.values(), out)
    return out


def _map_tensors(fn, x):
    if isinstance(x, torch.Tensor):
        return fn(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_map_tensors(fn, y) for y in x)
    return x


# --- the tensor -----------------------------------------------------------------


_METADATA_AS_INTS = {  # torch/_subclasses/fake_tensor.py: _DISPATCH_META_HANDLERS
    torch.ops.aten.size.default: lambda t: tuple(int(s) for s in t.size()),
    torch.ops.aten.stride.default: lambda t: tuple(int(s) for s in t.stride()),
    torch.ops.aten.storage_offset.default: lambda t: int(t.storage_offset()),
}


class FakeTensor(torch.Tensor):
    """A tensor with sizes, strides, dtype and a claimed device, and no data.

    Make one with ``FakeTensorMode.from_tensor(real)`` or, as in torch,
    ``FakeTensor(mode, meta_elem, device)``. See Note [FakeTensor is a meta tensor
    that lies about its device].
    """

    fake_mode: "FakeTensorMode"
    fake_device: torch.device

    @staticmethod
    def __new__(cls, fake_mode: "FakeTensorMode", elem: torch.Tensor, device, requires_grad: bool | None = None):
        if elem.device.type != "meta":
            raise TypeError(f"FakeTensor wraps a meta tensor, got one on {elem.device}")
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", 0)  # torch's fake cuda tensors say cuda:0 too
        self = torch.Tensor._make_subclass(
            cls,
            elem,
            elem.requires_grad if requires_grad is None else requires_grad,
            dispatch_device=True,
            device_for_backend_keys=device,
        )
        self.fake_mode = fake_mode
        self.fake_device = device
        return self

    # Torch functions go straight to the dispatcher; __torch_dispatch__ wraps results.
    __torch_function__ = disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # .device on a FakeTensor is asked here (dispatch_device=True), even in-kernel.
        if func is torch.ops.prim.device.default:
            return args[0].fake_mode._device_of(args[0])
        if func in _METADATA_AS_INTS:  # a C++ kernel asking sizes() of a symbolic fake: torch's
            return _METADATA_AS_INTS[func](args[0])  # _DISPATCH_META_HANDLERS, each symbol fixed (a guard)
        # No FakeTensorMode active (an op on fakes outside `with mode:`, or a mode
        # stacked above ours already popped itself): enter the fakes' own mode.
        modes = {t.fake_mode for t in _flat_tensors(args, kwargs or {}) if isinstance(t, FakeTensor)}
        if len(modes) != 1:
            raise MixedFakeTensorError(f"{func}: got FakeTensors from {len(modes)} different FakeTensorModes")
        (mode,) = modes
        with mode:
            return func(*args, **(kwargs or {}))

    def tolist(self):
        # C++ refuses tolist() on subclasses; like torch's FakeTensor, go element by
        # element, so the first item() raises DataDependentOutputError.
        return self.item() if self.dim() == 0 else [t.tolist() for t in self.unbind(0)]

    def __repr__(self) -> str:
        extra = ", requires_grad=True" if self.requires_grad and self.grad_fn is None else ""
        if self.grad_fn is not None:
            extra = f", grad_fn=<{type(self.grad_fn).__name__}>"
        return (
            f"FakeTensor(size={tuple(self.shape)}, dtype={self.dtype}, "
            f"device={str(self.fake_device)!r}{extra})"
        )


# Note [The device question has a torch_dispatch rule]
#     Inside the kernel (DisableTorchDispatch: no mode on the stack) a Meta kernel's
#     ``x.to(dtype)`` or ``x.new_empty(...)`` asks the fake for its device, and the C++
#     dispatch of that ``prim.device`` goes to the subclass (``dispatch_on_subclass`` in
#     torch/csrc/utils/python_arg_parser.cpp). For every subclass argument torch asks
#     first whether a ``torch.library.register_torch_dispatch`` rule is registered for
#     (op, class), and only if none answers whether the argument is a DTensor: that
#     check imports ``torch.distributed.tensor`` (with sympy and torch's ShapeEnv) the
#     first time, 0.3 s of a learner's first compile. ``prim.device`` is the only op
#     that reaches FakeTensor's own dispatch in a trace (every other op meets our mode
#     first), so it gets the rule, the same answer as ``FakeTensor.__torch_dispatch__``
#     (which still answers for a torch that asks in another order). The rule is public
#     API and touches nothing of torch's; it is looked up only for our class.
_PRIM_LIB = torch.library.Library("prim", "IMPL")  # kept alive: the rule lives as long as the library
torch.library.register_torch_dispatch(
    "prim::device", FakeTensor, lambda cls, func, types, args, kwargs: args[0].fake_mode._device_of(args[0]),
    lib=_PRIM_LIB)

"""FakeTensorMode: inside ``with mode:`` every ATen op runs on meta kernels and returns FakeTensors.

Place in the pipeline: under every tracing pass. The symbolic interpreter (pass
1, "dynamo"), AOT metadata collection (pass 2, "aot_metadata") and AOT joint
tracing (pass 3, "aot_joint") all run the user's ops on FakeTensors (``fake_tensor.py``)
to learn the shapes, strides, dtypes, devices and aliasing of the results without
computing anything. Every op run here reports an ``"op"`` event to ``minidynamo.events``.

Mirrors ``FakeTensorMode`` of ``torch/_subclasses/fake_tensor.py``; ours keeps the idea
and the op cache (``dispatch_cache.py``), and drops constant propagation, the python
dispatcher, cross-ref checking and most device special cases.

Note [Running the kernel]
    FakeTensorMode.__torch_dispatch__ runs the op on the FakeTensors themselves
    "in kernel invocation" (as torch's ``in_kernel_invocation_manager``): Python
    dispatch switched off so we do not come back here, the Meta key forced into
    the thread-local include set so the Meta kernel runs even though the tensor's
    backend keys say CPU or CUDA, and ``.device`` answering "meta" meanwhile.
    Meta kernels compute output metadata only. Outputs that are new tensors get
    wrapped as FakeTensors with the fake device; an in-place op returns its own
    (already fake) input.

Note [Factories cannot claim cuda here]
    ``torch.empty(3, device="cuda")`` initialises CUDA in the Python argument
    parser, before any dispatch, and on a CPU-only build that fails. The C++
    lazy-init skips it when a mode sits in the dispatcher's special FAKE slot
    (``_mode_key = torch._C._TorchDispatchModeKey.FAKE``), which is where torch
    registers its FakeTensorMode. Ours is an ordinary mode (taking torch's slot
    would make torch's own internals mistake it for theirs), so on a CPU-only
    build a fake claims cuda through ``mode.from_tensor(t, device="cuda")`` and
    ops on such fakes, not through factory calls or ``.to("cuda")``. On a CUDA
    build the initialisation succeeds and ``torch.empty(3, device="cuda")`` under
    our mode is a fake ``cuda`` tensor, as under torch's.
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

import torch

from minidynamo import events
from minidynamo.fake.converter import FakeTensorConverter
from minidynamo.fake.dispatch_cache import cached_dispatch
from minidynamo.fake.fake_tensor import (
    DataDependentOutputError,
    FakeTensor,
    FakeTensorError,
    MixedFakeTensorError,
    UnsupportedOperatorError,
    _METADATA_AS_INTS,
    _flat_tensors,
    _map_tensors,
)
from minidynamo._torch_private import (
    DisableTorchDispatch,
    HigherOrderOperator,
    PreserveDispatchKeyGuard,
    TorchDispatchMode,
    defer_dynamo_in_meta_kernels,
    set_meta_in_tls_dispatch_include,
)

__all__ = ["FakeTensorMode"]

aten = torch.ops.aten


# torch.tensor(data) builds a real CPU tensor first and then "lifts" it into the
# traced world with aten.lift_fresh: a fresh constant, so we convert it (torch's
# fake mode does the same and also remembers its value as a constant; ours does not).
_LIFT_OPS = (aten.lift_fresh.default, aten.lift_fresh_copy.default)
_PRIM_DEVICE = torch.ops.prim.device.default
_data_dependent: dict = {}  # op -> "always", "unless integer indices" or "": from its tags, read once


# --- the mode -------------------------------------------------------------------


def _index_with_integer_indices(func, args) -> bool:
    """``x[idx]`` with integer index tensors: its shape is known from the indices' shapes.

    ``aten.index.Tensor`` carries the tag ``dynamic_output_shape`` because a *bool*
    mask's result size depends on the data; with integer indices it does not.
    torch's FakeTensorMode makes the same distinction (``fake_impls.py``: ``index_tensor``).
    """
    if func is not torch.ops.aten.index.Tensor:
        return False
    indices = args[1] if len(args) > 1 else ()
    return all(i is None or i.dtype not in (torch.bool, torch.uint8) for i in indices)


class FakeTensorMode(TorchDispatchMode):
    """Inside ``with mode:`` every ATen op runs on meta kernels and returns FakeTensors.

    ``allow_non_fake_inputs=True`` converts real tensor inputs with
    :meth:`from_tensor` instead of raising MixedFakeTensorError (as torch's flag).
    """

    cache_enabled = True  # Note [The dispatch cache] (torch: config fake_tensor_cache_enabled)
    # run the kernel on every hit too and compare (torch: cache_crosscheck_enabled); tests/conftest.py sets it
    cache_crosscheck = os.environ.get("MINIDYNAMO_FAKE_CACHE_CROSSCHECK") == "1"

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # not wrapped in torch._disable_dynamo: that imports real Dynamo (seconds) at the first op (issue 17)
        return False


    def __init__(self, *, allow_non_fake_inputs: bool = False):
        super().__init__()
        defer_dynamo_in_meta_kernels()  # once: torch's meta kernels would import torch._dynamo (issue 17)

        self.allow_non_fake_inputs = allow_non_fake_inputs
        self.fake_tensor_converter = FakeTensorConverter()
        self.in_kernel_invocation = False
        self.shape_env = None  # a ShapeEnv when the trace has symbolic sizes (shapes/symbolic_shapes.py)
        self._quiet_depth = 0  # > 0 while the converter replays views: no op events

    def __repr__(self) -> str:
        return f"FakeTensorMode(id={id(self)})"

    def from_tensor(self, t: torch.Tensor, *, device=None, dynamic_dims=(), source: str = "",
                    view_base_dims=()) -> FakeTensor:
        """A FakeTensor for the real tensor ``t`` (memoized: aliasing is kept across calls).

        ``device`` overrides the claimed device (torch's from_tensor has no such
        argument; there one builds ``FakeTensor(mode, meta, "cuda")`` by hand).
        ``dynamic_dims`` (with ``self.shape_env`` set): those dims get symbolic sizes,
        named after ``source`` (torch passes a ``symbolic_context`` and a ``source``);
        ``view_base_dims``: a view's base's (torch's ``view_base_context``; Note [A view input
        is fakified through its base], converter.py).
        """
        return self.fake_tensor_converter.from_real_tensor(self, t, device=device, dynamic_dims=dynamic_dims,
                                                           source=source, view_base_dims=view_base_dims)

    def _device_of(self, t: FakeTensor) -> torch.device:
        return torch.device("meta") if self.in_kernel_invocation else t.fake_device

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """Ops run inside do not report events (the converter's own view replays)."""
        self._quiet_depth += 1
        try:
            yield
        finally:
            self._quiet_depth -= 1

    @contextlib.contextmanager
    def in_kernel_invocation_manager(self) -> Iterator[None]:
        """See Note [Running the kernel]."""
        prev = self.in_kernel_invocation
        with DisableTorchDispatch(), PreserveDispatchKeyGuard():
            set_meta_in_tls_dispatch_include(True)
            self.in_kernel_invocation = True
            try:
                yield
            finally:
                self.in_kernel_invocation = prev

    supports_higher_order_operators = True  # torch.cond reaches __torch_dispatch__ (aot/higher_order.py)

    def _cond(self, pred, true_fn, false_fn, operands):
        """torch's ``cond_fake_tensor_mode`` (torch/_higher_order_ops/cond.py): one branch run on the fakes,
        its outputs fresh (no alias of an operand); AOT checked that both branches agree."""
        with self:
            return tuple(o.clone() for o in true_fn(*operands))

    def _while_loop(self, cond_fn, body_fn, carried, additional):
        """torch's ``while_loop_fake_tensor_mode``: the body run once on the fakes, its outputs fresh;
        Dynamo checked that they match the carries. Registered as torch registers its own rule,
        ``while_loop.py_impl(FakeTensorMode)`` (aot/higher_order.py, on first use)."""
        with self:
            return tuple(o.clone() for o in body_fn(*carried, *additional))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is _PRIM_DEVICE:
            return self._device_of(args[0])
        if func in _METADATA_AS_INTS:  # torch's _DISPATCH_META_HANDLERS (fake_tensor.py)
            return _METADATA_AS_INTS[func](args[0])
        if isinstance(func, HigherOrderOperator):
            if func is torch.ops.higher_order.cond:
                return self._cond(*args, **(kwargs or {}))
            return NotImplemented
        kwargs = dict(kwargs) if kwargs else {}

        # 1. Inputs: all fakes of this mode (or converted, if allowed).
        flat_in = _flat_tensors(args, kwargs)
        if not all(isinstance(t, FakeTensor) and t.fake_mode is self for t in flat_in):
            args, kwargs = self._check_inputs(func, args, kwargs)
            flat_in = _flat_tensors(args, kwargs)

        # 2. Ops whose output depends on data we do not have.
        dependent = _data_dependent.get(func)
        if dependent is None:
            tags = func.tags
            dependent = _data_dependent[func] = (
                "always" if torch.Tag.data_dependent_output in tags else
                "unless integer indices" if torch.Tag.dynamic_output_shape in tags else "")
        if dependent and (dependent == "always" or not _index_with_integer_indices(func, args)):
            if self.shape_env is not None:  # Note [A fake mode makes unbacked symbols only when told]
                from minidynamo.fake.unbacked_impls import unbacked_output

                out = unbacked_output(self, func, args, kwargs)
                if out is not NotImplemented:
                    return out
            raise DataDependentOutputError(str(func), dynamic_shape=dependent != "always")

        # 3. Which device do the outputs claim? A factory's `device=` kwarg, else the inputs'.
        out_device = self._output_device(func, flat_in, kwargs)
        if "device" in kwargs:
            kwargs["device"] = torch.device("meta")

        # 4. Run the Meta kernel on the fakes themselves, 5. wrap its outputs; or rebuild
        # them from the dispatch cache (Note [The dispatch cache], dispatch_cache.py).
        out = cached_dispatch(self, func, args, kwargs, flat_in, lambda: self._run_kernel(func, args, kwargs, out_device),
                              out_device)
        if events.is_recording() and not self._quiet_depth:
            self._emit(func, flat_in, out)
        return out

    # -- helpers ----------------------------------------------------------------------

    def _run_kernel(self, func, args, kwargs, out_device):
        """Steps 4 and 5 of ``__torch_dispatch__``: the Meta kernel, then its new outputs wrapped."""
        try:
            with self.in_kernel_invocation_manager(), self._symbolic_kernels():
                out = func(*args, **kwargs)
        except NotImplementedError as e:
            if "Meta" in str(e) or "meta" in str(e):
                raise UnsupportedOperatorError(str(func), str(e).splitlines()[0][:200]) from None
            raise

        # In-place ops already return a fake input.
        def wrap(t):
            if isinstance(t, FakeTensor):
                return t
            if t.device.type != "meta":
                raise UnsupportedOperatorError(str(func), f"its kernel returned a real tensor on {t.device}")
            return FakeTensor(self, t, out_device)

        return _map_tensors(wrap, out)

    def _symbolic_kernels(self):
        """Note [Meta kernels over SymInts]: with symbolic sizes, kernels are found by the Python dispatcher.

        Many C++ Meta/CompositeExplicitAutograd kernels (``view``, ``empty_like``) take
        concrete sizes only and fail on a SymInt; torch's meta registrations in Python
        (``torch/_meta_registrations.py``, ``torch/_refs``) take SymInts. The Python
        dispatcher routes to them, as torch's FakeTensorMode does with a ShapeEnv. A
        static trace (no ShapeEnv) dispatches as before.
        """
        if self.shape_env is None:
            return contextlib.nullcontext()
        from minidynamo._torch_private import enable_python_dispatcher

        return enable_python_dispatcher()


    def _check_inputs(self, func, args, kwargs):
        bad: list[str] = []

        def check(t):
            if isinstance(t, FakeTensor):
                if t.fake_mode is not self:
                    raise MixedFakeTensorError(
                        f"{func}: got a FakeTensor from another FakeTensorMode; "
                        "fakes of two modes cannot meet (convert inputs with one mode's from_tensor)"
                    )
                return t
            if self.allow_non_fake_inputs or func in _LIFT_OPS:
                return self.from_tensor(t)
            bad.append(f"{type(t).__name__} of size {tuple(t.shape)} on {t.device}")
            return t

        args = _map_tensors(check, args)
        kwargs = {k: _map_tensors(check, v) for k, v in kwargs.items()}
        if bad:
            raise MixedFakeTensorError(
                f"{func}: got a real tensor ({bad[0]}) under FakeTensorMode; convert every input "
                "with mode.from_tensor(t) first, or make the mode with allow_non_fake_inputs=True"
            )
        return args, kwargs

    def _output_device(self, func, flat_in, kwargs) -> torch.device:
        if not flat_in and "device" not in kwargs and _takes_device(func):
            kwargs["device"] = None  # a factory called without device= (cpu): it too runs on meta
        if kwargs.get("device") is not None:
            return torch.device(kwargs["device"])
        devices = {t.fake_device for t in flat_in}
        if len(devices) > 1:
            # Torch lets a 0-dim cpu tensor meet tensors on another device (a scalar).
            non_scalar = {t.fake_device for t in flat_in if t.dim() != 0 or t.fake_device.type != "cpu"}
            if len(non_scalar) > 1:
                raise FakeTensorError(f"{func}: inputs on different devices {sorted(map(str, devices))}")
            devices = non_scalar or devices
        return next(iter(devices)) if devices else torch.device("cpu")

    def _emit(self, func, flat_in, out) -> None:
        # Snapshots in plain tuples (sizes, storage addresses), formatted when read: Notes
        # [Events are formatted when read] and [The log is a tape until read] (events.py).
        flat_out = [out] if isinstance(out, torch.Tensor) else _flat_tensors(out if isinstance(out, (list, tuple)) else [out], {})
        events.emit_lazy(
            "op", _op_event_details, func,
            tuple([tuple(t.shape) for t in flat_in]), tuple([tuple(t.shape) for t in flat_out]),
            tuple([t.untyped_storage()._cdata for t in flat_in]), tuple([t.untyped_storage()._cdata for t in flat_out]),
            op=func,
        )


_device_arg: dict = {}


def _takes_device(func) -> bool:
    """Whether ``func``'s schema has a ``device`` keyword (a factory, like torch's ``_is_tensor_constructor``)."""
    known = _device_arg.get(func)
    if known is None:
        known = _device_arg[func] = any(a.name == "device" and a.kwarg_only for a in func._schema.arguments)
    return known


def _op_event_details(func, in_shapes, out_shapes, in_storages, out_storages) -> dict:
    """An op event's details, from the snapshots ``_emit`` took (storage addresses compare as ``storage_id``)."""
    return {
        "input_shapes": list(in_shapes),
        "output_shapes": list(out_shapes),
        "output_aliases_input": [next((i for i, s in enumerate(in_storages) if s == o), None) for o in out_storages],
        "mutates": func._schema.is_mutable,
    }

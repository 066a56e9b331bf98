"""FakeTensorConverter: real tensors in, FakeTensors out, aliasing kept.

Place in the pipeline: the door into every fake pass. Dynamo converts each
input tensor it meets (``wrap_fx_proxy`` -> ``wrap_to_fake_tensor``), AOTAutograd
converts the flat inputs again for its own passes; ``mode.from_tensor(t)`` calls
this converter.

Mirrors ``FakeTensorConverter`` in ``torch/_subclasses/fake_tensor.py`` and the
``MetaConverter`` in ``torch/_subclasses/meta_utils.py`` (2300 lines: symbolic
sizes, subclasses, functorch wrappers, sparse, nested). Ours handles dense
strided tensors.

Note [The memo keeps aliasing]
    Two memos, both weak in the real tensors:
    * tensor memo: the same real tensor converts to the same FakeTensor object,
      however many times it is asked (Dynamo and AOT ask again and again);
    * storage memo: real storage -> meta storage. Tensors that share a real
      storage get fakes that share one meta storage, so ``untyped_storage()``
      identity, which AOTAutograd uses to find aliased inputs, says the same
      about fakes as about the real tensors.
    A real view (``t._is_view()``) is converted by converting its ``_base``
    first and then replaying the view as ``as_strided(size, stride, offset)``
    under the mode; autograd's ADInplaceOrView kernel then sets the fake's
    ``_base`` and ``_is_view()`` and gives it its base's version counter.
    (Torch replays the view function when it can, and falls back to as_strided.)

Note [What the fake keeps]
    sizes, strides, storage offset, dtype, device (or an override), requires_grad,
    leafness (a non-leaf real tensor becomes a non-leaf fake: ours clones under
    grad mode to give it history (CloneBackward0), torch attaches a
    ``DelayedError`` node that fails if anyone backpropagates into it), the view
    relation and storage sharing. The version counter is not copied: every fake
    starts at version 0, fake views share their base's counter (autograd does
    that), and in-place ops under the mode bump it as they would on real tensors.
    Torch does the same. No data is kept, so no value of the real tensor leaks
    into a trace.

Note [A view input is fakified through its base]
    A symbolic fake of a view (``x[1:]``, ``x.t()``, ``x.view(3, 4)``) is made as torch's
    ``MetaConverter.meta_tensor`` makes it (torch/_subclasses/meta_utils.py, ``t.is_view``
    branch and ``view_from_base``): the base first, under the source ``L['x']._base`` and
    with the dims Dynamo chose for it (torch's ``view_base_context``), so its sizes get
    symbols of their own, created before the view's (the view's sizes are then duck-sized
    against them: ``x.t()`` of a (3, 5) base has sizes ``(s64, s83)``, ``s64`` hashed from
    ``L['x']._base.size()[1]``, where the view alone would be ``(s77, s27)``);
    then the view's own symbolic sizes, strides and offset (``L['x'].size()[0]``...), and
    ``base.as_strided(sizes, strides, offset)`` on the base's fake, with the ShapeEnv's
    guards suppressed (its bounds check would guard on the base: torch suppresses it too).
    The fake is a view of the base's fake: two views of one base (or a tensor and its
    transpose) share one fake storage and the base's symbols, and autograd history comes
    from the replayed view. A complex base is read as real first where the view is (``view_as_real``), as
    torch's; a view that changes the dtype otherwise is fakified alone.
"""

from __future__ import annotations

import weakref

import torch

from minidynamo._torch_private import DisableTorchDispatch, StorageWeakRef, unsafe_set_version_counter
from minidynamo.fake.fake_tensor import FakeTensor, FakeTensorError, MixedFakeTensorError

__all__ = ["FakeTensorConverter"]


def can_be_dynamic(t: torch.Tensor) -> bool:
    """A strided tensor, contiguous or not, a view or not (Note [A symbolic fake]).

    Not: a tensor with autograd history whose layout a ``clone`` would not keep (the
    fake gets its history by a clone: ``x[:, ::2]`` or ``x[1:]`` of a leaf that requires grad).
    """
    if t.layout != torch.strided or t.is_sparse or t.is_quantized or t.is_nested:
        return False
    if through_base(t):  # Note [A view input is fakified through its base]: history from the replayed view
        return True
    if t.requires_grad and not t.is_leaf and (t.storage_offset() != 0 or not _dense(t)):
        return False
    return True


def through_base(t: torch.Tensor) -> bool:
    """A view whose symbolic fake is made through its base's (Note [A view input is fakified through its base])."""
    base = t._base if t._is_view() else None
    return base is not None and (base.dtype == t.dtype or _complex_of_real(base.dtype, t.dtype)
                                 or _complex_of_real(t.dtype, base.dtype)) \
        and base.layout == torch.strided and not base.is_nested and type(base) in (torch.Tensor, torch.nn.Parameter)


def _complex_of_real(complex_dtype: torch.dtype, real_dtype: torch.dtype) -> bool:
    return complex_dtype.is_complex and complex_dtype.to_real() == real_dtype


def base_as(base: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The base's fake read in the view's dtype (``view_as_real`` of a complex base), as torch's ``meta_tensor``;
    call under the fake mode."""
    if base.dtype == dtype:
        return base
    return torch.view_as_real(base) if _complex_of_real(base.dtype, dtype) else torch.view_as_complex(base)


def _dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense (``x.t()``, a permute): a ``clone`` keeps its strides."""
    dims = sorted((st, sz) for sz, st in zip(t.shape, t.stride()) if sz != 1)
    expected = 1
    for st, sz in dims:
        if st != expected:
            return False
        expected *= sz
    return True


class FakeTensorConverter:
    """Converts real tensors to FakeTensors of one mode, remembering what it made."""

    def __init__(self) -> None:
        # id(real) -> (weakref to real, fake). Keyed by id: Tensor.__eq__ is elementwise.
        self.tensor_memo: dict[int, tuple[weakref.ref, FakeTensor]] = {}
        # StorageWeakRef(real storage) -> the meta UntypedStorage that stands for it.
        self.storage_memo: dict[StorageWeakRef, torch.UntypedStorage] = {}
        self._purge_at = 64  # storage_memo's size at which freed storages are next forgotten

    def __len__(self) -> int:
        return len(self.tensor_memo)

    # -- memo ------------------------------------------------------------------------

    def _lookup(self, t: torch.Tensor) -> FakeTensor | None:
        hit = self.tensor_memo.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        return None

    def _remember(self, t: torch.Tensor, fake: FakeTensor) -> None:
        key = id(t)
        memo = self.tensor_memo
        memo[key] = (weakref.ref(t, lambda _ref: memo.pop(key, None)), fake)

    def meta_storage(self, t: torch.Tensor) -> torch.UntypedStorage:
        """The meta storage standing for ``t``'s real storage (made on first use)."""
        key = StorageWeakRef(t.untyped_storage())
        if key not in self.storage_memo and len(self.storage_memo) >= self._purge_at:
            # Forget freed storages now and then (not on every call: 260 parameters made that
            # quadratic). A stale key cannot meet a live storage: the weak reference it holds
            # keeps the freed storage's address from being reused.
            for old in [k for k in self.storage_memo if k.expired()]:
                del self.storage_memo[old]
            self._purge_at = 2 * len(self.storage_memo) + 64
        if key not in self.storage_memo:
            nbytes = t.untyped_storage().nbytes()
            with DisableTorchDispatch():  # no mode may see this: it is ours, not the user's
                self.storage_memo[key] = torch.empty(nbytes, dtype=torch.uint8, device="meta").untyped_storage()
        return self.storage_memo[key]

    # -- conversion --------------------------------------------------------------------

    def from_real_tensor(self, mode, t: torch.Tensor, *, device=None, dynamic_dims=(), source: str = "",
                         view_base_dims=()) -> FakeTensor:
        """The fake of ``t``: static, or with the dims ``dynamic_dims`` symbolic (read at ``source``).

        ``view_base_dims``: for a view, its base's dynamic dims (torch's ``view_base_context``), the
        base read at ``source + "._base"`` (Note [A view input is fakified through its base]).
        """
        if isinstance(t, FakeTensor):
            if t.fake_mode is not mode:
                raise MixedFakeTensorError("from_tensor: this FakeTensor belongs to another FakeTensorMode")
            return t
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"from_tensor: expected a torch.Tensor, got {type(t).__name__}")
        plain = type(t) is torch.Tensor or type(t) is torch.nn.Parameter
        if not plain or t.layout != torch.strided or t.is_quantized or t.is_nested:
            raise FakeTensorError(
                f"from_tensor: only dense strided torch.Tensors are supported, got {type(t).__name__} "
                f"with layout {t.layout}"
            )
        hit = self._lookup(t)
        if hit is not None:
            return hit
        device = torch.device(device) if device is not None else t.device
        strides = mode.shape_env is not None and source in mode.shape_env.dynamic_strides  # dynamic_shapes.py
        if (dynamic_dims or strides or view_base_dims) and mode.shape_env is not None and can_be_dynamic(t):
            if through_base(t):
                fake = self._convert_view_symbolic(mode, t, device, dynamic_dims, source, view_base_dims)
            else:
                fake = self._convert_symbolic(mode, t, device, dynamic_dims, source)
        else:
            fake = self._convert(mode, t, device)
        self._remember(t, fake)
        return fake

    def _convert(self, mode, t: torch.Tensor, device: torch.device) -> FakeTensor:
        if t._is_view():
            # Note [The memo keeps aliasing]: base first, then replay the view.
            base = self.from_real_tensor(mode, t._base, device=device)
            with mode._quiet(), mode, torch.set_grad_enabled(t.grad_fn is not None):
                if t.dtype != base.dtype and through_base(t):  # ``view_as_real`` of a complex base
                    base = base_as(base, t.dtype)
                fake = torch.as_strided(base, t.size(), t.stride(), t.storage_offset())
            if t.requires_grad and not fake.requires_grad:  # a leaf view made requires_grad by hand
                fake.requires_grad_(True)
            return fake

        storage = self.meta_storage(t)
        elem = self._meta_like(t, storage)
        fake = FakeTensor(mode, elem, device, requires_grad=t.requires_grad)
        if t.requires_grad and not t.is_leaf:
            # Note [What the fake keeps]: give it history, then put the storage back.
            with mode._quiet(), mode, torch.enable_grad():
                fake = fake.clone()
            with torch.no_grad(), mode.in_kernel_invocation_manager():
                fake.set_(storage, t.storage_offset(), t.size(), t.stride())
            unsafe_set_version_counter((fake,), (0,))
        return fake

    def _convert_view_symbolic(self, mode, t: torch.Tensor, device, dynamic_dims, source: str,
                               view_base_dims) -> FakeTensor:
        """Note [A view input is fakified through its base]: the base's fake, then the view replayed on it."""
        base = self.from_real_tensor(mode, t._base, device=device, dynamic_dims=view_base_dims or (),
                                     source=f"{source}._base")
        env = mode.shape_env
        dims = dynamic_dims if isinstance(dynamic_dims, dict) else set(dynamic_dims)
        sizes = env.symbolic_sizes(t, source, dims)
        strides, offset = env.symbolic_strides_and_offset(t, source, sizes)
        with mode._quiet(), mode, torch.set_grad_enabled(t.grad_fn is not None):
            base = base_as(base, t.dtype)
            with env.suppress_guards():
                fake = torch.as_strided(base, sizes, strides, offset)
        if t.requires_grad and not fake.requires_grad:  # a leaf view made requires_grad by hand
            fake.requires_grad_(True)
        return fake

    def _convert_symbolic(self, mode, t: torch.Tensor, device, dynamic_dims, source: str) -> FakeTensor:
        """Note [A symbolic fake]: sizes, strides and storage offset from the ShapeEnv (SymInts over s77, s27...).

        As torch's ``ShapeEnv.create_symbolic_sizes_strides_storage_offset`` followed by
        ``empty_strided`` on meta: the storage is the meta tensor's own (its byte size an
        expression too). A stride is an expression of the sizes where the layout allows
        (``x.t()``: ``(1, s77)``), else a symbol of its own (``x[:, ::2]``'s step), as torch's
        ``_compute_symbolic_stride``; a storage offset of 2 or more is a symbol too. The
        fake owns its storage, so it is not a view of another input: the symbolic layer
        keeps inputs that share a storage static (``dynamic_shapes.dynamic_dims_for``).
        """
        env = mode.shape_env
        sizes = env.symbolic_sizes(t, source, dynamic_dims if isinstance(dynamic_dims, dict) else set(dynamic_dims))
        strides, offset = env.symbolic_strides_and_offset(t, source, sizes)
        with DisableTorchDispatch(), torch.no_grad(), torch.inference_mode(False):
            elem = torch.empty_strided(sizes, strides, dtype=t.dtype, device="meta")
            if not (isinstance(offset, int) and offset == 0):
                extent = 1 + sum((s - 1) * st for s, st in zip(sizes, strides))
                elem = torch.empty((offset + extent,), dtype=t.dtype, device="meta")
                elem.as_strided_(sizes, strides, offset)
        fake = FakeTensor(mode, elem, device, requires_grad=t.requires_grad)
        if t.requires_grad and not t.is_leaf:
            with mode._quiet(), mode, torch.enable_grad():
                fake = fake.clone()
        return fake

    @staticmethod
    def _meta_like(t: torch.Tensor, storage: torch.UntypedStorage) -> torch.Tensor:
        # Under inference_mode a fresh tensor would be an inference tensor, which has no
        # version counter to reset (nor to bump when the trace writes to it): make it a normal one.
        with DisableTorchDispatch(), torch.no_grad(), torch.inference_mode(False):
            elem = torch.empty(0, dtype=t.dtype, device="meta")
            elem.set_(storage, t.storage_offset(), t.size(), t.stride())
        # set_ is an in-place op and bumped the version; a fresh fake starts at 0 (torch's too).
        unsafe_set_version_counter((elem,), (0,))
        return elem

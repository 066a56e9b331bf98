"""Dispatch keys: which a tensor carries, which the thread adds or removes, in what order.

Place in the pipeline: under every stage that calls an ATen op. FakeTensorMode,
functionalization and AOTAutograd's tracing all work by putting keys on tensors or
in thread-local state; this module computes the keys a call will visit.

Mirrors ``c10/core/DispatchKey.h`` (the priority order), ``c10/core/DispatchKeySet.h``
(per-backend keys, ``getAutogradRelatedKeySetFromBackend``,
``getAutocastRelatedKeySetFromBackend``), ``c10/core/TensorImpl.cpp`` (the key set a
tensor is born with) and ``c10/core/impl/LocalDispatchKeySet.h`` (the TLS include and
exclude sets). The dispatcher computes, for each call::

    keys = (union of the tensors' keys | TLS included) - TLS excluded
    kernel = table[highest priority key of (keys minus the op's fallthrough keys)]

Note [Ours computes keys from what Python can see]
    We do not read ``torch._C._dispatch_keys``: ``tensor_keys`` derives the keys from
    the tensor's device, inference flag, Python subclass, functional wrapper and
    conj/neg bits, and ``tls_included``/``tls_excluded`` from the active dispatch
    modes, inference mode and autocast. The tests compare both with the real
    dispatcher's key sets. The real key set is a 128-bit mask (functionality bits
    times backend bits); ours is a tuple of names ordered by ``PRIORITY``.

Note [Switches with no Python-level flag]
    Pre-dispatch tracing (``torch._C._EnablePreDispatch``) and C++ functionalization
    (``torch._enable_functionalization``) put PreDispatch / Functionalize in the TLS
    include set and keep no other state Python can see, so for these two keys
    ``tls_included`` reads the TLS bit itself, the same bit the dispatcher reads.

Note [requires_grad adds no key]
    A plain CPU tensor carries AutogradCPU whether or not it requires grad: the
    autograd kernel runs for every call and itself decides that there is nothing to
    record. Only an inference tensor (made under ``torch.inference_mode``) is born
    without ADInplaceOrView and Autograd keys, which is why it is cheaper.
"""

from __future__ import annotations

import torch

__all__ = [
    "PRIORITY",
    "BACKENDS",
    "priority",
    "order",
    "tensor_keys",
    "tls_included",
    "tls_excluded",
    "keys",
    "is_python_subclass",
]

# The per-backend "functionalities" expand to one key per backend, in this order
# (c10/core/DispatchKey.h, C10_FORALL_BACKEND_COMPONENTS).
BACKENDS = (
    "CPU", "CUDA", "HIP", "XLA", "MPS", "IPU", "XPU", "HPU", "VE", "Lazy",
    "MTIA", "MAIA", "PrivateUse1", "PrivateUse2", "PrivateUse3", "Meta",
)  # fmt: skip

_PER_BACKEND = {
    "Dense": "",  # the backend keys themselves: CPU, CUDA, ...
    "Quantized": "Quantized",
    "Sparse": "Sparse",
    "SparseCsr": "SparseCsr",
    "NestedTensor": "NestedTensor",
    "AutogradFunctionality": "Autograd",
}

# Functionality keys, LOWEST priority first, as in c10/core/DispatchKey.h (torch 2.x).
_FUNCTIONALITIES = (
    "Dense", "FPGA", "Vulkan", "Metal", "Quantized", "CustomRNGKeyId", "MkldnnCPU",
    "Sparse", "SparseCsr", "NestedTensor",
    "BackendSelect", "Python", "Fake", "FuncTorchDynamicLayerBackMode", "Functionalize",
    "Named", "Conjugate", "Negative", "ZeroTensor", "ADInplaceOrView",
    "AutogradOther", "AutogradFunctionality", "AutogradNestedTensor", "Tracer",
    "AutocastCPU", "AutocastMTIA", "AutocastMAIA", "AutocastXPU", "AutocastIPU", "AutocastHPU",
    "AutocastXLA", "AutocastMPS", "AutocastCUDA", "AutocastPrivateUse1",
    "FuncTorchBatched", "BatchedNestedTensor", "FuncTorchVmapMode", "Batched", "VmapMode",
    "FuncTorchGradWrapper", "DeferredInit", "PythonTLSSnapshot", "FuncTorchDynamicLayerFrontMode",
    "TESTING_ONLY_GenericWrapper", "TESTING_ONLY_GenericMode", "PreDispatch", "PythonDispatcher",
)  # fmt: skip


def _expand() -> tuple[str, ...]:
    out: list[str] = []
    for name in _FUNCTIONALITIES:
        if name in _PER_BACKEND:
            prefix = _PER_BACKEND[name]
            out += [prefix + b for b in BACKENDS]
        else:
            out.append(name)
    return tuple(out)


# Every runtime key, lowest priority first. The dispatcher compares functionality
# first; between two backends of one functionality the later backend wins.
PRIORITY: tuple[str, ...] = _expand()
_RANK = {name: i for i, name in enumerate(PRIORITY)}


def priority(key: str) -> int:
    """The rank of ``key`` (higher runs first); a clear error for a name we do not know."""
    try:
        return _RANK[key]
    except KeyError:
        raise ValueError(f"unknown dispatch key {key!r}; known keys are listed in dispatch.key_set.PRIORITY") from None


def order(names) -> tuple[str, ...]:
    """The keys ``names``, highest priority first: the order the dispatcher tries them."""
    return tuple(sorted(set(names), key=priority, reverse=True))


# --- the keys a tensor is born with ------------------------------------------------

_DEVICE_TO_BACKEND = {
    "cpu": "CPU", "cuda": "CUDA", "hip": "HIP", "xla": "XLA", "mps": "MPS", "ipu": "IPU",
    "xpu": "XPU", "hpu": "HPU", "ve": "VE", "lazy": "Lazy", "mtia": "MTIA", "maia": "MAIA",
    "privateuseone": "PrivateUse1", "meta": "Meta",
}  # fmt: skip

# getAutocastRelatedKeySetFromBackend: only these backends have an autocast key.
_AUTOCAST = {
    "CPU": "AutocastCPU", "CUDA": "AutocastCUDA", "XPU": "AutocastXPU", "IPU": "AutocastIPU",
    "HPU": "AutocastHPU", "XLA": "AutocastXLA", "MPS": "AutocastMPS", "MTIA": "AutocastMTIA",
    "MAIA": "AutocastMAIA", "PrivateUse1": "AutocastPrivateUse1",
}  # fmt: skip

_AUTOCAST_DEVICE = {v: k.lower() if k != "PrivateUse1" else "privateuseone" for k, v in _AUTOCAST.items()}


def is_python_subclass(t: torch.Tensor) -> bool:
    """Whether ``t``'s class overrides ``__torch_dispatch__`` (it then carries the Python key).

    Mirrors torch/csrc/utils/python_arg_parser's check at ``_make_subclass`` /
    ``_make_wrapper_subclass`` time: the default ``Tensor.__torch_dispatch__`` is the
    "disabled" implementation; anything else turns the Python key on.
    """
    own = getattr(type(t), "__torch_dispatch__", None)
    default = getattr(torch.Tensor, "__torch_dispatch__", None)
    return own is not None and getattr(own, "__func__", own) is not getattr(default, "__func__", default)


def tensor_keys(t: torch.Tensor) -> tuple[str, ...]:
    """The dispatch keys ``t`` itself carries, highest priority first.

    The counterpart of ``torch._C._dispatch_keys(t)`` (TensorImpl's ``key_set_``).
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"dispatch.tensor_keys needs a torch.Tensor, got {type(t).__name__}")
    if t.layout is not torch.strided:
        raise NotImplementedError(f"dispatch.tensor_keys models strided tensors only; this one has layout {t.layout}")
    if t.is_nested or t.is_quantized:
        raise NotImplementedError("dispatch.tensor_keys does not model nested or quantized tensors")
    from minidynamo._torch_private import is_functional_tensor

    device = t.device.type  # a FakeTensor answers with the device it claims
    backend = _DEVICE_TO_BACKEND.get(device)
    if backend is None:
        raise NotImplementedError(f"dispatch.tensor_keys: no backend key known for device type {device!r}")
    names = {backend}
    if backend in _AUTOCAST:
        names.add(_AUTOCAST[backend])
    if not t.is_inference():
        # Note [requires_grad adds no key]: every non-inference tensor has these two.
        names |= {"ADInplaceOrView", "Autograd" + backend}
    if is_python_subclass(t):
        names |= {"Python", "PythonTLSSnapshot"}
    if is_functional_tensor(t):
        # FunctionalTensorWrapper (C++): the inner tensor's keys plus Functionalize.
        names.add("Functionalize")
    if t.is_conj():
        names.add("Conjugate")
    if t.is_neg():
        names.add("Negative")
    return order(names)


# --- what the thread adds and removes (thread-local state) -------------------------


def tls_included() -> tuple[str, ...]:
    """Keys the current thread adds to every call (``LocalDispatchKeySet.included_``).

    BackendSelect and ADInplaceOrView by default (c10's ``default_included_set``);
    inference mode drops ADInplaceOrView; an active TorchDispatchMode adds Python and
    PythonTLSSnapshot, so the mode sees ops on plain tensors too.
    """
    from minidynamo._torch_private import DispatchKey, dispatch_tls_is_dispatch_key_included, is_in_torch_dispatch_mode

    names = {"BackendSelect"}
    if not torch.is_inference_mode_enabled():
        names.add("ADInplaceOrView")
    if is_in_torch_dispatch_mode():
        names |= {"Python", "PythonTLSSnapshot"}
    # Note [Switches with no Python-level flag]
    for key in ("PreDispatch", "Functionalize"):
        if dispatch_tls_is_dispatch_key_included(getattr(DispatchKey, key)):
            names.add(key)
    return order(names)


def tls_excluded() -> tuple[str, ...]:
    """Keys the current thread removes from every call (``LocalDispatchKeySet.excluded_``).

    Every autocast key unless autocast is on for its device (c10's
    ``default_excluded_set``); under inference mode also every autograd key.
    """
    names = {key for key, device in _AUTOCAST_DEVICE.items() if not _autocast_on(device)}
    if torch.is_inference_mode_enabled():
        names |= {"AutogradOther", "AutogradNestedTensor"} | {"Autograd" + b for b in BACKENDS}
    return order(names)


def _autocast_on(device: str) -> bool:
    try:
        return torch.is_autocast_enabled(device)
    except (RuntimeError, ValueError):  # a device type this build does not know
        return False


def keys(*tensors: torch.Tensor, tls: bool = True) -> tuple[str, ...]:
    """The keys the dispatcher computes for a call on ``tensors``, highest priority first.

    ``(union of tensor_keys | tls_included()) - tls_excluded()``. With ``tls=False``
    only the tensors' own keys (what ``torch._C._dispatch_keys`` shows). This is the
    set before the op's fallthrough kernels are skipped; ``trace`` shows which
    kernels then really run.
    """
    if not tensors:
        raise TypeError("dispatch.keys needs at least one tensor")
    names: set[str] = set()
    for t in tensors:
        names |= set(tensor_keys(t))
    if tls:
        names = (names | set(tls_included())) - set(tls_excluded())
    return order(names)

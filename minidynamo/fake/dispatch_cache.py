"""The FakeTensor dispatch cache: an op's output metadata, remembered per input metadata.

Place in the pipeline: inside ``FakeTensorMode.__torch_dispatch__``, around step 4
(running the Meta kernel). Mirrors ``torch/_subclasses/fake_tensor.py``
(``FakeTensorMode._cached_dispatch_impl``, ``_cache_key``, ``_make_cache_entry``,
``_output_from_cache_entry``); ours keeps torch's key and its way of rebuilding an
output, and drops the SymInt part (a trace with a ShapeEnv is not cached).

Note [The dispatch cache]
    A Meta kernel is a function of its inputs' metadata: the same op on inputs of
    the same sizes, strides, dtypes, devices and scalar arguments gives outputs of
    the same metadata. Many of torch's Meta kernels are Python (``torch/_refs``,
    ``torch/_meta_registrations.py``, decompositions), and a compile runs each
    forward op three times (Dynamo, AOT metadata collection, the joint trace), so
    torch's FakeTensorMode remembers the metadata of each op's outputs under a key
    made of the op and its inputs' metadata, and on a hit builds fresh outputs
    with ``torch.empty_strided`` on ``meta`` instead of running the kernel. The
    cache is one dict for all modes (a class attribute in torch), so pass 3 hits
    what pass 1 and 2 stored.

    The key (torch's): the op; default dtype and inference mode; each tensor's
    dtype, sizes, strides, storage offset, claimed device, requires_grad, its
    storage's size in bytes and which earlier input shares its storage (a kernel's
    overlap checks look at aliasing); each other argument with its type
    (``1`` and ``1.0`` give different dtypes). An argument of any other type
    (a SymInt, a generator, a function) bypasses the cache. Ours adds one thing
    torch leaves out (Note [Which kernel ran is part of the key]).

    The entry, per output: the input it *is* (an in-place op returns its input),
    the input whose storage it shares (a view: rebuilt with ``set_`` onto that
    input's storage, as torch does), or a fresh tensor's metadata. Bypassed, and
    remembered as bypassed: ops that change an input's metadata (``inplace_view``
    ops, ``set_``, ``resize_``: checked by comparing inputs before and after),
    ops that depend on data, ``lift_fresh``, ``_unsafe_view`` (as torch), outputs
    that are not strided meta tensors with plain bits, or whose rebuilt copy's
    dispatch keys differ (torch's check). ``FakeTensorMode.cache_crosscheck``
    runs the kernel on every hit too and compares (torch's
    ``cache_crosscheck_enabled``); the tests turn it on.

Note [Which kernel ran is part of the key]
    The Python dispatcher (``enable_python_dispatcher``, on in every AOT trace:
    aot/graph_capture.py's Note [AOT traces under the Python dispatcher]) swaps some
    Meta kernels for Python ones (``py_impl(Meta)``: ``aten.constant_pad_nd`` runs
    ``torch/_refs``' ``constant_pad_nd``), and their outputs' metadata can differ:
    that one makes its output with ``torch.empty(..., requires_grad=input.requires_grad)``,
    so on an input that requires grad its fake output requires grad with the
    dispatcher on and not without it (the C++ Meta kernel's never does). torch's key
    (``FakeTensorMode._cache_key``) leaves the dispatcher out, so the first call's
    answer serves the other kind, and torch's own ``cache_crosscheck_enabled`` fails on
    ``F.pad`` (tests/test_aot_python_dispatcher_like_torch.py shows it). Ours keys on
    it, so a hit is always what the kernel gives. Above autograd the two agree when
    grad is on (the autograd kernel gives the output its ``grad_fn`` either way).

Note [Views are not cached]
    Torch caches view ops too, rebuilding the output with ``set_`` onto the input's
    storage. Ours does not: a view's Meta kernel is C++ (``alias_with_sizes_and_strides``)
    and runs in about 30 us, and the rebuild (key, ``empty_strided``, ``set_``, the
    FakeTensor) costs more than that here; a Python Meta kernel (``addmm``,
    ``native_layer_norm``: 0.7-1.8 ms) is what the cache is for (about 50 us a hit).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from minidynamo._torch_private import OpOverload, dispatch_keys, python_dispatcher_enabled

__all__ = ["CacheStats", "cached_dispatch", "clear_cache", "stats", "storage_id"]

aten = torch.ops.aten

_ATOMS = (int, float, bool, complex, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)
_MAX_ENTRIES = 20_000  # entries hold only metadata; cleared when full, like nothing torch bounds


class _Bypass(Exception):
    """This call cannot be cached (the reason is counted in ``stats().bypasses``)."""


class CacheStats:
    """Hits, misses and bypasses (by reason) since the last :func:`clear_cache` (torch: ``cache_hits`` ...)."""

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0
        self.bypasses: dict[str, int] = {}

    def bypass(self, reason: str) -> None:
        self.bypasses[reason] = self.bypasses.get(reason, 0) + 1

    def __repr__(self) -> str:
        return f"CacheStats(hits={self.hits}, misses={self.misses}, bypasses={self.bypasses})"


_cache: dict[tuple, Any] = {}
_stats = CacheStats()
_BYPASSED = object()  # the entry of a key whose calls cannot be cached
_op_ok: dict[Any, str | None] = {}  # per op: None if cacheable, else why not
_mutable: dict[Any, bool] = {}  # per op: does its schema write to an argument


def stats() -> CacheStats:
    return _stats


def clear_cache() -> None:
    global _stats
    _cache.clear()
    _stats = CacheStats()


def storage_id(t: torch.Tensor) -> int:
    """The address of ``t``'s storage: equal for two tensors exactly when they alias.

    ``StorageWeakRef`` compares this same number (``untyped_storage()._cdata``);
    reading it directly skips making and freeing two weak references per comparison.
    """
    return t.untyped_storage()._cdata


def _op_reason(func) -> str | None:
    """Why calls of ``func`` are never cached (None: they may be); computed once per op."""
    try:
        return _op_ok[func]
    except KeyError:
        pass
    tags = getattr(func, "tags", ())
    reason = None
    if not isinstance(func, OpOverload):
        reason = "not an OpOverload"
    elif torch.Tag.inplace_view in tags:
        reason = "inplace view"
    elif torch.Tag.data_dependent_output in tags or torch.Tag.dynamic_output_shape in tags:
        reason = "data-dependent output"
    elif func in (aten._unsafe_view.default, aten.lift_fresh.default, aten.lift_fresh_copy.default):
        reason = "unsafe view or lift"
    elif func.namespace not in ("aten", "prims"):
        reason = "not a builtin op"
    elif func.is_view:
        reason = "view"  # Note [Views are not cached]
    _op_ok[func] = reason
    return reason


def _tensor_key(t: torch.Tensor, storages: list) -> tuple:
    if t.layout is not torch.strided or t.is_quantized or t.is_nested:
        raise _Bypass(f"{t.layout} tensor")
    storage = t.untyped_storage()
    sid = storage._cdata  # storage_id(t)
    alias = storages.index(sid) if sid in storages else -1
    storages.append(sid)
    return (t.dtype, tuple(t.shape), t.stride(), t.storage_offset(), getattr(t, "fake_device", None),
            t.requires_grad, t.is_conj(), t.is_neg(), t.is_inference(), storage.nbytes(), alias)


def _arg_key(x: Any, storages: list) -> Any:
    if isinstance(x, torch.Tensor):
        return _tensor_key(x, storages)
    if isinstance(x, (list, tuple)):
        return (type(x), tuple(_arg_key(y, storages) for y in x))
    if isinstance(x, _ATOMS):
        return (type(x), x)
    raise _Bypass(f"argument of type {type(x).__name__}")


def cache_key(func, args: tuple, kwargs: dict) -> tuple:
    """Note [The dispatch cache]: the key; raises _Bypass for what cannot be cached."""
    storages: list = []
    return (
        func, torch.get_default_dtype(), torch.is_inference_mode_enabled(),
        python_dispatcher_enabled(),  # Note [Which kernel ran is part of the key]
        tuple(_arg_key(a, storages) for a in args),
        tuple((k, _arg_key(v, storages)) for k, v in kwargs.items()),
    )


def _layout(t: torch.Tensor) -> tuple:
    s = t.untyped_storage()  # s._cdata: storage_id(t)
    return (tuple(t.shape), t.stride(), t.storage_offset(), s._cdata, s.nbytes())


def _out_info(o: Any, flat_in: list[torch.Tensor], fresh: list) -> tuple:
    if o is None or isinstance(o, (bool, int, float)):
        return ("const", o)
    if not isinstance(o, torch.Tensor):
        raise _Bypass(f"output of type {type(o).__name__}")
    for i, t in enumerate(flat_in):
        if o is t:
            return ("input", i)
    if o.layout is not torch.strided or o.is_conj() or o.is_neg() or o.is_quantized or o.grad_fn is not None:
        raise _Bypass("output with special bits")
    storage = o.untyped_storage()
    meta = (tuple(o.shape), o.stride(), o.storage_offset(), o.dtype, o.requires_grad, storage.nbytes(),
            o.fake_device)
    for i, t in enumerate(flat_in):
        if storage_id(t) == storage._cdata:
            return ("view", i, meta)
    if storage._cdata in fresh:
        raise _Bypass("outputs share a fresh storage")
    fresh.append(storage._cdata)
    return ("new", meta)


def _make_entry(out: Any, flat_in: list[torch.Tensor]) -> tuple:
    fresh: list = []
    if isinstance(out, (list, tuple)):
        return (type(out), tuple(_out_info(o, flat_in, fresh) for o in out))
    return (None, _out_info(out, flat_in, fresh))


def _rebuild_one(mode, info: tuple, flat_in: list[torch.Tensor]) -> Any:
    from minidynamo.fake.fake_tensor import FakeTensor

    kind = info[0]
    if kind == "const":
        return info[1]
    if kind == "input":
        return flat_in[info[1]]
    shape, stride, offset, dtype, requires_grad, nbytes, device = info[-1]
    with mode.in_kernel_invocation_manager():
        empty = torch.empty_strided(shape, stride, dtype=dtype, device="meta")
        if kind == "view":
            empty.set_(flat_in[info[1]].untyped_storage(), offset, shape, stride)
        elif offset or empty.untyped_storage().nbytes() != nbytes:
            storage = torch.empty((nbytes,), dtype=torch.uint8, device="meta").untyped_storage()
            empty.set_(storage, offset, shape, stride)
    if requires_grad:
        empty.requires_grad_(True)
    return FakeTensor(mode, empty, device)


def _rebuild(mode, entry: tuple, flat_in: list[torch.Tensor]) -> Any:
    container, infos = entry
    if container is None:
        return _rebuild_one(mode, infos, flat_in)
    return container(_rebuild_one(mode, info, flat_in) for info in infos)


def _same(a: Any, b: Any, flat_in: list[torch.Tensor]) -> bool:
    """The rebuilt output ``a`` matches the kernel's ``b``: layout, dtype, aliasing, dispatch keys."""
    if isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y, flat_in) for x, y in zip(a, b))
    if not isinstance(b, torch.Tensor):
        return type(a) is type(b) and a == b
    if not isinstance(a, torch.Tensor):
        return False
    la, lb = _layout(a), _layout(b)
    same_storage = (la[3] == lb[3]) == any(storage_id(t) == lb[3] for t in flat_in)
    return (la[:3] == lb[:3] and la[4] == lb[4] and same_storage and a.dtype == b.dtype
            and a.requires_grad == b.requires_grad and a.fake_device == b.fake_device
            and dispatch_keys(a) == dispatch_keys(b))


def cached_dispatch(mode, func, args: tuple, kwargs: dict, flat_in: list[torch.Tensor],
                    run: Callable[[], Any], out_device: Optional[torch.device] = None) -> Any:
    """``run()`` (the kernel and the wrapping of its outputs), or its outputs rebuilt from the cache.

    ``out_device`` is the device the outputs claim: part of the key, since a factory's
    ``device=`` reaches here rewritten to ``meta`` (``torch.ones(2)`` and
    ``torch.ones(2, device='meta')`` run the same kernel and claim different devices).
    """
    reason = _op_reason(func)
    if reason is not None or mode.shape_env is not None or not type(mode).cache_enabled:
        _stats.bypass(reason or "symbolic shapes or cache off")
        return run()
    try:
        key = (cache_key(func, args, kwargs), out_device)
    except _Bypass as e:
        _stats.bypass(str(e))
        return run()
    entry = _cache.get(key)
    if entry is _BYPASSED:
        _stats.bypass("remembered")
        return run()
    if entry is not None:
        _stats.hits += 1
        out = _rebuild(mode, entry, flat_in)
        if type(mode).cache_crosscheck:
            want = run()
            if not _same(out, want, flat_in):
                raise AssertionError(f"dispatch cache: {func} rebuilt {out!r}, the kernel gives {want!r}")
        return out
    mutable = _mutable.get(func)
    if mutable is None:
        mutable = _mutable[func] = func._schema.is_mutable
    before = [_layout(t) for t in flat_in] if mutable else None
    out = run()
    _stats.misses += 1
    if len(_cache) >= _MAX_ENTRIES:
        _cache.clear()
    try:
        if before is not None and before != [_layout(t) for t in flat_in]:
            raise _Bypass("changes an input's metadata")
        entry = _make_entry(out, flat_in)
        if not _same(_rebuild(mode, entry, flat_in), out, flat_in):
            raise _Bypass("rebuilt output differs")
    except _Bypass as e:
        _stats.bypass(str(e))
        _cache[key] = _BYPASSED
        return out
    _cache[key] = entry
    return out

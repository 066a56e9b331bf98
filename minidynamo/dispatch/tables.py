"""Which keys an operator has kernels for: the dispatcher's own tables, read aloud.

Place in the pipeline: beside it; chapters 07 and 08 use it as evidence for why an
op decomposes on one device and not on another.

Mirrors ``aten/src/ATen/core/dispatch/OperatorEntry.cpp``. An operator keeps two
tables:

* the *registrations* (``kernels_``): what was registered at which key, alias keys
  included (``CompositeImplicitAutograd``, ``CompositeExplicitAutograd``,
  ``Autograd``); ``torch._C._dispatch_dump`` prints them;
* the *computed* table (``dispatchTable_``): one entry per runtime key (CPU,
  AutogradCPU, Meta, ...), filled from the registrations by
  ``computeDispatchTableEntryWithDebug``; ``torch._C._dispatch_dump_table`` prints it.

Note [Kernels only the Python dispatcher sees]
    ``OpOverload.py_impl(key)`` registers a Python kernel in ``op.py_kernels``; the C++
    dispatcher never sees it, only the Python dispatcher does (torch/_ops.py, switched
    on by make_fx and AOTAutograd). ``torch._meta_registrations`` registers many of
    torch._decomp's decompositions this way as Meta kernels, e.g. for
    ``_fused_rms_norm``; with the Python dispatcher on, such a kernel counts as "the
    backend has a kernel", which changes what the Autograd<Backend> key resolves to.
    ``KernelTable.python_dispatcher`` lists them.

Note [How the computed table is filled]
    ``computed_kernel`` computes one entry from the registrations (``kernels_for``),
    by the rule of ``computeDispatchTableEntryWithDebug``. For a runtime key, in
    order: a kernel registered at that key ("kernel"); for a backend key,
    CompositeExplicitAutogradNonFunctional, then CompositeExplicitAutograd
    ("default backend kernel"); CompositeImplicitAutograd ("math kernel"), but
    only when the backend has no kernel of its own (for Autograd<Backend>: none at
    the backend's keys, and none at CompositeExplicitAutograd); for an autograd key,
    the Autograd alias kernel ("autograd kernel"); for FuncTorchBatched, the
    FuncTorchBatchedDecomposition alias ("batched kernel"); else the key's fallback
    ("backend fallback", or "fallthrough" for the few keys whose fallback is one);
    else "missing". That "only when the backend has no kernel" is why an
    op such as ``_fused_rms_norm`` decomposes before autograd on a device without a
    fused kernel and reaches its own autograd formula on a device with one (chapter
    08). ``torch_table_entry`` reads torch's own computed table
    (``_dispatch_dump_table``); the tests compare the two on many ops and keys.
    Ours covers the dense backend keys, their Autograd keys and the non-backend
    keys (Python, Functionalize, ...); not the sparse/quantized/nested ones.
"""

from __future__ import annotations

import re

__all__ = ["KernelTable", "kernels_for", "computed_kernel", "torch_table_entry", "op_name"]

_REGISTRATION = re.compile(r"^(?P<key>\w+)(?P<alias>\[alias\])?: (?P<fallthrough>fallthrough )?registered at (?P<where>\S+)")
_COMPUTED = re.compile(r"^(?P<key>\w+): (?P<fallthrough>fallthrough )?registered at (?P<where>\S+) \[(?P<kind>[^\]]+)\]")


def op_name(op) -> str:
    """``"aten::add.Tensor"`` for an OpOverload (or such a string); a clear error otherwise."""
    if isinstance(op, str):
        return op
    name = getattr(op, "name", None)
    if callable(name) and hasattr(op, "_schema"):
        return name()
    if hasattr(op, "overloads"):
        raise TypeError(f"{op} is an OpOverloadPacket; pick an overload, e.g. {op}.default")
    raise TypeError(f"expected an OpOverload such as torch.ops.aten.add.Tensor, got {type(op).__name__}")


def _source(where: str) -> str:
    """Where a kernel came from, without machine paths or line numbers."""
    path = where.rsplit(":", 1)[0]
    if path.endswith(".py"):
        marker = "site-packages/"
        path = path.split(marker, 1)[1] if marker in path else path.rsplit("/", 1)[-1]
        return f"Python: {path}"
    return f"C++: {path.rsplit('/', 1)[-1]}"


class KernelTable(dict):
    """key -> where its kernel was registered, in the dispatcher's registration order.

    ``"CPU" in kernels_for(op)`` asks whether a kernel is registered at CPU. The
    ``alias`` set names the alias keys among them (CompositeImplicitAutograd, ...).
    """

    def __init__(self, op: str, entries: dict[str, str], alias: set[str], python_only: dict[str, str] | None = None):
        super().__init__(entries)
        self.op = op
        self.alias = frozenset(alias)
        # Note [Kernels only the Python dispatcher sees]
        self.python_dispatcher = dict(python_only or {})

    def __repr__(self) -> str:
        rows = [f"  {k + ('[alias]' if k in self.alias else ''):<34} {v}" for k, v in self.items()]
        rows += [f"  {k + ' (py_impl)':<34} {v}" for k, v in self.python_dispatcher.items()]
        return f"kernels_for({self.op}):\n" + "\n".join(rows)


def kernels_for(op) -> KernelTable:
    """The keys with a kernel registered for ``op`` (an OpOverload), from the dispatcher.

    Fallbacks (the Python key's, Functionalize's, ...) are not the op's own kernels
    and are not listed; ``computed_kernel`` shows what a runtime key ends up with.
    """
    from minidynamo._torch_private import dispatch_dump, load_python_kernels

    load_python_kernels()  # torch registers its Python kernels lazily, on import
    name = op_name(op)
    try:
        dump = dispatch_dump(name)
    except RuntimeError:
        dump = ""
    if not dump.strip():
        raise ValueError(f"the dispatcher knows no operator {name!r} (expected e.g. 'aten::add.Tensor')")
    entries: dict[str, str] = {}
    alias: set[str] = set()
    for line in dump.splitlines():
        m = _REGISTRATION.match(line)
        if not m or line.startswith(("name:", "schema:", "debug:", "alias analysis")):
            continue
        key = m["key"]
        through = m["fallthrough"] or "[ fallthrough" in line  # both spellings occur in the dump
        entries[key] = ("fallthrough, " if through else "") + _source(m["where"])
        if m["alias"]:
            alias.add(key)
    python_only = {}
    if not isinstance(op, str):
        from minidynamo._torch_private import python_dispatcher_kernels

        for key, fn in python_dispatcher_kernels(op).items():
            where = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__name__', '?')}"
            python_only[key] = f"Python dispatcher only: {where}"
    return KernelTable(name, entries, alias, python_only)


def torch_table_entry(op, key: str) -> tuple[str, str] | None:
    """Torch's computed dispatch table for runtime ``key``: (kind, source), or None.

    Read from ``_dispatch_dump_table`` (the oracle for :func:`computed_kernel`).
    ``kind`` is the dispatcher's own word: "kernel", "math kernel" (from
    CompositeImplicitAutograd), "default backend kernel" (CompositeExplicitAutograd),
    "autograd kernel", "backend fallback", ... ; a fallthrough reads "fallthrough".
    """
    from minidynamo._torch_private import dispatch_dump_table

    name = op_name(op)
    kernels_for(name)  # a clear error for an unknown op
    for line in dispatch_dump_table(name).splitlines():
        m = _COMPUTED.match(line)
        if m and m["key"] == key:
            kind = "fallthrough" if m["fallthrough"] else m["kind"]
            return kind, _source(m["where"])
    return None


# The per-backend functionalities a backend's "own kernel" can sit at (c10's
# getBackendKeySetFromAutograd: the backend's dense key and its Quantized, Sparse and
# SparseCsr variants; NestedTensor has its own autograd key).
_BACKEND_VARIANTS = ("", "Quantized", "Sparse", "SparseCsr")


# Keys whose fallback is ``CppFunction::makeFallthrough()``: BackendSelectFallbackKernel.cpp,
# VariableFallbackKernel.cpp (ADInplaceOrView), autocast_mode.cpp, VmapModeRegistrations.cpp.
_FALLTHROUGH_FALLBACKS = frozenset(
    {"BackendSelect", "ADInplaceOrView", "FuncTorchVmapMode", "VmapMode"}
    | {f"Autocast{d}" for d in ("CPU", "CUDA", "MTIA", "MAIA", "XPU", "MPS", "IPU", "HPU", "XLA", "PrivateUse1")}
)


def _split_key(key: str) -> tuple[str, str | None]:
    """("backend", "CPU") for CPU, ("autograd", "CPU") for AutogradCPU, ("other", None) else."""
    from minidynamo.dispatch.key_set import BACKENDS

    if key in BACKENDS:
        return "backend", key
    if key.startswith("Autograd") and key[len("Autograd") :] in BACKENDS:
        return "autograd", key[len("Autograd") :]
    if key in ("AutogradOther", "AutogradNestedTensor") or any(
        key.startswith(v) and key[len(v) :] in BACKENDS for v in _BACKEND_VARIANTS if v
    ):
        raise ValueError(
            f"computed_kernel covers dense backend keys, their Autograd keys and non-backend keys, not {key!r}"
        )
    return "other", None


def computed_kernel(op, key: str) -> tuple[str, str] | None:
    """What runtime ``key`` gets for ``op``, computed from its registrations: (kind, source).

    Note [How the computed table is filled]. ``None`` when nothing serves the key
    ("missing"). A fallback's source is "fallback" (fallbacks are per key, not per op).
    """
    from minidynamo._torch_private import DispatchKey, dispatch_has_backend_fallback

    table = kernels_for(op)  # the registrations, alias keys included
    kind_of_key, backend = _split_key(key)

    def registered(k: str):
        where = table.get(k)
        return None if where is None else ("fallthrough" if where.startswith("fallthrough") else None, where)

    def entry(kind: str, k: str):
        fallthrough, where = registered(k)
        return (fallthrough or kind, where.removeprefix("fallthrough, "))

    if key in table:  # 1. a kernel registered at this key
        return entry("kernel", key)
    if kind_of_key == "backend":  # 2.1, 2.2
        nonfunctional_ok = backend not in ("XLA", "Lazy")
        if nonfunctional_ok and "CompositeExplicitAutogradNonFunctional" in table:
            return entry("default backend kernel", "CompositeExplicitAutogradNonFunctional")
        if "CompositeExplicitAutograd" in table:
            return entry("default backend kernel", "CompositeExplicitAutograd")
    if kind_of_key in ("backend", "autograd"):  # 2.3
        has_backend_kernel = "CompositeExplicitAutograd" in table
        if kind_of_key == "autograd":
            has_backend_kernel |= any(v + backend in table for v in _BACKEND_VARIANTS)
        if "CompositeImplicitAutograd" in table and not has_backend_kernel:
            return entry("math kernel", "CompositeImplicitAutograd")
    if kind_of_key == "autograd" and "Autograd" in table:  # 2.4
        return entry("autograd kernel", "Autograd")
    if key == "FuncTorchBatched" and "FuncTorchBatchedDecomposition" in table:  # 2.5
        return entry("batched kernel", "FuncTorchBatchedDecomposition")
    if dispatch_has_backend_fallback(getattr(DispatchKey, key)):  # 3.
        # A fallback is per key; a few keys register a fallthrough as their fallback.
        return ("fallthrough" if key in _FALLTHROUGH_FALLBACKS else "backend fallback"), "fallback"
    return None  # 4. missing

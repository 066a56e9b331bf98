"""A custom op whose kernels report when they run: the dispatcher's order, observed.

Place in the pipeline: beside it; chapter 07's experiment. ``Probe`` defines
``minidynamo_probe::probe(Tensor x) -> Tensor`` with ``torch.library`` and registers
a Python kernel at each key of ``PROBE_KEYS``. Each kernel reports a ``"dispatch"``
event (key, handler, the key set it received) and then redispatches to the next key,
exactly as C++ kernels do. ``trace`` (trace.py) records those events.

Mirrors the redispatch idiom of ``torch/_library/autograd.py`` (``make_autograd_impl``)
and of the generated ``VariableType``/``ADInplaceOrView`` kernels::

    with torch._C._AutoDispatchBelowAutograd():            # TLS: autograd off below
        op.redispatch(keyset & keys_after(Autograd), x)     # keyset: skip what ran

Note [Redispatch with the key set, not from the top]
    A kernel that simply called ``op(x)`` again would re-enter the dispatcher from
    the top and run every higher key a second time. Each probe kernel therefore
    receives the call's key set (``with_keyset=True``) and redispatches with
    ``keyset & full_after(its key)``: the next kernel is the next lower key.

Note [No probe kernel at the Python key]
    A kernel registered at the Python key would replace the Python fallback, and
    then no TorchDispatchMode or tensor subclass would ever see the op. The handler
    at the Python key is the mode or the subclass's ``__torch_dispatch__``; trace's
    logging mode (or a FakeTensorMode) reports that step.

Note [The PythonTLSSnapshot probe stands in for a C++ fallback]
    Torch's PythonTLSSnapshot kernel is a fallback that saves the Python TLS (the
    mode stack) and redispatches. Our probe kernel at that key replaces it for this
    op only, logs and redispatches; for one call nothing changes, because the Python
    fallback then reads the same TLS it would have found in the snapshot.
"""

from __future__ import annotations

import torch

from minidynamo import events

__all__ = ["PROBE_KEYS", "Probe", "probe", "NAMESPACE"]

NAMESPACE = "minidynamo_probe"
# Every key a probe kernel can sit on, highest priority first (see key_set.PRIORITY).
PROBE_KEYS = (
    "PreDispatch",
    "PythonTLSSnapshot",
    "Autograd",
    "ADInplaceOrView",
    "Functionalize",
    "CPU",
    "Meta",
)
# Keys whose kernel computes the result instead of redispatching.
_BACKENDS = ("CPU", "Meta")

_def_lib = None
_open_probe: "Probe | None" = None


def _schema_op():
    """Define minidynamo_probe::probe once per process and return its OpOverload."""
    global _def_lib
    if _def_lib is None:
        lib = torch.library.Library(NAMESPACE, "DEF")
        lib.define("probe(Tensor x) -> Tensor")
        _def_lib = lib
    return getattr(torch.ops, NAMESPACE).probe.default


def _keyset_names(keyset) -> tuple[str, ...]:
    """A torch DispatchKeySet as names, highest priority first (its str lists lowest first)."""
    text = str(keyset)
    inner = text[text.index("(") + 1 : text.rindex(")")]
    return tuple(reversed([name for name in inner.split(", ") if name]))


def _report(key: str, handler: str, op, keyset=None, phase: str = "forward") -> None:
    events.emit(
        "dispatch",
        op=str(op),
        key=key,
        handler=handler,
        keyset=_keyset_names(keyset) if keyset is not None else None,
        phase=phase,
        inferred=False,
    )


class Probe:
    """Register probe kernels at ``keys``; ``probe.op`` is the OpOverload to call.

    Use as a context manager (the registrations are removed on exit), or call
    :meth:`close`. ``remove(key)`` drops one registration, so an experiment can
    show what changes without it. One Probe may be open at a time.
    """

    def __init__(self, keys=PROBE_KEYS):
        global _open_probe
        unknown = [k for k in keys if k not in PROBE_KEYS]
        if unknown:
            raise ValueError(f"Probe: no probe kernel for keys {unknown}; choose from {PROBE_KEYS}")
        if _open_probe is not None:
            raise RuntimeError("a Probe is already open; close it (or leave its with-block) before opening another")
        self.op = _schema_op()
        self._libs: dict[str, torch.library.Library] = {}
        _open_probe = self
        try:
            for key in keys:
                self.add(key)
        except BaseException:
            self.close()
            raise

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys that have a probe kernel now, highest priority first."""
        return tuple(k for k in PROBE_KEYS if k in self._libs)

    def add(self, key: str) -> "Probe":
        """Register the probe kernel at ``key``."""
        if key not in PROBE_KEYS:
            raise ValueError(f"Probe.add: no probe kernel for key {key!r}; choose from {PROBE_KEYS}")
        if key in self._libs:
            return self
        lib = torch.library.Library(NAMESPACE, "IMPL")
        kernel = _autograd_kernel(self.op) if key == "Autograd" else _kernel(self.op, key)
        lib.impl("probe", kernel, key, with_keyset=True)
        self._libs[key] = lib
        return self

    def remove(self, key: str) -> "Probe":
        """Drop the probe kernel at ``key`` (the dispatcher then uses its fallback there)."""
        if key not in self._libs:
            raise KeyError(f"Probe.remove: no probe kernel registered at {key!r}; registered: {self.keys}")
        self._libs.pop(key)._destroy()
        return self

    def close(self) -> None:
        global _open_probe
        for key in list(self._libs):
            self.remove(key)
        if _open_probe is self:
            _open_probe = None

    def __call__(self, x):
        return self.op(x)

    def __enter__(self) -> "Probe":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Probe({NAMESPACE}.probe, kernels at {list(self.keys)})"


def probe(keys=PROBE_KEYS) -> Probe:
    """``with dispatch.probe() as p: dispatch.trace(p, x)``: see :class:`Probe`."""
    return Probe(keys)


def _kernel(op, key: str):
    from minidynamo._torch_private import (
        DispatchKey,
        DispatchKeySet,
        ExcludeDispatchKeyGuard,
        dispatch_keyset_full_after,
        from_functional_tensor,
        to_functional_tensor,
    )

    after = dispatch_keyset_full_after(getattr(DispatchKey, key))

    def kernel(keyset, x):
        _report(key, f"probe kernel at {key}", op, keyset)
        if key == "CPU":
            return x * 2
        if key == "Meta":
            return torch.empty_like(x)
        if key == "Functionalize":
            # As the real functionalization kernels do: unwrap, run below, wrap.
            with ExcludeDispatchKeyGuard(DispatchKeySet(DispatchKey.Functionalize)):
                out = op.redispatch(keyset & after, from_functional_tensor(x))
            return to_functional_tensor(out)
        # Note [Redispatch with the key set, not from the top]
        return op.redispatch(keyset & after, x)

    kernel.__name__ = f"probe_{key}_kernel"
    return kernel


def _autograd_kernel(op):
    from minidynamo._torch_private import AutoDispatchBelowAutograd, after_autograd_keyset

    class Probe(torch.autograd.Function):  # its autograd node is named ProbeBackward
        @staticmethod
        def forward(ctx, keyset, x):
            with AutoDispatchBelowAutograd():
                return op.redispatch(keyset & after_autograd_keyset, x)

        @staticmethod
        def backward(ctx, grad):
            _report("Autograd", "ProbeBackward node (autograd engine)", op, phase="backward")
            return None, grad * 2

    def kernel(keyset, x):
        _report("Autograd", "probe kernel at Autograd", op, keyset)
        return Probe.apply(keyset, x)

    return kernel

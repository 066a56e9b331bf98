"""Backends: what runs a captured graph. ``backend(gm, example_inputs) -> callable``.

Place in the pipeline: the end of Dynamo's half. Each compiled fx graph is handed to
the backend once; the callable it returns is what the transformed function calls.
Mirrors ``torch/_dynamo/backends/`` (``debugging.py``: ``eager``, ``aot_eager``;
``inductor.py``: ``inductor``) and
``torch/_dynamo/backends/registry.py`` (``lookup_backend``).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch

from minidynamo import events


def eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """Run the captured fx graph as Python (no further compilation)."""
    return gm.forward


def aot_eager(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """AOTAutograd, then run its forward and backward graphs eagerly: torch's ``aot_eager``.

    The graph goes through mini AOTAutograd (``minidynamo.aot.aot_module_simplified``):
    metadata (FakeTensor pass 2), joint graph (pass 3), then, as torch's backend
    does, the min-cut rematerialization partition, and input mutations of
    inference graphs kept inside the graph (``keep_inference_input_mutations``).

    Note [Why aot_eager partitions by min-cut]: torch's ``aot_eager``
    (``torch/_dynamo/backends/debugging.py``: "AOT Autograd backend with nop
    compiler. It is helpful in debugging.") passes
    ``partition_fn=min_cut_rematerialization_partition``, the partitioner Inductor
    uses (``partition_fn`` in ``torch/_inductor/compile_fx.py``). So the forward and
    backward it runs are split by the same algorithm as Inductor's (without
    Inductor's decompositions; ``aot_eager_decomp_partition`` adds them, and the
    partitioner's ``compiler="inductor"`` setting): when a model fails under
    Inductor but not under ``aot_eager``, the partition is not the suspect. The default partition stays one name away,
    ``aot_eager_default_partitioner``.
    """
    from minidynamo.aot import aot_module_simplified
    from minidynamo.aot.min_cut_partition import min_cut_rematerialization_partition

    return aot_module_simplified(gm, example_inputs, partition_fn=min_cut_rematerialization_partition,
                                 keep_inference_input_mutations=True)


def aot_eager_default_partitioner(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """``aot_eager`` with the default partition (torch: the backend of the same name)."""
    from minidynamo.aot import aot_module_simplified

    return aot_module_simplified(gm, example_inputs, keep_inference_input_mutations=True)


def inductor(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """Our AOTAutograd, then torch's Inductor compiles each graph it makes (minidynamo/compile_fx.py)."""
    from minidynamo.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)


aot_eager_default_partition = aot_eager_default_partitioner  # our earlier name, kept for old callers


# --- dynamic graphs: one symbolic compile, else one per size ------------------------------
#
# Note [AOT backends specialize per size]
#     A graph with SymInt placeholders handed to ``aot_eager`` is traced by our
#     AOTAutograd once, over the same symbols (``minidynamo/aot/sym_tracing.py``,
#     Note [AOT traces Dynamo's symbols]): its forward and backward graphs take
#     SymInt inputs and serve every size, as torch's do, and the decisions AOT
#     makes on sizes join this ShapeEnv's guards (installed after the backend
#     returns). Only when that symbolic trace fails (an op or a construct it does
#     not handle: a metadata mutation of an input, a size expression it cannot
#     write as graph nodes) does the backend fall back to being called lazily,
#     once per distinct set of input sizes (``specialize_per_size``), reported as
#     an ``"aot_symbolic_failed"`` event and then an ``"aot_specialized"`` event
#     per size: never a graph traced for one size run on another. The ``eager``
#     backend and user callables get the symbolic graph itself, as torch's do.


def graph_is_dynamic(gm: torch.fx.GraphModule) -> bool:
    return any(isinstance(n.meta.get("example_value"), torch.SymInt) for n in gm.graph.nodes if n.op == "placeholder")


def compile_symbolic_or_per_size(backend: Callable, gm: torch.fx.GraphModule, example_inputs: list, name: str) -> Callable:
    """Note [AOT backends specialize per size]: the symbolic AOT compile, else one compile per size."""
    from minidynamo.aot.sym_tracing import SymbolicAOTFailed

    try:
        return backend(gm, example_inputs)
    except SymbolicAOTFailed as exc:
        events.emit("aot_symbolic_failed", graph=name, reason=str(exc))
        return specialize_per_size(backend, gm, name)


def specialize_per_size(backend: Callable, gm: torch.fx.GraphModule, name: str) -> Callable:
    """Note [AOT backends specialize per size]: ``backend`` called once per distinct input sizes."""
    compiled: dict = {}

    def key(args):
        return tuple((tuple(a.shape), a.stride(), a.dtype, a.requires_grad) if isinstance(a, torch.Tensor) else
                     (type(a), a) for a in args)

    def run(*args):
        k = key(args)
        fn = compiled.get(k)
        if fn is None:
            events.emit("aot_specialized", graph=name, sizes=[a for a in k])
            from minidynamo.aot.sym_tracing import static_copy

            with warnings.catch_warnings():
                fn = compiled[k] = backend(static_copy(gm), list(args))
        return fn(*args)

    run.specializations = compiled
    return run


BACKENDS: dict[str, Callable] = {
    "inductor": inductor,
    "eager": eager, "aot_eager": aot_eager,
    "aot_eager_default_partitioner": aot_eager_default_partitioner,  # torch's name
    "aot_eager_default_partition": aot_eager_default_partitioner,  # our earlier name
}


class InvalidBackend(RuntimeError, ValueError):
    """A backend name nobody registered (torch/_dynamo/exc.py ``InvalidBackend``, a RuntimeError; ours is
    a ValueError too, as it was before it took torch's name)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"Invalid backend: {name!r}, known: {sorted(BACKENDS)} or a callable(gm, example_inputs)")


def lookup_backend(backend: Any) -> Callable:
    """A backend name ("eager", "aot_eager", "aot_eager_default_partitioner", "inductor") or any
    ``callable(gm, example_inputs)``."""
    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise InvalidBackend(backend)  # torch/_dynamo/backends/registry.py: lookup_backend
        return BACKENDS[backend]
    if callable(backend):
        return backend
    raise TypeError(f"backend must be a name or a callable(gm, example_inputs), not {type(backend).__name__}")


# Note [mode= and options= go to the backend]
#     ``torch.compile(fn, backend=b, mode=..., options=...)`` wraps ``b`` in a
#     ``_TorchCompileWrapper`` (torch/__init__.py) that calls ``b(gm, example_inputs, mode=...,
#     options=...)`` when ``mode`` is not None or "default", or ``options`` is not empty. torch's
#     ``eager`` (torch/_dynamo/backends/debugging.py) and aot_autograd backends
#     (torch/_dynamo/backends/common.py) log "eager backend ignoring extra kwargs {...}" and run
#     the graph; a callable that takes no such keyword raises TypeError, which torch reports as
#     ``BackendCompilerFailed``. Ours hands them on the same way, and our named backends warn in
#     torch's words. Only torch's Inductor reads them (``mode="reduce-overhead"``: CUDA graphs);
#     our ``inductor`` backend hands Inductor the graphs without them, and says so.

_IGNORING = {"eager": "eager backend", "aot_eager": "aot_autograd-based backend",
             "aot_eager_default_partitioner": "aot_autograd-based backend", "inductor": "minidynamo's inductor backend"}


def with_backend_kwargs(backend: Callable, mode: Any = None, options: Any = None) -> Callable:
    """The backend ``md.compile(..., mode=, options=)`` calls (Note [mode= and options= go to the backend])."""
    kwargs: dict = {}
    if mode and mode != "default":
        kwargs["mode"] = mode
    if options:
        kwargs["options"] = options
    if not kwargs:
        return backend
    ours = next((name for name, fn in BACKENDS.items() if fn is backend), None)
    if ours is not None:
        warnings.warn(f"{_IGNORING.get(ours, ours + ' backend')} ignoring extra kwargs {kwargs}", stacklevel=4)
        return backend

    def call_with_kwargs(gm, example_inputs):
        return backend(gm, example_inputs, **kwargs)

    call_with_kwargs.__name__ = getattr(backend, "__name__", type(backend).__name__)
    return call_with_kwargs

"""Backends: what runs a captured graph. ``backend(gm, example_inputs) -> callable``.

Place in the pipeline: the end of Dynamo's half. Each compiled fx graph is handed to
the backend once; the callable it returns is what the transformed function calls.
Mirrors ``torch/_dynamo/backends/`` (``debugging.py``: ``eager``, ``aot_eager``) and
``torch/_dynamo/backends/registry.py`` (``lookup_backend``).
"""

from __future__ import annotations

from typing import Any, Callable

import torch


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
    partitioner's ``compiler="inductor"`` setting): when a model fails under Inductor but not under ``aot_eager``, the
    partition is not the suspect. The default partition stays one name away,
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


aot_eager_default_partition = aot_eager_default_partitioner  # our earlier name, kept for old callers


BACKENDS: dict[str, Callable] = {
    "eager": eager, "aot_eager": aot_eager,
    "aot_eager_default_partitioner": aot_eager_default_partitioner,  # torch's name
    "aot_eager_default_partition": aot_eager_default_partitioner,  # our earlier name
}


def lookup_backend(backend: Any) -> Callable:
    """A backend name ("eager", "aot_eager", "aot_eager_default_partitioner") or any ``callable(gm, example_inputs)``."""
    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; known: {sorted(BACKENDS)} or a callable(gm, example_inputs)")
        return BACKENDS[backend]
    if callable(backend):
        return backend
    raise TypeError(f"backend must be a name or a callable(gm, example_inputs), not {type(backend).__name__}")

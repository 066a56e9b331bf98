"""Backends: what runs a captured graph. ``backend(gm, example_inputs) -> callable``.

Place in the pipeline: the end of Dynamo's half. Each compiled fx graph is handed to
the backend once; the callable it returns is what the transformed function calls.
Mirrors ``torch/_dynamo/backends/`` (``debugging.py``: ``eager``, ``aot_eager``;
``inductor.py``: ``inductor``) and
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
    """
    from minidynamo.aot import aot_module_simplified
    from minidynamo.aot.min_cut_partition import min_cut_rematerialization_partition

    return aot_module_simplified(gm, example_inputs, partition_fn=min_cut_rematerialization_partition,
                                 keep_inference_input_mutations=True)


def aot_eager_default_partition(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """``aot_eager`` with the default partition (torch: the backend of the same name)."""
    from minidynamo.aot import aot_module_simplified

    return aot_module_simplified(gm, example_inputs, keep_inference_input_mutations=True)


def inductor(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    """Our AOTAutograd, then torch's Inductor compiles each graph it makes (minidynamo/compile_fx.py)."""
    from minidynamo.compile_fx import compile_fx

    return compile_fx(gm, example_inputs)


BACKENDS: dict[str, Callable] = {
    "inductor": inductor,
    "eager": eager, "aot_eager": aot_eager,
    "aot_eager_default_partitioner": aot_eager_default_partition,  # torch's name
    "aot_eager_default_partition": aot_eager_default_partition,
}


def lookup_backend(backend: Any) -> Callable:
    """A backend name ("eager", "aot_eager", "aot_eager_default_partition", "inductor") or any ``callable(gm, example_inputs)``."""
    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; known: {sorted(BACKENDS)} or a callable(gm, example_inputs)")
        return BACKENDS[backend]
    if callable(backend):
        return backend
    raise TypeError(f"backend must be a name or a callable(gm, example_inputs), not {type(backend).__name__}")

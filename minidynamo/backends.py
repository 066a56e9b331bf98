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
    """AOTAutograd, then run its forward and backward graphs eagerly.

    The graph goes through mini AOTAutograd (``minidynamo.aot.aot_module_simplified``):
    metadata (FakeTensor pass 2), joint graph (pass 3), default partition; the
    forward and backward graphs then run as they are.
    """
    from minidynamo.aot import aot_module_simplified

    return aot_module_simplified(gm, example_inputs)


BACKENDS: dict[str, Callable] = {"eager": eager, "aot_eager": aot_eager}


def lookup_backend(backend: Any) -> Callable:
    """A backend name ("eager", "aot_eager") or any ``callable(gm, example_inputs)``."""
    if isinstance(backend, str):
        if backend not in BACKENDS:
            raise ValueError(f"unknown backend {backend!r}; known: {sorted(BACKENDS)} or a callable(gm, example_inputs)")
        return BACKENDS[backend]
    if callable(backend):
        return backend
    raise TypeError(f"backend must be a name or a callable(gm, example_inputs), not {type(backend).__name__}")

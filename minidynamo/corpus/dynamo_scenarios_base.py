"""The registry of the Dynamo scenarios and the helpers their cases share (``dynamo_scenarios.py`` runs them).

Place in the pipeline: none; a corpus. Each ``dynamo_scenarios_*`` case module registers
its scenarios here with ``@scenario(source)``; ``dynamo_scenarios.py`` imports the case
modules and runs what they registered, so the case modules never import their runner.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

__all__ = ["Scenario", "SCENARIOS", "scenario"]


@dataclasses.dataclass
class Scenario:
    name: str
    script: Callable  # script(compile) -> None
    source: str  # the PyTorch test it restates
    backend: str = "eager"  # what our counting backend hands the graph to
    dynamic: Any = None


SCENARIOS: dict[str, Scenario] = {}


def scenario(source: str, *, backend: str = "eager", dynamic=None):
    def register(script):
        assert script.__name__ not in SCENARIOS, script.__name__
        SCENARIOS[script.__name__] = Scenario(script.__name__, script, source, backend, dynamic)
        return script

    return register


def _x(*shape, seed=0):
    """A random tensor from its own seeded generator: the same values in every run (the cases' inputs)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _seeded(cls, *args, seed=0):
    """``cls(*args)`` built after ``torch.manual_seed(seed)``: the same parameters in every run."""
    torch.manual_seed(seed)
    return cls(*args)

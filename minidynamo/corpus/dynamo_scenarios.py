"""Scenarios: a compiled callable called several times while the world around it changes.

Place in the pipeline: none; a corpus (user code to minidynamo) and its comparer, like
``dynamic_compare``. A scenario is a function of one argument, ``compile``: it builds a
fresh world (modules, globals, hooks), wraps what it calls with ``compile(target)``, then
calls it, changes something (a global, a module attribute, a hook, the parameters'
order), and calls again. ``run(scenario, system)`` runs it with ``system`` one of
``"eager"`` (``compile`` is the identity), ``"ours"`` (``md.compile`` with a counting
backend) or ``"torch"`` (``torch.compile`` with a counting eager backend). Each call
logs its result, or the exception it raised, what it printed, and its arguments after
the call (mutations); ``note(value)`` logs what the scenario reads of the world (a
global, ``mod.text_encoding is out``). After each call the run records how many graphs
the backend has been handed so far: torch's ``CompileCounter.frame_count``.

The cases are ported, in our own words, from PyTorch's test/dynamo: test_recompiles.py,
test_global.py, test_modules.py, test_misc.py, test_functions.py and test_ctx_manager.py
(``dynamo_scenarios_globals``, ``dynamo_scenarios_values``, ``dynamo_scenarios_modules``,
``dynamo_scenarios_hooks``, ``dynamo_scenarios_training``, ``dynamo_scenarios_objects``,
``dynamo_scenarios_control``);
each names its source test. ``tests/test_ported_scenarios.py`` requires our log to equal eager's on every
scenario, no internal error of ours, and our graph counts to equal torch's except where
a listed reason says why they differ.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import warnings
from typing import Any, Callable

import torch
import torch.nn as nn

__all__ = ["Scenario", "SCENARIOS", "scenario", "Run", "run", "snapshot"]


from .dynamo_scenarios_base import SCENARIOS, Scenario, scenario  # noqa: F401 - the registry the case modules fill


def snapshot(v) -> Any:
    """A copy of ``v`` that later mutations cannot change, comparable with ``dynamo_testing.same``."""
    if isinstance(v, torch.Tensor):
        return ("tensor", v.detach().clone(), v.requires_grad, v.grad_fn is None)
    if isinstance(v, nn.Module):
        return ("module", type(v).__name__, {k: snapshot(t) for k, t in v.state_dict().items()})
    if isinstance(v, list):
        return [snapshot(x) for x in v]
    if isinstance(v, tuple):
        return ("tuple", type(v).__name__, [snapshot(x) for x in v])
    if isinstance(v, dict):
        return {k: snapshot(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, float, str, torch.dtype, torch.device)):
        return v
    if hasattr(v, "__dict__"):
        return ("object", type(v).__name__, {k: snapshot(x) for k, x in vars(v).items() if not k.startswith("_")})
    return ("repr", repr(v))


@dataclasses.dataclass
class Run:
    log: list  # ("returned", result, args, printed) | ("raised", type name, message, printed) | ("note", value)
    counts: list  # graphs handed to the backend after each call
    warnings: list  # the texts of the warnings raised during the run

    @property
    def internal_errors(self) -> list:
        return [w for w in self.warnings if w.startswith("minidynamo: tracing")]


class _Caller:
    """Calls ``fn`` and logs what happened (``fn`` eager, or compiled by the system)."""

    def __init__(self, fn, run: Run, graphs: list):
        self.fn, self.run, self.graphs = fn, run, graphs

    def __call__(self, *args, **kwargs):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                result = self.fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001  (the user's exception is part of what is compared)
            self.run.log.append(("raised", type(e).__name__, str(e), out.getvalue()))
            result = None
        else:
            self.run.log.append(("returned", snapshot(result), snapshot(args), out.getvalue()))
        self.run.counts.append(len(self.graphs))
        return result

    def note(self, value) -> None:
        self.run.log.append(("note", snapshot(value)))


def _counting(graphs: list, inner: Callable) -> Callable:
    def backend(gm, example_inputs):
        graphs.append(gm)
        return inner(gm, example_inputs)

    return backend


def run(case: Scenario, system: str) -> Run:
    """Run ``case`` once in a fresh world, with ``system`` ("eager", "ours" or "torch")."""
    import minidynamo as md
    from minidynamo.backends import lookup_backend
    from minidynamo._torch_private import dynamo_reset

    result, graphs = Run([], [], []), []
    if system == "eager":
        def compile(fn):
            return _Caller(fn, result, graphs)
    elif system == "ours":
        md.reset()
        backend = _counting(graphs, lookup_backend(case.backend))

        def compile(fn):
            return _Caller(md.compile(fn, backend=backend, dynamic=case.dynamic), result, graphs)
    elif system == "torch":
        dynamo_reset()
        backend = _counting(graphs, lambda gm, example_inputs: gm.forward)

        def compile(fn):
            return _Caller(torch.compile(fn, backend=backend, dynamic=case.dynamic), result, graphs)
    else:
        raise ValueError(system)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.manual_seed(0)
        case.script(compile)
    result.warnings = [str(w.message) for w in caught]
    if system == "ours":
        md.reset()
    elif system == "torch":
        dynamo_reset()
    return result


# the case modules register themselves on import (after the machinery above)
from . import dynamo_scenarios_globals, dynamo_scenarios_values  # noqa: E402,F401
from . import dynamo_scenarios_modules, dynamo_scenarios_hooks, dynamo_scenarios_training  # noqa: E402,F401
from . import dynamo_scenarios_objects, dynamo_scenarios_control  # noqa: E402,F401

"""The differential corpus for the symbolic interpreter (chapters 3-5).

Place in the pipeline: beside ``minidynamo.symbolic``. Every case is a small
function plus a factory that builds fresh, seeded inputs. The tests in
``tests/test_dynamo_differential.py`` run each case three ways: eagerly, through
``md.compile`` and through ``md.explain``, and compare with plain CPython (values
and input mutations) and with ``torch._dynamo.explain`` (graph and break counts).

The real counterpart is PyTorch's ``test/dynamo/test_functions.py`` and
``test/dynamo/test_misc.py``: many tiny functions, each checked with
``torch._dynamo.testing.standard_test`` against eager.

A case is registered with one of three decorators, named after the chapter it
belongs to: ``@tracing`` (chapter 3: what the symbolic interpreter traces),
``@guarded`` (chapter 4: functions whose compiled code depends on guarded
Python values; ``alt`` gives a second input set that must fail a guard) and
``@breaks`` (chapter 5: graph breaks).

Cases with global or object state use ``reset`` (called before every run) and
``observe`` (the state to compare after every run), so eager and compiled runs
start from the same state and their side effects are compared too.

The cases live in themed modules, imported here in the corpus's order (which is the order
of ``CASES``): ``dynamo_testing`` (``Case``, the registry, ``T``, ``same``),
``dynamo_helpers`` (what the cases share), ``dynamo_tracing_values``,
``dynamo_tracing_control``, ``dynamo_tracing_torch``, ``dynamo_tracing_more`` (chapter 3),
``dynamo_guards`` (chapter 4) and ``dynamo_breaks`` (chapter 5).
"""

from __future__ import annotations

from . import dynamo_tracing_values, dynamo_tracing_control, dynamo_tracing_torch, dynamo_tracing_more  # noqa: F401
from . import dynamo_guards, dynamo_breaks  # noqa: F401
from .dynamo_testing import CASES, Case, T, same

__all__ = ["Case", "CASES", "AOT_CASES", "KNOWN_DIFFERENCES", "same", "T"]

AOT_CASES = [name for name, c in CASES.items() if c.aot]

# Cases where our graph_count / graph_break_count differ from torch._dynamo.explain
# ON PURPOSE, each with the reason. Chapter 5 prints this table; the differential
# test checks that each listed case really differs, so the table cannot go stale.
KNOWN_DIFFERENCES: dict[str, str] = {}

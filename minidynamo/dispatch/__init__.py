"""The dispatcher made visible (chapter 07): keys, the handlers that really run, kernel tables.

Place in the pipeline: under every stage that calls an ATen op (see ``keys.py``).
Mirrors ``aten/src/ATen/core/dispatch/Dispatcher.h`` and ``OperatorEntry.cpp``.

    dispatch.keys(t)           dispatch keys of a call on t, highest priority first
    dispatch.trace(fn, *args)  the handlers that really ran, in order (a Trace)
    dispatch.kernels_for(op)   the keys an OpOverload has kernels registered for
    dispatch.computed_kernel(op, key)    what a runtime key gets, by the dispatcher's rule
    dispatch.torch_table_entry(op, key)  the same entry read from torch's own table
"""

from __future__ import annotations

from minidynamo.dispatch.key_set import BACKENDS, PRIORITY, keys, order, tensor_keys, tls_excluded, tls_included
from minidynamo.dispatch.probe import PROBE_KEYS, Probe, probe
from minidynamo.dispatch.tables import KernelTable, computed_kernel, kernels_for, torch_table_entry
from minidynamo.dispatch.trace import Step, Trace, trace

__all__ = [
    "BACKENDS",
    "PRIORITY",
    "PROBE_KEYS",
    "KernelTable",
    "Probe",
    "Step",
    "Trace",
    "computed_kernel",
    "keys",
    "kernels_for",
    "order",
    "probe",
    "tensor_keys",
    "tls_excluded",
    "tls_included",
    "torch_table_entry",
    "trace",
]

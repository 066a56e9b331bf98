"""Fake values: every traced tensor op computes its output's metadata at once (FakeTensor pass 1).

Place in the pipeline: the symbolic interpreter calls :func:`get_fake_value` for each
tensor op it records; the fake mode (``minidynamo.fake``) runs the op on meta tensors
and reports each ATen op to the event log under the current pass ("dynamo").
Mirrors ``torch/_dynamo/utils.py`` (``get_fake_value``, ``run_node``) and the
``wrap_to_fake_tensor_and_record`` step of ``torch/_dynamo/variables/builder.py``.

Note [One door to the fake mode]
    Everything the interpreter knows about a tensor it did not really compute (shape,
    dtype, strides, requires_grad) comes from running the op on fake inputs here, in
    one function. Swapping the fake implementation (meta tensors, our FakeTensorMode,
    the real one) touches only this file.
"""

from __future__ import annotations

import contextlib
import sys

from typing import Any, Callable

import torch

from minidynamo._torch_private import tree_map

from . import graph_break_registry as gb
from .exc import TracedUserError, unimplemented  # noqa: F401 - TracedUserError: importable from here


def make_fake_mode():
    """A fresh fake mode for one trace (one per OutputGraph, as in Dynamo)."""
    from minidynamo.fake import FakeTensorMode

    return FakeTensorMode()


def wrap_to_fake(mode, value: torch.Tensor) -> torch.Tensor:
    """The fake twin of a real input tensor (same shape, strides, dtype, requires_grad)."""
    return mode.from_tensor(value)


def _data_dependent_errors() -> tuple[type, ...]:
    from minidynamo import fake

    errs = [getattr(fake, n) for n in ("DataDependentOutputError", "DynamicOutputShapeException") if hasattr(fake, n)]
    return tuple(errs)


def _unsupported_errors() -> tuple[type, ...]:
    from minidynamo import fake

    return (NotImplementedError,) + ((fake.UnsupportedOperatorError,) if hasattr(fake, "UnsupportedOperatorError") else ())


def _guard_on_data_dependent() -> tuple[type, ...]:
    """Our ShapeEnv's GuardOnDataDependentSymNode, only once the ShapeEnv is loaded: without it no
    unbacked symbol exists, and a static compile never imports sympy (tests/test_cold_start.py)."""
    module = sys.modules.get("minidynamo.shapes.symbolic_shapes")
    return (module.GuardOnDataDependentSymNode,) if module is not None else ()


def get_fake_value(mode, fn: Callable, args: tuple, kwargs: dict, what: str, dynamic_output=None) -> Any:
    """Run ``fn(*args, **kwargs)`` on fake values (args already hold fake tensors).

    A data-dependent op (``.item()``, ``nonzero``) cannot be faked: that is a graph break.
    Any other failure is the user's own error (a shape mismatch), surfaced with the op.
    """
    try:
        # with symbols, as torch's get_fake_value: the Python dispatcher routes CompositeImplicit ops
        # (F.interpolate's upsample_nearest1d.vec) to their Python decompositions, which take SymInts
        with mode, (mode._symbolic_kernels() if getattr(mode, "shape_env", None) is not None
                    else contextlib.nullcontext()):
            return fn(*args, **kwargs)
    except _data_dependent_errors() as e:
        if dynamic_output is not None:  # capture_dynamic_output_shape_ops: an unbacked size (unbacked.py)
            out = dynamic_output(fn, args, kwargs)
            if out is not None:
                return out
        kind = gb.DYNAMIC_SHAPE_OPERATOR if getattr(e, "dynamic_shape", False) else gb.DATA_DEPENDENT_OPERATOR
        unimplemented(f"data-dependent operator {what}: its output depends on tensor values", "the output depends on "
                      "tensor values", gb_id=kind, context=f"{type(e).__name__}: {e}")
    except _guard_on_data_dependent() as e:
        unimplemented(f"data-dependent decision in {what}", "torch._check the value first",
                      gb_id=gb.DATA_DEPENDENT_BRANCH, context=f"{type(e).__name__}: {e}")
    except _unsupported_errors() as e:
        unimplemented(f"{what} is not supported on fake tensors", gb_id=gb.NO_FAKE_KERNEL, context=str(e))
    except Exception as e:
        raise TracedUserError(f"{what} raised {type(e).__name__} while tracing on fake tensors: {e}") from e


def map_fake(fn: Callable, tree: Any) -> Any:
    return tree_map(fn, tree)

"""NumPy in a traced frame: an ndarray is a tensor in the graph, a NumPy call a call of torch's NumPy.

Place in the pipeline: symbolic (Dynamo), beside ``tensor.py``. With ``config.trace_numpy``
(torch's name and default, True), ``Tensor.numpy()``, ``np.*`` calls, ndarray operators and
ndarray arguments of the frame go into the graph instead of breaking it. Mirrors
``torch/_dynamo/variables/tensor.py`` (``NumpyNdarrayVariable``), ``variables/misc.py``
(``NumpyVariable``, ``get_np_to_tnp_map``), ``variables/builder.py`` (``wrap_numpy_ndarray``)
and the wrappers of ``torch/_dynamo/utils.py`` (``numpy_to_tensor_wrapper``,
``numpy_method_wrapper``, ``numpy_operator_wrapper``, ``numpy_attr_wrapper``,
``to_numpy_helper``).

Note [NumPy is traced through torch._numpy]
    ``torch._numpy`` is torch's NumPy written on tensors: ``tnp.ndarray`` holds a tensor,
    and ``tnp.sum``, ``tnp.where``, ``tnp.random.rand`` follow NumPy's rules (float64 by
    default, NumPy's type promotion) with torch ops. It is the library the graph calls,
    not a stage of the pipeline this course rebuilds, so it is imported through
    ``_torch_private`` and used as it is. What Dynamo adds, and what this module rebuilds:
    in the graph an ndarray is a plain tensor; each NumPy operation is one
    ``call_function`` node whose target is a small wrapper (``wrapped_sum``...) that
    turns its tensor arguments into ``tnp.ndarray``, calls torch's NumPy, and turns the
    result back into a tensor. The fake run of that node (FakeTensor pass 1) is the same
    code on fake tensors, so a NumPy result whose value the trace cannot know
    (``float(a.sum())``, ``np.random.rand()`` returning a Python float) is a
    data-dependent graph break, as in torch. After the graph, an ndarray that the rest
    of the program sees is turned back into a real ``np.ndarray``
    (``to_numpy_helper``): the user gets the type eager gives, except that a 0-d result
    stays a 0-d ndarray where NumPy gives a scalar (torch does the same).
"""

from __future__ import annotations

import functools
import operator
from typing import Any

import numpy as np
import torch

from minidynamo import config
from minidynamo._torch_private import torch_numpy

from ..exc import unimplemented
from .. import graph_break_registry as gb
from .base import GetAttrVariable, VariableTracker
from .constant import ConstantVariable
from .tensor import NUMPY_OF_TENSOR, TensorVariable, _symbolic, size_variable

NP_MODULES = ("", "fft", "linalg", "random")  # np, np.fft, np.linalg, np.random (torch's NP_TO_TNP_MODULE)


@functools.lru_cache(maxsize=1)
def np_to_tnp_map() -> dict[int, tuple[Any, Any]]:
    """``id(np function) -> (np function, torch._numpy function)`` (torch: ``get_np_to_tnp_map``)."""
    tnp = torch_numpy()
    out = {}
    for sub in NP_MODULES:
        np_mod = getattr(np, sub) if sub else np
        tnp_mod = getattr(tnp, sub) if sub else tnp
        for name, tnp_fn in vars(tnp_mod).items():
            np_fn = getattr(np_mod, name, None)
            if callable(tnp_fn) and np_fn is not None and not name.startswith("_"):
                out[id(np_fn)] = (np_fn, tnp_fn)
    return out


@functools.lru_cache(maxsize=1)
def numpy_function_ids() -> dict[int, Any]:
    """``id -> object`` of every callable NumPy defines in np, np.fft, np.linalg, np.random: what torch
    traces as a NumPy call, or breaks on when torch._numpy lacks it (torch: ``trace_rules._numpy_function_ids``)."""
    out = {}
    for sub in NP_MODULES:
        mod = getattr(np, sub) if sub else np
        for name, value in vars(mod).items():
            module = getattr(value, "__module__", None) if callable(value) else ""
            if module is None or module == mod.__name__ or (
                    module == "numpy.random.mtrand" and sub == "random" and name not in _NOT_TRACED_RANDOM):
                out[id(value)] = value
    return out


_NOT_TRACED_RANDOM = {"seed", "ranf", "get_bit_generator", "RandomState", "set_bit_generator", "sample"}


def is_numpy_callable(value: Any) -> bool:
    """A function (or scalar type) of np, np.fft, np.linalg or np.random (torch: ``trace_rules.is_numpy``)."""
    return numpy_function_ids().get(id(value)) is value


# --- the graph's targets (torch/_dynamo/utils.py) -----------------------------------------

def numpy_to_tensor(value: Any) -> Any:
    """A ``tnp.ndarray`` (or an ``np.ndarray``) as the tensor the graph passes on; others as they are."""
    tnp = torch_numpy()
    if isinstance(value, tnp.ndarray):
        return value.tensor
    if isinstance(value, np.ndarray):
        return torch.as_tensor(value)
    if isinstance(value, (tuple, list)):
        return type(value)(numpy_to_tensor(v) for v in value)
    return value


def _as_tnp(value: Any) -> Any:
    return torch_numpy().ndarray(value) if isinstance(value, torch.Tensor) else value


class numpy_to_tensor_wrapper:  # noqa: N801 - torch's name
    """``np.sum(a)`` in the graph: ``tnp.sum`` on the tensors, the result as a tensor."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = f"wrapped_{fn.__name__}"

    def __repr__(self) -> str:
        return f"<Wrapped function <original {self.fn.__name__}>>"

    def __call__(self, *args, **kwargs):
        return numpy_to_tensor(self.fn(*args, **kwargs))


class numpy_method_wrapper:  # noqa: N801 - torch's name
    """``a.reshape(2, 2)`` in the graph: the method of ``tnp.ndarray(a)``, the result as a tensor."""

    def __init__(self, method: str):
        self.method = method
        self.__name__ = f"wrapped_{method}"

    def __repr__(self) -> str:
        return f"<Wrapped method <original {self.method}>>"

    def __call__(self, *args, **kwargs):
        return numpy_to_tensor(getattr(_as_tnp(args[0]), self.method)(*args[1:], **kwargs))


class numpy_operator_wrapper:  # noqa: N801 - torch's name
    """``a * 2`` in the graph: the operator on ``tnp.ndarray`` (NumPy's promotion), the result as a tensor."""

    def __init__(self, op):
        self.op = op
        self.__name__ = f"wrapped_{op.__name__}"

    def __repr__(self) -> str:
        return f"<Wrapped operator <original {self.__name__}>>"

    def __call__(self, *args):
        return numpy_to_tensor(self.op(*(_as_tnp(a) for a in args)))


def numpy_attr_wrapper(obj: Any, name: str) -> Any:
    """``a.T`` in the graph."""
    return numpy_to_tensor(getattr(_as_tnp(obj), name))


def to_numpy_helper(value: Any) -> Any:
    """After the graph: a tensor that stands for an ndarray becomes the real ``np.ndarray``."""
    if isinstance(value, torch.Tensor):
        return value.numpy(force=True)
    if isinstance(value, (tuple, list)):
        return type(value)(to_numpy_helper(v) for v in value)
    return value


# --- the trackers -------------------------------------------------------------------------

def _ndarray_result(tx, kind: str, target: Any, args: tuple, kwargs: dict) -> VariableTracker:
    """One node, its fake value; a tensor result is an ndarray again (torch: ``NumpyNdarrayVariable.create``)."""
    result = tx.wrap_fx_proxy(kind, target, args, kwargs)
    if type(result) is TensorVariable:
        return NumpyNdarrayVariable(result.proxy, result.example_value)
    items = getattr(result, "items", None)
    if isinstance(items, list) and any(type(i) is TensorVariable for i in items):
        result.items = [NumpyNdarrayVariable(i.proxy, i.example_value) if type(i) is TensorVariable else i
                        for i in items]
    return result


def _proxies(args, kwargs) -> tuple[tuple, dict]:
    return tuple(a.as_proxy() for a in args), {k: v.as_proxy() for k, v in kwargs.items()}


def is_ndarray(var: VariableTracker) -> bool:
    return isinstance(var, NumpyNdarrayVariable)


def call_numpy_operator(tx, fn, args: list) -> VariableTracker | None:
    """An operator on ndarrays, none of them a tensor: NumPy's operator in the graph (torch: builtin.py).

    With a tensor among the operands torch prefers the tensor's operator (so does eager:
    ``Tensor.__array_priority__``); that one is the caller's. None when this is not ours.
    """
    if not any(is_ndarray(a) for a in args) or any(type(a) is TensorVariable for a in args):
        return None
    return _ndarray_result(tx, "call_function", numpy_operator_wrapper(fn), tuple(a.as_proxy() for a in args), {})


def from_tensor(tx, tensor: TensorVariable, force: bool = False) -> "NumpyNdarrayVariable":
    """``Tensor.numpy()`` (torch: ``TensorVariable.method_numpy``): a view of the tensor, marked an ndarray."""
    if not config.trace_numpy:
        unimplemented("Tensor.numpy() was called, but the trace_numpy configuration was manually disabled",
                      "set minidynamo.config.trace_numpy = True to trace through NumPy", gb_id=gb.NUMPY,
                      context=f"call_method {tensor} numpy")
    if force:
        detached = tx.wrap_fx_proxy("call_method", "detach", (tensor.proxy,), {})
        result = tx.wrap_fx_proxy("call_method", "cpu", (detached.proxy,), {})
    else:
        result = tx.wrap_fx_proxy("call_method", "view_as", (tensor.proxy, tensor.proxy), {})
    return NumpyNdarrayVariable(result.proxy, result.example_value)


NUMPY_OF_TENSOR.append(from_tensor)


class NumpyNdarrayVariable(TensorVariable):
    """An ``np.ndarray`` while tracing: a tensor in the graph, NumPy's rules for every operation on it."""

    def python_type(self) -> type:
        return np.ndarray

    def var_getattr(self, tx, name: str) -> VariableTracker:
        # As torch's: not TensorVariable's attributes; ndarray's are unrelated
        example = torch_numpy().ndarray(self.example_value)
        if name in ("T", "real", "imag", "flat"):
            return _ndarray_result(tx, "call_function", numpy_attr_wrapper, (self.proxy, name), {})
        if name in ("shape", "size") and _symbolic(self.example_value.shape):
            # a dynamic ndarray: its sizes stay symbols, as a tensor's do (torch: insert_into_graph)
            fake = self.example_value
            if name == "shape":
                return size_variable(tx, self, tuple(fake.shape), ("size", ()))
            return size_variable(tx, self, fake.numel(), ("numel", ()))
        if name in ("ndim", "itemsize", "shape", "size"):  # metadata the fake value knows: folded
            value = getattr(example, name)
            return ConstantVariable(tuple(int(v) for v in value) if name == "shape" else int(value))
        if name in ("base", "flags", "dtype"):
            unimplemented(f"Dynamo currently does not support tracing `ndarray.{name}`.", gb_id="GB0157",
                          context=f"var_getattr {self} {name}")
        if name == "__version__":
            unimplemented("Dynamo currently does not support tracing `ndarray.__version__`.", gb_id="GB0159",
                          context=f"var_getattr {self} {name}")
        if callable(getattr(torch_numpy().ndarray, name, None)):
            return GetAttrVariable(self, name)
        unimplemented(f"ndarray attribute {name!r} is not modelled in torch._numpy", gb_id="GB0157",
                      context=f"var_getattr {self} {name}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "astype":
            dtype = kwargs.get("dtype", args[0] if args else None)
            if dtype is not None and dtype.is_python_constant() and dtype.as_python_constant() in ("O", object):
                unimplemented("`ndarray.astype('O')` or `ndarray.astype(object)` is not supported by torch.compile, "
                              "as there is no equivalent to object type in torch.Tensor.", gb_id="GB0250",
                              context=f"call_method {self} {name}")
        if name in ("__len__", "tolist", "__iter__"):  # as a tensor's (torch delegates these)
            return super().call_method(tx, name, args, kwargs)
        if name in ("tostring", "tobytes", "__delattr__"):
            unimplemented(f"`ndarray.{name}()` is not modelled in `torch._numpy`.", gb_id="GB0158",
                          context=f"call_method {self} {name}")
        if name == "__getitem__" and len(args) == 1 and not kwargs:  # a[i]: BINARY_SUBSCR, NumPy's indexing
            return _ndarray_result(tx, "call_function", numpy_operator_wrapper(operator.getitem),
                                   (self.proxy, args[0].as_proxy()), {})
        if name == "clip":  # torch's patch_args: tnp's clip names its bounds min/max
            kwargs = {{"a_min": "min", "a_max": "max"}.get(k, k): v for k, v in kwargs.items()}
        pargs, pkw = _proxies(args, kwargs)
        return _ndarray_result(tx, "call_function", numpy_method_wrapper(name), (self.proxy, *pargs), pkw)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        # ``for row in a``: a tensor's rows, each an ndarray again (torch keeps ``type(self)``)
        return [NumpyNdarrayVariable(v.proxy, v.example_value) for v in super().unpack_var_sequence(tx)]

    def reconstruct(self, codegen) -> str:
        if self.source is not None:  # a frame argument: the user's own ndarray (its NumpyTensorSource's base)
            return codegen.source_expr(self.source.base)
        return f"{codegen.install(to_numpy_helper, '___to_numpy_helper')}({codegen.tensor_expr(self)})"

    def __repr__(self) -> str:
        v = self.example_value
        return f"NumpyNdarrayVariable({self.proxy.node.name}, {v.dtype}, {tuple(v.shape)})"


class NumpyVariable(VariableTracker):
    """A function of ``np`` (``np.sum``, ``np.random.rand``, ``np.float32``): traced as torch._numpy's."""

    def __init__(self, value: Any, **kwargs):
        super().__init__(**kwargs)
        self.value = value

    def as_python_constant(self) -> Any:
        return self.value

    def python_type(self) -> type:
        return type(self.value)

    def as_proxy(self) -> Any:
        # ``a.astype(np.float64)``: a NumPy scalar type goes into the graph by its name, which
        # torch._numpy reads as that dtype (torch: NumpyVariable.as_proxy), not as a class
        if isinstance(self.value, type):
            return self.value.__name__
        return self.value

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        name = getattr(self.value, "__name__", repr(self.value))
        if not config.trace_numpy:
            unimplemented(f"Attempted to trace numpy function {name} while `minidynamo.config.trace_numpy` "
                          "was set to False.", "set minidynamo.config.trace_numpy = True", gb_id="GB0293",
                          context=f"numpy function: {self.value}")
        entry = np_to_tnp_map().get(id(self.value))
        if entry is None or entry[0] is not self.value:
            unimplemented(f"Can't find numpy function {name} in torch._numpy.", gb_id="GB0294",
                          context=f"numpy function: {self.value}")
        fn = entry[1]
        if getattr(fn, "__module__", "") == "torch._numpy.random" and config.use_numpy_random_stream:
            unimplemented(f"Attempted to trace {name} when `minidynamo.config.use_numpy_random_stream` is set "
                          "to True.", f"set use_numpy_random_stream to False, or avoid calling {name}",
                          gb_id="GB0298", context=f"numpy function: {self.value}")
        if getattr(fn, "__name__", "") == "clip":
            kwargs = {{"a_min": "min", "a_max": "max"}.get(k, k): v for k, v in kwargs.items()}
        pargs, pkw = _proxies(args, kwargs)
        return _ndarray_result(tx, "call_function", numpy_to_tensor_wrapper(fn), pargs, pkw)

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        unimplemented("Tracing numpy.* functions as methods is not supported.", gb_id="GB0290",
                      context=f"numpy function: {self.value}.{name}")

    def reconstruct(self, codegen) -> str:
        return codegen.constant_expr(self.value)

    def __repr__(self) -> str:
        return f"NumpyVariable({getattr(self.value, '__name__', self.value)})"

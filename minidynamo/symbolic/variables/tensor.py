"""TensorVariable: a tensor while tracing = an fx.Proxy (graph node) + a FakeTensor (its metadata).

Place in the pipeline: every tensor op the interpreter meets adds a node to the fx graph
and runs once on fake values (FakeTensor pass 1). Mirrors
``torch/_dynamo/variables/tensor.py`` and ``wrap_fx_proxy`` in ``variables/builder.py``.

Note [Metadata is known, data is not]
    ``x.shape``, ``x.dtype``, ``x.dim()`` come from the fake value and fold to constants.
    ``x.item()``, ``x.tolist()`` and ``bool(x)`` need data the tracer does not have:
    each is a graph break.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from minidynamo import config

from ..exc import unimplemented
from .. import graph_break_registry as gb
from .base import VariableTracker
from .constant import ConstantVariable

# Methods whose result depends only on metadata: evaluated on the fake value, folded.
CONSTANT_METHODS = {
    "size", "dim", "ndimension", "numel", "nelement", "element_size", "is_contiguous",
    "is_floating_point", "is_complex", "stride", "storage_offset", "get_device", "type",
}
CONSTANT_ATTRS = {"shape", "dtype", "device", "ndim", "requires_grad", "is_leaf", "layout", "is_cuda",
                  "is_sparse", "is_quantized", "is_meta", "itemsize", "is_nested"}
RETAIN_GRAD = gb.gb_id_of("Tensor.retain_grad() with AOTDispatcher")

# Methods that need data (or change autograd state) the tracer cannot fake: graph breaks.
BREAK_METHOD_TYPES = {  # torch's registry id for each (graph_break_registry.py)
    "item": gb.ITEM, "__bool__": gb.ITEM, "__int__": gb.ITEM, "__float__": gb.ITEM, "tolist": gb.TOLIST,
    "numpy": gb.NUMPY, "backward": gb.BACKWARD, "requires_grad_": "GB0125",
}
BREAK_METHODS = {
    "item": "Tensor.item() needs the tensor's data (a Python number)",
    "tolist": "Tensor.tolist() needs the tensor's data",
    "numpy": "Tensor.numpy() leaves torch",
    "backward": "Tensor.backward() runs autograd eagerly",
    "__bool__": "bool(tensor) depends on the tensor's data",
    "__int__": "int(tensor) depends on the tensor's data",
    "__float__": "float(tensor) depends on the tensor's data",
    "requires_grad_": "requires_grad_ changes autograd metadata of an input",
    # torch/_dynamo/variables/tensor.py: method_resize_, method_resize_as_, method_sparse_resize_*
    "resize_": "Dynamo currently does not support tracing `Tensor.resize_()`.",
    "resize_as_": "Dynamo currently does not support tracing `Tensor.resize_as_()`.",
    "sparse_resize_": "Dynamo currently does not support tracing `Tensor.sparse_resize_()`.",
    "sparse_resize_and_clear_": "Dynamo currently does not support tracing `Tensor.sparse_resize_and_clear_()`.",
}


# ``Tensor.numpy()`` under config.trace_numpy: variables/numpy.py, which sits above this module
# (the import contracts of pyproject.toml), registers its ``from_tensor`` here when imported.
NUMPY_OF_TENSOR: list = []


def is_inplace_view(name: str) -> bool:
    """Is ``aten.<name>`` tagged ``inplace_view`` (``t_``, ``unsqueeze_``, ``as_strided_``, ``set_``...)?"""
    packet = getattr(torch.ops.aten, name, None) if name.endswith("_") else None
    overloads = packet.overloads() if packet is not None and hasattr(packet, "overloads") else []
    return bool(overloads) and torch.Tag.inplace_view in getattr(packet, overloads[0]).tags


class TensorVariable(VariableTracker):
    """A tensor: ``proxy`` (fx.Proxy in the graph) and ``example_value`` (a FakeTensor)."""

    def __init__(self, proxy: torch.fx.Proxy, example_value: torch.Tensor, **kwargs):
        super().__init__(**kwargs)
        self.proxy = proxy
        self.example_value = example_value
        self.class_type = torch.Tensor  # an input's is its real class (builder.py), never the FakeTensor's

    def as_proxy(self) -> torch.fx.Proxy:
        return self.proxy

    def python_type(self) -> type:
        """``type(x)`` as eager sees it: Tensor, Parameter or a subclass (guarded by TYPE_MATCH)."""
        return self.class_type

    def set_name_hint(self, name: str) -> None:
        """A node stored in a local is renamed after it, once: ``y = x.sin()`` names the node ``y``.

        As torch's ``TensorVariable.set_name_hint`` (torch/_dynamo/variables/tensor.py, called by
        ``STORE_FAST`` in symbolic_convert.py); a placeholder keeps its name. fx makes the name
        unique (``x``, ``x_1``) and never a builtin's (``input`` -> ``input_1``).
        """
        node = self.proxy.node if isinstance(self.proxy, torch.fx.Proxy) else None
        if node is not None and node.op != "placeholder" and not node.meta.get("name_set"):
            node._rename(name)
            node.meta["name_set"] = True

    def as_python_constant(self) -> Any:
        unimplemented("a tensor is not a Python constant", gb_id=gb.NOT_A_CONSTANT)

    def truth(self, tx) -> bool:
        unimplemented(
            "data-dependent control flow: the branch depends on a tensor's value",
            "compute both sides with torch.where, or move the test out of the compiled function",
            gb_id=gb.DATA_DEPENDENT_BRANCH, context=f"attempted to jump with {self}",
        )

    def var_getattr(self, tx, name: str) -> VariableTracker:
        fake = self.example_value
        stored = tx.output.side_effects.load_attr(self, name)  # Note [A tensor's own attribute is a side effect]
        if stored is not None:
            return stored
        if name == "__class__":
            return tx.wrap_sourceless(self.python_type())
        if name == "retain_grad":  # torch breaks at the attribute, not the call (tensor.py method_attr_retain_grad)
            unimplemented("`Tensor.retain_grad()` does not work with AOTDispatcher.", gb_id=RETAIN_GRAD,
                          context=f"var_getattr {self} retain_grad")
        if name in CONSTANT_ATTRS:
            value = getattr(fake, name)
            if name == "shape" and _symbolic(value):
                return _sizes(tx, self, value, ("size", ()))
            return ConstantVariable(value)
        if name in ("T", "mT", "H", "mH", "real", "imag"):
            return tx.wrap_fx_proxy("call_function", getattr, (self.proxy, name), {})
        if name == "grad" and self.source is not None:
            # ``x.grad`` of an input: torch reads it through its source (AttrSource(x, "grad")),
            # a graph input or None under a guard, as any attribute of an input
            from ..source import AttrSource

            try:
                grad = self.source.get(tx.output.L, tx.output.root_globals).grad
            except Exception:  # noqa: BLE001 - a source we cannot evaluate here
                unimplemented("reading Tensor.grad of this tensor is not traced", gb_id=gb.UNSUPPORTED_METHOD)
            return tx.variable_builder(AttrSource(self.source, "grad"))(grad)
        if name == "grad":
            unimplemented("reading Tensor.grad is not traced", gb_id=gb.UNSUPPORTED_METHOD)
        if name == "data":  # torch: a call_function node (``torch._C._autograd._get_data_attr``), an op of the graph
            return tx.wrap_fx_proxy("call_function", torch.detach, (self.proxy,), {})
        if hasattr(torch.Tensor, name) and callable(getattr(torch.Tensor, name)):
            from .base import GetAttrVariable

            return GetAttrVariable(self, name)
        if self.source is not None and not hasattr(torch.Tensor, name):
            # an attribute of the input tensor's own (``x.note``, set earlier in Python): read
            # through its source and guarded, as any attribute of an input
            from ..source import AttrSource

            try:
                real = self.source.get(tx.output.L, tx.output.root_globals)
            except Exception:  # noqa: BLE001 - a source only the transformed code can read (a random value)
                real = None
            if name in getattr(real, "__dict__", {}):
                return tx.variable_builder(AttrSource(self.source, name))(real.__dict__[name])
        if not hasattr(torch.Tensor, name) and not name.startswith("_"):
            self._raise_missing_attribute(tx, name)
        unimplemented(f"Tensor attribute {name!r}", gb_id=gb.UNSUPPORTED_METHOD)

    def _raise_missing_attribute(self, tx, name: str) -> None:
        """``x.no_such_attr``: eager's AttributeError, raised in the trace (an observed exception,
        torch's TensorVariable.var_getattr); an input's is guarded absent, as for an object
        (Note [What the trace found missing is guarded], tests/test_exceptions_like_torch.py)."""
        if self.source is not None:
            try:
                real = self.source.get(tx.output.L, tx.output.root_globals)
            except Exception:  # noqa: BLE001 - a source we cannot read here: break as before
                return
            if hasattr(real, name):
                return
            expr = f"not hasattr({tx.output.guards.read_expr(self.source)}, {name!r})"
            tx.output.guards.add(self.source, "HASATTR", expr, f"the trace found no attribute {name!r}")
        tx.raise_observed_exception(AttributeError, [f"'Tensor' object has no attribute {name!r}"])

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name in ("__int__", "__float__") and not args and config.capture_scalar_outputs and (
                self.example_value.dtype.is_floating_point is (name == "__float__")) and self.example_value.numel() == 1:
            name = "item"  # int(t) of an int tensor, float(t) of a float one: torch's item (unbacked.py)
        if name == "__deepcopy__":  # copy.deepcopy(t) reaches it (torch/_dynamo/variables/tensor.py call_method)
            unimplemented("copy.deepcopy of a tensor is not traced", "avoid calling copy.deepcopy() on a tensor",
                          gb_id=gb.DEEPCOPY_TENSOR, context=f"{self}.__deepcopy__()")
        if name in ("data_ptr", "const_data_ptr") and not args and not kwargs:  # Note [A data pointer is read after the graph]
            return DataPtrVariable(self, name)
        if name in ("register_hook", "register_post_accumulate_grad_hook") and len(args) == 1 and not kwargs:
            return tx.register_tensor_hook(self, args[0], name)  # Note [A hook on a tensor of the trace is a node]
        if name == "untyped_storage" and not args and not kwargs:  # Note [A storage is its tensor's, after the graph]
            return UntypedStorageVariable(self, self.example_value.untyped_storage())
        if name in ("item", "tolist") and not args and not kwargs:  # unbacked symbols, or a break (unbacked.py)
            from .unbacked import call_item, call_tolist

            return call_item(tx, self) if name == "item" else call_tolist(tx, self)
        if name == "requires_grad_" and self.source is None:
            # on an intermediate tensor it is an ordinary op in the graph, unless what it
            # taints is returned (Note [A requires_grad_() intermediate returned breaks], instruction_translator.py)
            root = getattr(tx.output, "root_tx", None)
            if root is not None and getattr(root, "current_inst", None) is not None:
                result = tx.wrap_fx_proxy("call_method", name, (self.proxy,) + tuple(a.as_proxy() for a in args),
                                       {k: v.as_proxy() for k, v in kwargs.items()})
                root.note_requires_grad_(self.proxy.node, result.proxy.node)
                return result
        elif name == "numpy" and config.trace_numpy and NUMPY_OF_TENSOR and self.example_value.layout == torch.strided:
            force = kwargs.get("force", args[0] if args else None)  # Note [NumPy is traced through torch._numpy]
            return NUMPY_OF_TENSOR[0](tx, self, force=bool(force is not None and force.as_python_constant()))
        elif name in BREAK_METHODS:
            unimplemented(BREAK_METHODS[name], "keep tensors as tensors inside the compiled region",
                          gb_id=BREAK_METHOD_TYPES.get(name, gb.UNSUPPORTED_METHOD), context=f"{self}.{name}()")
        # Note [An in-place view of a graph input breaks the graph]: torch's var_getattr
        # (torch/_dynamo/variables/tensor.py) returns a DelayGraphBreakVariable for an inplace_view
        # method of a tensor with a source ("It's hard to get inplace view (metadata mutation) on
        # graph input work properly across dynamo/aot/inductor, just fall back"), and method_set_
        # breaks on set_ with more than one argument. Ours breaks at the same calls; AOTAutograd
        # (chapter 11) still handles these ops when it is given them directly.
        if self.source is not None and is_inplace_view(name):
            unimplemented("Getting an inplace view on a graph input is not supported",
                          "apply the in-place view to a clone, or outside the compiled function",
                          gb_id="GB0148", context=f"{self}.{name}()")
        if name == "set_" and len(args) + len(kwargs) > 1:
            unimplemented("Dynamo currently does not support tracing `Tensor.set_()` overloads that include "
                          "more than one argument.", gb_id="GB0128")
        if name in CONSTANT_METHODS:
            cargs = [a.as_python_constant() for a in args]
            ckw = {k: v.as_python_constant() for k, v in kwargs.items()}
            if name == "type" and (cargs or ckw):
                pass  # x.type(torch.float16) is a conversion: trace it below
            else:
                value = getattr(self.example_value, name)(*cargs, **ckw)
                if _symbolic(value):  # a symbolic size (dynamic_shapes.py)
                    return _sizes(tx, self, value, (name, tuple(cargs)))
                return tx.wrap_constant_result(value)
        if name == "__len__":
            if self.example_value.dim() and _symbolic(self.example_value.shape[0]):
                return _sizes(tx, self, self.example_value.shape[0], ("size", (0,)))
            return ConstantVariable(len(self.example_value))
        if name in ("__setitem__",):
            return tx.store_subscr(self, args[0], args[1])
        if name == "__getitem__" and len(args) == 1 and not kwargs:  # x.__getitem__(i), torch.Tensor.__getitem__(x, i)
            import operator

            if type(args[0]).__name__ == "SymNodeVariable":  # as BINARY_SUBSCR: torch.select keeps it symbolic
                return tx.wrap_fx_proxy("call_function", torch.select, (self.proxy, 0, args[0].as_proxy()), {})
            return tx.wrap_fx_proxy("call_function", operator.getitem, (self.proxy, args[0].as_proxy()), {})
        if not hasattr(torch.Tensor, name):
            unimplemented(f"Tensor has no method {name!r}", gb_id=gb.UNSUPPORTED_METHOD)
        if name == "new" and len(args) == 1 and isinstance(args[0], ConstantVariable) \
                and isinstance(args[0].value, torch.Size):
            # Note [Tensor.new with a Size]: ``x.new(torch.Size([5, 8]))`` means a shape, but
            # fx stores a torch.Size argument as a plain tuple, and ``x.new((5, 8))`` means
            # data; pass the sizes as separate ints, which mean a shape either way.
            # an empty Size is a 0-d shape, but ``x.new()`` is shape (0,): break on that one
            if len(args[0].value) == 0:
                unimplemented("Tensor.new with an empty torch.Size", gb_id=gb.UNSUPPORTED_METHOD)
            args = [ConstantVariable(int(d)) for d in args[0].value]
        if name == "type" and len(args) == 1 and args[0].is_python_constant() \
                and type(args[0].as_python_constant()).__name__ == "tensortype":
            # ``x.type(torch.HalfTensor)``: a legacy tensor-type class, which fx cannot store
            # as an argument; its dotted name means the same conversion to ``Tensor.type``
            cls = args[0].as_python_constant()
            args = [ConstantVariable(f"{cls.__module__}.{cls.__name__}")]
        pargs = tuple(a.as_proxy() for a in args)
        pkw = {k: v.as_proxy() for k, v in kwargs.items()}
        return tx.wrap_fx_proxy("call_method", name, (self.proxy,) + pargs, pkw)

    def unpack_var_sequence(self, tx) -> list[VariableTracker]:
        if self.example_value.dim() == 0:
            unimplemented("iteration over a 0-d tensor", gb_id=gb.OBSERVED_EXCEPTION)
        n = self.example_value.shape[0]
        return [tx.wrap_fx_proxy("call_function", operator.getitem, (self.proxy, i), {}) for i in range(n)]

    def reconstruct(self, codegen) -> str:
        return codegen.tensor_expr(self)

    def __repr__(self) -> str:
        v = self.example_value
        return f"TensorVariable({self.proxy.node.name}, {v.dtype}, {tuple(v.shape)})"


class UnspecializedPythonVariable(TensorVariable):
    """A Python number the graph takes as a 0-d tensor input (torch's ``UnspecializedPythonVariable``).

    Inside the trace it is a tensor (``y * k`` is ``mul(y, random_value_0)``); after the
    graph it is the number itself, read from ``raw_source`` (Note [A random number is a
    graph input], misc.py).
    """

    raw_source = None

    def reconstruct(self, codegen) -> str:
        if self.raw_source is not None:
            return codegen.source_expr(self.raw_source)
        return super().reconstruct(codegen)


class UntypedStorageVariable(VariableTracker):
    """``t.untyped_storage()`` of a tensor of the trace (torch/_dynamo/variables/tensor.py ``UntypedStorageVariable``).

    Note [A storage is its tensor's, after the graph]
        Torch's ``method_untyped_storage`` traces the call with no node: the tracker holds
        the tensor and the fake tensor's (meta) storage. ``s.size()`` is its byte count,
        a constant of the trace when no size is symbolic; any other method (``nbytes``,
        ``data_ptr``...) is an unsupported method call, a graph break at that line, not
        at ``untyped_storage()``. After the graph the storage is rebuilt from the real
        tensor: ``<tensor>.untyped_storage()``. Ours does the same; a symbolic ``size()``
        (torch: an ``untyped_storage_size`` node) breaks in ours.
    """

    def __init__(self, from_tensor: "TensorVariable", example_value, **kwargs):
        super().__init__(**kwargs)
        self.from_tensor = from_tensor
        self.example_value = example_value  # the fake tensor's storage (device meta)

    def python_type(self) -> type:
        return torch.UntypedStorage

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "size" and not args and not kwargs:
            result = self.example_value.size()
            if not _symbolic(result):
                return ConstantVariable(int(result))
        unimplemented(f"Dynamo does not know how to trace method `{name}` of class `UntypedStorage`",
                      f"Avoid calling `UntypedStorage.{name}` in your code.", gb_id=gb.UNSUPPORTED_METHOD,
                      context=f"call_method UntypedStorageVariable() {name} {args} {kwargs}")

    def reconstruct(self, codegen) -> str:
        return f"{codegen.expr(self.from_tensor)}.untyped_storage()"

    def __repr__(self) -> str:
        return f"UntypedStorageVariable({self.from_tensor!r})"


class DataPtrVariable(VariableTracker):
    """``t.data_ptr()`` of a tensor of the trace (torch: ``DataPtrVariable``, torch/_dynamo/variables/tensor.py).

    Note [A data pointer is read after the graph]
        An address exists only once the graph has run and allocated the tensor: the
        trace cannot know it, but it need not. Torch's ``method_data_ptr`` returns a
        ``DataPtrVariable`` that holds the tensor, and its ``reconstruct`` emits
        ``<tensor>.data_ptr()``: the number is computed by the transformed function,
        after the graph, from the real tensor, with no graph break. Ours does the same.
        Anything the trace would do with the number itself (arithmetic, a comparison
        torch cannot prove) still breaks, as torch's does.
    """

    def __init__(self, from_tensor: "TensorVariable", method_name: str = "data_ptr", **kwargs):
        super().__init__(**kwargs)
        self.from_tensor = from_tensor
        self.method_name = method_name
        self.tensor_version = from_tensor.example_value._version

    def python_type(self) -> type:
        return int

    def _root(self) -> torch.fx.Node:
        """The tensor's node, through ``detach()`` (which keeps the data pointer)."""
        node = self.from_tensor.as_proxy().node
        while (node.op, node.target) in (("call_method", "detach"), ("call_function", torch.detach)) \
                and len(node.args) == 1 and isinstance(node.args[0], torch.fx.Node):
            node = node.args[0]
        return node

    def compare(self, other: VariableTracker, op: str) -> VariableTracker:
        """``p == q`` / ``p != q``: decided only where both are one tensor's pointer (torch's ``richcompare_impl``)."""
        if isinstance(other, DataPtrVariable) and other.tensor_version == self.tensor_version \
                and other._root() is self._root():
            return ConstantVariable(op == "__eq__")
        unimplemented("Dynamo can only trace data pointer comparisons when it can prove both operands have the "
                      "same data pointer.", gb_id="GB5976", context=f"richcompare_impl {self} {op} {other}")

    def reconstruct(self, codegen) -> str:
        return f"{codegen.expr(self.from_tensor)}.{self.method_name}()"

    def __repr__(self) -> str:
        return f"DataPtrVariable({self.from_tensor!r}.{self.method_name}())"


# Note [A tensor's own attribute is a side effect]
#     ``y.tag = "mine"`` on a tensor (an input or one made in the trace) changes nothing
#     the graph computes. Torch's ``BuiltinVariable._call_setattr`` (torch/_dynamo/
#     variables/builtin.py) records it in ``side_effects.store_attr``: reads of ``y.tag``
#     later in the trace see the stored value, and after the graph the transformed code
#     sets the attribute on the real tensor, if the tensor is still reachable (a dead
#     one is pruned, ``SideEffects.prune_dead_object_new``). Tensor attributes that are
#     C descriptors (``requires_grad``, ``grad``, ``real``, ``data``...) are not plain
#     attributes: ``data`` has its own path, the others stay graph breaks, as torch's.
def store_tensor_attr(tx, obj: "TensorVariable", name: str, value: VariableTracker) -> bool:
    """Record ``obj.name = value`` as a side effect (Note [A tensor's own attribute ...]); False if not ours."""
    import inspect
    import types

    if name == "requires_grad":
        unimplemented("setting requires_grad in the middle of the graph is not traced",
                      "set it outside the compiled function", gb_id="GB0206",
                      context=f"setattr({obj}, {name}, {value})")
    if name in ("grad", "_grad"):
        return False
    if type(inspect.getattr_static(torch.Tensor, name, None)) is types.GetSetDescriptorType:
        unimplemented(f"tensor attribute {name!r} has a C setter the trace does not follow",
                      f"don't set {name!r} on tensors in the compiled function", gb_id=gb.TENSOR_SETATTR,
                      context=f"setattr({obj}, {name}, {value})")
    tx.output.side_effects.store_attr(obj, name, value)
    return True


def _symbolic(value: Any) -> bool:
    """Does a metadata result hold a SymInt (a dynamic trace)? A static trace never pays for the import."""
    if isinstance(value, (tuple, list)):
        return any(isinstance(v, torch.SymInt) for v in value)
    return isinstance(value, (torch.SymInt, torch.SymBool))


def _sizes(tx, var, value, how):
    return size_variable(tx, var, value, how)


def size_variable(tx, tensor_var, value: Any, how: tuple):
    """``x.size(0)`` / ``x.shape`` / ``x.numel()`` when the result holds SymInts.

    A size that is exactly an input's symbol is that symbol's placeholder (as torch
    reuses ``s0``); any other expression is a ``Tensor.size``/``numel`` node.
    ``how`` is the method call that produced ``value``: ``("size", ())``, ``("size", (0,))``.
    """
    from minidynamo.shapes.symbolic_shapes import is_symbolic

    from .lists import TupleVariable
    from .sym_node import SymNodeVariable

    name, args = how

    def one(v, method, margs):
        if not is_symbolic(v):
            return ConstantVariable(int(v)) if isinstance(v, torch.SymInt) else tx.wrap_constant_result(v)
        proxy = tx.output.symbol_proxies.get(v.node.expr)
        if proxy is None:
            proxy = tx.output.create_proxy("call_method", method, (tensor_var.proxy, *margs), {})
            proxy.node.meta["example_value"] = v
        return SymNodeVariable(proxy, v)

    if isinstance(value, (tuple, list)):  # x.size() / x.shape (a torch.Size, as eager's) / x.stride() (a tuple)
        return TupleVariable([one(v, name, (i,)) for i, v in enumerate(value)],
                             tuple_cls=torch.Size if isinstance(value, torch.Size) else tuple)
    return one(value, name, args)

"""Values the trace cannot know: ``.item()`` and data-dependent sizes as unbacked symbols.

Place in the pipeline: ``TensorVariable.call_method("item")`` and the fake pass of
``nonzero``-like ops (``fake_values.get_fake_value``) come here when
``minidynamo.config.capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops`` are
on; ``torch._check`` and ``torch._check_is_size`` come here from ``torch.py``. Each value
gets an unbacked symbol of the trace's ShapeEnv (``u0``, ``zuf0``: Note [An unbacked symbol
has no value], shapes/symbolic_shapes.py) and stays in the graph instead of breaking it.
Mirrors ``torch/_dynamo/variables/tensor.py`` (``method_item`` under
``capture_scalar_outputs``), ``torch/_subclasses/fake_impls.py`` (``nonzero``,
``masked_select``: ``create_unbacked_symint`` with a range) and ``torch/_dynamo/variables/torch.py``
(``torch._check``).
"""

from __future__ import annotations

import torch

from minidynamo import config
from minidynamo._torch_private import torch_check_is_size

from .. import graph_break_registry as gb
from ..exc import unimplemented
from .base import VariableTracker
from .constant import ConstantVariable


def _env(tx):
    from ..dynamic_shapes import shape_env_of

    env = shape_env_of(tx.output)
    tx.output.fake_mode.shape_env = env
    return env


def call_item(tx, tensor) -> VariableTracker:
    """``t.item()``: a graph node whose value is a fresh unbacked symbol (torch: ``u0``, or ``zuf0`` for floats)."""
    from .sym_node import SymNodeVariable

    # torch/_dynamo/variables/tensor.py ``method_item``: "We enable capture_scalar_outputs when
    # full_graph=True by default" (``tx.one_graph``)
    if not config.capture_scalar_outputs and not getattr(tx.output, "fullgraph", False):
        unimplemented("Tensor.item() needs the tensor's data (a Python number)",
                      "set minidynamo.config.capture_scalar_outputs = True to keep it in the graph as a symbol "
                      "(torch._dynamo.config.capture_scalar_outputs)", gb_id=gb.ITEM)
    fake = tensor.example_value
    env = _env(tx)
    if fake.dtype is torch.bool:  # torch: an unbacked int in [0, 1], the bool is Eq(u0, 1)
        import sympy

        from minidynamo.shapes.sym_node import SymNode

        u = env.create_unbacked_symint("Tensor.item() of a bool tensor", 0, 1)
        env.creation_range.pop(u.node.expr, None)  # no assert node of its own: the bool is what the graph has
        value = torch.SymBool(SymNode(sympy.Eq(u.node.expr, 1), env, bool, None))
    else:
        value = (env.create_unbacked_symfloat("Tensor.item()") if fake.dtype.is_floating_point
                 else env.create_unbacked_symint("Tensor.item()"))
    proxy = tx.output.create_proxy("call_method", "item", (tensor.as_proxy(),), {})
    proxy.node.meta["example_value"] = value
    return SymNodeVariable(proxy, value)


def call_tolist(tx, tensor) -> VariableTracker:
    """``t.tolist()``: one ``item`` per element, through ``t[i]`` (torch's graph has the same getitems)."""
    import operator

    from .lists import ListVariable

    fake = tensor.example_value
    if fake.dtype not in (torch.int8, torch.int16, torch.int32, torch.int64):  # torch's method_tolist: a break
        unimplemented("Tensor.tolist() of a non-integer tensor needs the tensor's data",  # even when captured
                      "only integer tensors' tolist() is traced (torch/_dynamo/variables/tensor.py method_tolist)",
                      gb_id=gb.TOLIST)
    if not config.capture_scalar_outputs and not getattr(tx.output, "fullgraph", False):
        unimplemented("Tensor.tolist() needs the tensor's data",
                      "set minidynamo.config.capture_scalar_outputs = True to keep it in the graph as symbols",
                      gb_id=gb.TOLIST)
    fake = tensor.example_value
    if fake.dim() == 0:
        return call_item(tx, tensor)
    n = fake.shape[0]
    if not isinstance(n, int):
        unimplemented("Tensor.tolist() of a tensor whose first size is symbolic", gb_id=gb.TOLIST)
    return ListVariable([call_tolist(tx, tx.wrap_fx_proxy("call_function", operator.getitem, (tensor.as_proxy(), i), {}))
                         for i in range(n)])


# Ops whose output size depends on data: how many elements at most (the unbacked symbol's range).
def dynamic_output_shape(tx, func, fargs: tuple, fkwargs: dict):
    """The fake output of a data-dependent-size op, its size an unbacked symbol in ``[0, numel]``, or None."""
    if not config.capture_dynamic_output_shape_ops:
        return None
    name = getattr(func, "__name__", str(func))
    x = fargs[0] if fargs else None
    if not isinstance(x, torch.Tensor):
        return None
    env = _env(tx)
    with tx.output.fake_mode:
        if name == "nonzero" and not fkwargs:
            u = env.create_unbacked_symint("Tensor.nonzero()", 0, x.numel())
            # column-major, as torch's fake nonzero (torch/_subclasses/fake_impls.py ``nonzero``: strides (1, u0))
            return torch.empty_strided((u, x.dim()), (1, u), dtype=torch.int64, device=x.device)
        if name == "masked_select" and len(fargs) == 2:
            mask = fargs[1]
            n = torch.broadcast_shapes(x.shape, mask.shape).numel()
            u = env.create_unbacked_symint("torch.masked_select()", 0, n)
            return torch.empty((u,), dtype=x.dtype, device=x.device)
        if name in ("unique", "_unique2", "_unique") and not fkwargs and len(fargs) == 1:
            u = env.create_unbacked_symint("torch.unique()", 0, x.numel())
            return torch.empty((u,), dtype=x.dtype, device=x.device)
        if name == "getitem" and len(fargs) == 2 and isinstance(fargs[1], torch.Tensor) \
                and fargs[1].dtype is torch.bool and fargs[1].shape == x.shape:
            u = env.create_unbacked_symint("boolean-mask indexing", 0, x.numel())
            return torch.empty((u,), dtype=x.dtype, device=x.device)
    return None


def call_check(tx, fn, args: list, kwargs: dict) -> VariableTracker:
    """``torch._check(cond)`` / ``torch._check_is_size(u)``: a fact of the ShapeEnv and a node of the graph."""
    from .sym_node import SymNodeVariable

    if not args or kwargs:
        unimplemented(f"torch.{fn.__name__} with arguments {args} {kwargs}", gb_id=gb.DYNAMIC_SHAPE_OPERATOR)
    arg = args[0]
    if arg.is_python_constant():
        fn(arg.as_python_constant())  # the user's own error (as eager) when False
        return ConstantVariable(None)
    if not isinstance(arg, SymNodeVariable):
        unimplemented(f"torch.{fn.__name__} of {arg}", gb_id=gb.DYNAMIC_SHAPE_OPERATOR)
    node = arg.sym_num.node
    expr = node.expr >= 0 if fn is torch_check_is_size else node.expr
    what = f"torch.{fn.__name__}({node.expr})"
    node.shape_env.defer_runtime_assert(expr, what)
    # torch._check(u0 >= 2) and torch._check_is_size(u0) (as u0 >= 0) become the runtime asserts torch's
    # graph has (Note [A range the trace relied on is asserted in the graph], runtime_assert.py)
    proxy = arg.as_proxy()
    if fn is torch_check_is_size:
        import operator

        proxy = tx.output.create_proxy("call_function", operator.ge, (proxy, 0), {})
        proxy.node.meta["example_value"] = arg.sym_num >= 0
    tx.output.create_proxy("call_function", torch.ops.aten._assert_scalar.default, (
        proxy, f"Runtime assertion failed for expression {expr} on node '{proxy.node.name}'"), {})
    return ConstantVariable(None)


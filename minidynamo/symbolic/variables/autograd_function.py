"""``MyFunction.apply(x)`` of a custom ``torch.autograd.Function`` while tracing.

Place in the pipeline: ``UserDefinedClassVariable.var_getattr`` (user_class.py) hands ``cls.apply``
here; calling it either inlines ``forward`` (no input needs a gradient) or speculates ``forward``
as the body of a higher-order op and records the call as one node. Mirrors
``torch/_dynamo/variables/misc.py`` (``AutogradFunctionVariable.call_apply``,
``AutogradFunctionContextVariable``) and ``torch/_dynamo/variables/higher_order_ops.py``
(``AutogradFunctionApplyVariable``, whose ``_ALLOW_FALLBACK_TO_EAGER`` is true).

Note [autograd.Function.apply is speculated, then falls back]
    torch's ``call_apply`` takes one of two paths. With no input that needs a gradient (or grad
    mode off) it inlines ``forward`` with a context object, as any function: its ops land in the
    graph. Otherwise ``AutogradFunctionApplyVariable`` traces ``forward`` (and ``backward``) into
    subgraphs of a higher-order op; a graph break inside them is not replayed but passed on as a
    graph break at the ``.apply`` call itself (``add_hop_context``, the HOP's
    ``_ALLOW_FALLBACK_TO_EAGER``), with the inner break's type and message and the line
    ``Higher Order Operator: autograd.Function``. The eager ``.apply`` then runs the user's
    ``forward`` frame, which passes the frame hook and is compiled on its own (a printing forward:
    2 graphs). Ours takes both paths; on the second it speculates ``forward``, then ``backward``
    (with a gradient like each forward output, and a ctx whose saved tensors and tensor attributes
    are placeholders of its own), and where both trace it discards the subgraphs and records the
    call as the one opaque node it always made (Note [A custom autograd.Function in the graph],
    torch.py), not torch's ``autograd_function_apply`` node over the two subgraphs.
"""

from __future__ import annotations

import inspect
import types
from typing import Any

import torch

from .. import graph_break_registry as gb
from ..exc import UncapturedHigherOrderOpError, Unsupported, unimplemented
from ..source import AttrSource
from .base import VariableTracker
from .constant import ConstantVariable
from .functions import UserFunctionVariable
from .higher_order_ops import speculate_subgraph
from .lists import TupleVariable
from .new_object import NewObjectVariable
from .tensor import TensorVariable
from .torch import TorchInGraphFunctionVariable, autograd_function_apply

HOP_NAME = "autograd.Function"  # torch's AutogradFunctionApplyVariable._HOP_NAME
_CTX_METHODS = ("save_for_backward", "save_for_forward", "mark_dirty", "mark_non_differentiable",
                "set_materialize_grads")


class AutogradFunctionContextVariable(NewObjectVariable):
    """The ``ctx`` a traced ``forward`` receives (torch's ``AutogradFunctionContextVariable``, misc.py).

    Attributes set on it live here (``ctx.k = k``); ``save_for_backward`` keeps its tensors for
    ``saved_tensors``; the other ``mark_*`` calls only matter to the real autograd graph, which
    the eager ``.apply`` (or the opaque node) builds.
    """

    def __init__(self, needs_input_grad: tuple, **kwargs):
        super().__init__(torch.autograd.function.FunctionCtx, **kwargs)
        self.needs_input_grad = needs_input_grad
        self.saved: list[VariableTracker] = []

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.attrs:
            return self.attrs[name]
        if name in _CTX_METHODS:
            return _CtxMethodVariable(self, name)
        if name == "saved_tensors":
            return TupleVariable(list(self.saved))
        if name == "needs_input_grad":
            return TupleVariable([ConstantVariable(b) for b in self.needs_input_grad])
        unimplemented(f"reading {name!r} of an autograd.Function's ctx", gb_id=gb.UNSUPPORTED_METHOD,
                      context=f"getattr(ctx, {name!r})")

    def __repr__(self) -> str:
        return "AutogradFunctionContextVariable()"


class _CtxMethodVariable(VariableTracker):
    """``ctx.save_for_backward`` and its siblings, bound to the ctx tracker."""

    def __init__(self, ctx: AutogradFunctionContextVariable, name: str, **kwargs):
        super().__init__(**kwargs)
        self.ctx, self.name = ctx, name

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        if self.name == "save_for_backward":
            self.ctx.saved = [tx.realize(a) for a in args]
        return ConstantVariable(None)


class _ForwardWithCtx(VariableTracker):
    """``forward`` with its ``ctx`` already bound: what ``speculate_subgraph`` calls with the operands."""

    def __init__(self, forward: VariableTracker, ctx: VariableTracker | None, **kwargs):
        super().__init__(**kwargs)
        self.forward, self.ctx = forward, ctx

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        return self.forward.call_function(tx, ([self.ctx] if self.ctx is not None else []) + list(args), kwargs)


class _BackwardWithCtx(VariableTracker):
    """``backward`` called with its operands: the gradients, then a ctx whose saved tensors and tensor
    attributes are the remaining operands (the backward subgraph's own placeholders)."""

    def __init__(self, backward: VariableTracker, ctx: AutogradFunctionContextVariable, n_grads: int,
                 tensor_attrs: list, **kwargs):
        super().__init__(**kwargs)
        self.backward, self.ctx, self.n_grads, self.tensor_attrs = backward, ctx, n_grads, tensor_attrs

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        grads, rest = args[: self.n_grads], args[self.n_grads :]
        ctx = AutogradFunctionContextVariable(self.ctx.needs_input_grad)
        ctx.saved, rest = rest[: len(self.ctx.saved)], rest[len(self.ctx.saved) :]
        ctx.attrs = {**self.ctx.attrs, **dict(zip(self.tensor_attrs, rest))}
        return self.backward.call_function(tx, [ctx, *grads], {})


def _tagged(e: Unsupported) -> Unsupported:
    """torch's ``add_hop_context``: the break names the HOP it fell back from (the deepest one only)."""
    if not e.hop_name:
        e.hop_name = HOP_NAME
        if e.explanation is not None:
            e.explanation.hop_name = HOP_NAME
    return e


class AutogradFunctionApplyVariable(VariableTracker):
    """``cls.apply`` (Note [autograd.Function.apply is speculated, then falls back])."""

    def __init__(self, fn_cls: type, **kwargs):
        super().__init__(**kwargs)
        self.fn_cls = fn_cls

    def python_type(self) -> type:
        return types.MethodType

    def _forward(self, tx) -> VariableTracker:
        forward = inspect.getattr_static(self.fn_cls, "forward", None)
        if isinstance(forward, staticmethod):
            forward = forward.__func__
        if not isinstance(forward, types.FunctionType):
            unimplemented("Dynamo requires the `forward` attribute of a `torch.autograd.Function` subclass to be a "
                          f"standard Python function or method. Found type `{type(forward).__name__}` instead.",
                          gb_id="GB0230", context=f"call_apply {self.fn_cls.__name__}")
        source = self.source.base if isinstance(self.source, AttrSource) else None
        if source is not None:
            return tx.variable_builder(AttrSource(source, "forward"))(forward)
        return UserFunctionVariable(forward)

    def _ctx(self, forward: VariableTracker, args: list) -> AutogradFunctionContextVariable | None:
        """The ctx argument, or None for a forward without one (torch: a ``setup_context`` style forward)."""
        fn = forward.as_python_constant()
        if len(args) == len(inspect.signature(fn).parameters):
            return None
        needs = tuple(isinstance(a, TensorVariable) and bool(a.example_value.requires_grad) for a in args)
        return AutogradFunctionContextVariable(needs)

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        args = [tx.realize(a) for a in args]
        kwargs = {k: tx.realize(v) for k, v in kwargs.items()}
        forward = self._forward(tx)
        ctx = self._ctx(forward, args) if not kwargs else None
        needs_grad = any(isinstance(a, TensorVariable) and a.example_value.requires_grad
                         for a in [*args, *kwargs.values()])
        if kwargs or (needs_grad and torch.is_grad_enabled()):
            if not kwargs:
                self._speculate_forward(tx, forward, ctx, args)
            return TorchInGraphFunctionVariable(autograd_function_apply(self.fn_cls)).call_function(tx, args, kwargs)
        # torch's call_apply without a gradient to track: forward is inlined like any function
        return _ForwardWithCtx(forward, ctx).call_function(tx, args, {})

    def _speculate_forward(self, tx, forward, ctx, args: list) -> None:
        """Trace ``forward``, then ``backward``, as HOP bodies; a break inside either is a break at
        ``.apply`` (torch's fallback)."""
        if not all(isinstance(a, TensorVariable) or a.is_python_constant() for a in args):
            return  # operands a subgraph cannot take: the opaque node, as before
        try:
            body = speculate_subgraph(tx, _ForwardWithCtx(forward, ctx), args, HOP_NAME, fallback_to_eager=True)
        except UncapturedHigherOrderOpError:
            return  # a forward whose outputs a subgraph cannot hold (None among them): the opaque node
        except Unsupported as e:
            raise _tagged(e) from None
        self._speculate_backward(tx, body.outputs, ctx)

    def _speculate_backward(self, tx, grads: list, ctx) -> None:
        """``backward(ctx, *grads)`` with a gradient like each forward output, the saved tensors and the
        ctx's tensor attributes as its operands (torch speculates ``bwd_fn`` the same way)."""
        backward = inspect.getattr_static(self.fn_cls, "backward", None)
        backward = backward.__func__ if isinstance(backward, staticmethod) else backward
        if not isinstance(backward, types.FunctionType) or ctx is None:
            return
        attrs = [k for k, v in ctx.attrs.items() if isinstance(v, TensorVariable)]
        operands = [*grads, *ctx.saved, *(ctx.attrs[k] for k in attrs)]
        if not all(isinstance(a, TensorVariable) or a.is_python_constant() for a in operands):
            return
        try:
            speculate_subgraph(tx, _BackwardWithCtx(UserFunctionVariable(backward), ctx, len(grads), attrs),
                               operands, HOP_NAME, fallback_to_eager=True)
        except UncapturedHigherOrderOpError:
            return  # ``return g, None``: a result a subgraph cannot hold; nothing broke
        except Unsupported as e:
            raise _tagged(e) from None

    def __repr__(self) -> str:
        return f"AutogradFunctionApplyVariable({self.fn_cls.__name__})"


def is_plain_apply(cls: Any, name: str) -> bool:
    """``cls.apply`` where ``cls`` is a custom ``torch.autograd.Function`` that keeps torch's ``apply``."""
    return (name == "apply" and isinstance(cls, type) and issubclass(cls, torch.autograd.Function)
            and inspect.getattr_static(cls, "apply") is inspect.getattr_static(torch.autograd.Function, "apply"))


__all__ = ["AutogradFunctionApplyVariable", "AutogradFunctionContextVariable", "is_plain_apply"]

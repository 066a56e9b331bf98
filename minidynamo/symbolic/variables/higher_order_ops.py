"""Higher-order operators while tracing: ``torch.cond`` and activation checkpointing as subgraphs.

Place in the pipeline: a call of ``torch.cond`` or ``torch.utils.checkpoint.checkpoint``
reaches ``TorchInGraphFunctionVariable.call_function`` (``torch.py``), which hands it here.
Each function argument (a branch, the checkpointed function) is traced into a graph of
its own (:func:`speculate_subgraph`), installed as an attribute of the graph's module, and
the call becomes one node whose target is torch's own operator:
``torch.ops.higher_order.cond`` or ``torch.ops.higher_order.tag_activation_checkpoint``.
Mirrors ``torch/_dynamo/variables/higher_order_ops.py`` (``speculate_subgraph``,
``CondHigherOrderVariable``, ``CheckpointHigherOrderVariable``).

Note [A branch is traced, never run]
    Python's ``if`` on a tensor's value is a graph break: the trace cannot know which
    side runs. ``torch.cond(pred, true_fn, false_fn, operands)`` says the same thing in a
    form a graph can hold: both branches are traced, each into its own subgraph, and the
    graph keeps one ``cond`` node that picks one at run time. So each branch must be
    capturable whole (a graph break inside one, or a side effect on the world outside it,
    cannot be replayed by a node): torch refuses with ``UncapturedHigherOrderOpError``
    and so do we. Both branches must return the same number of tensors with the same
    metadata: the node has one output type whichever branch runs.

Note [The operands of a higher-order node]
    A branch reads its operands and anything else from the enclosing graph (a closure's
    tensor, a parameter). Each such value is lifted into a placeholder of the subgraph
    (Note [A subgraph lifts what it reads from outside], output_graph.py); the node then
    passes the explicit operands first and the lifted values after them, and both branches
    take the same list (a value only one branch reads is an unused placeholder of the
    other), as torch's ``cond`` node: ``cond(pred, cond_true_0, cond_false_0, (l_x_, l_y_))``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ..exc import TorchRuntimeError, UncapturedHigherOrderOpError, Unsupported, unimplemented
from .base import VariableTracker
from .tensor import TensorVariable


def _side_effect_state(side_effects) -> tuple:
    return (tuple(side_effects.mutated_containers), tuple(side_effects.attr_stores),
            tuple(side_effects.global_stores))


def _flatten(var: VariableTracker, op: str) -> tuple[list[TensorVariable], Any]:
    """The tensors a body returns, and how to rebuild the value (None: a single tensor)."""
    from .lists import ListVariable, TupleVariable

    if isinstance(var, TensorVariable):
        return [var], None
    if isinstance(var, (TupleVariable, ListVariable)) and all(isinstance(v, TensorVariable) for v in var.items):
        return list(var.items), type(var)
    raise UncapturedHigherOrderOpError(
        op, f"{op} bodies must return a tensor or a tuple/list of tensors, not {var}")


class Subgraph:
    """One traced body: its GraphModule-to-be, the operand placeholders, and what it lifted."""

    def __init__(self, sub, operand_nodes: list, outputs: list[TensorVariable], spec: Any):
        self.sub, self.operand_nodes, self.outputs, self.spec = sub, operand_nodes, outputs, spec

    @property
    def freevars(self) -> list[torch.fx.Node]:
        """The enclosing graph's nodes this body read, in the order it first read them."""
        return list(self.sub.lifted)

    def graph_module(self, freevars: list[torch.fx.Node], name: str) -> torch.fx.GraphModule:
        """The body as a GraphModule taking the operands, then ``freevars`` (Note [The operands ...])."""
        old = self.sub.graph
        new = torch.fx.Graph()
        val_map = {}
        for node in self.operand_nodes:
            val_map[node] = new.placeholder(node.name)
            val_map[node].meta = dict(node.meta)
        for outer in freevars:
            ph = new.placeholder(outer.name)
            ph.meta["example_value"] = outer.meta.get("example_value")
            if outer in self.sub.lifted:
                val_map[self.sub.lifted[outer]] = ph
        for node in old.nodes:  # lifted placeholders of ours that the merge did not keep: none expected
            if node.op == "placeholder" and node not in val_map:
                val_map[node] = new.placeholder(node.name)
        out = new.graph_copy(old, val_map)
        new.output(out)
        new.lint()
        return torch.fx.GraphModule(self.sub.graph_root(), new, class_name=name)


def speculate_subgraph(tx, fn_var: VariableTracker, operands: list[VariableTracker], op: str,
                       pure: bool = False, fn_kwargs: dict | None = None) -> Subgraph:
    """Trace ``fn_var(*operands)`` into a graph of its own (torch: ``speculate_subgraph``).

    Raises ``UncapturedHigherOrderOpError`` where torch does: a graph break inside the body,
    or a side effect on a value from outside it (Note [A branch is traced, never run]).
    """
    parent = tx.output
    sub = parent.subgraph_tracer()  # output_graph.SubgraphTracer
    args, operand_nodes = [], []
    versions = [a.example_value._version for a in operands if isinstance(a, TensorVariable)]
    for a in operands:
        if isinstance(a, TensorVariable):
            proxy = sub.placeholder(a.as_proxy().node.name, a.example_value)
            operand_nodes.append(proxy.node)
            args.append(TensorVariable(proxy, a.example_value))
        elif a.is_python_constant():
            args.append(a)
        else:
            raise UncapturedHigherOrderOpError(op, f"{op} operands must be tensors or constants, not {a}")
    before = _side_effect_state(parent.side_effects)
    tx.output = sub
    try:
        result = fn_var.call_function(tx, args, dict(fn_kwargs or {}))  # a tensor among them is lifted
        outputs, spec = _flatten(result, op)
        out_nodes = tuple(sub.lift(v.as_proxy()).node for v in outputs)
    except Unsupported as e:
        raise UncapturedHigherOrderOpError(op, f"{e.reason}" + (f"\n  Hint: {e.hint}" if e.hint else "")) from None
    finally:
        tx.output = parent
    if _side_effect_state(parent.side_effects) != before:
        raise UncapturedHigherOrderOpError(
            op, "HOP: Unsafe side effect\n  Explanation: Mutating a variable from outside the scope of this HOP "
                "is not supported.")
    if pure:  # torch's check_aliasing_and_input_mutation (cond: neither is supported)
        _check_pure(op, [a for a in operands if isinstance(a, TensorVariable)], versions, outputs, sub)
    sub.graph.output(out_nodes)
    return Subgraph(sub, operand_nodes, outputs, spec)


def _check_pure(op: str, operands: list, versions: list, outputs: list, sub) -> None:
    """A branch may not mutate its inputs or return (a view of) one, nor two views of one value."""
    from minidynamo._torch_private import StorageWeakRef

    for a, v in zip(operands, versions):
        if a.example_value._version != v:
            raise UncapturedHigherOrderOpError(op, "Encountered input mutation during higher order op tracing\n"
                                                   f"  Explanation: Higher order ops do not support input mutation. "
                                                   f"Found in {op}")
    inputs = [a.example_value for a in operands] + [n.meta.get("example_value") for n in sub.lifted]
    seen = {StorageWeakRef(t.untyped_storage()) for t in inputs if isinstance(t, torch.Tensor)}
    for o in outputs:
        ref = StorageWeakRef(o.example_value.untyped_storage())
        if ref in seen:
            raise UncapturedHigherOrderOpError(op, "Encountered aliasing during higher order op tracing\n"
                                                   f"  Explanation: Higher order ops do not support aliasing. Found "
                                                   f"in {op}\n  Hint: Replace `return input` with `return "
                                                   "input.clone()` to avoid aliasing.")
        seen.add(ref)


def _fresh(tx, example: torch.Tensor) -> torch.Tensor:
    """A new fake with ``example``'s metadata: the node's output is no alias of the body's values."""
    with tx.output.fake_mode:
        return example.clone()


def _rebuild(tx, proxy: torch.fx.Proxy, examples: tuple, spec: Any) -> VariableTracker:
    from .lists import ListVariable, TupleVariable

    items = tx.wrap_example(proxy, examples)
    items = items.items if isinstance(items, (TupleVariable, ListVariable)) else [items]
    if spec is None:
        return items[0]
    return ListVariable(list(items)) if spec is ListVariable else TupleVariable(list(items))


def _meta_mismatch(a: torch.Tensor, b: torch.Tensor) -> str | None:
    """Why two branch outputs cannot be one node's output (torch: ``_merge_output`` in cond.py)."""
    if a.dim() != b.dim():
        return f"expected same dim but got {a.dim()} and {b.dim()}"
    for what in ("shape", "dtype", "device"):
        if getattr(a, what) != getattr(b, what):
            return f"expected same {what} but got {getattr(a, what)} and {getattr(b, what)}"
    return None


def _fake_call_failed(why: str) -> str:
    """torch's message shape (``get_fake_value``): the op failed on fake values."""
    return (f"RuntimeError when making fake tensor call\n  Explanation: Dynamo failed to run FX node with fake "
            f"tensors: call_function cond: got RuntimeError({why!r})")


def call_cond(tx, args: list, kwargs: dict) -> VariableTracker:
    """``torch.cond(pred, true_fn, false_fn, operands)``: one ``cond`` node, two subgraphs."""
    from .sym_node import SymNodeVariable

    names = ["pred", "true_fn", "false_fn", "operands"]
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in bound:
            unimplemented(f"torch.cond() got an unexpected keyword argument {k!r}")
        bound[k] = v
    if len(bound) < 3:
        unimplemented("torch.cond() needs pred, true_fn and false_fn")
    pred, true_fn, false_fn = bound["pred"], bound["true_fn"], bound["false_fn"]
    ops_var = bound.get("operands")
    operands = [] if ops_var is None else ops_var.unpack_var_sequence(tx)
    if pred.is_python_constant():  # torch's cond.py: a Python bool picks the branch while tracing
        return (true_fn if pred.as_python_constant() else false_fn).call_function(tx, operands, {})
    if not isinstance(pred, (TensorVariable, SymNodeVariable)):
        unimplemented(f"torch.cond's pred must be a boolean tensor or a bool, not {pred}")
    true_br = speculate_subgraph(tx, true_fn, operands, "torch.cond", pure=True)
    false_br = speculate_subgraph(tx, false_fn, operands, "torch.cond", pure=True)
    if len(true_br.outputs) != len(false_br.outputs) or true_br.spec != false_br.spec:
        raise TorchRuntimeError(_fake_call_failed(
            "true_fn and false_fn must return the same pytree structure, got "
            f"{len(true_br.outputs)} and {len(false_br.outputs)} outputs"))
    for a, b in zip(true_br.outputs, false_br.outputs):
        why = _meta_mismatch(a.example_value, b.example_value)
        if why is not None:
            raise TorchRuntimeError(_fake_call_failed(f"When merging two branches' output in torch.cond, {why}."))
    freevars = true_br.freevars + [n for n in false_br.freevars if n not in true_br.sub.lifted]
    true_name = tx.output.install_subgraph("cond_true", None)
    false_name = tx.output.install_subgraph("cond_false", None)
    tx.output.subgraphs[true_name] = true_br.graph_module(freevars, true_name)
    tx.output.subgraphs[false_name] = false_br.graph_module(freevars, false_name)
    t = tx.output.create_proxy("get_attr", true_name, (), {})
    f = tx.output.create_proxy("get_attr", false_name, (), {})
    operand_proxies = tuple(a.as_proxy() for a in operands if isinstance(a, TensorVariable)) + tuple(
        torch.fx.Proxy(n, tx.output.tracer) for n in freevars)
    proxy = tx.output.create_proxy("call_function", torch.ops.higher_order.cond,
                                   (pred.as_proxy(), t, f, operand_proxies), {})
    examples = tuple(_fresh(tx, v.example_value) for v in true_br.outputs)
    return _rebuild(tx, proxy, examples, true_br.spec)


# checkpoint()'s own keyword arguments (torch/_higher_order_ops/wrap.py: TagActivationCheckpoint.divide_kwargs)
_CHECKPOINT_OPTIONS = ("use_reentrant", "context_fn", "determinism_check", "debug", "preserve_rng_state",
                       "early_stop")


def call_checkpoint(tx, args: list, kwargs: dict) -> VariableTracker:
    """``checkpoint(fn, *args, use_reentrant=False)``: one ``tag_activation_checkpoint`` node, its body a subgraph.

    torch's ``CheckpointHigherOrderVariable``: the body is traced as a cond branch is, and
    the node keeps ``use_reentrant`` (and the other checkpoint options) as its kwargs; AOT
    reads the node to tag the body's ops for recomputation (Note [A checkpointed region is
    recomputed], aot/activation_checkpoint.py).
    """
    if not args:
        unimplemented("checkpoint() needs a function")
    fn, operands = args[0], list(args[1:])
    options, fn_kwargs = {}, {}
    for k, v in kwargs.items():
        if k not in _CHECKPOINT_OPTIONS:  # the function's own keyword arguments (torch: divide_kwargs)
            fn_kwargs[k] = v
            continue
        if k == "context_fn" and _constant_partial(v) is not None:
            options[k] = _constant_partial(v)
            continue
        if not v.is_python_constant():
            unimplemented(f"checkpoint's {k}= argument must be a constant, not {v}")
        options[k] = v.as_python_constant()
    if options.get("use_reentrant", None) is not False:
        unimplemented("checkpoint with use_reentrant=True (or not given) is traced as torch does only with "
                      "use_reentrant=False", "pass use_reentrant=False")
    from torch.utils.checkpoint import noop_context_fn

    context_fn = options.pop("context_fn", None)
    if context_fn is noop_context_fn:
        context_fn = None
    body = speculate_subgraph(tx, fn, operands, "torch.utils.checkpoint.checkpoint", fn_kwargs=fn_kwargs)
    name = tx.output.install_subgraph("wrap_body", None)
    tx.output.subgraphs[name] = body.graph_module(body.freevars, name)
    if context_fn is not None:  # selective checkpointing: AOT asks its policy per op (activation_checkpoint.py)
        tx.output.subgraphs[name].meta["_checkpoint_context_fn"] = context_fn
    gm = tx.output.create_proxy("get_attr", name, (), {})
    operand_proxies = tuple(a.as_proxy() for a in operands if isinstance(a, TensorVariable)) + tuple(
        torch.fx.Proxy(n, tx.output.tracer) for n in body.freevars)
    proxy = tx.output.create_proxy("call_function", torch.ops.higher_order.tag_activation_checkpoint,
                                   (gm, *operand_proxies), options)
    examples = tuple(_fresh(tx, v.example_value) for v in body.outputs)
    return _rebuild(tx, proxy, examples, body.spec)


def _constant_partial(var: VariableTracker):
    """A ``functools.partial`` of constants (``partial(create_selective_checkpoint_contexts, policy)``) as
    the object itself (torch: ``guard_as_python_constant``), or None."""
    import functools

    from .functional import FunctoolsPartialVariable

    if not isinstance(var, FunctoolsPartialVariable):
        return None
    parts = [var.func, *var.args, *var.keywords.values()]
    if not all(p.is_python_constant() for p in parts):
        return None
    return functools.partial(var.func.as_python_constant(), *[a.as_python_constant() for a in var.args],
                             **{k: v.as_python_constant() for k, v in var.keywords.items()})


def higher_order_handler(fn: Any):
    """The handler for a torch callable that is a higher-order op here, or None."""
    import sys

    cond_mod = sys.modules.get("torch._higher_order_ops.cond")
    if fn is getattr(torch, "cond", None) or (cond_mod is not None and fn is getattr(cond_mod, "cond", None)):
        return call_cond
    if fn is torch.ops.higher_order.cond:
        return call_cond
    ckpt = sys.modules.get("torch.utils.checkpoint")
    if ckpt is not None and fn is ckpt.checkpoint:
        return call_checkpoint
    return None

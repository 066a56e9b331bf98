"""Higher-order operators while tracing: ``torch.cond``, ``torch.while_loop`` and checkpointing as subgraphs.

Place in the pipeline: a call of ``torch.cond``, ``torch.while_loop`` or
``torch.utils.checkpoint.checkpoint`` reaches ``TorchInGraphFunctionVariable.call_function``
(``torch.py``), which hands it here. Each function argument (a branch, a loop's ``cond_fn``
and ``body_fn``, the checkpointed function) is traced into a graph of its own
(:func:`speculate_subgraph`), installed as an attribute of the graph's module, and
the call becomes one node whose target is torch's own operator:
``torch.ops.higher_order.cond``, ``torch.ops.higher_order.while_loop`` or
``torch.ops.higher_order.tag_activation_checkpoint``.
Mirrors ``torch/_dynamo/variables/higher_order_ops.py`` (``speculate_subgraph``,
``CondHigherOrderVariable``, ``CheckpointHigherOrderVariable``, ``_call_while_loop``).

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

from .. import graph_break_registry as gb
from ..exc import TorchRuntimeError, UncapturedHigherOrderOpError, Unsupported, unimplemented
from .base import VariableTracker
from .tensor import TensorVariable


def _side_effect_state(side_effects) -> tuple:
    return (tuple(side_effects.mutated_containers), tuple(side_effects.attr_stores),
            tuple(side_effects.global_stores))


def _flatten(var: VariableTracker, op: str, ints_ok: bool = False) -> tuple[list[TensorVariable], Any]:
    """The tensors a body returns, and how to rebuild the value (None: a single tensor).

    ``ints_ok``: symbolic ints (and bools) may be among them too (``while_loop``'s int carries)."""
    from .lists import ListVariable, TupleVariable
    from .sym_node import SymNodeVariable

    kinds = (TensorVariable, SymNodeVariable) if ints_ok else TensorVariable
    if isinstance(var, kinds):
        return [var], None
    if isinstance(var, (TupleVariable, ListVariable)) and all(isinstance(v, kinds) for v in var.items):
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
                       pure: bool = False, fn_kwargs: dict | None = None, constant_ok: bool = False,
                       ints_ok: bool = False, fallback_to_eager: bool = False) -> Subgraph:
    """Trace ``fn_var(*operands)`` into a graph of its own (torch: ``speculate_subgraph``).

    Raises ``UncapturedHigherOrderOpError`` where torch does: a graph break inside the body,
    or a side effect on a value from outside it (Note [A branch is traced, never run]).

    Note [A checkpointed body that breaks runs eagerly]
        torch's ``add_hop_context`` (torch/_dynamo/variables/higher_order_ops.py) lets a HOP
        whose ``_ALLOW_FALLBACK_TO_EAGER`` is true (checkpoint, autograd.Function; not cond,
        while_loop, map, scan) pass a graph break inside its body on as a plain graph break at
        the HOP's call, which then runs eagerly: ``fallback_to_eager`` does so.
    """
    from .sym_node import SymNodeVariable

    parent = tx.output
    sub = parent.subgraph_tracer()  # output_graph.SubgraphTracer
    args, operand_nodes = [], []
    versions = [a.example_value._version for a in operands if isinstance(a, TensorVariable)]
    for a in operands:
        if isinstance(a, TensorVariable):
            proxy = sub.placeholder(a.as_proxy().node.name, a.example_value)
            operand_nodes.append(proxy.node)
            args.append(TensorVariable(proxy, a.example_value))
        elif ints_ok and isinstance(a, SymNodeVariable):  # a while_loop int carry (Note [A loop is two subgraphs ...])
            proxy = sub.placeholder(a.proxy.node.name if a.proxy is not None else "unbacked_symint", a.sym_num)
            operand_nodes.append(proxy.node)
            args.append(SymNodeVariable(proxy, a.sym_num))
        elif a.is_python_constant():
            args.append(a)
        else:
            raise UncapturedHigherOrderOpError(op, f"{op} operands must be tensors or constants, not {a}")
    before = _side_effect_state(parent.side_effects)
    tx.output = sub
    try:
        result = fn_var.call_function(tx, args, dict(fn_kwargs or {}))  # a tensor among them is lifted
        if constant_ok and result.is_python_constant():  # while_loop's cond_fn may answer a Python bool
            return Subgraph(sub, operand_nodes, [], ("constant", result.as_python_constant()))
        outputs, spec = _flatten(result, op, ints_ok)
        out_nodes = tuple(sub.lift(v.as_proxy()).node for v in outputs)
    except Unsupported as e:
        if fallback_to_eager:
            raise  # Note [A checkpointed body that breaks runs eagerly]
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
    for o in (o for o in outputs if isinstance(o, TensorVariable)):
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
            unimplemented(f"torch.cond() got an unexpected keyword argument {k!r}", gb_id=gb.COND_ARGS)
        bound[k] = v
    if len(bound) < 3:
        unimplemented("torch.cond() needs pred, true_fn and false_fn", gb_id=gb.COND_ARGS)
    pred, true_fn, false_fn = bound["pred"], bound["true_fn"], bound["false_fn"]
    ops_var = bound.get("operands")
    operands = [] if ops_var is None else ops_var.unpack_var_sequence(tx)
    if pred.is_python_constant():  # torch's cond.py: a Python bool picks the branch while tracing
        return (true_fn if pred.as_python_constant() else false_fn).call_function(tx, operands, {})
    if not isinstance(pred, (TensorVariable, SymNodeVariable)):
        unimplemented(f"torch.cond's pred must be a boolean tensor or a bool, not {pred}", gb_id=gb.COND_PRED)
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
        unimplemented("checkpoint() needs a function", gb_id=gb.HOP_NOT_CALLABLE)
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
            unimplemented(f"checkpoint's {k}= argument must be a constant, not {v}", gb_id=gb.NOT_A_CONSTANT)
        options[k] = v.as_python_constant()
    if options.get("use_reentrant", None) is not False:
        unimplemented("checkpoint with use_reentrant=True (or not given) is traced as torch does only with "
                      "use_reentrant=False", "pass use_reentrant=False", gb_id=gb.UNSUPPORTED_FUNCTION)
    from torch.utils.checkpoint import noop_context_fn

    context_fn = options.pop("context_fn", None)
    if context_fn is noop_context_fn:
        context_fn = None
    body = speculate_subgraph(tx, fn, operands, "torch.utils.checkpoint.checkpoint", fn_kwargs=fn_kwargs,
                              fallback_to_eager=True)
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


class RemovableHandleVariable(VariableTracker):
    """The handle ``register_hook`` returns (torch's ``RemovableHandleVariable``, variables/misc.py).

    ``name`` is the local the transformed code stores the real handle in, when the hook is
    registered after the graph (an input's hook); a hook registered by the graph's own
    ``register_hook`` node has no handle outside it.
    """

    def __init__(self, name: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.name = name

    def python_type(self) -> type:
        return torch.utils.hooks.RemovableHandle

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "remove" and not args and not kwargs and self.name is not None:
            # an input's hook, not registered yet: it is registered after the graph and removed
            # right after (torch: ``SideEffects.remove_hook``), so the handle stays a real one
            tx.output.side_effects.remove_hook(self)
            return tx.wrap_constant_result(None)
        return super().call_method(tx, name, args, kwargs)

    def reconstruct(self, codegen) -> str:
        if self.name is None:
            unimplemented("the handle of a hook registered inside the graph cannot leave it",
                          "do not return or keep the handle of a hook on a tensor made in the compiled function",
                          gb_id=gb.RECONSTRUCTION, context=f"{self}")
        return self.name


# Note [A hook on a tensor of the trace is a node]
#     ``y.register_hook(fn)`` changes no value the forward computes; it says what the
#     backward does with ``y``'s gradient. Torch 2.13 (``_method_register_hook``,
#     torch/_dynamo/variables/tensor.py) keeps the forward in one graph either way:
#     - on a tensor with a source (an input), the call is a side effect: after the
#       graph the transformed code registers the hook on the real tensor
#       (``SideEffects.register_hook``), and the handle is that call's result;
#     - on a tensor made in the trace, the hook's body is traced into a subgraph
#       (``speculate_subgraph``, taking the gradient and what it closes over), and the
#       graph holds ``torch.ops.higher_order.register_hook(y, hook_body_0)``, whose
#       output is ``y`` from then on: run, it registers ``hook_body_0`` on the real
#       ``y``; traced by AOTAutograd, it registers on the traced ``y``, and the hook's
#       ops land in the joint graph's backward.
#     A tensor that does not require grad cannot take a hook (eager raises): ours breaks
#     there, so eager's RuntimeError reaches the user.
def call_register_hook(tx, tensor: TensorVariable, hook: VariableTracker, name: str) -> VariableTracker:
    """``tensor.register_hook(hook)`` (Note [A hook on a tensor of the trace is a node])."""
    if not tensor.example_value.requires_grad:
        unimplemented("cannot register a hook on a tensor that doesn't require gradient (eager raises)",
                      gb_id=gb.UNSUPPORTED_METHOD, context=f"{tensor}.{name}()")
    if tensor.source is not None:
        handle = RemovableHandleVariable(f"___hook_handle_{len(tx.output.side_effects.tensor_hooks)}")
        tx.output.side_effects.register_hook(tensor, hook, handle, name)
        return handle
    if name != "register_hook":
        unimplemented(f"Tensor.{name} on a tensor made in the compiled function is not traced",
                      gb_id=gb.UNSUPPORTED_METHOD, context=f"{tensor}.{name}()")
    from minidynamo._torch_private import register_hook_op

    # a break inside the hook (a print, a change to a list outside it) breaks the caller's graph, as torch's
    side_effects = tx.output.side_effects
    side_effects.locked_by = "register_hook"
    try:
        body = speculate_subgraph(tx, hook, [tensor], "register_hook", constant_ok=True, fallback_to_eager=True)
    except UncapturedHigherOrderOpError as e:  # a hook returning other than a tensor: eager's business
        unimplemented(f"the hook's body cannot be a subgraph: {e}", gb_id=gb.UNSUPPORTED_METHOD,
                      context=f"{tensor}.{name}({hook})")
    finally:
        side_effects.locked_by = None
    if body.spec == ("constant", None):  # a hook that returns None leaves the gradient as it is
        body.sub.graph.output(None)
    elif body.spec is not None:
        unimplemented("a tensor hook must return a tensor or None", gb_id=gb.UNSUPPORTED_METHOD,
                      context=f"{tensor}.{name}({hook}) returns {body.spec}")
    else:  # the hook returns the gradient itself, not a tuple of one
        output = next(n for n in body.sub.graph.nodes if n.op == "output")
        output.args = (output.args[0][0],)
    gm_name = tx.output.install_subgraph("hook_body", None)
    tx.output.subgraphs[gm_name] = body.graph_module(body.freevars, gm_name)
    gm = tx.output.create_proxy("get_attr", gm_name, (), {})
    freevars = tuple(torch.fx.Proxy(n, tx.output.tracer) for n in body.freevars)
    proxy = tx.output.create_proxy("call_function", register_hook_op(), (tensor.as_proxy(), gm, *freevars), {})
    proxy.node.meta["example_value"] = tensor.example_value
    tensor.proxy = proxy  # from here on, the tensor is the node's output
    return RemovableHandleVariable()


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


_WHILE = "torch.while_loop"


def _plain_uncaptured(op: str, message: str) -> UncapturedHigherOrderOpError:
    """torch raises some HOP errors with its own message, not the "captured completely" preamble."""
    err = UncapturedHigherOrderOpError(op, message)
    err.args = (f"{message}\n  Higher Order Operator: {op}",)
    return err


def _meta_diff(lhs: Any, rhs: Any) -> list[str]:
    """torch's ``check_meta_consistency`` fields (torch/_higher_order_ops/utils.py), grad and contiguity left out."""
    ints = (int, torch.SymInt)
    if not (isinstance(lhs, torch.Tensor) and isinstance(rhs, torch.Tensor)):
        return [] if isinstance(lhs, ints) and isinstance(rhs, ints) else [f"'type: {lhs} vs {rhs}'"]
    out = [f"'{what}: {a} vs {b}'" for what, a, b in (
        ("shape", lhs.shape, rhs.shape), ("stride", lhs.stride(), rhs.stride()), ("dtype", lhs.dtype, rhs.dtype))
        if a != b]
    if lhs.device != rhs.device:
        out.append("device")
    return out


def call_while_loop(tx, args: list, kwargs: dict) -> VariableTracker:
    """``torch.while_loop(cond_fn, body_fn, carried_inputs)``: one ``while_loop`` node, two subgraphs.

    Note [A loop is two subgraphs and a carry]
        ``while cond_fn(*carry): carry = body_fn(*carry)`` cannot be unrolled by the trace: how
        many times it runs depends on data. So, as ``torch.cond``, both functions are traced
        once each into a subgraph (``cond_fn_0``, ``body_fn_0``) and the graph keeps one node,
        ``while_loop(cond_fn_0, body_fn_0, carried_inputs, additional_inputs)``. Since the body's
        outputs are the next iteration's inputs, they must match the carries one for one
        (shape, stride, dtype, device), and ``cond_fn`` must return a boolean scalar tensor.
        Both subgraphs take the carries first, then the values they read from outside
        (torch's ``additional_inputs``: those both read, then ``cond_fn``'s own, then
        ``body_fn``'s), as torch's ``_call_while_loop`` (torch/_dynamo/variables/higher_order_ops.py)
        orders them. An ``int`` carry may change any number of times, so each subgraph sees
        it as a fresh unbacked symbol (``u0``), and the node's output for it is one more
        (torch's NOTE [unspecialize int carry with unbacked symints]). Where ours is simpler:
        torch lets a body mutate a carry under ``no_grad``; ours refuses every mutation, and
        our AOTAutograd runs a graph with an int carry eagerly (aot/higher_order.py).
    """
    import operator

    from .lists import ListVariable, TupleVariable
    from .sym_node import SymNodeVariable

    names = ["cond_fn", "body_fn", "carried_inputs", "additional_inputs"]
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names or k in bound:
            unimplemented(f"torch.while_loop() got an unexpected keyword argument {k!r}", gb_id="GB0303")
        bound[k] = v
    if len(bound) < 3:
        unimplemented("torch.while_loop expects cond_fn, body_fn and carried_inputs "
                      "(Usage: while_loop(cond_fn, body_fn, operands))", gb_id="GB0303")
    cond_fn, body_fn, carried_var = bound["cond_fn"], bound["body_fn"], bound["carried_inputs"]
    if not isinstance(carried_var, (TupleVariable, ListVariable)):
        unimplemented(f"torch.while_loop's carried_inputs must be a tuple or list, not {carried_var}",
                      gb_id="GB0303")
    carried = carried_var.unpack_var_sequence(tx)
    extra = bound.get("additional_inputs")
    additional = [] if extra is None else extra.unpack_var_sequence(tx)
    is_int = [_is_int_carry(c) for c in carried]
    for c, i in zip(carried + additional, is_int + [False] * len(additional)):
        if not i and not isinstance(c, TensorVariable):
            unimplemented(f"torch.while_loop with the carry {c}: carries are tensors or ints",
                          gb_id=gb.HOP_NON_TENSOR_LEAF)
    cond_br = speculate_subgraph(tx, cond_fn, _loop_operands(tx, carried, is_int) + additional, _WHILE, pure=True,
                                 constant_ok=True, ints_ok=True)
    if isinstance(cond_br.spec, tuple) and cond_br.spec[0] == "constant":
        if cond_br.spec[1]:
            raise UncapturedHigherOrderOpError(_WHILE, "torch.while_loop: infinite loop detected\n  Explanation: "
                                               "Infinite loop detected because while_loop's cond_fn always returns "
                                               f"the same value {cond_br.spec[1]}.")
        return TupleVariable(list(carried))  # torch: a loop that never runs returns its carries
    pred = cond_br.outputs[0] if len(cond_br.outputs) == 1 and cond_br.spec is None else None
    ok = pred is not None and (
        (isinstance(pred, TensorVariable) and pred.example_value.dtype == torch.bool
         and pred.example_value.shape == torch.Size([])) or isinstance(getattr(pred, "sym_num", None), torch.SymBool))
    if not ok:
        got = pred.example_value.shape if isinstance(pred, TensorVariable) else f"{len(cond_br.outputs)} values"
        raise UncapturedHigherOrderOpError(_WHILE, "torch.while_loop: unsupported cond_fn return type\n  "
                                           f"Explanation: Expected cond_fn to return a scalar tensor or a bool but "
                                           f"got {got}.")
    out_node = cond_br.sub.graph.find_nodes(op="output")[0]
    out_node.args = (out_node.args[0][0],)  # cond_fn_0 returns the boolean itself, as torch's
    body_br = speculate_subgraph(tx, body_fn, _loop_operands(tx, carried, is_int) + additional, _WHILE, pure=True,
                                 ints_ok=True)
    outs = [_value(o) for o in body_br.outputs]
    ins = [_value(c) for c in carried]
    if len(outs) != len(ins):
        raise _plain_uncaptured(_WHILE, "Expected body_fn_output and carried_inputs to have same number of outputs "
                                        f"but got lhs:{outs} and rhs:{ins}")
    diffs = [f"pair[{i}] differ in {', '.join(d)}" for i, d in enumerate(map(_meta_diff, outs, ins)) if d]
    if diffs:
        raise _plain_uncaptured(_WHILE, "Expected body_fn_output and carried_inputs to have same metadata but "
                                        "found:\n" + "\n".join(diffs))
    shared = [n for n in cond_br.freevars if n in body_br.sub.lifted]
    freevars = shared + [n for n in cond_br.freevars if n not in body_br.sub.lifted] + [
        n for n in body_br.freevars if n not in cond_br.sub.lifted]
    needs_grad = [v for v in ins + [_value(a) for a in additional] + [n.meta.get("example_value") for n in freevars]
                  if isinstance(v, torch.Tensor) and v.requires_grad]
    if any(is_int) and needs_grad and torch.is_grad_enabled():  # torch's autograd rule stacks every carry
        kinds = [int if i else type(v) for v, i in zip(ins, is_int)]
        raise TorchRuntimeError(
            "RuntimeError when making fake tensor call\n  Explanation: Dynamo failed to run FX node with fake "
            "tensors: call_function while_loop: got AssertionError(\"all carried_inputs must be tensors for "
            f"stack_output, got {kinds}\")")
    cond_name = tx.output.install_subgraph("cond_fn", None)
    body_name = tx.output.install_subgraph("body_fn", None)
    tx.output.subgraphs[cond_name] = cond_br.graph_module(freevars, cond_name)
    tx.output.subgraphs[body_name] = body_br.graph_module(freevars, body_name)
    c = tx.output.create_proxy("get_attr", cond_name, (), {})
    b = tx.output.create_proxy("get_attr", body_name, (), {})
    extra_proxies = tuple(a.as_proxy() for a in additional) + tuple(
        torch.fx.Proxy(n, tx.output.tracer) for n in freevars)
    carried_args = tuple(a.as_python_constant() if a.is_python_constant() else a.as_proxy() for a in carried)
    proxy = tx.output.create_proxy("call_function", torch.ops.higher_order.while_loop,
                                   (c, b, carried_args, extra_proxies), {})
    proxy.node.meta["example_value"] = None
    items = []
    for i, v in enumerate(outs):
        p = tx.output.create_proxy("call_function", operator.getitem, (proxy, i), {})
        if isinstance(v, torch.Tensor):
            example = _fresh(tx, v)
            p.node.meta["example_value"] = example
            items.append(TensorVariable(p, example))
        else:  # an int carry leaves the loop as a value nobody knows (torch: a fresh unbacked symbol)
            example = _unbacked_env(tx).create_unbacked_symint("torch.while_loop int output")
            p.node.meta["example_value"] = example
            items.append(SymNodeVariable(p, example))
    return TupleVariable(items)


def _is_int_carry(var: VariableTracker) -> bool:
    from .sym_node import SymNodeVariable

    if isinstance(var, SymNodeVariable):
        return isinstance(var.sym_num, torch.SymInt)
    return var.is_python_constant() and type(var.as_python_constant()) is int


def _unbacked_env(tx):
    from .unbacked import _env

    return _env(tx)


def _loop_operands(tx, carried: list, is_int: list) -> list:
    """The carries a subgraph is traced with: each int a fresh unbacked symbol (torch's NOTE [unspecialize int
    carry with unbacked symints]: the loop may have changed it any number of times)."""
    from .sym_node import SymNodeVariable

    return [SymNodeVariable(None, _unbacked_env(tx).create_unbacked_symint("torch.while_loop int carry")) if i else c
            for c, i in zip(carried, is_int)]


def _value(var: VariableTracker) -> Any:
    if isinstance(var, TensorVariable):
        return var.example_value
    return var.sym_num if hasattr(var, "sym_num") else var.as_python_constant()


def higher_order_handler(fn: Any):
    """The handler for a torch callable that is a higher-order op here, or None."""
    import sys

    cond_mod = sys.modules.get("torch._higher_order_ops.cond")
    if fn is getattr(torch, "cond", None) or (cond_mod is not None and fn is getattr(cond_mod, "cond", None)):
        return call_cond
    if fn is torch.ops.higher_order.cond:
        return call_cond
    while_mod = sys.modules.get("torch._higher_order_ops.while_loop")
    if fn is getattr(torch, "while_loop", None) or fn is getattr(torch.ops.higher_order, "while_loop", None) or (
            while_mod is not None and fn is getattr(while_mod, "while_loop", None)):
        return call_while_loop
    ckpt = sys.modules.get("torch.utils.checkpoint")
    if ckpt is not None and fn is ckpt.checkpoint:
        return call_checkpoint
    return None

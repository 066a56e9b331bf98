"""``torch.cond`` and ``torch.while_loop`` in AOTAutograd: functionalized, in the joint graph (cond with a backward).

Place in the pipeline: AOT runs Dynamo's graph (``aot_autograd._SourceLineInterpreter``);
at a ``cond`` node it calls :func:`run_cond` instead of the operator. The three modes
AOT stacks (``FunctionalTensorMode`` above ``ProxyTorchDispatchMode`` above
``FakeTensorMode``) each let the ``cond`` operator through their ``__torch_dispatch__``
(``supports_higher_order_operators``) to a rule of their own, beside the mode:
``FunctionalTensorMode._cond``, ``ProxyTorchDispatchMode._cond``, ``FakeTensorMode._cond``.
Mirrors ``torch/_higher_order_ops/cond.py``: ``CondAutogradOp`` (autograd),
``cond_func`` (functionalization), ``trace_cond`` (the proxy mode),
``cond_fake_tensor_mode`` (fake tensors); and ``torch/_higher_order_ops/while_loop.py``
(``while_loop_tracing``, ``while_loop_fake_tensor_mode``, ``while_loop_func``) for inference.

Note [cond's backward is a cond]
    The forward records ``cond(pred, true_graph_0, false_graph_0, operands)``, each branch
    traced to ATen ops of its own. The backward is one more ``cond`` on the same
    predicate, whose branches are each branch's vector-Jacobian product: given the
    operands and the output gradients, run the branch again and differentiate it. So
    only the predicate and the operands are saved; the branch's intermediates are
    recomputed inside the backward branch, as torch's ``create_bw_fn`` does. A gradient
    the branch does not produce for an operand is zeros, so both backward branches
    return the same thing.

Note [A branch is traced apart]
    Each branch is traced by our ``make_fx`` with every dispatch mode of the trace around
    it switched off and a fake mode of its own, on fresh fakes with the operands'
    metadata: the branch's ops land in its own graph, never in the joint graph, and
    autograd is live inside the backward branch's trace. Over symbolic sizes the branch's
    fake mode shares the operands' ShapeEnv (Note [A branch over symbolic sizes]).
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.fx as fx

from minidynamo._torch_private import AutoDispatchBelowAutograd, disable_current_modes

__all__ = ["run_cond", "CondAutogradOp", "run_while_loop"]


def _cond():
    return torch.ops.higher_order.cond


def _fresh_fakes(values: list) -> tuple[Any, list]:
    """A fake mode of its own and fakes with ``values``' metadata (Note [A branch is traced apart]).

    Over symbolic sizes (Note [A branch over symbolic sizes]) the mode shares the operands' ShapeEnv and
    the fakes keep their SymInt sizes; a SymInt operand (a size Dynamo lifted into the branch) stays itself.
    """
    from minidynamo.fake import FakeTensor, FakeTensorMode

    env = _shape_env_of(values)
    mode = FakeTensorMode()
    mode.shape_env = env
    out = []
    with mode:
        for v in values:
            if isinstance(v, torch.Tensor) and env is not None:
                with disable_current_modes(), torch.no_grad():
                    elem = torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device="meta")
                out.append(FakeTensor(mode, elem, v.device))
            elif isinstance(v, torch.Tensor):
                out.append(torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device=v.device))
            else:
                out.append(v)
    return mode, out


def _shape_env_of(values: list) -> Any:
    """Note [A branch over symbolic sizes]
        An operand whose sizes are SymInts (``(s0, 3)``), or a SymInt operand, makes the
        branch symbolic: it is traced on fakes with the same symbols, in a fake mode that
        shares their ShapeEnv, so a size the branch reads (``t.size(0)``, ``view(-1)``) is a
        node over its own placeholders (``sym_size.int(arg0_1, 0)``), as torch's
        ``trace_cond`` records it with the operands' symbolic fakes. Decisions the branch
        makes land in that ShapeEnv, whose guards Dynamo installs.
    """
    for v in values:
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return v.node.shape_env
        if isinstance(v, torch.Tensor):
            for s in v.shape:
                if isinstance(s, torch.SymInt):
                    return s.node.shape_env
    return None


def _trace_branch(fn: Callable, values: list, name: str) -> fx.GraphModule:
    from minidynamo.aot.make_fx import make_fx

    with disable_current_modes():
        mode, fakes = _fresh_fakes(values)
        gm = make_fx(lambda *a: tuple(_run_nested(fn, a)), fake_mode=mode, pass_name=None,
                     placeholder_names=[f"arg{i}_1" for i in range(len(fakes))])(*fakes)
    gm.meta["hop_branch"] = name
    return gm


class _NestedLoops(fx.Interpreter):
    """A Dynamo subgraph run while a branch is traced: a ``while_loop`` inside it goes through
    :func:`run_while_loop`, so its own subgraphs are traced to ATen ops too (torch: ``reenter_make_fx``)."""

    def run_node(self, n: fx.Node) -> Any:
        if n.op == "call_function" and n.target is getattr(torch.ops.higher_order, "while_loop", None):
            return run_while_loop(*self.fetch_args_kwargs_from_env(n)[0])
        return super().run_node(n)


def _run_nested(fn: Callable, args: tuple) -> Any:
    if isinstance(fn, fx.GraphModule) and any(
            n.target is getattr(torch.ops.higher_order, "while_loop", None) for n in fn.graph.nodes):
        return _NestedLoops(fn).run(*args)
    return fn(*args)


def _vjp(branch: fx.GraphModule, num_operands: int) -> Callable:
    """The backward branch of Note [cond's backward is a cond]: operands and output grads -> operand grads."""

    def joint(*args):
        operands, grads = args[:num_operands], args[num_operands:]
        with torch.enable_grad():
            # a SymInt operand (a size Dynamo lifted) passes through and gets no gradient
            prims = [o.detach().requires_grad_(o.is_floating_point()) if isinstance(o, torch.Tensor) else o
                     for o in operands]
            outs = branch(*prims)
            diff = [p for p in prims if isinstance(p, torch.Tensor) and p.requires_grad]
            pairs = [(o, g) for o, g in zip(outs, grads) if o.requires_grad]
            got = torch.autograd.grad([o for o, _ in pairs], diff, [g for _, g in pairs], allow_unused=True) \
                if pairs and diff else [None] * len(diff)
        by_prim = dict(zip(map(id, diff), got))
        return tuple(by_prim.get(id(p)) if by_prim.get(id(p)) is not None else torch.zeros_like(p)
                     for p in prims if isinstance(p, torch.Tensor))

    return joint


class CondAutogradOp(torch.autograd.Function):
    """torch's ``CondAutogradOp``: a forward ``cond`` and, for the backward, a ``cond`` of the two VJPs."""

    @staticmethod
    def forward(ctx, pred, fw_true, fw_false, bw_true, bw_false, *operands):
        # tensors are saved; a SymBool predicate (``x.size(0) > 6``) and SymInt operands are kept on ctx
        values = (pred, *operands)
        ctx.tensor_at = [i for i, v in enumerate(values) if isinstance(v, torch.Tensor)]
        ctx.save_for_backward(*(values[i] for i in ctx.tensor_at))
        ctx.others = {i: v for i, v in enumerate(values) if not isinstance(v, torch.Tensor)}
        ctx.bw = (bw_true, bw_false)
        with AutoDispatchBelowAutograd():
            return tuple(_cond()(pred, fw_true, fw_false, tuple(operands)))

    @staticmethod
    def backward(ctx, *grads):
        values = dict(ctx.others)
        values.update(zip(ctx.tensor_at, ctx.saved_tensors))
        pred, *operands = (values[i] for i in range(len(values)))
        bw_true, bw_false = ctx.bw
        grads = [torch.zeros_like(o) if g is None else g for g, o in zip(grads, ctx.outputs_like)]
        with AutoDispatchBelowAutograd():
            got = iter(_cond()(pred, bw_true, bw_false, tuple(operands) + tuple(grads)))
        return (None, None, None, None, None, *(next(got) if isinstance(o, torch.Tensor) else None for o in operands))


def run_cond(pred, true_gm: fx.GraphModule, false_gm: fx.GraphModule, operands: tuple) -> tuple:
    """Dynamo's ``cond`` node, run by AOT: ATen branches, then the op under autograd (Note [cond's backward ...])."""
    operands = tuple(operands)
    fw_true = _trace_branch(true_gm, list(operands), "true")
    fw_false = _trace_branch(false_gm, list(operands), "false")
    outs_like = fw_true.graph.find_nodes(op="output")[0].args[0]
    out_vals = [n.meta["val"] for n in outs_like]
    needs_grad = torch.is_grad_enabled() and any(
        isinstance(o, torch.Tensor) and o.requires_grad for o in (pred, *operands))
    if not needs_grad:
        with AutoDispatchBelowAutograd():
            return tuple(_cond()(pred, fw_true, fw_false, operands))
    bw_args = list(operands) + out_vals
    bw_true = _trace_branch(_vjp(fw_true, len(operands)), bw_args, "true_bw")
    bw_false = _trace_branch(_vjp(fw_false, len(operands)), bw_args, "false_bw")

    class _Op(CondAutogradOp):
        pass

    def backward(ctx, *grads):
        ctx.outputs_like = out_vals
        return CondAutogradOp.backward(ctx, *grads)

    _Op.backward = staticmethod(backward)
    return tuple(_Op.apply(pred, fw_true, fw_false, bw_true, bw_false, *operands))


def _trace_cond_fn(fn: Callable, values: list) -> fx.GraphModule:
    """``cond_fn`` to ATen ops; its graph returns the boolean itself, as torch's ``while_loop_cond_graph_0``."""
    gm = _trace_branch(lambda *a: (fn(*a),), values, "cond_fn")
    out = gm.graph.find_nodes(op="output")[0]
    out.args = (out.args[0][0],)
    gm.recompile()
    return gm


_FAKE_RULE: list = []


def _register_fake_rule() -> None:
    """Our FakeTensorMode's rule for ``while_loop``, registered the way torch registers its own
    (``@while_loop_op.py_impl(FakeTensorMode)`` in torch/_higher_order_ops/while_loop.py): the operator
    calls it, with the mode popped, when our mode is the one on top."""
    from minidynamo.fake import FakeTensorMode

    if not _FAKE_RULE:
        torch.ops.higher_order.while_loop.py_impl(FakeTensorMode)(
            lambda mode, *args, **kwargs: mode._while_loop(*args, **kwargs))
        _FAKE_RULE.append(True)


def run_while_loop(cond_gm: fx.GraphModule, body_gm: fx.GraphModule, carried: tuple, additional: tuple) -> tuple:
    """Dynamo's ``while_loop`` node, run by AOT for inference: its two subgraphs traced to ATen ops.

    Note [while_loop has no backward here]
        torch 2.13 has ``WhileLoopAutogradOp`` (torch/_higher_order_ops/while_loop.py): the forward
        stacks every iteration's carries, the backward is one more ``while_loop`` that walks them
        in reverse, reading its index with ``.item()``. Under ``aot_eager`` with the default
        ``capture_scalar_outputs=False`` that ``.item()`` raises ``DataDependentOutputException``
        while tracing the joint graph: torch's backend fails, Dynamo falls back and the loop runs
        eagerly. Ours refuses the same programs (an input that needs a gradient, grad mode on) and
        runs Dynamo's graph eagerly (Note [AOT failures run the graph eagerly]). With
        ``capture_scalar_outputs=True`` torch compiles the backward; ours still runs it eagerly.
    """
    carried, additional = tuple(carried), tuple(additional)
    operands = list(carried) + list(additional)
    if not all(isinstance(o, torch.Tensor) for o in operands):
        raise NotImplementedError("torch.while_loop with an int carry: torch's AOTAutograd traces it as an unbacked "
                                  "symbol; minidynamo's traces tensor carries only (the graph runs eagerly)")
    if torch.is_grad_enabled() and any(isinstance(o, torch.Tensor) and o.requires_grad for o in operands):
        raise NotImplementedError(
            "torch.while_loop with an input that requires grad: its backward reads the loop count with .item(); "
            "torch 2.13's aot_eager fails there too (DataDependentOutputException: aten._local_scalar_dense) "
            "unless capture_scalar_outputs=True (Note [while_loop has no backward here])")
    _register_fake_rule()
    cond_aten = _trace_cond_fn(cond_gm, operands)
    body_aten = _trace_branch(body_gm, operands, "body_fn")
    with AutoDispatchBelowAutograd():
        return tuple(torch.ops.higher_order.while_loop(cond_aten, body_aten, carried, additional))

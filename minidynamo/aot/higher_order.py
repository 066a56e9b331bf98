"""``torch.cond`` in AOTAutograd: functionalized, in the joint graph, with a backward of its own.

Place in the pipeline: AOT runs Dynamo's graph (``aot_autograd._SourceLineInterpreter``);
at a ``cond`` node it calls :func:`run_cond` instead of the operator. The three modes
AOT stacks (``FunctionalTensorMode`` above ``ProxyTorchDispatchMode`` above
``FakeTensorMode``) each let the ``cond`` operator through their ``__torch_dispatch__``
(``supports_higher_order_operators``) to a rule of their own, beside the mode:
``FunctionalTensorMode._cond``, ``ProxyTorchDispatchMode._cond``, ``FakeTensorMode._cond``.
Mirrors ``torch/_higher_order_ops/cond.py``: ``CondAutogradOp`` (autograd),
``cond_func`` (functionalization), ``trace_cond`` (the proxy mode),
``cond_fake_tensor_mode`` (fake tensors).

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

__all__ = ["run_cond", "CondAutogradOp"]


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
        gm = make_fx(lambda *a: tuple(fn(*a)), fake_mode=mode, pass_name=None,
                     placeholder_names=[f"arg{i}_1" for i in range(len(fakes))])(*fakes)
    gm.meta["hop_branch"] = name
    return gm


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

"""Activation checkpointing in AOTAutograd: a checkpointed region's ops are tagged for recomputation.

Place in the pipeline: between Dynamo's graph and the joint trace. Dynamo records
``checkpoint(fn, x, use_reentrant=False)`` as one ``tag_activation_checkpoint`` node whose
body is a subgraph (``symbolic/variables/higher_order_ops.py``). When AOT runs Dynamo's
graph (``aot_autograd._SourceLineInterpreter``), such a node runs its body in place, and
every ATen op the body records in the joint graph carries ``node.meta["recompute"]`` and
``node.meta["ac_graph_id"]``; the min-cut partitioner then recomputes those ops in the
backward instead of saving their outputs (``min_cut_partition.py``). Mirrors
``torch/_higher_order_ops/wrap.py`` (``TagActivationCheckpoint.tag_nodes``, run under
``fx_traceback.preserve_node_meta``) and the reading side in
``torch/_functorch/partitioners.py`` (``must_recompute``, ``cleanup_recompute_tags``).

Note [A checkpointed region is recomputed]
    Eager ``checkpoint`` drops the region's intermediates after the forward and runs the
    region again in the backward. Compiled, there is one forward graph and one backward
    graph, so the same effect is a partitioning decision: the region's ops are marked
    ``PREFER_RECOMPUTE`` (torch's ``CheckpointPolicy``), and the min-cut puts every marked
    op on the backward side of the cut (an infinite edge from the op to the sink), so
    only the region's inputs are saved. The region's last op, when the next region reads
    it, is saved instead (``cleanup_recompute_tags``): two regions in a row share that
    boundary value rather than recompute one from the other.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
import torch.fx as fx

__all__ = ["recompute_region", "current_tags", "must_recompute", "cleanup_recompute_tags", "policy"]

_current: dict | None = None


def policy():
    """torch's ``CheckpointPolicy`` enum (torch/utils/checkpoint.py): the values torch's partitioner reads."""
    from torch.utils.checkpoint import CheckpointPolicy

    return CheckpointPolicy


@contextlib.contextmanager
def recompute_region(ac_graph_id: int, context_fn: Any = None) -> Iterator[None]:
    """Ops recorded inside are tagged ``PREFER_RECOMPUTE`` and ``ac_graph_id`` (the region's number in its
    graph, from 1, as torch numbers them); under selective checkpointing, each op as its policy says."""
    global _current
    saved = _current
    _current = {"recompute": policy().PREFER_RECOMPUTE, "ac_graph_id": ac_graph_id}
    if context_fn is not None:
        _current["policy_fn"] = policy_fn_of(context_fn)
    try:
        yield
    finally:
        _current = saved


def current_tags(func: Any = None, args: tuple = (), kwargs: dict | None = None) -> dict | None:
    """The meta the node of ``func`` recorded now gets (make_fx reads it), or None outside a region.

    Note [Selective checkpointing asks a policy per op]
        ``checkpoint(fn, x, use_reentrant=False, context_fn=partial(create_selective_checkpoint_contexts,
        policy))`` recomputes only some of the region: ``policy(ctx, op, *args, **kwargs)``
        answers ``MUST_SAVE`` / ``PREFER_SAVE`` / ``MUST_RECOMPUTE`` / ``PREFER_RECOMPUTE`` for
        each ATen op (a list of ops means: those ``MUST_SAVE``, the rest ``PREFER_RECOMPUTE``).
        torch asks from the dispatch mode the context installs (``_CachingTorchDispatchMode`` in
        torch/utils/checkpoint.py writes ``recompute`` into the node's meta); ours asks where
        make_fx records the op, with the same arguments, and writes the answer in the same place.
    """
    if _current is None:
        return None
    fn = _current.get("policy_fn")
    tags = {"recompute": _current["recompute"], "ac_graph_id": _current["ac_graph_id"]}
    if fn is not None and func is not None:
        from torch.utils.checkpoint import SelectiveCheckpointContext

        answer = fn(SelectiveCheckpointContext(is_recompute=False), func, *args, **(kwargs or {}))
        if isinstance(answer, bool):  # torch accepts a bool: True is MUST_SAVE, False PREFER_RECOMPUTE
            answer = policy().MUST_SAVE if answer else policy().PREFER_RECOMPUTE
        tags["recompute"] = answer
    return tags


def policy_fn_of(context_fn: Any):
    """The per-op policy behind ``partial(create_selective_checkpoint_contexts, policy_fn_or_list)``."""
    import functools

    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    if not (isinstance(context_fn, functools.partial) and context_fn.func is create_selective_checkpoint_contexts
            and context_fn.args):
        raise NotImplementedError(f"checkpoint's context_fn={context_fn!r}: only "
                                  "functools.partial(create_selective_checkpoint_contexts, policy) is traced")
    policy_fn_or_list = context_fn.args[0]
    if callable(policy_fn_or_list):
        return policy_fn_or_list
    ops = list(policy_fn_or_list)
    return lambda ctx, op, *args, **kwargs: policy().MUST_SAVE if op in ops else policy().PREFER_RECOMPUTE


def must_recompute(node: fx.Node) -> bool:
    p = policy()
    return node.meta.get("recompute", None) in (p.MUST_RECOMPUTE, p.PREFER_RECOMPUTE)


def cleanup_recompute_tags(graph: fx.Graph) -> None:
    """A region's output read by a later region is saved, not recomputed (torch: ``cleanup_recompute_tags``)."""
    for node in graph.nodes:
        if must_recompute(node):
            for user in node.users:
                if must_recompute(user) and user.meta.get("ac_graph_id", 0) > node.meta.get("ac_graph_id", 0):
                    node.meta["recompute"] = policy().MUST_SAVE


def is_tag_activation_checkpoint(target: Any) -> bool:
    return target is getattr(torch.ops.higher_order, "tag_activation_checkpoint", None)


def is_cond(target: Any) -> bool:
    return target is getattr(torch.ops.higher_order, "cond", None)


def is_while_loop(target: Any) -> bool:
    return target is getattr(torch.ops.higher_order, "while_loop", None)

"""Common-subexpression elimination on the joint graph, before the min-cut partition.

Place in the pipeline: the first step of ``min_cut_partition.min_cut_rematerialization_partition``,
on the joint forward+backward graph that ``graph_capture`` traced; read by nothing else.
Mirrors ``torch/_functorch/compile_utils.py`` (``fx_graph_cse``), which torch's
``min_cut_rematerialization_partition`` (``torch/_functorch/partitioners.py``) runs when
``torch._functorch.config.cse`` is True (its default; ours is ``minidynamo.aot.config.cse``).

Note [Why CSE before the cut]
    A program that computes ``x @ w`` twice traces two ``mm`` nodes. Both are
    compute-intensive, so neither may be recomputed (Note [What may be recomputed]):
    each output the backward needs is saved, twice the bytes for one value.
    Merging equal nodes first gives the min-cut one ``mm`` to save. Two nodes are
    equal when they call the same target with the same arguments: the same
    nodes (already merged), and constants equal *and of the same type*
    (``1`` and ``1.0`` stay apart, as in torch's hash of ``(arg, type(arg))``).

Note [What CSE must not merge]
    torch's rules, as ours: a placeholder, ``get_attr`` or the output; a random op
    (torch's ``rand_ops``: two draws are two values); ``aten.empty`` (its contents
    are undefined, and it fuses into its user anyway); a node whose storage an
    output of the graph shares (two outputs with equal histories are still two
    tensors for the caller); a node whose value is an unbacked symbol. And equal
    nodes on either side of a mutation: each mutable op (its schema says so, or
    an ``out=``) starts a new *mutation region* (torch's
    ``pattern_matcher.compute_mutation_region_ids``), and only nodes of one region
    merge; after a mutation, a later duplicate replaces the earlier as the one
    to merge into. torch copies the graph into a new one without the duplicates;
    ours removes them in place (the same nodes survive, with the same names).
"""

from __future__ import annotations

import re
from typing import Any

import torch
import torch.fx as fx

from minidynamo._torch_private import OpOverload

__all__ = ["fx_graph_cse", "RAND_OPS"]

aten = torch.ops.aten

# torch/_functorch/compile_utils.py: rand_ops
RAND_OPS = frozenset({
    aten.dropout, aten._fused_dropout, aten._standard_gamma, aten.bernoulli, aten.multinomial,
    aten.native_dropout, aten.normal, aten.poisson, aten.binomial, aten.rrelu, aten.rand_like, aten.rand,
    aten.randint, aten.randn, aten.randperm,
})

# torch/_inductor/pattern_matcher.py: _mutation_op_re (a name that ends in "_", or names set/enter/exit/seed)
_MUTATION_NAME = re.compile(r"(?<!_)(_$|_[.]|(\b|_)(set|enter|exit|seed)(\b|_))(?!_)")


def _packet(node: fx.Node) -> Any:
    return getattr(node.target, "overloadpacket", node.target)


def _is_mutation(node: fx.Node) -> bool:
    """torch's ``is_mutation_op``: the schema is mutable, or the name says so, or an ``out=`` is given."""
    if isinstance(node.target, OpOverload):
        return node.target._schema.is_mutable
    if node.op == "call_function" and _MUTATION_NAME.search(getattr(node.target, "__name__", "")):
        return True
    return node.kwargs.get("out") is not None


def _storage(node: fx.Node) -> Any:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    try:
        return val.untyped_storage()._cdata  # what StorageWeakRef compares
    except NotImplementedError:
        return None


def _key(a: Any) -> Any:
    """A hashable stand-in for one argument; nodes by identity, constants with their type."""
    if isinstance(a, fx.Node):
        return a
    if isinstance(a, (list, tuple)):
        return (type(a), tuple(_key(x) for x in a))
    if isinstance(a, dict):
        return (dict, tuple((k, _key(v)) for k, v in a.items()))
    if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return (type(a), id(a.node))  # torch substitutes the SymNode, hashed by identity
    if isinstance(a, slice):  # unhashable before Python 3.12
        return (slice, _key(a.start), _key(a.stop), _key(a.step))
    hash(a)  # TypeError: this node is not merged
    return (type(a), a)


def _unbacked(node: fx.Node) -> bool:
    val = node.meta.get("val")
    if isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return any(str(s).startswith("u") for s in getattr(val.node.expr, "free_symbols", ()))
    return False


def fx_graph_cse(graph: fx.Graph) -> dict[str, str]:
    """Merge equal nodes of ``graph`` in place (Notes [Why CSE before the cut], [What CSE must not merge]).

    Returns ``{removed node name: the name of the node that replaced it}``.
    """
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    out_storages = {s for s in map(_storage, output.all_input_nodes) if s is not None}
    seen: dict[Any, fx.Node] = {}  # key -> the node later duplicates merge into
    region_of: dict[fx.Node, int] = {}
    removed: dict[str, str] = {}
    region = 0
    for node in list(graph.nodes):
        if _is_mutation(node):
            region += 1
        if (node.op != "call_function" or _packet(node) in RAND_OPS or _packet(node) is aten.empty
                or _storage(node) in out_storages or _unbacked(node)):
            continue
        try:
            key = (node.target, _key(node.args), _key(node.kwargs))
            hash(key)
        except TypeError:
            continue
        prev = seen.get(key)
        if prev is not None and region_of[prev] == region:
            node.replace_all_uses_with(prev)
            removed[node.name] = prev.name
            graph.erase_node(node)
            continue
        region_of[node] = region
        seen[key] = node  # first of its key, or first after a mutation (torch: overwrite_due_to_mutation)
    return removed

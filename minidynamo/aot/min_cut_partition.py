"""Min-cut rematerialization: save fewer tensors, recompute cheap ops in the backward.

Place in the pipeline: the other partitioner, beside ``partitioners.default_partition``;
torch's ``aot_eager`` (and Inductor) use this one. Mirrors
``torch/_functorch/partitioners.py`` (``min_cut_rematerialization_partition``,
``classify_nodes``, ``solve_min_cut``, ``get_default_op_list``), with the same
default options (``torch._functorch.config``): no memory budget, no RNG
functionalization, no activation offloading.

Note [Saving as a minimum cut]
    Every forward value the backward needs must cross from the forward to the
    backward either *saved* (it costs its bytes of memory) or *recomputed* in the
    backward from values that are saved. Build a flow network: each node ``n``
    becomes an edge ``n_in -> n_out`` whose capacity is what saving ``n`` costs,
    each data dependency an infinite edge ``n_out -> user_in``. The source feeds
    every node that can NOT be recomputed in the backward (inputs, matmuls,
    random ops, ...); every node the backward needs drains to the sink. A
    minimum source/sink cut then crosses exactly the node edges of a cheapest
    set of values to save: everything between that cut and the backward is
    recomputed. torch solves it with networkx; ours with ``max_flow.minimum_cut``
    (Dinic's algorithm), which cuts the same edges (Note [Which minimum cut]).
    Before building it, equal nodes of the joint graph are merged, as torch's
    ``fx_graph_cse`` does (cse.py, Note [Why CSE before the cut]).

Note [What may be recomputed]
    torch's rules, as ours: an op is recomputable only if it is on an allowlist
    of cheap ops (pointwise ops, views, reductions like sum, ...); a random op,
    a compute-intensive op (mm, convolution) or an input is never recomputed; a
    node whose output the backward must materialize anyway (a user there that
    cannot fuse with it) is not recomputed; neither is a reduction whose output
    is 4x smaller than its inputs (saving it is cheap). The capacity of a node
    is its size in bytes, grown by ``1.1 ** distance-to-backward`` (prefer
    saving values used soon), doubled when every user could fuse with it (it
    would never be written to memory otherwise). Parameters (static-lifetime
    inputs) cost nothing to save. torch's two further heuristics, which ban
    with no stated reason ("cannot recompute"), are ours too (Note [Values used
    far apart, and long fusible chains]); tests/test_aot_min_cut.py compares the
    partitions and the reasons with torch's.

Note [Values used far apart, and long fusible chains]
    ``solve_min_cut`` bans two more kinds of node after the rules above
    (``ban_recompute_used_far_apart`` and ``ban_recompute_long_fusible_chains`` in
    ``torch/_functorch/config.py``, both on). Far apart: a forward value used by a
    fusible op *after* a later unfusible one (a residual connection: the block's
    input feeds a convolution, and much later the add) -- that add is not
    recomputed, since the backward could not fuse it with the ops near the value.
    Long chains: a chain of fusible forward ops running more than 100 nodes past
    where it started is cut by banning the node there. On the small graphs of the
    chapters they change nothing; on timm's resnet18 the far-apart rule bans each
    block's residual add, so the relu mask of the last block is saved (``le``)
    rather than recomputed from the batch norm's bias, as torch saves it, and
    Inductor then fuses the forward's kernels as it does torch's (Note [A cold
    compile's phases] in minidynamo/bench/inductor.py counts them).
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from minidynamo._torch_private import OpOverload, lazy_graph_module
import minidynamo.aot.config as aot_config
from minidynamo.aot.activation_checkpoint import cleanup_recompute_tags, must_recompute, policy
from minidynamo.aot.cse import fx_graph_cse
from minidynamo.aot.max_flow import FlowGraph, minimum_cut
from minidynamo.aot.sym_tracing import hint
from minidynamo.aot.partitioners import (
    PartitionResult,
    _extract_graph_with_inputs_outputs,
    _is_primal,
    _is_tangent,
    default_partition,
    reordering_to_mimic_autograd_engine,
    syms_first,
)

__all__ = ["min_cut_rematerialization_partition", "MinCutResult", "min_cut_decisions_table", "activation_bytes"]

aten = torch.ops.aten

# Note [What may be recomputed]: torch's get_default_op_list, by overload packet name.
_RECOMPUTABLE = {
    "add", "sub", "div", "atan2", "mul", "max", "min", "pow", "remainder", "fmod", "__and__", "__or__",
    "__xor__", "__lshift__", "__rshift__", "eq", "ne", "ge", "gt", "le", "lt", "abs", "bitwise_not", "ceil",
    "floor", "frac", "neg", "relu", "round", "silu", "trunc", "log", "log10", "log1p", "log2", "lgamma", "exp",
    "expm1", "erf", "erfc", "cos", "acos", "cosh", "sin", "asin", "sinh", "tan", "atan", "tanh", "atanh",
    "sqrt", "rsqrt", "reciprocal", "sigmoid", "softplus", "threshold", "threshold_backward", "clamp", "where",
    "lerp", "addcmul", "gelu", "gelu_backward", "sum", "mean", "_grad_sum_to_size", "sum_to_size", "amax",
    "to", "type_as", "squeeze", "unsqueeze", "rsub", "_to_copy", "clone", "full_like", "var", "std",
    "select", "_unsafe_view", "view", "expand", "slice", "reshape", "broadcast_tensors", "scalar_tensor",
    "ones", "new_zeros", "lift_fresh_copy", "arange", "triu", "var_mean", "isinf", "any", "full",
    "as_strided", "zeros", "empty", "empty_like", "argmax", "maximum", "index", "gather", "alias", "t",
    "permute", "split", "zeros_like", "convert_element_type", "broadcast_in_dim", "iota",
}
_VIEWS = {"squeeze", "unsqueeze", "alias", "view", "slice", "t", "expand", "as_strided", "permute", "select",
          "split", "broadcast_in_dim"}
_RANDOM = {"native_dropout", "rand_like", "randn_like"}
_COMPUTE_INTENSIVE = {"mm", "convolution", "convolution_backward", "bmm", "addmm", "upsample_bilinear2d",
                      "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention"}
_MAX_DIST_FROM_BW = 1000  # torch: config.max_dist_from_bw
_NOT_SAVEABLE = 2**62  # torch's INT_INF: a finite "never save this unless nothing else works"


def _op_name(node: fx.Node) -> str | None:
    if node.op != "call_function":
        return None
    if node.target is operator.getitem:
        return "getitem"
    packet = getattr(node.target, "_overloadpacket", None)
    return packet.__name__ if packet is not None else getattr(node.target, "__name__", None)


def _is_pointwise(node: fx.Node) -> bool:
    return isinstance(node.target, OpOverload) and torch.Tag.pointwise in node.target.tags


def _is_view(node: fx.Node) -> bool:
    return _op_name(node) in _VIEWS


def _is_recomputable(node: fx.Node) -> bool:
    name = _op_name(node)
    return name == "getitem" or name in _RECOMPUTABLE or _is_pointwise(node)


def _is_fusible(a: fx.Node, b: fx.Node) -> bool:
    if _op_name(b) == "cat":
        return True
    fusible = lambda n: _is_recomputable(n) or _op_name(n) in _RANDOM  # noqa: E731
    return fusible(a) and fusible(b)


_UNBACKED_NUMEL = 4096  # torch's _size_of: hint_int(numel, fallback=4096) for a size over an unbacked symbol


def _size_of(node: fx.Node) -> int:
    """Bytes of the node's value; over symbolic sizes, for the example sizes (torch: ``hint_int``), no guard."""
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        return hint(val.numel(), _UNBACKED_NUMEL) * val.element_size()
    if isinstance(val, (list, tuple)):
        return sum(hint(v.numel(), _UNBACKED_NUMEL) * v.element_size() for v in val if isinstance(v, torch.Tensor))
    if isinstance(val, (int, float, torch.SymInt, torch.SymFloat, torch.SymBool)):  # torch: py_sym_types weigh one
        return 1
    return 0


def _aliases_input(node: fx.Node) -> bool:
    """An input, or a view (of a view...) of one: saving it costs no new memory."""
    while _is_view(node) and node.args and isinstance(node.args[0], fx.Node):
        node = node.args[0]
    return _is_primal(node)


def activation_bytes(saved: list[fx.Node]) -> int:
    """Bytes of the saved values that are new memory (not inputs or views of inputs)."""
    return sum(_size_of(n) for n in saved if not _aliases_input(n))


@dataclass
class MinCutResult(PartitionResult):
    """The partition plus its decisions (Note [Saving as a minimum cut])."""

    recomputed: list[fx.Node] = field(default_factory=list)  # forward nodes the backward computes again
    banned: dict[str, str] = field(default_factory=dict)  # node name -> why it may not be recomputed
    saved_bytes: int = 0  # bytes of the saved values that are new memory (activation_bytes)


@dataclass
class _NodeInfo:
    inputs: list[fx.Node]
    required_fw: set[fx.Node]
    required_bw: set[fx.Node]
    tangents_closure: set[fx.Node]
    fw_order: dict[fx.Node, int]


def _classify_nodes(graph: fx.Graph, num_fwd_outputs: int) -> tuple[_NodeInfo, list, list]:
    """Which nodes the forward needs, which the backward needs (torch: classify_nodes)."""
    required_bw: set[fx.Node] = set()
    for node in graph.nodes:
        if _is_tangent(node):
            required_bw.add(node)
        if node in required_bw:
            required_bw.update(node.users)
    output = next(n for n in reversed(graph.nodes) if n.op == "output")
    outs = list(output.args[0])
    fwd_outputs, bwd_outputs = outs[:num_fwd_outputs], outs[num_fwd_outputs:]
    tangents_closure = set(required_bw)
    required_bw.update(o for o in bwd_outputs if isinstance(o, fx.Node) and o.op != "output")
    primals = [n for n in graph.nodes if _is_primal(n)]
    # The forward needs what computes its outputs from the primals (walk the inputs back).
    required_fw: set[fx.Node] = set()
    stack = [o for o in fwd_outputs if isinstance(o, fx.Node)]
    while stack:
        n = stack.pop()
        if n in required_fw or _is_tangent(n):
            continue
        required_fw.add(n)
        stack.extend(n.all_input_nodes)
    order = {n: i for i, n in enumerate(n for n in graph.nodes if n in required_fw)}
    return _NodeInfo(primals, required_fw, required_bw, tangents_closure, order), fwd_outputs, bwd_outputs


def _ban_reason(node: fx.Node, info: _NodeInfo) -> str | None:
    """Why ``node`` may not be recomputed in the backward (Note [What may be recomputed]); None if it may."""
    if node.op != "call_function" or node.target is operator.getitem:
        return None
    if node.meta.get("recompute", None) == policy().MUST_SAVE:
        return "marked MUST_SAVE"
    if _op_name(node) in ("lift_fresh_copy", "lift_fresh"):
        return None
    if not _is_recomputable(node):
        # torch's default (ban_recompute_not_in_allowlist): random and compute-intensive
        # ops are banned by this one rule, since neither is on the allowlist.
        return "not in recomputable allowlist"
    if _materialized_in_backward(node, info):
        return "materialized in backward"
    if 1000 > node.dist_from_bw > _MAX_DIST_FROM_BW:  # type: ignore[attr-defined]
        return "too far from backward"
    inputs = sum(_size_of(a) for a in node.args if isinstance(a, fx.Node))
    if _size_of(node) * 4 < inputs:
        return "reduction op"
    return None


def _materialized_in_backward(node: fx.Node, info: _NodeInfo) -> bool:
    if _is_view(node):
        return False
    todo, seen = [node], set()
    while todo:
        cur = todo.pop()
        if cur in seen:
            continue
        seen.add(cur)
        for user in cur.users:
            if user not in info.required_fw and not _is_fusible(cur, user):
                return True
            if _is_view(user):
                todo.append(user)
    return False


def _flow_graph(graph: fx.Graph, info: _NodeInfo, static_inputs: set[fx.Node],
                unsaveable: set[fx.Node]) -> tuple[FlowGraph, dict[str, str]]:
    """The network of Note [Saving as a minimum cut], and why each banned node may not be recomputed."""
    for node in reversed(graph.nodes):  # distance (in nodes) to the nearest backward user
        if node.op == "output" or node in info.required_fw:
            node.dist_from_bw = int(1e9)
            if node in info.required_fw:
                for user in node.users:
                    node.dist_from_bw = min(node.dist_from_bw, user.dist_from_bw + 1)
        else:
            node.dist_from_bw = 0

    flow = FlowGraph()
    banned: dict[str, str] = {}

    def ban(node: fx.Node, reason: str) -> None:
        if _is_view(node) or must_recompute(node):
            return  # a view is free to recompute from what it views; a checkpointed op is recomputed
        banned[node.name] = reason
        flow.add_edge("source", node.name + "_in", capacity=math.inf)

    for node in graph.nodes:
        if node.op == "output":
            continue
        if node in info.required_bw:
            if node not in info.tangents_closure:
                flow.add_edge(node.name + "_out", "sink", capacity=math.inf)  # must be available to the backward
            else:
                flow.add_edge(node.name + "_in", "sink", capacity=math.inf)  # computed in the backward
                continue
        if must_recompute(node):  # Note [A checkpointed region is recomputed] (activation_checkpoint.py)
            flow.add_edge(node.name + "_in", "sink", capacity=math.inf)
            continue
        if _is_primal(node):
            ban(node, "primal input")
        reason = _ban_reason(node, info)
        # an input or buffer mutation kept in the graph (copy_, keep_input_mutations) has no user but runs in the
        # forward: torch's required_fw_nodes (the default partition's forward) holds it, and bans it
        if (node in info.required_fw or (node.op == "call_function" and node.is_impure()
                                         and node not in info.required_bw)) and reason:
            ban(node, reason)
        val = node.meta.get("val")
        if not isinstance(val, (torch.Tensor, int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
            weight = math.inf  # a tuple (multi-output op): save its getitems instead
        elif node in static_inputs:
            weight = 0
        elif node in unsaveable:
            weight = _NOT_SAVEABLE
        else:
            weight = int(_size_of(node) * 1.1 ** max(min(node.dist_from_bw, 100), 1))
            if node.op != "placeholder" and all(_is_fusible(node, u) for u in node.users):
                weight *= 2
        flow.add_edge(node.name + "_in", node.name + "_out", capacity=weight)
        for user in node.users:
            flow.add_edge(node.name + "_out", user.name + "_in", capacity=math.inf)

    _ban_far_apart_and_long_chains(graph, info, banned, ban)
    return flow, banned


def _ban_far_apart_and_long_chains(graph: fx.Graph, info: _NodeInfo, banned: dict[str, str], ban: Any) -> None:
    """Note [Values used far apart, and long fusible chains] (torch: the end of ``solve_min_cut``)."""
    order = info.fw_order
    fw_nodes = [n for n in graph.nodes if n in info.required_fw]  # torch's required_fw_nodes, in graph order
    tie = itertools.count()

    def first_unfusible(start_nodes: list[fx.Node], max_range: int) -> int:
        # torch's heap of (order, node, fusible): an unfusible entry of a node pops before its fusible one
        heap: list = []
        pushed: set = set()
        for n in start_nodes:
            heapq.heappush(heap, (order[n], True, next(tie), n))
            pushed.add((n, True))
        while heap:
            _, fusible, _, node = heapq.heappop(heap)
            pushed.discard((node, fusible))
            if not fusible:
                return order[node]
            for user in node.users:
                if user in info.required_fw and order[user] <= max_range:
                    key = (user, _is_fusible(node, user))
                    if key not in pushed:
                        heapq.heappush(heap, (order[user], key[1], next(tie), user))
                        pushed.add(key)
        return max_range

    for used in fw_nodes:  # values used far apart
        fw_users = [u for u in used.users if u in info.required_fw]
        if not fw_users:
            continue
        first = first_unfusible(fw_users, max(order[u] for u in fw_users))
        for user in tuple(used.users):
            if user in info.required_fw and order[user] > first and _is_fusible(used, user):
                if user.name in banned:
                    continue
                ban(user, "cannot recompute")

    visited: set[fx.Node] = set()
    for start in fw_nodes:  # long fusible chains
        chain = [(order[start], next(tie), start)]
        while chain:
            _, _, cur = heapq.heappop(chain)
            if cur in visited:
                continue
            visited.add(cur)
            if order[cur] > order[start] + 100 and not chain:  # 100: torch's arbitrary bound
                ban(cur, "cannot recompute")
                break
            for user in cur.users:
                if user in info.required_fw and _is_fusible(cur, user) and user.name not in banned:
                    heapq.heappush(chain, (order[user], next(tie), user))


def _solve_min_cut(graph: fx.Graph, info: _NodeInfo, static_inputs: set[fx.Node],
                   unsaveable: set[fx.Node]) -> tuple[list[fx.Node], dict[str, str]]:
    flow, banned = _flow_graph(graph, info, static_inputs, unsaveable)
    _, (reachable, non_reachable) = minimum_cut(flow, "source", "sink")
    cut = {u[:-3] for u in reachable for v in flow.successors(u) if v in non_reachable}
    saved = [n for n in graph.nodes if n.name in cut]
    return saved, banned


def min_cut_rematerialization_partition(joint_module: fx.GraphModule, *, num_fwd_outputs: int,
                                        static_lifetime_input_indices: list[int] | None = None,
                                        mutated_input_indices: list[int] | None = None) -> MinCutResult:
    """Note [Saving as a minimum cut]. Same signature as ``default_partition`` plus two hints.

    ``static_lifetime_input_indices``: primals the caller keeps alive anyway
    (parameters): free to save. ``mutated_input_indices``: primals the runtime
    wrapper writes back after the forward; saving one would trip its version
    counter in the backward, so it is saved only when nothing else works.
    """
    graph = joint_module.graph
    graph.eliminate_dead_code()
    if aot_config.cse:  # Note [Why CSE before the cut] (cse.py), as torch's partitioner
        fx_graph_cse(graph)
    cleanup_recompute_tags(graph)
    info, fwd_outputs, bwd_outputs = _classify_nodes(graph, num_fwd_outputs)
    if not info.required_bw:
        return _as_result(default_partition(joint_module, num_fwd_outputs=num_fwd_outputs), joint_module, [], {})
    primals = info.inputs
    static = {primals[i] for i in (static_lifetime_input_indices or []) if i < len(primals)}
    unsaveable = {primals[i] for i in (mutated_input_indices or []) if i < len(primals)}
    saved, banned = _solve_min_cut(graph, info, static, unsaveable)
    saved = syms_first(saved)
    tangents = [n for n in graph.nodes if _is_tangent(n)]
    # Multi-output ops: save the getitems, as the default partition does.
    fw_graph = _extract_graph_with_inputs_outputs(graph, primals, fwd_outputs + saved, "forward")
    bw_graph = _extract_graph_with_inputs_outputs(graph, saved + tangents, bwd_outputs, "backward")
    # A saved value the backward graph does not read after all: drop it (torch does the same).
    bw_used = {n.name for n in bw_graph.nodes if n.op == "placeholder" and n.users}
    if len(bw_used) < len(saved) + len(tangents):
        kept = [n for n in saved if n.name in bw_used]
        if len(kept) != len(saved):
            saved = kept
            fw_graph = _extract_graph_with_inputs_outputs(graph, primals, fwd_outputs + saved, "forward")
            bw_graph = _extract_graph_with_inputs_outputs(graph, saved + tangents, bwd_outputs, "backward")
    bw_graph = reordering_to_mimic_autograd_engine(bw_graph)  # Note [The backward in the autograd engine's order]
    fw_module, bw_module = lazy_graph_module(joint_module, fw_graph), lazy_graph_module(joint_module, bw_graph)
    fw_names = {n.name for n in fw_graph.nodes if n.op == "call_function"}
    bw_names = {n.name for n in bw_graph.nodes if n.op == "call_function"}
    recomputed = [n for n in graph.nodes if n.op == "call_function" and n.name in fw_names and n.name in bw_names]
    result = MinCutResult(fw_module, bw_module, saved, num_fwd_outputs, recomputed=recomputed, banned=banned)
    result.saved_bytes = activation_bytes(saved)
    return result


def _as_result(part: PartitionResult, joint_module: fx.GraphModule, recomputed, banned) -> MinCutResult:
    return MinCutResult(part.fw_module, part.bw_module, part.saved_values, part.num_fwd_outputs,
                        recomputed=recomputed, banned=banned,
                        saved_bytes=activation_bytes(part.saved_values))


def min_cut_decisions_table(result: MinCutResult, default: PartitionResult | None = None) -> str:
    """What min-cut saved and recomputed, with bytes; beside the default partition's choice if given."""
    rows = [("value", "decision", "op", "bytes")]
    for n in result.saved_values:
        kind = "saved (input)" if _is_primal(n) else "saved (view of input)" if _aliases_input(n) else "saved"
        rows.append((n.name, kind, str(_op_name(n) or "-"), str(_size_of(n))))
    for n in result.recomputed:
        rows.append((n.name, "recomputed", str(_op_name(n)), str(_size_of(n))))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.append(f"activation bytes saved: {result.saved_bytes} (inputs and their views cost none)")
    if default is not None:
        d = activation_bytes(default.saved_values)
        lines.append(f"default partition saves: {d} bytes of activations ({len(default.saved_values)} values)")
    return "\n".join(lines)

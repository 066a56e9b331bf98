"""Split the joint forward+backward graph into a forward graph and a backward graph.

Place in the pipeline: after ``graph_capture`` has traced the joint graph; before
the runtime wrappers run the two halves inside an ``autograd.Function``. Mirrors
``torch/_functorch/partitioners.py`` (``default_partition``,
``_extract_graph_with_inputs_outputs``, ``_extract_fwd_bwd_modules``).

Note [The default partition]
    A node is *forward* if it was traced before ``autograd.grad`` was called
    (graph_capture tags it ``partitioner_tag == "is_forward"``); everything after
    the last forward node is backward. A forward node that a backward node reads
    is a *saved value*: the forward graph returns it after the real outputs and
    the backward graph takes it as an input, before the tangents. That is what
    ``ctx.save_for_backward`` holds between the two. torch's default_partition
    does the same, by position too; its ``min_cut_rematerialization_partition``
    (Inductor's default) instead recomputes cheap ops in the backward to save
    fewer tensors, which ours does not do.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx

__all__ = ["default_partition", "PartitionResult", "reordering_to_mimic_autograd_engine", "saved_values_table"]


def _is_primal(node: fx.Node) -> bool:
    return node.op == "placeholder" and node.name.startswith("primals")


def _is_tangent(node: fx.Node) -> bool:
    return node.op == "placeholder" and node.name.startswith("tangents")


def _is_input_mutation(node: fx.Node) -> bool:
    """A ``copy_`` into a primal that the joint graph's forward ends with."""
    return (node.op == "call_function" and node.target is torch.ops.aten.copy_.default
            and node.meta.get("partitioner_tag") == "is_forward")


def _is_forward_assert(node: fx.Node) -> bool:
    """Note [Runtime asserts run in the forward]
        The runtime asserts Dynamo put in its graph (``_assert_scalar`` of ``u0 >= 0``,
        symbolic/runtime_assert.py) are traced into the joint graph's forward. They have
        no users and are impure, so a backward that gets the value they read (a saved
        ``_local_scalar_dense``) could compute them again; the values were already
        checked when the forward ran, and torch's backward graphs hold no copy of them
        (seen on ``x[:u0]`` and ``masked_select`` through torch's ``aot_eager``). Only the
        forward keeps them.
    """
    return (node.op == "call_function" and node.target is torch.ops.aten._assert_scalar.default
            and node.meta.get("partitioner_tag") == "is_forward")


def _extract_graph_with_inputs_outputs(
    joint: fx.Graph, inputs: list[fx.Node], outputs: list[Any], what: str
) -> fx.Graph:
    """A new graph computing ``outputs`` from ``inputs`` with copies of the joint's nodes.

    Only the nodes the outputs need are copied, with every side-effecting node
    (an in-place op, a ``copy_`` into an input) that can be computed: what copying
    every computable node and then ``eliminate_dead_code`` keeps (torch's way),
    without making the dead copies first. A node that needs a placeholder not in
    ``inputs`` cannot be computed; an output that cannot is an error naming it.

    Note [A random op is no effect of the backward]
        ``Node.is_impure()`` counts an op tagged ``nondeterministic_seeded`` as an effect
        (a dropout; also ``_scaled_dot_product_flash_attention_for_cpu``, which takes a
        dropout probability). Its inputs are often saved for the backward, so the backward
        could compute it, and as an effect it was copied there: GPT-2's backward ran each
        layer's attention forward again, 20 Inductor kernels where torch's has 17. Torch's
        partitioner copies every computable node and then ``eliminate_dead_code``, which,
        inside ``torch.compile``'s tracing context, treats random ops as pure unless
        ``torch._inductor.config.fallback_random`` (``torch/fx/graph.py``
        ``Graph.eliminate_dead_code``). The forward keeps them as effects (the RNG is
        drawn as eager draws it); the backward takes only what its outputs need.
    """
    computable: set[fx.Node] = set(inputs)
    effects: list[fx.Node] = []
    for node in joint.nodes:
        if node in computable or node.op in ("placeholder", "output"):
            continue
        if what == "backward" and _is_input_mutation(node):
            continue  # Note [Input mutations kept in the graph] (graph_capture): the forward's job
        if what == "backward" and _is_forward_assert(node):
            continue  # Note [Runtime asserts run in the forward]
        if all(a in computable for a in node.all_input_nodes):
            computable.add(node)
            # Note [A random op is no effect of the backward]
            if node.is_impure(impure_random=what != "backward"):
                effects.append(node)
    needed: set[fx.Node] = set(inputs)  # the walk back stops at the inputs
    todo = [o for o in outputs if isinstance(o, fx.Node)] + effects
    for x in todo:
        if x not in computable:
            raise RuntimeError(f"partition: the {what} graph cannot compute {x.name} from its inputs")
    while todo:
        node = todo.pop()
        if node not in needed:
            needed.add(node)
            todo.extend(node.all_input_nodes)

    graph = fx.Graph()
    env: dict[fx.Node, Any] = {}
    for node in inputs:
        new = graph.placeholder(node.name)
        new.meta = dict(node.meta)
        env[node] = new
    for node in joint.nodes:
        if node in needed and node not in env:
            env[node] = graph.node_copy(node, env.__getitem__)

    def out_arg(x: Any) -> Any:
        return env[x] if isinstance(x, fx.Node) else x

    graph.output(tuple(out_arg(o) for o in outputs))
    # No eliminate_dead_code here: every copied node is an output, an effect or an input of a
    # copied node, so it would remove nothing (it cost a lint and a purity check per node).
    return graph


def reordering_to_mimic_autograd_engine(graph: fx.Graph) -> fx.Graph:
    """Note [The backward in the autograd engine's order] (torch: ``reordering_to_mimic_autograd_engine``).

    Note [The backward in the autograd engine's order]
        A backward cut from the joint graph copies its nodes in joint order: the
        forward ops min-cut recomputes come first (they were traced first), then the
        backward proper. torch's ``min_cut_rematerialization_partition``
        (``torch/_functorch/partitioners.py``) ends with
        ``reordering_to_mimic_autograd_engine``: starting at the first user of a
        tangent, it copies the backward node by node and brings in each node's
        missing inputs (recomputed forward ops) just before it, in their old order;
        ``copy_`` nodes ahead of that first user come first. Ours does the same.
        The order is no detail for Inductor: its scheduler fuses in node order. On
        GPT-2 in training, with the recomputed ``view``s of each layer's attention
        output at the top, the gradient of the QKV ``split`` (a ``cat`` of
        ``clone``d, transposed q, k, v gradients) compiled to three C++ kernels
        where torch's compiles one.
    """
    order = {node: i for i, node in enumerate(graph.nodes)}
    new = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for node in graph.find_nodes(op="placeholder"):
        env[node] = new.node_copy(node, env.__getitem__)

    def insert(node: fx.Node) -> None:
        todo, insertable = [node], set()
        while todo:
            n = todo.pop()
            if n in insertable or n in env:
                continue
            insertable.add(n)
            todo.extend(n.all_input_nodes)
        for n in sorted(insertable, key=order.__getitem__):
            env[n] = new.node_copy(n, env.__getitem__)

    first = min((u for t in graph.nodes if _is_tangent(t) for u in t.users), key=order.__getitem__, default=None)
    if first is None:  # no gradient depends on a tangent
        return graph
    nodes = list(graph.nodes)
    for node in nodes[:order[first]]:
        if node.op == "call_function" and node.target is torch.ops.aten.copy_.default:
            insert(node)
    for node in nodes[order[first]:]:
        insert(node)
    return new


@dataclass
class PartitionResult:
    fw_module: fx.GraphModule
    bw_module: fx.GraphModule
    saved_values: list[fx.Node]  # nodes of the joint graph
    num_fwd_outputs: int

    @property
    def num_saved(self) -> int:
        return len(self.saved_values)


def default_partition(joint_module: fx.GraphModule, *, num_fwd_outputs: int) -> PartitionResult:
    """Note [The default partition]."""
    graph = joint_module.graph
    output_node = next(n for n in reversed(graph.nodes) if n.op == "output")
    joint_outputs = list(output_node.args[0])
    fwd_outputs, bwd_outputs = joint_outputs[:num_fwd_outputs], joint_outputs[num_fwd_outputs:]
    primals = [n for n in graph.nodes if _is_primal(n)]
    tangents = [n for n in graph.nodes if _is_tangent(n)]

    # Forward nodes: by position, up to the last node traced before autograd.grad ran.
    last_forward = None
    for node in graph.nodes:
        if node.meta.get("partitioner_tag") == "is_forward" or _is_primal(node):
            last_forward = node
    forward_names = set()
    for node in graph.nodes:
        if node.op != "output" and not _is_tangent(node):
            forward_names.add(node.name)
        if node is last_forward:
            break

    saved_values: list[fx.Node] = []
    for node in graph.nodes:
        if node.name not in forward_names:
            continue
        users = list(node.users)
        if users and all(u.target is operator.getitem for u in users):
            continue  # a multi-output node: save its getitems instead
        if any(u.name not in forward_names and u.op != "output" for u in users):
            saved_values.append(node)
        elif any(u.op == "output" for u in users) and any(o is node for o in bwd_outputs):
            # A forward value that is itself a gradient (e.g. an input's grad computed in the forward).
            saved_values.append(node)

    saved_values = syms_first(saved_values)
    fw_graph = _extract_graph_with_inputs_outputs(graph, primals, fwd_outputs + saved_values, "forward")
    bw_graph = _extract_graph_with_inputs_outputs(graph, saved_values + tangents, bwd_outputs, "backward")
    fw_module = fx.GraphModule(joint_module, fw_graph)
    bw_module = fx.GraphModule(joint_module, bw_graph)
    return PartitionResult(fw_module, bw_module, saved_values, num_fwd_outputs)


def syms_first(saved: list[fx.Node]) -> list[fx.Node]:
    """Saved SymInts before saved tensors: the backward graph takes its sizes first, as torch's does
    (``saved_sym_nodes + saved_values``); the runtime keeps them on ``ctx``, not in ``save_for_backward``."""
    syms = [n for n in saved if isinstance(n.meta.get("val"), (torch.SymInt, torch.SymFloat, torch.SymBool))]
    return syms + [n for n in saved if n not in syms] if syms else saved


def _describe(node: fx.Node) -> tuple[str, str, str, int]:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        nbytes = val.numel() * val.element_size()
        return tuple(val.shape).__repr__(), str(val.dtype).replace("torch.", ""), nbytes.__str__(), nbytes
    return "-", type(val).__name__, "0", 0


def saved_values_table(result: PartitionResult) -> str:
    """What the forward saves for the backward: one row per saved value, with sizes.

    ``kind`` says where the value comes from: an input of the function (``primal``,
    free to keep: the caller holds it anyway) or an activation computed in the forward.
    """
    rows = [("saved", "kind", "computed by", "shape", "dtype", "bytes")]
    total = 0
    for node in result.saved_values:
        shape, dtype, nbytes_s, nbytes = _describe(node)
        kind = "primal" if _is_primal(node) else "activation"
        by = "-" if node.op == "placeholder" else str(node.target)
        total += nbytes if kind == "activation" else 0
        rows.append((node.name, kind, by, shape, dtype, nbytes_s))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    lines.append(f"activation bytes saved: {total}")
    return "\n".join(lines)

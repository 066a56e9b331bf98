"""Our minimum cut (Dinic's algorithm, ``aot/max_flow.py``) against networkx's, which torch's partitioner calls.

On random graphs and on the flow networks the min-cut partitioner builds for the
benchmark workloads and the AOT programs of ``test_aot_min_cut``: the cut value and
both sides of the cut equal ``networkx.minimum_cut``'s (Note [Which minimum cut]);
on the workloads the partition also equals torch's ``min_cut_rematerialization_partition``.
"""

from __future__ import annotations

import copy
import math
import random

import networkx as nx
import pytest
import torch

from minidynamo.aot import aot_function
from minidynamo.aot.max_flow import FlowGraph, minimum_cut
from minidynamo.aot.min_cut_partition import (
    _classify_nodes,
    _flow_graph,
    min_cut_rematerialization_partition,
)
from tests.test_aot_min_cut import PROGRAMS, _compare, _joints_of, _workload

pytestmark = pytest.mark.ch10


def _nx(flow: FlowGraph) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(flow.capacity)
    for u, out in flow.capacity.items():
        for v, c in out.items():
            g.add_edge(u, v, capacity=c)
    return g


def _assert_same_cut(flow: FlowGraph, source="source", sink="sink"):
    value, (s_side, t_side) = minimum_cut(flow, source, sink)
    nx_value, (nx_s, nx_t) = nx.minimum_cut(_nx(flow), source, sink)
    assert value == nx_value
    assert (s_side, t_side) == (set(nx_s), set(nx_t))
    return value


def _random_graph(rng: random.Random) -> FlowGraph:
    n = rng.randint(2, 30)
    flow = FlowGraph()
    flow.add_edge(0, n - 1, capacity=0)  # both ends are in the graph
    for _ in range(rng.randint(0, 4 * n)):
        u, v = rng.randrange(n), rng.randrange(n)
        if u == v:
            continue
        # small capacities: many ties, so many minimum cuts to choose among
        c = rng.choice([0, 1, 2, 3, 5, 8, math.inf]) if rng.random() < 0.3 else rng.randint(1, 4)
        flow.add_edge(u, v, capacity=c)
    return flow


def test_random_graphs_match_networkx():
    rng = random.Random(0)
    checked = 0
    for _ in range(300):
        flow = _random_graph(rng)
        sink = max(flow.capacity)
        try:
            nx.minimum_cut(_nx(flow), 0, sink)
        except nx.NetworkXUnbounded:
            with pytest.raises(ValueError, match="infinite capacity"):
                minimum_cut(flow, 0, sink)
            continue
        _assert_same_cut(flow, 0, sink)
        checked += 1
    assert checked > 200


def test_ties_pick_networkxs_cut():
    # two chains a -> b -> c, every edge 1: three minimum cuts; networkx (and so torch) cuts next to the sink
    flow = FlowGraph()
    for u, v in [("s", "a"), ("a", "b"), ("b", "t")]:
        flow.add_edge(u, v, capacity=1)
    value, (s_side, t_side) = minimum_cut(flow, "s", "t")
    assert value == 1 and t_side == {"t"}
    _assert_same_cut(flow, "s", "t")


def _check_partitioner_network(joint, static=()):
    gm = copy.deepcopy(joint.gm)
    gm.graph.eliminate_dead_code()
    info, _, _ = _classify_nodes(gm.graph, joint.num_fwd_outputs)
    primals = info.inputs
    flow, _ = _flow_graph(gm.graph, info, {primals[i] for i in static}, set())
    assert _assert_same_cut(flow) > 0


def _static(joint):
    return [i for i, a in enumerate(joint.gm.graph.find_nodes(op="placeholder"))
            if isinstance(a.meta.get("val"), torch.nn.Parameter)]


@pytest.mark.parametrize("name", ["mlp", "transformer_block", "resnet10t_train",
                                  pytest.param("mobilenetv3_small_train", marks=pytest.mark.slow)])
def test_workload_networks_match_networkx_and_torch(name):
    fn, args = _workload(name)
    joints = [j for j, _ in _joints_of(fn, *args) if j.num_fwd_outputs is not None]
    assert joints
    for joint in joints:
        _check_partitioner_network(joint, _static(joint))
        _compare(joint, _static(joint))  # saved values and both graphs' ops equal torch's partition


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_networks_match_networkx(name):
    fn, make = PROGRAMS[name]
    torch.manual_seed(0)
    compiled = aot_function(fn, partition_fn=min_cut_rematerialization_partition)
    compiled(*make())
    _check_partitioner_network(compiled.artifacts.joint)

"""Maximum flow and minimum cut on a small directed graph: Dinic's algorithm.

Place in the pipeline: inside the min-cut partitioner (``min_cut_partition.py``),
which asks which forward values to save. torch's ``solve_min_cut`` calls
networkx's ``minimum_cut`` (preflow-push); this module is what that call
computes, written out, over plain dicts. It returns the same partition as
networkx (Note [Which minimum cut]); ``tests/test_max_flow.py`` checks that.
Mirrors ``networkx``'s ``minimum_cut`` as ``torch/_functorch/partitioners.py`` (``solve_min_cut``) calls it.

Note [Dinic's algorithm]
    The graph is ``capacity[u][v]``: how much may flow along the edge ``u -> v``
    (``math.inf`` for an edge that may never be cut). The *residual* graph says
    how much more can still flow: ``res[u][v] = capacity[u][v] - flow[u][v]``,
    and pushing ``f`` along ``u -> v`` also opens ``f`` back along ``v -> u``
    (the flow can be undone). Dinic repeats two steps until the sink is out of
    reach:

    1. a breadth-first search from the source over edges with room left gives
       every node its *level* (its distance from the source);
    2. a depth-first search sends flow along paths that go one level up at each
       step, until none is left (a *blocking flow*). Each node keeps a pointer to
       the next edge it has not tried yet, so an edge that is full, or leads to a
       dead end, is never looked at again in this phase.

    Each phase makes the source-to-sink distance longer, so there are at most
    ``len(nodes)`` phases; on the partitioner's graphs (chains of ops with a
    few branches) it takes a handful. The flow is exact: capacities are ints
    (bytes), ``inf`` only on edges no path of finite flow saturates.

Note [Which minimum cut]
    A graph can have several minimum cuts of the same value (two values of the
    same size, either one saved). networkx's ``minimum_cut`` returns one
    particular one: the sink side is every node that can still reach the sink in
    the residual graph of a maximum flow. That set is the same for *every*
    maximum flow (it is the smallest sink side of all minimum cuts), so our
    flow, found in another order than networkx's, cuts the same edges, and the
    partitioner saves the values torch's saves.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Hashable

__all__ = ["FlowGraph", "minimum_cut"]

Node = Hashable


class FlowGraph:
    """Edges with capacities, as ``networkx.DiGraph.add_edge(u, v, capacity=c)`` (a second add replaces)."""

    def __init__(self) -> None:
        self.capacity: dict[Node, dict[Node, float]] = {}

    def add_edge(self, u: Node, v: Node, capacity: float) -> None:
        self.capacity.setdefault(u, {})[v] = capacity
        self.capacity.setdefault(v, {})

    def __contains__(self, node: Node) -> bool:
        return node in self.capacity

    def successors(self, node: Node) -> dict[Node, float]:
        return self.capacity[node]


def _residual(graph: FlowGraph) -> dict[Node, dict[Node, float]]:
    """Room left on every edge and its reverse (zero-capacity edges and self-loops carry nothing)."""
    res: dict[Node, dict[Node, float]] = {u: {} for u in graph.capacity}
    for u, out in graph.capacity.items():
        for v, c in out.items():
            if u == v or c <= 0:
                continue
            res[u][v] = res[u].get(v, 0) + c
            res[v].setdefault(u, 0)
    return res


def _levels(res: dict[Node, dict[Node, float]], source: Node) -> dict[Node, int]:
    level = {source: 0}
    todo = deque([source])
    while todo:
        u = todo.popleft()
        for v, room in res[u].items():
            if room > 0 and v not in level:
                level[v] = level[u] + 1
                todo.append(v)
    return level


def _blocking_flow(res: dict[Node, dict[Node, float]], level: dict[Node, int], source: Node, sink: Node) -> float:
    """Push flow along level-increasing paths until none is left (Note [Dinic's algorithm], step 2)."""
    adj = {u: list(out) for u, out in res.items() if u in level}
    next_edge = dict.fromkeys(adj, 0)
    total = 0
    path = [source]
    while path:
        u = path[-1]
        if u == sink:
            edges = list(zip(path, path[1:]))
            f = min(res[a][b] for a, b in edges)
            if f == math.inf:
                raise ValueError("minimum_cut: a path of infinite capacity joins the source and the sink")
            for a, b in edges:
                res[a][b] -= f
                res[b][a] += f
            total += f
            # back up to the tail of the first edge that is now full
            full = next(i for i, (a, b) in enumerate(edges) if res[a][b] == 0)
            del path[full + 1:]
            continue
        nbrs, i, want = adj[u], next_edge[u], level[u] + 1
        while i < len(nbrs) and not (res[u][nbrs[i]] > 0 and level.get(nbrs[i]) == want):
            i += 1
        next_edge[u] = i
        if i < len(nbrs):
            path.append(nbrs[i])
        else:  # a dead end: never enter it again in this phase
            path.pop()
            if path:
                next_edge[path[-1]] += 1
    return total


def minimum_cut(graph: FlowGraph, source: Node, sink: Node) -> tuple[float, tuple[set, set]]:
    """``(cut value, (source side, sink side))``, as ``networkx.minimum_cut`` (Note [Which minimum cut])."""
    if source not in graph or sink not in graph:
        raise ValueError(f"minimum_cut: {source if source not in graph else sink!r} is not in the graph")
    res = _residual(graph)
    value = 0
    while True:
        level = _levels(res, source)
        if sink not in level:
            break
        value += _blocking_flow(res, level, source, sink)
    # the sink side: every node that can still reach the sink through an edge with room left
    sink_side = {sink}
    todo = [sink]
    while todo:
        v = todo.pop()
        for u in res[v]:  # res holds both directions of every edge
            if u not in sink_side and res[u][v] > 0:
                sink_side.add(u)
                todo.append(u)
    return value, (set(graph.capacity) - sink_side, sink_side)

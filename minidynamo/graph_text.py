"""The Python code of an fx graph, stable across runs: what chapters, the tour and ``print_readable`` print.

Place in the pipeline: under every stage that prints a graph (``aot/graph_capture.py``'s
``print_readable``, ``python -m minidynamo tour``, the chapters through
``minidynamo.notebook``); imports nothing of ours. Mirrors what
``torch/fx/graph_module.py`` (``GraphModule.print_readable``) prints, less the comments
that carry file paths and line numbers, so nbval sees the same text on every machine.
"""

from __future__ import annotations

import re

__all__ = ["normalize_graph", "print_graph"]


_COMMENT = re.compile(r"^\s*#\s*(File:|No stacktrace|Source Nodes|Module stack)")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")


def normalize_graph(graph_like) -> str:
    """The Python code of an fx graph (or GraphModule), stable across runs.

    Drops the comments that carry file paths and line numbers, blank lines and
    trailing spaces, and masks addresses. Node names are kept: they are part of
    what a reader compares between our graph and torch's.
    """
    graph = getattr(graph_like, "graph", graph_like)
    src = graph.python_code(root_module="self").src
    lines = []
    for line in src.splitlines():
        if not line.strip() or _COMMENT.match(line):
            continue
        lines.append(_ADDRESS.sub("0x?", line.rstrip()))
    return "\n".join(lines)


def print_graph(graph_like) -> None:
    """Print :func:`normalize_graph` of a graph."""
    print(normalize_graph(graph_like))

"""Helpers for the chapters: a deterministic first cell and one way to print graphs.

Place in the pipeline: none; every notebook's first cell calls :func:`setup`, and
every printed graph goes through :func:`normalize_graph`, so that nbval sees the
same text on every run and every machine.
"""

from __future__ import annotations

import logging
import random
import re
import warnings

import torch

__all__ = ["setup", "normalize_graph", "print_graph"]


def setup(seed: int = 0) -> None:
    """Seed every RNG, reset both Dynamos, silence warnings and logs, fix print options."""
    import numpy as np

    from minidynamo import reset
    from minidynamo._torch_private import dynamo_reset, silence_dynamo_logs

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.set_printoptions(precision=4, sci_mode=False)
    warnings.filterwarnings("ignore")
    logging.getLogger("torch").setLevel(logging.ERROR)
    silence_dynamo_logs()
    dynamo_reset()
    reset()


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

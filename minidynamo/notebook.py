"""Helpers for the chapters: a deterministic first cell and one way to print graphs.

Place in the pipeline: none; every notebook's first cell calls :func:`setup`, and
every printed graph goes through :func:`normalize_graph`, so that nbval sees the
same text on every run and every machine.
"""

from __future__ import annotations

import logging
import random
import warnings

import torch

from minidynamo.graph_text import normalize_graph, print_graph  # noqa: F401 - the chapters' name for them

__all__ = ["setup", "normalize_graph", "print_graph", "saved_for_backward"]


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


def saved_for_backward(fn, *args) -> list:
    """What our ``aot_eager`` saves for the backward, ``[(name, bytes), ...]`` per graph: ``fn`` compiled
    by ``md.compile`` and called once, its output's sum back-propagated (as the torch oracle does)."""
    import minidynamo as md
    from minidynamo.backends import aot_eager

    saved = []

    def backend(gm, example_inputs):
        compiled = aot_eager(gm, example_inputs)
        part = getattr(getattr(compiled, "artifacts", None), "partition", None)
        if part is not None:
            saved.append([(n.name, _nbytes(n.meta.get("val"))) for n in part.saved_values])
        return compiled

    md.reset()
    out = md.compile(fn, backend=backend)(*args)
    out.sum().backward()
    return saved


def _nbytes(val) -> int:
    return val.numel() * val.element_size() if isinstance(val, torch.Tensor) else 0

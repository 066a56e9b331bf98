"""``md.explain``: run a function once under a fresh cache and report what was compiled.

Place in the pipeline: beside the front door (``eval_frame.py``): ``explain`` compiles
the function with a backend that only collects each graph, and a config whose hooks
collect each graph break and cache entry, calls it once, and returns an
``ExplainOutput``. Mirrors ``torch._dynamo.explain`` (``torch/_dynamo/eval_frame.py``)
and ``torch/_dynamo/backends/debugging.py`` (``ExplainOutput``, ``ExplainWithBackend``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from . import frame_hook
from .convert_frame import CacheEntry
from .exc import GraphBreak
from .guards import Guard


class GuardList(list):
    """``md.explain(...).guards``: a list of guards that prints as the entries' guard trees (``TORCH_LOGS=guards``)."""

    def __init__(self, guards=(), trees=()):
        super().__init__(guards)
        self.trees = list(trees)

    def __str__(self) -> str:
        return "\n\n".join(str(t) for t in self.trees)


@dataclass
class ExplainOutput:
    """What ``md.explain`` found (torch/_dynamo/backends/debugging.py ``ExplainOutput``)."""

    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list[GraphBreak]
    guards: list[Guard]
    entries: list[CacheEntry]
    out: Any = None
    frame_hook: str = ""  # which entry point ran: the PEP 523 hook, or explicit calls (and why)

    @property
    def ops_per_graph(self) -> list[list]:
        """The ``call_function`` targets of each graph, as torch's ``ExplainOutput.ops_per_graph``.

        torch/_dynamo/backends/debugging.py ``_explain_graph_detail`` counts only
        ``call_function`` nodes: a method call on a tensor (``x.sin()``, a
        ``call_method`` node) and a submodule call (``call_module``) are not ops there.
        """
        return [[n.target for n in g.graph.nodes if n.op == "call_function"] for g in self.graphs]

    @property
    def op_count(self) -> int:
        """``sum(len(ops) for ops in ops_per_graph)``: torch's ``op_count``."""
        return sum(len(ops) for ops in self.ops_per_graph)

    @property
    def out_guards(self) -> list[Guard]:
        """torch's name for ``guards``."""
        return self.guards

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}"]
        if self.graph_count == 0:
            lines.append("No graph was compiled: every frame ran eagerly (Graph Break Count is graph_count - 1 = "
                         "-1, as torch computes it). A break before any op compiles no graph, so it has no break reason "
                         "here (as in torch); md.set_logs(graph_breaks=True) logs every break.")
        lines.append("Break Reasons:")
        for i, reason in enumerate(self.break_reasons, 1):
            lines.append(f"  Break Reason {i}:")
            lines += ["    " + ln for ln in str(reason).splitlines()]
        lines.append("Guards:")
        trees = getattr(self.guards, "trees", None)
        if trees:
            lines += ["  " + ln for t in trees for ln in str(t).splitlines()]
        else:
            lines += [f"  {g}" for g in self.guards]
        return "\n".join(lines)


def explain(fn: Callable, *args: Any, **kwargs: Any) -> ExplainOutput:
    """Run ``fn(*args, **kwargs)`` once under a fresh cache and report what was compiled.

    Like ``torch._dynamo.explain(fn)(*args)``: ``graph_break_count`` is
    ``graph_count - 1``, exactly as torch computes it.
    """
    from .eval_frame import CompileConfig, _optimize_with  # the front door, under md.explain

    graphs, reasons, entries = [], [], []

    def backend(gm, example_inputs):
        return gm.forward

    config = CompileConfig(backend=backend, on_graph=graphs.append, on_break=reasons.append,
                           on_entry=entries.append, frames={})  # a fresh cache, as torch.explain resets
    compiled = _optimize_with(fn, config)
    out = compiled(*args, **kwargs)
    guards = GuardList([g for e in entries for g in e.guards], [e.check.tree for e in entries])
    return ExplainOutput(graphs, len(graphs), len(graphs) - 1, reasons, guards, entries, out,
                         frame_hook.describe() if config.hook is not None else
                         "explicit calls through the cache, no frame hook: " + (frame_hook.reason() or "off"))

"""Which sizes reused which graph: one row per call, ours beside the real torch.compile (chapter 15).

Place in the pipeline: beside it, for chapter 15. Each side runs the same calls.
Ours is read from the event log (``minidynamo.events``): a call during which
Dynamo's pass began compiled a new entry (its ``recompile`` event names the dims
that became dynamic); any other call was served by a cached entry, the first whose
guards pass, as ``eval_frame`` looks them up. Torch's side is read from its
counters: a call during which ``torch._dynamo.utils.counters["stats"]["unique_graphs"]``
grew compiled a graph; otherwise the entry whose guard manager passes served it
(torch tries the newest entry first). Mirrors what ``TORCH_LOGS=recompiles`` prints,
as a table and a plot.

Note [Which entry serves a size]
    Both systems keep the first, static entry after automatic dynamic makes a dim
    symbolic. Ours looks entries up oldest first, so the size the static entry was
    traced for still runs that entry; torch tries the newest (dynamic) entry
    first, so every later size runs the dynamic graph. The counts agree; the rows
    show where the choice differs.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import torch

from minidynamo import events

__all__ = ["SizeCacheMap", "size_cache_map", "plot_size_cache"]


@dataclass
class Row:
    label: str
    ours: int  # the entry (1 = first compiled) that served the call
    ours_new: bool  # this call compiled it
    ours_dynamic: list  # the dims the recompile made dynamic
    torch: Any
    torch_new: bool


@dataclass
class SizeCacheMap:
    function: str
    rows: list

    def __repr__(self) -> str:
        lines = [f"{self.function}: call -> graph (* = compiled by this call)",
                 f"{'call':<16}{'ours':<10}{'torch':<10}now dynamic (ours)"]
        for r in self.rows:
            ours = f"{r.ours}{'*' if r.ours_new else ''}"
            theirs = f"{r.torch}{'*' if r.torch_new else ''}"
            lines.append(f"{r.label:<16}{ours:<10}{theirs:<10}{', '.join(r.ours_dynamic)}")
        g_ours = max(r.ours for r in self.rows)
        g_torch = max((r.torch for r in self.rows if isinstance(r.torch, int)), default=0)
        lines.append(f"graphs: ours {g_ours}, torch {g_torch}")
        return "\n".join(lines)

    _repr_pretty_ = lambda self, p, cycle: p.text(repr(self))  # noqa: E731


def _label(args: tuple) -> str:
    parts = [str(tuple(a.shape)) if isinstance(a, torch.Tensor) else repr(a) for a in args]
    return ", ".join(parts)


def size_cache_map(fn: Callable, make_args: Callable[[Any], tuple], specs: list, dynamic=None) -> SizeCacheMap:
    """Call ``fn(*make_args(spec))`` for each spec, compiled by us and by torch; which graph served each call."""
    import minidynamo as md
    from minidynamo._torch_private import dynamo_counters, dynamo_reset, dynamo_serving_entry

    sig = inspect.signature(fn)
    md.reset()
    ours = md.compile(fn, backend="eager", dynamic=dynamic)
    rows = []
    torch.manual_seed(0)
    calls = [make_args(s) for s in specs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args in calls:
            L = dict(sig.bind(*args).arguments)
            # the entry the lookup will take: the first whose guards hold, most recently used first
            hit = next((e for e in ours.cache.entries if e.check(L, fn.__globals__)), None)
            with events.record() as log:
                ours(*args)
            compiled = any(e.kind == "pass_begin" and e.pass_name == events.DYNAMO for e in log)
            dyn = [d for e in log if e.kind == "recompile" for d in e.dynamic]
            entry = ours.cache.entries[0] if compiled and ours.cache.entries else hit
            served = int(entry.compile_id.split("/")[1]) + 1 if entry is not None else 0  # in compile order
            rows.append(Row(_label(args), served, compiled, dyn, None, False))
        dynamo_reset()
        theirs = torch.compile(fn, backend="eager", dynamic=dynamic)
        for row, args in zip(rows, calls):
            before = dynamo_counters()["stats"]["unique_graphs"]
            theirs(*args)
            row.torch_new = dynamo_counters()["stats"]["unique_graphs"] > before
            row.torch = dynamo_serving_entry(fn.__code__, dict(sig.bind(*args).arguments))
        dynamo_reset()
    md.reset()
    return SizeCacheMap(fn.__name__, rows)


def plot_size_cache(m: SizeCacheMap):
    """Two rows of dots: the graph each call ran, ours above torch's; filled = compiled by that call."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(max(5, 0.55 * len(m.rows)), 3.6), sharex=True)
    xs = range(len(m.rows))
    for ax, who in zip(axes, ("ours", "torch")):
        ys = [getattr(r, who) or 0 for r in m.rows]
        new = [getattr(r, f"{who}_new") for r in m.rows]
        ax.scatter([x for x, n in zip(xs, new) if n], [y for y, n in zip(ys, new) if n], s=70, color="C3",
                   label="compiled by this call", zorder=3)
        ax.scatter([x for x, n in zip(xs, new) if not n], [y for y, n in zip(ys, new) if not n], s=70,
                   facecolors="none", edgecolors="C0", label="reused", zorder=3)
        ax.set_ylabel(f"{who}\ngraph #")
        ax.set_yticks(range(1, max(ys + [1]) + 1))
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize=8)
    axes[1].set_xticks(list(xs), [r.label for r in m.rows], rotation=45, ha="right", fontsize=8)
    axes[0].set_title(f"{m.function}: which graph each call ran")
    fig.tight_layout()
    return fig

"""Which symbols are backed, which unbacked, and where each bound came from: ours beside torch's (chapter 16).

Place in the pipeline: beside it, for chapter 16. One function is traced by our Dynamo
(``md.explain``) and by torch's (``torch.compile`` with a backend that keeps the graph),
under ``capture_scalar_outputs``; each graph's ShapeEnv is read off a node's example
value. For every symbol: backed (an input's size, with an example value) or unbacked (a
value from ``.item()``, none), where it came from, its range, what set each end of the
range, and the facts the graph checks. Torch's side reads ``ShapeEnv.var_to_sources``,
``var_to_range``, ``var_to_range_sloc`` (the user line that set each bound) and
``deferred_runtime_asserts`` (torch/fx/experimental/symbolic_shapes.py); ours reads
``minidynamo/shapes/symbolic_shapes.py``'s ShapeEnv. A table (its ``repr``) and a plot.

Note [Where a bound comes from]
    A backed size's lower bound is 2, set by 0/1 specialization (a size of 0 or 1 gets
    its own graph, so a symbol never stands for one); its upper bound is open. An
    unbacked value starts unbounded (``.item()`` of an int tensor could be anything) and
    only the user's ``torch._check`` narrows it (or the op that made it: ``nonzero`` has at
    most as many rows as its input has elements). Torch records the user line of each
    narrowing (``var_to_range_sloc``); ours records the fact itself
    (``torch._check(u0 >= 1)``), so the two columns say the same thing in two forms.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

__all__ = ["SymbolRow", "SymbolMap", "symbol_map", "plot_symbol_map"]


@dataclass
class SymbolRow:
    symbol: str
    kind: str  # "backed" or "unbacked"
    came_from: str
    example: int | None
    lo: int | None  # None: unbounded on that side
    hi: int | None
    lo_why: str
    hi_why: str
    facts: list = field(default_factory=list)


@dataclass
class SymbolMap:
    function: str
    ours: list
    torch: list

    def __repr__(self) -> str:
        lines = [f"{self.function}: symbols, ours beside torch's"]
        for who, rows in (("ours", self.ours), ("torch", self.torch)):
            lines.append(f"  {who}:")
            for r in rows:
                rng = f"[{'-oo' if r.lo is None else r.lo}, {'oo' if r.hi is None else r.hi}]"
                ex = "none" if r.example is None else str(r.example)
                lines.append(f"    {r.symbol:<6}{r.kind:<10}from {r.came_from:<18} example {ex:<5} range {rng:<10}"
                             f" low set by: {r.lo_why}" + (f"; high by: {r.hi_why}" if r.hi is not None else ""))
                for f in r.facts:
                    lines.append(f"{'':10}checked when the graph runs: {f}")
        return "\n".join(lines)

    _repr_pretty_ = lambda self, p, cycle: p.text(repr(self))  # noqa: E731


def _bound(v) -> int | None:
    """A finite bound as an int; None for torch's ``int_oo`` / ``-int_oo`` (or sympy's ``oo``)."""
    return int(v) if getattr(v, "is_Integer", False) or isinstance(v, int) else None


def _env_of(gm) -> Any:
    for n in gm.graph.nodes:
        v = n.meta.get("example_value")
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return v.node.shape_env
        if isinstance(v, torch.Tensor):
            for s in v.shape:
                if isinstance(s, torch.SymInt):
                    return s.node.shape_env
    return None


def _creators(gm) -> dict:
    """Symbol name -> what made it: the first node whose example value is that symbol (``Tensor.item()``) or has
    it among its sizes (``Tensor.nonzero()``)."""
    out = {}
    for n in gm.graph.nodes:
        v = n.meta.get("example_value")
        if n.op == "call_method":
            what = f"Tensor.{n.target}()"
        elif n.op == "call_function":
            what = f"torch.{getattr(n.target, '__name__', n.target)}()"
        else:
            continue
        if isinstance(v, (torch.SymInt, torch.SymFloat)):
            out.setdefault(str(v.node.expr), what)
        elif isinstance(v, torch.Tensor):
            for size in v.shape:
                if isinstance(size, torch.SymInt):
                    for sym in size.node.expr.free_symbols:
                        out.setdefault(str(sym), what)
    return out


def _ours(gm) -> list[SymbolRow]:
    env = _env_of(gm)
    rows = []
    for sym, sources in env.var_to_sources.items():
        rows.append(SymbolRow(str(sym), "backed", str(sources[0]), int(env.var_to_val[sym]), 2, None,
                              "0/1 specialization", "", []))
    for sym in env.unbacked:
        lo, hi = env.var_to_range[sym]
        facts = [g for g in env.deferred_runtime_asserts if sym in g.expr.free_symbols]
        made = env.unbacked_why.get(sym, "?")  # a bound no fact set came with the value (nonzero: [0, numel])
        lo_why = "unbounded" if lo is None else next((g.why for g in facts if _sets_low(g.expr, sym, lo)), made)
        hi_why = "unbounded" if hi is None else next((g.why for g in facts if _sets_high(g.expr, sym, hi)), made)
        rows.append(SymbolRow(str(sym), "unbacked", env.unbacked_why.get(sym, "?"), None, lo, hi, lo_why, hi_why,
                              [str(g.expr) for g in facts]))
    return rows


def _sets_low(expr, sym, lo) -> bool:
    import sympy

    return expr.lhs == sym and expr.rhs.is_Integer and (
        (isinstance(expr, sympy.Ge) and int(expr.rhs) == lo)
        or (isinstance(expr, sympy.Gt) and int(expr.rhs) + 1 == lo))


def _sets_high(expr, sym, hi) -> bool:
    import sympy

    return expr.lhs == sym and expr.rhs.is_Integer and (
        (isinstance(expr, sympy.Le) and int(expr.rhs) == hi)
        or (isinstance(expr, sympy.Lt) and int(expr.rhs) - 1 == hi))


def _user_line(sloc) -> str:
    """The user code of torch's ``SLoc`` (without its file and line, which depend on where the code ran)."""
    if sloc is None:
        return ""
    user = getattr(sloc, "maybe_user_loc", None)
    framework = getattr(sloc, "framework_loc", None)
    if isinstance(framework, str) and "0/1 specialization" in framework:
        return "0/1 specialization"
    return user.split("  #")[0].strip() if user else str(framework)


def _torch(gm) -> list[SymbolRow]:
    env = _env_of(gm)
    made = _creators(gm)
    slocs = getattr(env, "var_to_range_sloc", {})
    values = env.backed_var_to_val if hasattr(env, "backed_var_to_val") else env.var_to_val
    rows = []
    for sym, vr in env.var_to_range.items():
        backed = sym in env.var_to_sources
        lo, hi = _bound(vr.lower), _bound(vr.upper)
        sloc = slocs.get(sym)
        facts = [str(r.expr) for r in env.deferred_runtime_asserts.get(sym, [])]
        origin = env.var_to_sources[sym][0].name if backed else made.get(str(sym), "?")

        def why(end, bound):
            if bound is None:
                return "unbounded"
            line = _user_line(getattr(sloc, end, None))
            # a bound the user did not state came with the value (the kernel's range: nonzero's [0, numel])
            return line if backed or line.startswith("torch._check") else origin

        rows.append(SymbolRow(str(sym), "backed" if backed else "unbacked", origin,
                              int(values[sym]) if backed else None, lo, hi, why("lower", lo), why("upper", hi), facts))
    rows.sort(key=lambda r: (r.kind != "backed", r.symbol))
    return rows


def symbol_map(fn: Callable, *args, dynamic_dims: dict | None = None) -> SymbolMap:
    """Trace ``fn(*args)`` with ours and torch's Dynamo (``capture_scalar_outputs`` and
    ``capture_dynamic_output_shape_ops``); each side's symbols.

    ``dynamic_dims``: ``{arg index: dim}`` marked dynamic before each trace (``mark_dynamic``).
    """
    import minidynamo as md
    from minidynamo._torch_private import dynamo_config_patch, dynamo_mark_dynamic, dynamo_recorded_graphs, \
        dynamo_reset

    dynamic_dims = dynamic_dims or {}

    def fresh(mark):
        out = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        for i, d in dynamic_dims.items():
            mark(out[i], d)
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        md.reset()
        with md.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
            ours = md.explain(fn, *fresh(md.mark_dynamic)).graphs
        with dynamo_config_patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
            theirs = dynamo_recorded_graphs(fn, *fresh(dynamo_mark_dynamic))
        dynamo_reset()
        md.reset()
    if len(ours) != 1 or len(theirs) != 1:
        raise ValueError(f"symbol_map wants one graph on each side, got ours {len(ours)}, torch {len(theirs)}")
    return SymbolMap(fn.__name__, _ours(ours[0]), _torch(theirs[0]))


def plot_symbol_map(m: SymbolMap):
    """One panel per system: each symbol's range as a bar (blue backed, orange unbacked), its example value as a
    dot (backed only), and at each end of the bar what set it."""
    import matplotlib.pyplot as plt

    rows = {"ours": m.ours, "torch": m.torch}
    finite = [v for rs in rows.values() for r in rs for v in (r.lo, r.hi, r.example) if v is not None]
    right = max(finite + [10]) * 1.6 + 5
    fig, axes = plt.subplots(2, 1, figsize=(9, 1.2 + 0.9 * sum(len(r) for r in rows.values())), sharex=True)
    for ax, (who, rs) in zip(axes, rows.items()):
        for y, r in enumerate(rs):
            lo = 0 if r.lo is None else r.lo
            hi = right if r.hi is None else r.hi
            color = "tab:blue" if r.kind == "backed" else "tab:orange"
            ax.barh(y, hi - lo, left=lo, height=0.35, color=color, alpha=0.6)
            if r.hi is None:
                ax.annotate("", xy=(right, y), xytext=(right * 0.93, y),
                            arrowprops={"arrowstyle": "->", "color": color})
            if r.example is not None:
                ax.plot([r.example], [y], "o", color="black", zorder=3)
                ax.annotate(f"example {r.example}", (r.example, y), xytext=(0, -14), textcoords="offset points",
                            ha="center", fontsize=7)
            ax.annotate(f"low: {r.lo_why}", (lo, y), xytext=(0, 10), textcoords="offset points", fontsize=7)
            if r.hi is not None:
                ax.annotate(f"high: {r.hi_why}", (hi, y), xytext=(0, 10), textcoords="offset points", fontsize=7,
                            ha="right")
        ax.set_yticks(range(len(rs)), [f"{r.symbol} ({r.kind})\nfrom {r.came_from}" for r in rs], fontsize=8)
        ax.set_ylim(len(rs) - 0.2, -0.8)  # the first symbol on top
        ax.set_title(f"{who}", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlim(-1, right)
    axes[-1].set_xlabel("value (a bar runs from the lowest to the highest value the trace may assume)")
    fig.suptitle(f"{m.function}: backed and unbacked symbols, and what set each bound", fontsize=10)
    fig.tight_layout()
    return fig

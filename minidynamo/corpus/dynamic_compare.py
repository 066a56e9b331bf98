"""Ours against torch's Dynamo on functions called with a sequence of sizes (chapter 15).

Place in the pipeline: none; a comparer, like ``metadata_compare``. For one case (a
function, a list of call specs, the args each spec makes, ``dynamic=``), the same
calls go through ``torch.compile`` and ``md.compile`` with a counting backend; each
side reports the graphs compiled, its cache entries (recompiles + 1), the inputs the
last graph has symbolic (``L['x'].size()[0]``, or ``L['n']`` for an int), the shape
guards of the last graph (decisions on sizes, each symbol renamed after the input it
was read from, one spelling per guard), and every call's result. Mirrors what
``torch._dynamo.testing.CompileCounter`` and ``torch._dynamo.explain`` report.

``python -m minidynamo.corpus.dynamic_cases`` runs the cases ported from PyTorch's
test/dynamo (``dynamic_cases.py``, which imports this module, never the reverse) and
prints one row per case and the agreement (:func:`main`).
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable

import sympy
import torch

__all__ = ["Case", "Run", "run_torch", "run_ours", "run_eager", "same", "compare", "agreement"]


@dataclasses.dataclass
class Case:
    fn: Callable
    inputs: Callable[[Any], tuple]  # one call spec (a size, a tuple of sizes, ...) -> args
    sizes: list  # the call specs, in order
    dynamic: Any = None
    mark: Callable | None = None  # (args, mark_dynamic, mark_static) -> None, before each call
    origin: str = ""  # the PyTorch test it restates, or "ours, ..." (dynamic_cases docstring)


@dataclasses.dataclass
class Run:
    graphs: int
    entries: int
    dynamic_dims: frozenset
    shape_guards: frozenset
    outputs: list


def _dims_and_names(gm, source_of) -> tuple[frozenset, dict]:
    """Symbolic inputs of the graph (``L['x'].size()[0]``, ``L['n']``); and symbol -> that name."""
    dims, names = set(), {}
    for n in gm.graph.nodes:
        if n.op != "placeholder":
            continue
        v = n.meta.get("example_value")
        src = source_of(n)
        if src is None:
            continue
        if isinstance(v, torch.Tensor):
            for i, s in enumerate(v.shape):
                if isinstance(s, torch.SymInt) and s.node.maybe_as_int() is None:
                    name = f"{src}.size()[{i}]"
                    dims.add(name)
                    if isinstance(s.node.expr, sympy.Symbol):
                        names.setdefault(s.node.expr, name)
        elif isinstance(v, torch.SymInt) and ".size()" not in src and isinstance(v.node.expr, sympy.Symbol):
            dims.add(src)  # an int input traced as a SymInt
            names.setdefault(v.node.expr, src)
    return frozenset(dims), names


def _comparable(exprs, names: dict) -> frozenset:
    """Guards over sources: each symbol renamed after where it was read, one spelling per guard."""
    from minidynamo.shapes.symbolic_shapes import FloorDiv, _canonical

    rename = {s: sympy.Symbol(n.replace("'", "").replace("[", "_").replace("]", "_").replace(".", "_")
                              .replace("(", "").replace(")", ""), integer=True)
              for s, n in names.items()}
    out = set()
    for e in exprs:
        e = e.replace(lambda a: type(a).__name__ == "FloorDiv", lambda a: FloorDiv(*a.args))  # torch's -> ours
        e = e.replace(lambda a: type(a).__name__ in ("Mod", "PythonMod") and not isinstance(a, sympy.Mod),
                      lambda a: sympy.Mod(*a.args))  # torch's Mod -> sympy's, which simplifies as ours does
        if not e.free_symbols <= set(rename):
            continue  # a symbol of no input (not comparable)
        out.add(str(_canonical(e.xreplace(rename))))
    return frozenset(out)


def _torch_source(n):
    ga = n.meta.get("grapharg")
    name = getattr(getattr(ga, "source", None), "name", None)
    return name() if callable(name) else name


def _calls(case: Case, compiled, mark_dynamic, mark_static) -> list:
    torch.manual_seed(0)
    outs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in case.sizes:
            args = case.inputs(n)
            if case.mark:
                case.mark(args, mark_dynamic, mark_static)
            outs.append(compiled(*args))
    return outs


def run_torch(case: Case) -> Run:
    from minidynamo import _torch_private as tp

    tp.dynamo_reset()
    graphs, last = [], {}

    def backend(gm, example_inputs):  # read at compile time: torch drops the example values later
        graphs.append(gm)
        dims, names = _dims_and_names(gm, _torch_source)
        env = tp.tracing_shape_env()
        last.update(dims=dims, guards=_comparable([g.expr for g in env.guards], names) if env else frozenset())
        return gm.forward

    outs = _calls(case, torch.compile(case.fn, backend=backend, dynamic=case.dynamic),
                  tp.dynamo_mark_dynamic, tp.dynamo_mark_static)
    code = getattr(case.fn, "__code__", None) or case.fn.forward.__code__
    entries = len(tp.dynamo_cache_entries(code))
    return Run(len(graphs), entries, last.get("dims", frozenset()), last.get("guards", frozenset()), outs)


def _env_of(gm):
    for n in gm.graph.nodes:
        v = n.meta.get("example_value")
        if n.op == "placeholder" and isinstance(v, torch.SymInt):
            return v.node.shape_env
    return None


def run_ours(case: Case, backend="eager") -> Run:
    import minidynamo as md

    md.reset()
    graphs, last = [], {}

    def counting(gm, example_inputs):
        graphs.append(gm)
        dims, names = _dims_and_names(gm, lambda n: n.meta.get("source"))
        env = _env_of(gm)
        last.update(dims=dims, guards=_comparable([g.expr for g in env.guards], names) if env else frozenset())
        return gm.forward

    compiled = md.compile(case.fn, backend=counting if backend == "eager" else backend, dynamic=case.dynamic)
    outs = _calls(case, compiled, md.mark_dynamic, md.mark_static)
    return Run(len(graphs), len(compiled.cache.entries), last.get("dims", frozenset()),
               last.get("guards", frozenset()), outs)


def run_eager(case: Case) -> list:
    torch.manual_seed(0)
    return [case.fn(*case.inputs(n)) for n in case.sizes]


def same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.allclose(a, b, atol=1e-5)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def compare(case: Case) -> dict:
    """One case, both sides: the figures and whether each agrees."""
    ours, theirs, eager = run_ours(case), run_torch(case), run_eager(case)
    return {"ours": ours, "torch": theirs,
            "counts": (ours.graphs, ours.entries) == (theirs.graphs, theirs.entries),
            "dims": ours.dynamic_dims == theirs.dynamic_dims,
            "guards": ours.shape_guards == theirs.shape_guards,
            "eager": len(ours.outputs) == len(eager) and all(same(o, e) for o, e in zip(ours.outputs, eager))}


def agreement(results: dict) -> dict:
    n = len(results)
    with_guards = [k for k, r in results.items() if r["ours"].shape_guards or r["torch"].shape_guards]
    return {"cases": n, "counts_equal": sum(r["counts"] for r in results.values()),
            "dims_equal": sum(r["dims"] for r in results.values()),
            "eager_equal": sum(r["eager"] for r in results.values()),
            "cases_with_shape_guards": len(with_guards),
            "shape_guards_equal": sum(results[k]["guards"] for k in with_guards),
            "counts_differ": sorted(k for k, r in results.items() if not r["counts"]),
            "dims_differ": sorted(k for k, r in results.items() if not r["dims"]),
            "guards_differ": sorted(k for k in with_guards if not results[k]["guards"]),
            "eager_differ": sorted(k for k, r in results.items() if not r["eager"])}


def main(cases: dict) -> None:  # pragma: no cover - the measurement, printed
    """One row per case of ``cases`` (name -> Case) and the agreement: ``python -m minidynamo.corpus.dynamic_cases``."""
    results = {}
    print(f"{'case':34} {'graphs':>9} {'entries':>9}  dims guards eager")
    for name, case in cases.items():
        r = results[name] = compare(case)
        o, t = r["ours"], r["torch"]
        print(f"{name:34} {o.graphs:>4}/{t.graphs:<4} {o.entries:>4}/{t.entries:<4}  "
              f"{'ok' if r['dims'] else 'DIFF':4} {'ok' if r['guards'] else 'DIFF':6} {'ok' if r['eager'] else 'DIFF'}")
    a = agreement(results)
    print(f"\n{a['counts_equal']}/{a['cases']} cases: graph and entry counts equal torch's "
          f"({100 * a['counts_equal'] / a['cases']:.0f}%); dims {a['dims_equal']}/{a['cases']}; "
          f"shape guards {a['shape_guards_equal']}/{a['cases_with_shape_guards']}; eager {a['eager_equal']}/{a['cases']}")
    for k in ("counts_differ", "dims_differ", "guards_differ", "eager_differ"):
        if a[k]:
            print(f"{k}: {', '.join(a[k])}")
            if k == "guards_differ":
                for name in a[k]:
                    print(f"  {name}: ours {sorted(results[name]['ours'].shape_guards)} "
                          f"torch {sorted(results[name]['torch'].shape_guards)}")


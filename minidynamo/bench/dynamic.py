"""The dynamic-shape row of the benchmark: one model called with 20 batch sizes, ours and torch's.

Place in the pipeline: beside ``bench/__init__.py`` (which prints this row after its table;
``python -m minidynamo.bench.dynamic`` runs it alone). Each system runs in a fresh
process, one thread, after compiling and resetting an unrelated function (DESIGN.md,
"How the benchmark measures"). Figures: graphs Dynamo compiled over the 20 sizes,
cache entries, AOT compilations (both AOTAutograds trace the symbolic graph once; ours
falls back to one per size only where its symbolic trace fails, Note [AOT backends
specialize per size] in ``symbolic/dynamic_shapes.py``), total time of the 20 first
calls, and the per-call overhead of the dynamic entry against a static one (median of paired
rounds, compiled minus eager in the same round: ``_paired_overheads``).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

SIZES = list(range(2, 22))  # 20 batch sizes


def _model():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))


def _compile(system: str, fn, dynamic=None):
    if system == "ours":
        import minidynamo as md

        return md.compile(fn, backend="aot_eager", dynamic=dynamic)
    import torch

    return torch.compile(fn, backend="aot_eager", dynamic=dynamic)


def _reset(system: str) -> None:
    if system == "ours":
        import minidynamo as md

        md.reset()
    else:
        from minidynamo._torch_private import dynamo_reset

        dynamo_reset()


def _paired_overheads(fns: dict, x, rounds: int) -> dict:
    """Per-call overhead of each of ``fns`` over ``fns["eager"]``: the median over paired rounds.

    As ``bench/measure.py``'s Note [Paired rounds]: each round times ``inner`` calls of
    every function back to back (about 5 ms for the slowest), the order rotating
    between rounds, garbage collector off; a round's overhead is a function's time
    per call minus eager's in the same round.
    """
    import gc

    def per_call(f, inner):
        t = time.perf_counter()
        for _ in range(inner):
            f(x)
        return (time.perf_counter() - t) / inner

    slowest = max(min(per_call(f, 1) for _ in range(3)) for f in fns.values())
    inner = max(1, min(5000, round(0.005 / max(slowest, 1e-7))))
    names = list(fns)
    diffs: dict[str, list[float]] = {n: [] for n in names if n != "eager"}
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            times = {n: per_call(fns[n], inner) for n in order}
            for n in diffs:
                diffs[n].append(times[n] - times["eager"])
    finally:
        gc.enable()
    return {n: statistics.median(d) for n, d in diffs.items()}


def worker(system: str, quick: bool) -> dict:
    import torch

    from minidynamo import events
    from minidynamo._torch_private import silence_dynamo_logs

    torch.set_num_threads(1)
    silence_dynamo_logs()
    warm = _compile(system, lambda x: (x * 2).sin())
    warm(torch.randn(4))
    _reset(system)

    model = _model()
    sizes = SIZES[:6] if quick else SIZES
    graphs = []

    if system == "ours":
        compiled = _compile(system, model)
        with events.record() as log:
            start = time.perf_counter()
            for n in sizes:
                compiled(torch.randn(n, 16))
            total = time.perf_counter() - start
        graphs = sum(1 for e in log if e.kind == "pass_begin" and e.pass_name == "dynamo")
        aot = sum(1 for e in log if e.kind == "pass_begin" and e.pass_name == "aot_joint")
        entries = len(compiled.cache.entries)
    else:
        from minidynamo._torch_private import dynamo_cache_entries

        compiled = _compile(system, model)
        start = time.perf_counter()
        for n in sizes:
            compiled(torch.randn(n, 16))
        total = time.perf_counter() - start
        from minidynamo._torch_private import dynamo_unique_graphs

        graphs = aot = dynamo_unique_graphs()
        entries = len(dynamo_cache_entries(type(model).forward.__code__)) or None  # None: not found
    static = _compile(system, _model(), dynamic=False)
    x = torch.randn(sizes[-1], 16)
    static(x)
    overheads = _paired_overheads({"eager": model, "dynamic": compiled, "static": static}, x, 9 if quick else 90)
    return {"sizes": len(sizes), "entries": entries, "dynamo_traces": graphs, "aot_compiles": aot,
            "total_first_calls_s": total, "dynamic_overhead_s": overheads["dynamic"],
            "static_overhead_s": overheads["static"]}


def run(quick: bool = False) -> dict:
    out: dict[str, Any] = {}
    for system in ("ours", "torch"):
        proc = subprocess.run([sys.executable, "-m", "minidynamo.bench.dynamic", "--worker", system]
                              + (["--quick"] if quick else []), capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"dynamic-shape worker ({system}) failed:\n{proc.stderr[-3000:]}")
        out[system] = json.loads(proc.stdout.strip().splitlines()[-1])
    ours, theirs = out["ours"], out["torch"]
    out["compile_ratio"] = ours["total_first_calls_s"] / theirs["total_first_calls_s"]
    out["dynamic_static_ratio"] = {"ours": _ratio(ours), "torch": _ratio(theirs)}
    return out


def format_report(r: dict) -> str:
    o, t = r["ours"], r["torch"]

    def us(x):
        return f"{x * 1e6:.0f} us"

    return "\n".join([
        f"dynamic shapes: an MLP called with {o['sizes']} batch sizes (backend aot_eager)",
        f"  cache entries          ours {o['entries']:>3}    torch {t['entries'] or '-':>3}",
        f"  graphs compiled        ours {o['dynamo_traces']:>3}    torch {t['dynamo_traces']:>3}",
        f"  AOT compilations       ours {o['aot_compiles']:>3}    torch {t['aot_compiles']:>3}    (one per graph: "
        "AOT traces the symbolic graph once)",
        f"  first calls, total     ours {o['total_first_calls_s']:.2f} s   torch {t['total_first_calls_s']:.2f} s   "
        f"ratio {r['compile_ratio']:.2f}",
        f"  per-call overhead      ours dynamic {us(o['dynamic_overhead_s'])} / static {us(o['static_overhead_s'])}"
        f"    torch dynamic {us(t['dynamic_overhead_s'])} / static {us(t['static_overhead_s'])}",
        f"  dynamic / static       ours {_ratio(o):.2f}    torch {_ratio(t):.2f}    (target: ours within 1.5)",
    ])


def _ratio(side: dict) -> float:
    """A dynamic entry's per-call overhead over a static entry's (both over eager, paired rounds)."""
    return side["dynamic_overhead_s"] / side["static_overhead_s"] if side["static_overhead_s"] > 0 else float("nan")


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m minidynamo.bench.dynamic")
    p.add_argument("--worker", choices=("ours", "torch"))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", metavar="PATH")
    a = p.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(a.worker, a.quick)))
        return 0
    r = run(a.quick)
    print(format_report(r))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

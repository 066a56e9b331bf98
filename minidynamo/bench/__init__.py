"""``python -m minidynamo.bench``: minidynamo against real ``torch.compile``, as ratios.

Place in the pipeline: outside it; it times the whole pipeline. Every figure is
measured in a fresh process with ``torch.set_num_threads(1)``, import time
excluded (see ``../shared/DESIGN.md``, "How the benchmark measures"):

- compile latency, warm: the first call after the same process has compiled and
  run an unrelated function and reset, so one-time lazy imports count for neither
  side; cold: the first call in a fresh process, reported beside it;
- the first backward, reported separately;
- per-call overhead: compiled time minus eager time in paired interleaved rounds
  (Note [Paired rounds], ``bench/measure.py``), the median of every round of every
  worker of a system, with a 95% bootstrap interval (Note [How sure a figure is],
  ``bench/stats.py``); a ratio whose torch side is not told from 0 prints "within noise";
- every figure is the median over ``--repeats`` (5) fresh workers per system, ours
  and torch's alternating (the machine's speed drifts over seconds); a fresh worker
  is a new interpreter, or with ``--fork`` a child forked from a zygote that has
  imported torch and the model's library (faster, but its warm compiles are slower
  than a new interpreter's: Note [Fresh processes from a zygote], ``bench/measure.py``);
- FakeTensor ops per pass: ours from ``minidynamo.events``, torch's from
  ``minidynamo.real_passes``;
- the cost of the event log: our compile latency recording and not (the headline
  compile figures are taken recording, on both sides, to count ops per pass).

``compile_ratio`` = our warm compile latency / torch's; ``overhead_ratio`` = our
per-call overhead / torch's. The machine is noisy: absolute times drift between
runs; each ratio comes with its 95% interval (``*_ratio_ci`` in the JSON; the table
prints the overhead ratio as median ± half the interval). Nothing here asserts a time.

    python -m minidynamo.bench [--json PATH] [--plot PATH] [--quick] [--only NAME,...] [--no-scaling]
                               [--no-cold] [--repeats N] [--frame-hook] [--compare PATH] [--no-imports]
                               [--spawn]

(``--workloads`` is another name for ``--only``.)

``cold_ratio`` = our cold figure / torch's: ``compile()`` plus the first call in a fresh
process (Note [The cold figure is compile() and the first call]), the median of as many
fresh workers as the warm figures, with bytecode caches on (Note [Workers keep bytecode
caches] in ``bench/imports.py``); the table's notes give cold minus warm, the one-time
cost. The output ends with the import time of a first compile by group (Note [Import
time of a first compile], ``bench/imports.py``) and
any ratio more than 10% worse than in the previous full run (``test-artifacts/bench.json``,
or ``--compare PATH``), "within noise" where this run's 95% interval still reaches the
previous figure plus 10%, and where the run's time went (per workload; inside the workers
by phase).

The modules: ``bench/workloads.py`` (what is compiled), ``bench/measure.py`` (one worker:
what it times, and the processes it runs in), ``bench/stats.py`` (medians and intervals),
``bench/report.py`` (table, regressions, plot), ``bench/imports.py`` (the import-time
breakdown), ``bench/dynamic.py`` (the dynamic-shape row), ``bench/guards.py`` (the guard-check
rows of the table: ``--only guards``), ``bench/checkpoint.py`` (checkpointing's saved tensors and a
cond compile: ``--only checkpoint``), ``bench/frame_hook.py``
(``--frame-hook``); this one is the driver and the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable

# one-time costs: what a first compile imports, and the workers' environment
from minidynamo.bench.imports import format_imports, import_breakdown, worker_env  # noqa: F401 - re-exported
from minidynamo.bench.measure import Zygotes, spawn_worker, worker, zygote
from minidynamo.bench.report import PREVIOUS, RATIOS, _workloads, format_table, plot, regressions  # noqa: F401
from minidynamo.bench.stats import ratio as _ratio_ci
from minidynamo.bench.stats import summarize
from minidynamo.bench.workloads import (  # noqa: F401 - re-exported (tests, chapter 12 use _BUILDERS, _call)
    _BUILDERS, CNNS, REAL_MODELS, SCALING_SIZES, SYSTEMS, WORKLOADS, Workload, _call, _compile, _reset,
    _warmup_fn, pointwise_chain_fn,
)

_SPAWN = {"on": True}  # Note [Fresh processes from a zygote]: new interpreters unless --fork
_ZYGOTES = Zygotes()
_TIMING: dict[str, Any] = {"workers": 0, "phases_s": {}}


def _run_worker(spec: dict) -> dict:
    """One measurement in a fresh process (Note [Fresh processes from a zygote])."""
    start = time.perf_counter()
    result = spawn_worker(spec) if _SPAWN["on"] else _ZYGOTES.run(spec)
    wall = time.perf_counter() - start
    phases = result.get("phases_s", {})
    totals = _TIMING["phases_s"]
    totals["process start"] = totals.get("process start", 0.0) + max(0.0, wall - sum(phases.values()))
    for key, value in phases.items():
        totals[key] = totals.get(key, 0.0) + value
    _TIMING["workers"] += 1
    return result


# --- the driver -------------------------------------------------------------------

_PER_PROCESS = ("overhead_rounds_s", "phases_s", "inner")  # kept out of the report's figures


def _median_of_runs(runs: list[dict]) -> dict:
    """Each time the median over the repeated workers; counts from the first (they do not vary)."""
    merged = {k: v for k, v in runs[0].items() if k not in _PER_PROCESS}
    for key, value in runs[0].items():
        if key.endswith("_s") and isinstance(value, float):
            merged[key] = statistics.median(r[key] for r in runs)
    return merged


def _each(values: list[float]) -> dict:
    """One value per process: their median and its interval (Note [How sure a figure is])."""
    return summarize([[v] for v in values])


def _steady_figures(fig: dict, runs: list[dict]) -> dict:
    """The overhead over every round of every worker of one system, pooled (Note [Paired rounds])."""
    steady = [r for r in runs if "overhead_s" in r]
    if not steady:
        return summarize([])
    summary = summarize([r.get("overhead_rounds_s") or [r["overhead_s"]] for r in steady])
    fig["overhead_s"] = summary["median"]
    fig["overhead_ci_s"] = summary["ci"]
    fig["overhead_rounds"] = summary["n"]
    fig["overhead_processes"] = summary["processes"]
    if len(steady) > 1:
        fig["overhead_s_runs"] = [r["overhead_s"] for r in steady]
    for key in ("eager_call_s", "compiled_call_s"):
        if all(key in r for r in steady):
            fig[key] = statistics.median(r[key] for r in steady)
    return summary


def _progress_line(progress: Callable[[str], None], start: float, msg: str) -> None:
    progress(f"[{time.perf_counter() - start:6.0f} s] {msg}")


def run(workloads: tuple[str, ...], quick: bool, scaling: bool, cold: bool, progress: Callable[[str], None],
        repeats: int = 1) -> dict:
    report: dict[str, Any] = {}
    start = time.perf_counter()
    _TIMING.update(workers=0, phases_s={})
    per_workload: dict[str, float] = {}
    try:
        for name in workloads:
            began = time.perf_counter()
            report[name] = _run_workload(name, quick, cold, repeats, lambda m: _progress_line(progress, start, m))
            per_workload[name] = time.perf_counter() - began
        if scaling and "pointwise_chain" in report:
            began = time.perf_counter()
            sizes = (5, 10, 20) if quick else SCALING_SIZES
            curve: dict[str, list] = {"sizes": list(sizes), "ours_s": [], "torch_s": []}
            for n in sizes:
                for system in SYSTEMS:
                    _progress_line(progress, start, f"  pointwise chain of {n}: {system}")
                    r = _run_worker({"workload": "pointwise_chain", "length": n, "system": system, "quick": quick,
                                     "warm": True, "steady": False})
                    curve[f"{system}_s"].append(r["compile_s"])
            report["pointwise_chain"]["scaling"] = curve
            per_workload["scaling"] = time.perf_counter() - began
    finally:
        _ZYGOTES.close()
    report["_timing"] = {"total_s": time.perf_counter() - start, "per_workload_s": per_workload,
                         "phases_s": dict(_TIMING["phases_s"]), "workers": _TIMING["workers"],
                         "mode": "spawned interpreters" if _SPAWN["on"] else "forked from a zygote"}
    return report


def _run_workload(name: str, quick: bool, cold: bool, repeats: int, progress: Callable[[str], None]) -> dict:
    runs: dict[str, list[dict]] = {system: [] for system in SYSTEMS}
    colds: dict[str, list[dict]] = {system: [] for system in SYSTEMS}
    kinds = [("warm", runs)] + ([("cold", colds)] if cold else [])
    for kind, into in kinds:  # warm then cold: as many fresh processes each, alternating
        for rep in range(repeats):
            # one fresh worker per system and repeat, ours and torch's alternating (Note [Paired rounds])
            for system in SYSTEMS if rep % 2 == 0 else reversed(SYSTEMS):
                of = f", {rep + 1}/{repeats}" if repeats > 1 else ""
                progress(f"  {name}: {system} ({kind}{of})")
                spec = {"workload": name, "system": system, "quick": quick, "warm": kind == "warm", "rep": rep}
                into[system].append(_run_worker(spec))
    figures = {system: _median_of_runs(runs[system]) for system in SYSTEMS}
    entry: dict[str, Any] = {}
    summaries: dict[str, dict] = {}
    for system in SYSTEMS:
        fig = figures[system]
        summaries[system] = {"compile": _each([r["compile_s"] for r in runs[system]]),
                             "overhead": _steady_figures(fig, runs[system] + colds[system])}
        if cold:
            values = [r["compile_s"] for r in colds[system]]
            summaries[system]["cold"] = _each(values)
            fig["compile_cold_s"] = statistics.median(values)
            fig["compile_cold_s_runs"] = values
        fig["compile_ci_s"] = summaries[system]["compile"]["ci"]
        if cold:
            fig["compile_cold_ci_s"] = summaries[system]["cold"]["ci"]
    for key, figure in (("compile_ratio", "compile"), ("cold_ratio", "cold"), ("overhead_ratio", "overhead")):
        if figure not in summaries["ours"]:
            entry[key] = None
            continue
        r = _ratio_ci(summaries["ours"][figure], summaries["torch"][figure])
        entry[key], entry[key + "_ci"], entry[key + "_within_noise"] = r["ratio"], r["ci"], r["within_noise"]
    ours, theirs = figures["ours"], figures["torch"]
    entry["ops_per_pass"] = {"ours": ours.get("ops_per_pass", {}), "torch": theirs.get("ops_per_pass", {})}
    entry["ours"] = {k: v for k, v in ours.items() if k != "ops_per_pass"}
    entry["torch"] = {k: v for k, v in theirs.items() if k != "ops_per_pass"}
    return entry


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--backend" in argv:  # ``--backend inductor``: its own rows (minidynamo/bench/inductor.py)
        i = argv.index("--backend")
        backend = argv[i + 1] if i + 1 < len(argv) else ""
        if backend != "inductor":
            raise SystemExit(f"--backend: only 'inductor' has its own rows (the default run is aot_eager), not {backend!r}")
        from minidynamo.bench import inductor as bench_inductor

        return bench_inductor.main(argv[:i] + argv[i + 2:])
    parser = argparse.ArgumentParser(prog="python -m minidynamo.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument("--plot", metavar="PATH", help="save a matplotlib figure")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few rounds (for tests)")
    parser.add_argument("--only", "--workloads", dest="only", metavar="NAMES",
                        help=f"comma-separated subset of {','.join(WORKLOADS)} (and dynamic_shapes, guards, "
                             "checkpoint: the dynamic-shape row, the guard-check rows, the checkpointing rows)")
    parser.add_argument("--no-scaling", action="store_true", help="skip the chain-length curve")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-start measurements")
    parser.add_argument("--repeats", type=int, default=None, metavar="N",
                        help="workers per system and workload, alternating; figures are medians (default 5, --quick 1)")
    parser.add_argument("--frame-hook", action="store_true",
                        help="only the frame hook's figures (minidynamo/bench/frame_hook.py), in a fresh process")
    parser.add_argument("--compare", metavar="PATH", default=None,
                        help=f"a previous run's --json to compare ratios with (default {PREVIOUS}, if present); "
                             f"a full run (no --quick/--only) saves its figures there")
    parser.add_argument("--no-imports", action="store_true", help="skip the import-time breakdown")
    parser.add_argument("--spawn", action="store_true",
                        help="every worker a new interpreter (the default)")
    parser.add_argument("--fork", action="store_true",
                        help="workers forked from a zygote that imported torch: faster, but a garbage collection in "
                             "a forked child copies the inherited heap, so warm compiles read slower")
    parser.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    parser.add_argument("--zygote", metavar="KEY", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if args.zygote is not None:
        return zygote(args.zygote)
    if args.fork and hasattr(os, "fork"):
        _SPAWN["on"] = False
    if args.frame_hook:
        from minidynamo.bench import frame_hook as bench_frame_hook

        cmd = [sys.executable, "-m", "minidynamo.bench.frame_hook", "--json"] + (["--quick"] if args.quick else [])
        report = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        print(bench_frame_hook.format_report(report))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"frame_hook": report}, f, indent=2)
        return 0
    workloads = tuple(args.only.split(",")) if args.only else WORKLOADS
    dynamic_row = not args.only or "dynamic_shapes" in workloads  # bench/dynamic.py: 20 batch sizes
    guard_rows = not args.only or "guards" in workloads  # bench/guards.py: 1, 10, 100 inputs, 200 parameters
    checkpoint_rows = not args.only or "checkpoint" in workloads  # bench/checkpoint.py: saved tensors, cond
    workloads = tuple(w for w in workloads if w not in ("dynamic_shapes", "guards", "checkpoint"))
    unknown = [w for w in workloads if w not in _BUILDERS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}")
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 5)
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    began = time.perf_counter()
    report = run(workloads, args.quick, not args.no_scaling, not args.no_cold,
                 progress=lambda msg: print(msg, file=sys.stderr, flush=True), repeats=repeats)
    if not (args.no_imports or args.quick):
        report["_imports"] = import_breakdown()
    if guard_rows:  # bench/guards.py: one entry's guard check per call, ours, flat and torch's
        from minidynamo.bench import guards as bench_guards

        print("  guard check rows", file=sys.stderr, flush=True)
        report["guards"] = bench_guards.run_in_process(args.quick)
    print(format_table(report))
    if dynamic_row:
        from minidynamo.bench import dynamic as bench_dynamic

        report["dynamic_shapes"] = bench_dynamic.run(args.quick)
        print(bench_dynamic.format_report(report["dynamic_shapes"]))
    if checkpoint_rows:
        from minidynamo.bench import checkpoint as bench_checkpoint

        report["checkpoint"] = bench_checkpoint.run(args.quick)
        print(bench_checkpoint.format_report(report["checkpoint"]))
    if "_imports" in report:
        print(format_imports(report["_imports"]))
    compare = args.compare or (PREVIOUS if os.path.exists(PREVIOUS) else None)
    if compare:
        with open(compare) as f:
            found = regressions(report, json.load(f))
        noisy = sum("within noise" in line for line in found)
        print(f"against {compare}: " + ("no ratio more than 10% worse" if not found else
                                        f"{len(found)} regression(s), {noisy} of them within noise"))
        for line in found:
            print("  " + line)
    report["_timing"]["whole_run_s"] = time.perf_counter() - began
    print(f"whole run {report['_timing']['whole_run_s']:.0f} s (with the import breakdown and the dynamic-shape row)")
    if not (args.quick or args.only):
        os.makedirs(os.path.dirname(PREVIOUS), exist_ok=True)
        with open(PREVIOUS, "w") as f:
            json.dump(report, f, indent=2)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
    if args.plot:
        plot(report, args.plot)
    return 0


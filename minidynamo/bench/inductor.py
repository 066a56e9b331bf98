"""``python -m minidynamo.bench --backend inductor``: ours + torch's Inductor against ``torch.compile(backend="inductor")``.

Place in the pipeline: outside it; it times the ``inductor`` backend (minidynamo/compile_fx.py).
Per workload, in training (forward and backward) with ``torch.set_num_threads(1)``:

- cold compile: ``compile()``, the first forward and backward, in a fresh process with a
  fresh ``TORCHINDUCTOR_CACHE_DIR`` (every C++ kernel built); with ``--cold-repeats N``, N
  such processes per system, ours and torch's alternating (ours first, then torch first, ...),
  and the median of each figure, so that a machine loaded by others weighs on both alike;
- where a cold compile goes (Note [A cold compile's phases]): seconds in Dynamo and the
  first step, in AOTAutograd, in Inductor's joint-graph passes and in Inductor per graph
  (C++ builds included), the C++ kernels generated, and the CPU seconds of the process and
  its compilers (a figure the machine's load changes less than the wall clock);
- warm-cache compile: the same in a second fresh process over the cache the first one filled;
- per call: compiled / eager in paired interleaved rounds in that process (median of the
  rounds' ratios), ours and torch's each against their own eager;
- numerics: ours against eager and against torch's Inductor, outputs and gradients
  (``bitwise``, ``fp32`` within rtol 1e-4 / atol 1e-5, or ``differs``).

- graphs: what each Dynamo compiled in the first step (graphs, graph breaks, frames or graphs
  that ran eagerly instead), so a fallback is printed as it is, not hidden in a ratio.

Workloads: an MLP classifier, a 2-layer transformer encoder (``nn.TransformerEncoder``), a small
conv net with batch norm, and timm's resnet18 (random weights, 2 images of 64x64, no downloads;
minidynamo/zoo.py, Note [timm without torchvision]). Nothing here asserts a time; ``--quick``
runs one small workload with few rounds. No test runs these rows (each costs minutes of C++
builds); tests/test_inductor_backend.py checks the backend itself on small programs.

    python -m minidynamo.bench --backend inductor [--quick] [--only NAMES] [--cold-repeats N] [--json PATH]

Note [A cold compile's phases]
    The same four phases are read from ours and from torch's, by timing the functions both
    call (``inductor_phase_points``, torch's module globals that its own path calls at run
    time, and ``minidynamo.aot.aot_module_simplified``): ``inductor`` is torch's
    ``_compile_fx_inner`` (one graph: post-grad passes, lowering, scheduling, code
    generation, the C++ builds), ``joint passes`` is ``_recursive_joint_graph_passes``,
    ``aot`` is the AOTAutograd call (ours or torch's) less what runs inside it of the other
    two (ours includes the crossing into torch's fake mode, compile_fx's Note [One boundary
    between our fakes and Inductor's]), and ``dynamo`` is the rest of the cold figure: the
    Dynamo trace, guards, imports and running the first forward and backward. Each phase
    counts its own time only (a phase inside another is subtracted from it). torch, and ours,
    compile the backward graph when the first backward runs (``torch/_functorch/_aot_autograd/
    runtime_wrappers.py``: ``CompiledFunction.backward``; compile_fx's Note [The backward is
    compiled when it first runs]), outside ``aot_module_simplified``; its time is still
    Inductor's. Kernels: the ``cpp_fused_*`` kernels in the wrappers Inductor wrote to the
    cache directory (each one a C++ build).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROUNDS = 30


def _workload(name: str):
    import torch

    torch.manual_seed(0)
    if name == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
        return model, (torch.randn(32, 64),)
    if name == "encoder":
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), (torch.randn(4, 16, 32),)
    if name == "convnet":
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                                    torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.AdaptiveAvgPool2d(1),
                                    torch.nn.Flatten(), torch.nn.Linear(16, 10))
        return model, (torch.randn(4, 3, 32, 32),)
    if name == "resnet18":
        from minidynamo.zoo import timm_model

        model = timm_model("resnet18", num_classes=10)
        torch.manual_seed(0)
        return model, (torch.randn(2, 3, 64, 64),)
    raise ValueError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")


WORKLOADS = ("mlp", "encoder", "convnet", "resnet18")
PHASES = ("dynamo", "aot", "joint passes", "inductor")  # Note [A cold compile's phases]


def _graphs_figure(system: str, caught: list) -> str:
    """``graphs/breaks/eager``: graphs compiled, graph breaks, frames or graphs run eagerly instead."""
    if system == "ours":
        from minidynamo.aot.aot_autograd import AOTFallbackWarning
        from minidynamo.symbolic import counters

        aot_eager = sum(1 for w in caught if issubclass(w.category, AOTFallbackWarning))
        return f"{counters['graphs']}/{counters['graph_breaks']}/{counters['eager_fallbacks'] + aot_eager}"
    from minidynamo._torch_private import dynamo_counters

    c = dynamo_counters()  # torch raises instead of running a frame eagerly (suppress_errors=False): no third figure
    return f"{c['stats']['unique_graphs']}/{sum(c['graph_break'].values())}/-"


def _step(fn, args):
    out = fn(*args)
    out.sum().backward()
    return out


def _print_break_reasons(name: str, model, args) -> None:
    """Why our Dynamo broke the graph or ran a frame eagerly: a second, untimed trace (backend
    ``eager``) that listens to the ``graph_break`` events; each reason's first line, once."""
    import warnings

    import minidynamo as md
    from minidynamo import events

    reasons: dict[str, int] = {}

    def on(event) -> None:
        if event.kind == "graph_break":
            reason = str(event.details.get("reason", "")).strip().splitlines()
            key = reason[0] if reason else "?"
            reasons[key] = reasons.get(key, 0) + 1

    md.reset()
    with events.subscribe(on), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        md.compile(model, backend="eager")(*args)
    for reason, count in reasons.items():
        print(f"{name} (ours) graph break x{count}: {reason[:200]}", file=sys.stderr)


class _PhaseClock:
    """Note [A cold compile's phases]: seconds per phase, each phase its own time only."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._inner: list[float] = []  # per open phase: seconds of the phases inside it
        self._undo: list = []

    def wrap(self, owner, attr: str, phase: str) -> None:
        real = getattr(owner, attr)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            self._inner.append(0.0)
            try:
                return real(*args, **kwargs)
            finally:
                spent, inner = time.perf_counter() - start, self._inner.pop()
                self.seconds[phase] = self.seconds.get(phase, 0.0) + spent - inner
                if self._inner:
                    self._inner[-1] += spent

        setattr(owner, attr, timed)
        self._undo.append((owner, attr, real))

    def restore(self) -> None:
        for owner, attr, real in reversed(self._undo):
            setattr(owner, attr, real)
        self._undo.clear()


def _cpu_seconds() -> float:
    """CPU seconds of this process and of the children it waited for (the C++ compilers)."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _kernels_built(cache_dir: str) -> int:
    """The C++ kernels (``cpp_fused_*``) in the wrappers Inductor wrote to ``cache_dir``."""
    import re

    names = set()
    for root, _dirs, files in os.walk(cache_dir):
        for f in files:
            if f.endswith(".py"):
                with open(os.path.join(root, f), errors="replace") as fh:
                    names.update((f, k) for k in re.findall(r"^(cpp_fused_\w+) = async_compile", fh.read(), re.M))
    return len(names)


def worker(name: str, system: str, out_path: str, rounds: int) -> None:
    """One fresh process: compile, first step, then paired rounds; figures and results to ``out_path``."""
    import copy

    import torch

    torch.set_num_threads(1)
    model, args = _workload(name)
    eager_model = copy.deepcopy(model)
    import warnings

    from minidynamo._torch_private import inductor_phase_points

    clock = _PhaseClock()
    if rounds == 0:  # a cold run: Note [A cold compile's phases]
        for owner, attr, phase in inductor_phase_points():
            if system == "torch" or phase != "aot":
                clock.wrap(owner, attr, phase)
        if system == "ours":
            import minidynamo.aot

            clock.wrap(minidynamo.aot, "aot_module_simplified", "aot")
    cpu0 = _cpu_seconds()
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if system == "ours":
            import minidynamo as md

            compiled = md.compile(model, backend="inductor")
        else:
            compiled = torch.compile(model, backend="inductor")
        out = _step(compiled, args)
    compile_s = time.perf_counter() - start
    cpu_s = _cpu_seconds() - cpu0
    clock.restore()
    phases = dict(clock.seconds)
    if phases:
        phases["dynamo"] = compile_s - sum(phases.values())
    graphs = _graphs_figure(system, caught)
    for w in caught:  # a fallback is printed as it is (its first line), beside the row
        if "eager" in str(w.message) or "Fallback" in w.category.__name__:
            print(f"{name} ({system}): {w.category.__name__}: {str(w.message).splitlines()[0]}", file=sys.stderr)
    grads = [p.grad.clone() for p in model.parameters()]
    ratios = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        _step(eager_model, args)
        t1 = time.perf_counter()
        _step(compiled, args)
        t2 = time.perf_counter()
        ratios.append((t2 - t1) / (t1 - t0))
    ratios.sort()
    if system == "ours" and graphs.split("/")[1:] != ["0", "0"]:
        _print_break_reasons(name, copy.deepcopy(eager_model), args)
    torch.save({"out": out.detach(), "grads": grads}, out_path + ".pt")
    with open(out_path, "w") as f:
        json.dump({"compile_s": compile_s, "per_call_ratio": ratios[len(ratios) // 2] if ratios else None,
                   "graphs": graphs, "cpu_s": cpu_s, "phases": phases,
                   "kernels": _kernels_built(os.environ.get("TORCHINDUCTOR_CACHE_DIR", ""))}, f)


def _run_worker(name: str, system: str, cache_dir: str, tmp: str, rounds: int) -> dict:
    out_path = os.path.join(tmp, f"{name}-{system}-{len(os.listdir(tmp))}.json")
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir)
    subprocess.run([sys.executable, "-m", "minidynamo.bench.inductor", "--worker", name, system, out_path,
                    str(rounds)], check=True, env=env)
    with open(out_path) as f:
        figures = json.load(f)
    figures["results"] = out_path + ".pt"
    return figures


def _tier(a: dict, b: dict) -> str:
    import torch

    pairs = [(a["out"], b["out"]), *zip(a["grads"], b["grads"])]
    if all(torch.equal(x, y) for x, y in pairs):
        return "bitwise"
    if all(torch.allclose(x, y, rtol=1e-4, atol=1e-5) for x, y in pairs):
        return "fp32"
    return "differs"


def _eager_results(name: str) -> dict:
    import torch

    model, args = _workload(name)
    out = _step(model, args)
    return {"out": out.detach(), "grads": [p.grad.clone() for p in model.parameters()]}


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _cold_figures(runs: list[dict]) -> dict:
    """The median of each cold figure over the repeats (each figure on its own)."""
    phases = {p: _median([r["phases"].get(p, 0.0) for r in runs]) for p in PHASES}
    return {"cold_compile_s": _median([r["compile_s"] for r in runs]),
            "cold_cpu_s": _median([r["cpu_s"] for r in runs]), "cold_phases_s": phases, "kernels": runs[0]["kernels"], "cold_runs_s": [r["compile_s"] for r in runs]}


def measure(name: str, rounds: int, cold_repeats: int = 1) -> dict:
    import torch

    row: dict = {"workload": name}
    with tempfile.TemporaryDirectory() as tmp:
        colds: dict[str, list[dict]] = {"ours": [], "torch": []}
        for rep in range(cold_repeats):  # ours and torch's alternate, each first in turn
            for system in ("ours", "torch") if rep % 2 == 0 else ("torch", "ours"):
                cache = os.path.join(tmp, f"cache-{system}-{rep}")
                colds[system].append(_run_worker(name, system, cache, tmp, 0))
        for system in ("ours", "torch"):
            warm = _run_worker(name, system, os.path.join(tmp, f"cache-{system}-0"), tmp, rounds)
            row[system] = {**_cold_figures(colds[system]), "warm_cache_compile_s": warm["compile_s"],
                           "per_call_vs_eager": warm["per_call_ratio"], "graphs": colds[system][0]["graphs"]}
            row[system + "_results"] = torch.load(warm["results"])
    eager = _eager_results(name)
    ours_r, torch_r = row.pop("ours_results"), row.pop("torch_results")
    row["numerics_vs_eager"] = _tier(ours_r, eager)
    row["numerics_vs_torch_inductor"] = _tier(ours_r, torch_r)
    row["per_call_ours_over_torch"] = row["ours"]["per_call_vs_eager"] / row["torch"]["per_call_vs_eager"]
    row["cold_ours_over_torch"] = row["ours"]["cold_compile_s"] / row["torch"]["cold_compile_s"]
    row["cold_cpu_ours_over_torch"] = row["ours"]["cold_cpu_s"] / row["torch"]["cold_cpu_s"]
    return row


def _print(rows: list[dict]) -> None:
    head = (f"{'workload':10s} {'per call/eager':>22s} {'ours/torch':>10s} {'cold compile s':>18s} "
            f"{'warm-cache s':>16s} {'graphs/breaks/eager':>20s}  numerics (eager, torch's inductor)")
    print(head)
    print(f"{'':10s} {'ours':>10s} {'torch':>11s} {'':>10s} {'ours':>8s} {'torch':>9s} {'ours':>7s} {'torch':>8s} "
          f"{'ours':>9s} {'torch':>10s}")
    for r in rows:
        o, t = r["ours"], r["torch"]
        print(f"{r['workload']:10s} {o['per_call_vs_eager']:10.2f} {t['per_call_vs_eager']:11.2f} "
              f"{r['per_call_ours_over_torch']:10.2f} {o['cold_compile_s']:8.1f} {t['cold_compile_s']:9.1f} "
              f"{o['warm_cache_compile_s']:7.1f} {t['warm_cache_compile_s']:8.1f} "
              f"{o.get('graphs', '-'):>9s} {t.get('graphs', '-'):>10s}  "
              f"{r['numerics_vs_eager']}, {r['numerics_vs_torch_inductor']}")
    print()
    print("where the cold compile goes (median seconds; Note [A cold compile's phases]):")
    print(f"{'workload':10s} {'system':6s} {'cold s':>7s} " + " ".join(f"{p:>12s}" for p in PHASES)
          + f" {'kernels':>8s} {'cpu s':>7s}")
    for r in rows:
        for system in ("ours", "torch"):
            f = r[system]
            print(f"{r['workload']:10s} {system:6s} {f['cold_compile_s']:7.1f} "
                  + " ".join(f"{f['cold_phases_s'][p]:12.1f}" for p in PHASES)
                  + f" {f['kernels']:8d} {f['cold_cpu_s']:7.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minidynamo.bench --backend inductor",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small workload, few rounds")
    parser.add_argument("--only", metavar="NAMES", help=f"comma-separated, of {','.join(WORKLOADS)}")
    parser.add_argument("--cold-repeats", type=int, default=1, metavar="N",
                        help="cold processes per system, ours and torch's alternating; the median is printed")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        name, system, out_path, rounds = args.worker
        worker(name, system, out_path, int(rounds))
        return 0
    names = args.only.split(",") if args.only else (["mlp"] if args.quick else list(WORKLOADS))
    rounds = 5 if args.quick else ROUNDS
    if args.cold_repeats < 1:
        parser.error("--cold-repeats must be at least 1")
    rows = [measure(n, rounds, args.cold_repeats) for n in names]
    _print(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

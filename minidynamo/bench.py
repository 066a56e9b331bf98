"""``python -m minidynamo.bench``: minidynamo against real ``torch.compile``, as ratios.

Place in the pipeline: outside it; it times the whole pipeline. Every figure is
measured in a fresh subprocess with ``torch.set_num_threads(1)``, import time
excluded (see ``../shared/DESIGN.md``, "How the benchmark measures"):

- compile latency, warm: the first call after the same process has compiled and
  run an unrelated function and reset, so one-time lazy imports count for neither
  side; cold: the first call in a fresh process, reported beside it;
- the first backward, reported separately;
- per-call overhead: compiled time minus eager time, medians of interleaved rounds
  (Note [Paired rounds]);
- every figure is the median over ``--repeats`` (5) fresh workers per system, ours
  and torch's alternating (the machine's speed drifts over seconds);
- FakeTensor ops per pass: ours from ``minidynamo.events``, torch's from
  ``minidynamo.real_passes``;
- the cost of the event log: our compile latency recording and not (the headline
  compile figures are taken recording, on both sides, to count ops per pass).

``compile_ratio`` = our warm compile latency / torch's; ``overhead_ratio`` = our
per-call overhead / torch's. The machine is noisy: absolute times drift between
runs, ratios measured in one run hold to about 5%. Nothing here asserts a time.

    python -m minidynamo.bench [--json PATH] [--plot PATH] [--quick] [--only NAME,...] [--no-scaling]
                               [--no-cold] [--repeats N] [--frame-hook] [--compare PATH] [--no-imports]

``cold_ratio`` = our cold figure / torch's: ``compile()`` plus the first call in a fresh
process (Note [The cold figure is compile() and the first call]), the median of as many
fresh workers as the warm figures, with bytecode caches on (Note [Workers keep bytecode
caches] in ``bench_imports.py``); the table's notes give cold minus warm, the one-time
cost. The output ends with the import time of a first compile by group (Note [Import
time of a first compile], ``bench_imports.py``) and
any ratio more than 10% worse than in the previous full run (``test-artifacts/bench.json``,
or ``--compare PATH``).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

# one-time costs: what a first compile imports, and the workers' environment
from minidynamo.bench_imports import format_imports, import_breakdown, worker_env  # noqa: F401 - re-exported

SYSTEMS = ("ours", "torch")
WORKLOADS = ("mlp", "transformer_block", "mutation_views", "pointwise_chain", "inputs200")
REAL_MODELS = ("gpt2_tiny", "resnet10t_train")  # minidynamo/zoo.py, issue 13
WORKLOADS = WORKLOADS + REAL_MODELS
CNNS = ("resnet18_train", "mobilenetv3_small_train")  # issue 12: compiled fw+bw within 5% of eager
REAL_MODELS = REAL_MODELS + CNNS
WORKLOADS = WORKLOADS + CNNS
SCALING_SIZES = (25, 50, 100, 200, 400)


# --- workloads ------------------------------------------------------------------


@dataclass
class Workload:
    fn: Callable  # what gets compiled
    make_inputs: Callable[[], tuple]
    backward: bool  # the steady-state call includes out.backward()


def _mlp(quick: bool) -> Workload:
    import torch

    width, batch = (32, 4) if quick else (256, 32)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width),
    )

    def mlp(x):
        return model(x).sum()

    return Workload(mlp, lambda: (torch.randn(batch, width),), backward=True)


def _transformer_block(quick: bool) -> Workload:
    import torch
    import torch.nn.functional as F

    seq, dim, heads = (8, 16, 2) if quick else (64, 128, 4)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = torch.nn.LayerNorm(dim)
            self.qkv = torch.nn.Linear(dim, 3 * dim)
            self.proj = torch.nn.Linear(dim, dim)
            self.ln2 = torch.nn.LayerNorm(dim)
            self.fc1 = torch.nn.Linear(dim, 4 * dim)
            self.fc2 = torch.nn.Linear(4 * dim, dim)

        def forward(self, x):
            s, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
            q = q.view(s, heads, d // heads).transpose(0, 1)
            k = k.view(s, heads, d // heads).transpose(0, 1)
            v = v.view(s, heads, d // heads).transpose(0, 1)
            att = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(d // heads), dim=-1)
            y = (att @ v).transpose(0, 1).reshape(s, d)
            x = x + self.proj(y)
            x = x + self.fc2(F.gelu(self.fc1(self.ln2(x))))
            return x.sum()

    block = Block()
    return Workload(block, lambda: (torch.randn(seq, dim),), backward=True)


def _mutation_views(quick: bool) -> Workload:
    import torch

    n = 8 if quick else 64

    def mutation_views(x, y):
        x.add_(1)
        y[0].add_(y[1])
        return x.view(-1), x[1:], y.t(), (x * y).sum()

    return Workload(mutation_views, lambda: (torch.randn(n, n), torch.randn(n, n)), backward=False)


_POINTWISE = ("x = x.sin()", "x = x * 1.01", "x = x + 0.5", "x = x.cos()", "x = torch.relu(x)", "x = x - 0.25")


def pointwise_chain_fn(length: int) -> Callable:
    """A function of ``length`` pointwise ops, generated as Python source."""
    import torch

    body = "\n".join(f"    {_POINTWISE[i % len(_POINTWISE)]}" for i in range(length))
    namespace: dict[str, Any] = {"torch": torch}
    exec(compile(f"def pointwise_chain(x):\n{body}\n    return x\n", f"<pointwise_chain_{length}>", "exec"), namespace)
    return namespace["pointwise_chain"]


def _pointwise_chain(quick: bool, length: int = 50) -> Workload:
    import torch

    n = 64 if quick else 1024
    return Workload(pointwise_chain_fn(length), lambda: (torch.randn(n),), backward=False)


def _inputs200(quick: bool) -> Workload:
    import torch

    count = 20 if quick else 200

    def inputs200(*xs):
        xs[0].add_(1)
        xs[1].add_(1)
        xs[2].add_(1)
        return torch.stack(xs[3:]).sum(0)

    return Workload(inputs200, lambda: tuple(torch.randn(4) for _ in range(count)), backward=False)


def _gpt2_tiny(quick: bool) -> Workload:
    """transformers GPT2LMHeadModel (2 layers, hidden 64), forward with labels and backward of the loss."""
    from minidynamo import zoo

    model, _, kwargs = zoo.gpt2()

    def gpt2_tiny(input_ids):
        return model(input_ids=input_ids, labels=input_ids).loss

    return Workload(gpt2_tiny, lambda: (kwargs["input_ids"],), backward=True)


def _resnet10t_train(quick: bool) -> Workload:
    """timm resnet10t in train mode (BatchNorm updates its running statistics): forward and backward."""
    from minidynamo import zoo

    model, args, _ = zoo.resnet10t()
    model.train()

    def resnet10t_train(x):
        return model(x).sum()

    return Workload(resnet10t_train, lambda: args, backward=True)


def _timm_cnn(name: str, quick: bool) -> Workload:
    """A timm CNN built from its config (pretrained=False) in train mode: forward, sum, backward."""
    import torch

    from minidynamo import zoo

    zoo._without_broken_torchvision()
    import timm

    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, num_classes=10).train()
    shape = (2, 3, 32, 32) if quick else (2, 3, 64, 64)  # batch 2: train-mode BatchNorm needs 2 values

    def cnn(x):
        return model(x).sum()

    cnn.__name__ = cnn.__qualname__ = name.replace("_100", "")
    return Workload(cnn, lambda: (torch.randn(*shape),), backward=True)


_BUILDERS = {
    "resnet18_train": lambda quick: _timm_cnn("resnet18", quick),
    "mobilenetv3_small_train": lambda quick: _timm_cnn("mobilenetv3_small_100", quick),
    "mlp": _mlp,
    "transformer_block": _transformer_block,
    "mutation_views": _mutation_views,
    "pointwise_chain": _pointwise_chain,
    "inputs200": _inputs200,
    "gpt2_tiny": _gpt2_tiny,
    "resnet10t_train": _resnet10t_train,
}


def _warmup_fn(x):
    # The unrelated function compiled first in "warm" measurements.
    return (x.sin() * 2).relu().sum()


# --- the worker: one measurement in a fresh process --------------------------------


def _compile(system: str, fn: Callable) -> Callable:
    if system == "ours":
        import minidynamo as md

        return md.compile(fn, backend="aot_eager")
    import torch

    from minidynamo.real_passes import counting_backend

    return torch.compile(fn, backend=counting_backend("aot_eager"))


def _reset(system: str) -> None:
    if system == "ours":
        import minidynamo as md

        md.reset()
    else:
        from minidynamo._torch_private import dynamo_reset

        dynamo_reset()


def _call(fn: Callable, args: tuple, backward: bool) -> Any:
    out = fn(*args)
    if backward:
        out.backward()
    return out


def _timed(fn: Callable) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def worker(spec: dict) -> dict:
    """Run one measurement (in its own process) and return its figures."""
    import torch

    from minidynamo._torch_private import silence_dynamo_logs

    torch.set_num_threads(1)
    torch.manual_seed(0)
    silence_dynamo_logs()
    system, quick = spec["system"], spec.get("quick", False)
    if spec["workload"] == "pointwise_chain" and "length" in spec:
        wl = _pointwise_chain(quick, spec["length"])
    else:
        wl = _BUILDERS[spec["workload"]](quick)

    if spec.get("warm", True):
        warm = _compile(system, _warmup_fn)
        x = torch.randn(8, requires_grad=True)
        warm(x).backward()
        _reset(system)

    cold = not spec.get("warm", True)
    if system == "torch":
        from minidynamo.real_passes import counting_backend  # noqa: F401 - ours, imported before the timer
    # Note [The cold figure is compile() and the first call]: torch.compile() imports
    # torch._dynamo before the first call, md.compile() its stages at the first call;
    # a learner's first `compile(f)(x)` pays both, so the cold figure times both.
    setup_s = _timed(lambda: _store(spec, "_compiled", _compile(system, wl.fn)))
    compiled = spec.pop("_compiled")
    args = wl.make_inputs()
    result: dict[str, Any] = {"compile_fn_s": setup_s}
    if system == "ours":
        from minidynamo import events

        with events.record() as log:
            result["compile_s"] = _timed(lambda: _store(result, "out", compiled(*args)))
        ops = events.ops_per_pass(log)
    else:
        from minidynamo.real_passes import record_real_passes

        with record_real_passes() as real_log:
            result["compile_s"] = _timed(lambda: _store(result, "out", compiled(*args)))
        ops = real_log.counts()
    out = result.pop("out")
    if cold:
        result["first_call_s"] = result["compile_s"]
        result["compile_s"] += setup_s
    result["ops_per_pass"] = ops
    if wl.backward:
        result["first_backward_s"] = _timed(lambda: out.backward())
    if spec.get("steady", True):
        result.update(_steady_state(wl, compiled, args, quick))
        if system == "ours":
            result.update(_recording_cost(wl, args))
    return result


def _recording_cost(wl: Workload, args: tuple) -> dict:
    """Our compile latency with the event log recording and without (the issue: one flag check when off).

    Each is timed twice, alternating, after the same function has been compiled
    once in this process, so both are equally warm; the faster of each is kept.
    """
    from minidynamo import events

    times: dict[str, list[float]] = {"on": [], "off": []}
    for mode in ("off", "on", "off", "on"):
        _reset("ours")
        compiled = _compile("ours", wl.fn)
        if mode == "on":
            with events.record():
                times[mode].append(_timed(lambda: compiled(*args)))
        else:
            times[mode].append(_timed(lambda: compiled(*args)))
    return {"compile_recording_on_s": min(times["on"]), "compile_recording_off_s": min(times["off"])}


def _steady_state(wl: Workload, compiled: Callable, args: tuple, quick: bool) -> dict:
    """Per-call time of eager and of the compiled function, and the overhead (Note [Paired rounds]).

    Note [Paired rounds]
        The machine's speed drifts over seconds: the same eager call measured
        45 us in one process and 110 us in another a moment later. So eager and
        compiled calls are timed in alternating rounds of about 10 ms each, with
        the garbage collector off (as ``timeit`` does), and a round's overhead is
        its compiled time minus the eager time next to it; the overhead is the
        median over rounds. Ours and torch's are timed in separate processes
        (torch's FakeTensorMode leaves the process's tensor methods slower, which
        would tax ours), alternating, and the driver takes the median over them.
    """
    per_call = _timed(lambda: _call(wl.fn, args, wl.backward))
    rounds = 3 if quick else 31
    inner = 2 if quick else max(2, min(50, round(0.01 / max(per_call, 1e-6))))
    eager_times, compiled_times = [], []
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            pair = [(eager_times, wl.fn), (compiled_times, compiled)]
            for times, f in pair if r % 2 == 0 else reversed(pair):
                times.append(_timed(lambda: [_call(f, args, wl.backward) for _ in range(inner)]) / inner)
    finally:
        gc.enable()
    return {
        "eager_call_s": statistics.median(eager_times),
        "compiled_call_s": statistics.median(compiled_times),
        "overhead_s": statistics.median(c - e for c, e in zip(compiled_times, eager_times)),
    }


def _store(d: dict, key: str, value: Any) -> None:
    d[key] = value


def _run_worker(spec: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "minidynamo.bench", "--worker", json.dumps(spec)],
        capture_output=True, text=True, timeout=600, env=worker_env(),  # Note [Workers keep bytecode caches]
    )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark worker {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- the driver -------------------------------------------------------------------


def _ratio(ours: float, theirs: float) -> float | None:
    return ours / theirs if theirs and theirs > 0 else None


def _median_of_runs(runs: list[dict]) -> dict:
    """Each time the median over the repeated workers; counts from the first (they do not vary)."""
    merged = dict(runs[0])
    for key, value in runs[0].items():
        if key.endswith("_s") and isinstance(value, float):
            merged[key] = statistics.median(r[key] for r in runs)
    return merged


def run(workloads: tuple[str, ...], quick: bool, scaling: bool, cold: bool, progress: Callable[[str], None],
        repeats: int = 1) -> dict:
    report: dict[str, Any] = {}
    for name in workloads:
        runs: dict[str, list[dict]] = {system: [] for system in SYSTEMS}
        for rep in range(repeats):
            # one fresh worker per system and repeat, ours and torch's alternating (Note [Paired rounds])
            for system in SYSTEMS if rep % 2 == 0 else reversed(SYSTEMS):
                of = f", {rep + 1}/{repeats}" if repeats > 1 else ""
                progress(f"  {name}: {system} (warm{of})")
                runs[system].append(_run_worker({"workload": name, "system": system, "quick": quick, "warm": True}))
        figures = {system: _median_of_runs(runs[system]) for system in SYSTEMS}
        for system in SYSTEMS:
            if repeats > 1:
                figures[system]["overhead_s_runs"] = [r["overhead_s"] for r in runs[system]]
        if cold:  # as many fresh processes as warm ones, alternating; the median (the figure drifts most)
            colds: dict[str, list[float]] = {system: [] for system in SYSTEMS}
            for rep in range(repeats):
                for system in SYSTEMS if rep % 2 == 0 else reversed(SYSTEMS):
                    of = f", {rep + 1}/{repeats}" if repeats > 1 else ""
                    progress(f"  {name}: {system} (cold{of})")
                    spec = {"workload": name, "system": system, "quick": quick, "warm": False, "steady": False}
                    colds[system].append(_run_worker(spec)["compile_s"])
            for system in SYSTEMS:
                figures[system]["compile_cold_s"] = statistics.median(colds[system])
                figures[system]["compile_cold_s_runs"] = colds[system]
        ours, theirs = figures["ours"], figures["torch"]
        report[name] = {
            "compile_ratio": _ratio(ours["compile_s"], theirs["compile_s"]),
            "cold_ratio": _ratio(ours.get("compile_cold_s", 0.0), theirs.get("compile_cold_s", 0.0)),
            "overhead_ratio": _ratio(ours["overhead_s"], theirs["overhead_s"]),
            "ops_per_pass": {"ours": ours["ops_per_pass"], "torch": theirs["ops_per_pass"]},
            "ours": {k: v for k, v in ours.items() if k != "ops_per_pass"},
            "torch": {k: v for k, v in theirs.items() if k != "ops_per_pass"},
        }
    if scaling and "pointwise_chain" in report:
        sizes = (5, 10, 20) if quick else SCALING_SIZES
        curve: dict[str, list] = {"sizes": list(sizes), "ours_s": [], "torch_s": []}
        for n in sizes:
            for system in SYSTEMS:
                progress(f"  pointwise chain of {n}: {system}")
                r = _run_worker({"workload": "pointwise_chain", "length": n, "system": system, "quick": quick,
                                 "warm": True, "steady": False})
                curve[f"{system}_s"].append(r["compile_s"])
        report["pointwise_chain"]["scaling"] = curve
    return report


def _workloads(report: dict) -> list:
    """The workload rows of a report (not ``_imports`` or ``dynamic_shapes``)."""
    return [(n, e) for n, e in report.items() if isinstance(e, dict) and "compile_ratio" in e and "ours" in e]


# --- regressions against the previous run ---------------------------------------------

RATIOS = ("compile_ratio", "cold_ratio", "overhead_ratio")
PREVIOUS = "test-artifacts/bench.json"  # the last full run's figures, compared with the next one


def regressions(report: dict, previous: dict, tolerance: float = 0.10) -> list[str]:
    """Each ratio more than ``tolerance`` worse (higher) than in ``previous``, as a line to print."""
    lines = []
    for name, e in _workloads(report):
        old = previous.get(name)
        if not isinstance(old, dict):
            continue
        for key in RATIOS:
            a, b = e.get(key), old.get(key)
            if a is not None and b and a > b * (1 + tolerance):
                lines.append(f"REGRESSION {name} {key}: {b:.2f} -> {a:.2f} ({(a / b - 1) * 100:+.0f}%)")
    return lines


def format_table(report: dict) -> str:
    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x * 1000:.1f}"

    def ratio(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    lines = [
        f"{'workload':<24}{'compile ms (ours/torch)':>26}{'ratio':>7}{'cold ms (ours/torch)':>24}{'ratio':>7}"
        f"{'overhead ms (ours/torch)':>27}{'ratio':>7}",
    ]
    for name, e in _workloads(report):
        o, t = e["ours"], e["torch"]
        lines.append(
            f"{name:<24}{ms(o['compile_s']) + ' / ' + ms(t['compile_s']):>26}{ratio(e['compile_ratio']):>7}"
            f"{ms(o.get('compile_cold_s')) + ' / ' + ms(t.get('compile_cold_s')):>24}{ratio(e.get('cold_ratio')):>7}"
            f"{ms(o.get('overhead_s')) + ' / ' + ms(t.get('overhead_s')):>27}{ratio(e['overhead_ratio']):>7}"
        )
    lines.append("")
    lines.append("FakeTensor ops per pass (ours | torch):")
    for name, e in _workloads(report):
        ours = ", ".join(f"{k}={v}" for k, v in e["ops_per_pass"]["ours"].items())
        theirs = ", ".join(f"{k}={v}" for k, v in e["ops_per_pass"]["torch"].items())
        lines.append(f"  {name:<18} {ours} | {theirs}")
    for name, e in _workloads(report):
        on, off = e["ours"].get("compile_recording_on_s"), e["ours"].get("compile_recording_off_s")
        if on and off:
            lines.append(f"event log, {name}: our compile {ms(on)} ms recording, {ms(off)} ms not "
                         f"({(on / off - 1) * 100:+.0f}%)")
    for name, e in _workloads(report):
        if "first_backward_s" in e["ours"]:
            lines.append(f"first backward, {name}: ours {ms(e['ours']['first_backward_s'])} ms, "
                         f"torch {ms(e['torch']['first_backward_s'])} ms")
    colds = [(n, e) for n, e in _workloads(report) if e["ours"].get("compile_cold_s") and e["torch"].get("compile_cold_s")]
    if colds:  # the one-time cost of a fresh process: imports, first-op caches (issue 17: ours at most 500 ms on mlp)
        lines.append("cold minus warm compile, ms (ours / torch): " + ", ".join(
            f"{n} {ms(e['ours']['compile_cold_s'] - e['ours']['compile_s'])} / "
            f"{ms(e['torch']['compile_cold_s'] - e['torch']['compile_s'])}" for n, e in colds))
    for name in (n for n in REAL_MODELS if n in report):
        o, t = report[name]["ours"], report[name]["torch"]
        if o.get("eager_call_s") and t.get("eager_call_s"):
            lines.append(f"real model, {name}: per call vs eager: ours {o['compiled_call_s'] / o['eager_call_s']:.2f}x, "
                         f"torch {t['compiled_call_s'] / t['eager_call_s']:.2f}x (target: ours within 1.05x)")
    if "scaling" in report.get("pointwise_chain", {}):
        s = report["pointwise_chain"]["scaling"]
        lines.append("compile latency of pointwise chains (ms): " + ", ".join(
            f"{n}: {ms(a)} / {ms(b)}" for n, a, b in zip(s["sizes"], s["ours_s"], s["torch_s"])))
    return "\n".join(lines)


def plot(report: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, _ in _workloads(report)]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    axes[0].bar(names, [report[n]["compile_ratio"] or 0 for n in names])
    axes[0].axhline(0.5, color="red", linestyle="--", label="target 0.5")
    axes[0].set_title("compile latency, ours / torch (warm)")
    axes[0].legend()
    axes[1].bar(names, [report[n]["overhead_ratio"] or 0 for n in names])
    axes[1].axhline(1.0, color="red", linestyle="--", label="target 1.0")
    axes[1].set_title("per-call overhead, ours / torch")
    axes[1].legend()
    for ax in axes[:2]:
        ax.tick_params(axis="x", rotation=30)
    s = report.get("pointwise_chain", {}).get("scaling")
    if s:
        axes[2].plot(s["sizes"], [x * 1000 for x in s["ours_s"]], "o-", label="minidynamo")
        axes[2].plot(s["sizes"], [x * 1000 for x in s["torch_s"]], "s-", label="torch.compile")
        axes[2].set_xlabel("ops in the chain")
        axes[2].set_ylabel("compile latency (ms)")
        axes[2].set_title("compile time vs ops")
        axes[2].legend()
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minidynamo.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument("--plot", metavar="PATH", help="save a matplotlib figure")
    parser.add_argument("--quick", action="store_true", help="tiny sizes and few rounds (for tests)")
    parser.add_argument("--only", metavar="NAMES", help=f"comma-separated subset of {','.join(WORKLOADS)}")
    parser.add_argument("--no-scaling", action="store_true", help="skip the chain-length curve")
    parser.add_argument("--no-cold", action="store_true", help="skip the cold-start measurements")
    parser.add_argument("--repeats", type=int, default=None, metavar="N",
                        help="workers per system and workload, alternating; figures are medians (default 5, --quick 1)")
    parser.add_argument("--frame-hook", action="store_true",
                        help="only the frame hook's figures (minidynamo/bench_frame_hook.py), in a fresh process")
    parser.add_argument("--compare", metavar="PATH", default=None,
                        help=f"a previous run's --json to compare ratios with (default {PREVIOUS}, if present); "
                             f"a full run (no --quick/--only) saves its figures there")
    parser.add_argument("--no-imports", action="store_true", help="skip the import-time breakdown")
    parser.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if args.frame_hook:
        from minidynamo import bench_frame_hook

        cmd = [sys.executable, "-m", "minidynamo.bench_frame_hook", "--json"] + (["--quick"] if args.quick else [])
        report = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        print(bench_frame_hook.format_report(report))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"frame_hook": report}, f, indent=2)
        return 0
    workloads = tuple(args.only.split(",")) if args.only else WORKLOADS
    dynamic_row = not args.only or "dynamic_shapes" in workloads  # bench_dynamic.py: 20 batch sizes
    workloads = tuple(w for w in workloads if w != "dynamic_shapes")
    unknown = [w for w in workloads if w not in _BUILDERS]
    if unknown:
        parser.error(f"unknown workload(s) {unknown}; known: {', '.join(WORKLOADS)}")
    repeats = args.repeats if args.repeats is not None else (1 if args.quick else 5)
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    report = run(workloads, args.quick, not args.no_scaling, not args.no_cold,
                 progress=lambda msg: print(msg, file=sys.stderr, flush=True), repeats=repeats)
    if not (args.no_imports or args.quick):
        report["_imports"] = import_breakdown()
    print(format_table(report))
    if dynamic_row:
        from minidynamo import bench_dynamic

        report["dynamic_shapes"] = bench_dynamic.run(args.quick)
        print(bench_dynamic.format_report(report["dynamic_shapes"]))
    if "_imports" in report:
        print(format_imports(report["_imports"]))
    compare = args.compare or (PREVIOUS if os.path.exists(PREVIOUS) else None)
    if compare:
        with open(compare) as f:
            found = regressions(report, json.load(f))
        print(f"against {compare}: " + ("no ratio more than 10% worse" if not found else f"{len(found)} regression(s)"))
        for line in found:
            print("  " + line)
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


if __name__ == "__main__":
    sys.exit(main())

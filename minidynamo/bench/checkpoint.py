"""The checkpointing rows of the benchmark: tensors saved for the backward, per-call time, and a cond compile.

Place in the pipeline: beside ``bench/__init__.py`` (which prints these rows after its table;
``python -m minidynamo.bench.checkpoint`` runs them alone). Two training workloads, each with
and without ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``: an MLP and a
transformer block (attention and an MLP, both checkpointed). For each: the tensors the
forward saves for the backward, count and bytes, eager / ours / torch's ``aot_eager``, and
the time of one training call (forward and ``backward``). Then the compile time of a
``torch.cond`` model, ours and torch's.

How it measures. Each system runs in a fresh process, one thread, after compiling and
resetting an unrelated function (DESIGN.md, "How the benchmark measures"). Saved tensors:
ours and torch's are read off the partition (the backward graph's saved inputs: our
``partition.saved_values``, torch's ``min_cut_rematerialization_partition`` output through
``_torch_private.torch_aot_eager_saved``); eager's are what autograd packs
(``torch.autograd.graph.saved_tensors_hooks``): under eager checkpointing the region's
ops pack into checkpoint's own hooks, not ours, so eager's checkpointed figure is what
autograd saves outside the regions (the regions' inputs are kept by checkpoint itself).
Per-call times: medians of rounds that alternate eager and the compiled function in one
process (``_rounds``); the ratio is ours / torch's, each taken over eager's time in its own
process, so drift between the two processes cancels. No figure here is asserted: the machine is noisy.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

WORKLOADS = ("mlp", "mlp_checkpointed", "block", "block_checkpointed")


def _mlp(quick: bool):
    import torch

    torch.manual_seed(0)
    width = 64 if quick else 256
    layers = [torch.nn.Linear(width, width) for _ in range(4)]
    model = torch.nn.Sequential(*[m for lin in layers for m in (lin, torch.nn.GELU())])
    return model, (torch.randn(32 if quick else 128, width),)


class _Block:
    """A pre-norm transformer block as plain functions of its parameters, so that both halves can be checkpointed."""

    def __init__(self, quick: bool):
        import torch

        torch.manual_seed(0)
        d = 32 if quick else 128
        self.heads, self.d = 4, d
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)
        self.x = torch.randn(4, 16 if quick else 64, d)

    def attention(self, x):
        import torch

        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
        q, k, v = (a.reshape(b, t, self.heads, d // self.heads).transpose(1, 2) for a in (q, k, v))
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // self.heads) ** 0.5, dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))

    def mlp(self, x):
        import torch

        return self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))

    def plain(self, x):
        x = x + self.attention(x)
        return x + self.mlp(x)

    def checkpointed(self, x):
        from torch.utils.checkpoint import checkpoint

        x = x + checkpoint(self.attention, x, use_reentrant=False)
        return x + checkpoint(self.mlp, x, use_reentrant=False)

    def parameters(self):
        for m in (self.ln1, self.ln2, self.qkv, self.proj, self.up, self.down):
            yield from m.parameters()


def _workload(name: str, quick: bool):
    """``(fn, inputs)``: ``fn(*inputs)`` is one training forward, its output's sum back-propagated."""
    from torch.utils.checkpoint import checkpoint

    if name.startswith("mlp"):
        model, inputs = _mlp(quick)
        if name == "mlp":
            return (lambda x: model(x)), inputs
        return (lambda x: checkpoint(model, x, use_reentrant=False)), inputs
    block = _Block(quick)
    return (block.plain if name == "block" else block.checkpointed), (block.x,)


class _CondModel:
    def __init__(self):
        import torch

        torch.manual_seed(0)
        self.lin = torch.nn.Linear(32, 32)

    def __call__(self, x):
        import torch

        h = self.lin(x)
        return torch.cond(h.sum() > 0, lambda t: (t.relu() * 2).sin(), lambda t: t.tanh() - 1, (h,)).sum(-1)


def _saved_eager(fn, inputs) -> tuple[int, int]:
    import torch

    packed = []

    def pack(t):
        packed.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*inputs).sum()
    return len(packed), sum(packed)


def _saved_compiled(system: str, fn, inputs) -> tuple[int, int]:
    if system == "ours":
        from minidynamo.notebook import saved_for_backward

        graphs = saved_for_backward(fn, *inputs)
    else:
        from minidynamo._torch_private import torch_aot_eager_saved

        graphs = torch_aot_eager_saved(fn, *inputs)
    return sum(len(g) for g in graphs), sum(b for g in graphs for _, b in g)


def _compile(system: str, fn):
    if system == "eager":
        return fn
    if system == "ours":
        import minidynamo as md

        return md.compile(fn, backend="aot_eager")
    import torch

    return torch.compile(fn, backend="aot_eager")


def _reset(system: str) -> None:
    if system == "ours":
        import minidynamo as md

        md.reset()
    elif system == "torch":
        from minidynamo._torch_private import dynamo_reset

        dynamo_reset()


def _per_call(step, inner: int) -> float:
    t = time.perf_counter()
    for _ in range(inner):
        step()
    return (time.perf_counter() - t) / inner


def _rounds(steps: dict, rounds: int) -> dict:
    """Median time per call of each of ``steps``, over rounds that alternate them (the order rotating)."""
    import gc

    slowest = max(_per_call(s, 1) for s in steps.values())
    inner = max(1, min(200, round(0.02 / max(slowest, 1e-7))))
    names = list(steps)
    times: dict[str, list[float]] = {n: [] for n in names}
    gc.collect()
    gc.disable()
    try:
        for r in range(rounds):
            for n in names[r % len(names):] + names[:r % len(names)]:
                times[n].append(_per_call(steps[n], inner))
    finally:
        gc.enable()
    return {n: statistics.median(t) for n, t in times.items()}


def worker(system: str, quick: bool) -> dict:
    """One compiled system's figures for every workload, eager timed beside it in this process."""
    import torch

    from minidynamo._torch_private import silence_dynamo_logs

    torch.set_num_threads(1)
    silence_dynamo_logs()
    warm = _compile(system, lambda x: (x * 2).sin())
    warm(torch.randn(4))
    _reset(system)
    out: dict[str, Any] = {}
    for name in WORKLOADS:
        fn, inputs = _workload(name, quick)
        inputs = tuple(i.requires_grad_() for i in inputs)
        count, nbytes = _saved_compiled(system, fn, inputs)
        row = {"saved_tensors": count, "saved_bytes": nbytes}
        if system == "ours":  # eager's figures, once
            row["eager_saved_tensors"], row["eager_saved_bytes"] = _saved_eager(fn, inputs)
        _reset(system)
        compiled = _compile(system, fn)
        steps = {"eager": lambda: fn(*inputs).sum().backward(),
                 "compiled": lambda: compiled(*inputs).sum().backward()}
        steps["compiled"]()
        times = _rounds(steps, 5 if quick else 21)
        row["per_call_s"], row["eager_per_call_s"] = times["compiled"], times["eager"]
        out[name] = row
        _reset(system)
    model, x = _CondModel(), torch.randn(16, 32, requires_grad=True)
    start = time.perf_counter()
    _compile(system, model)(x).sum().backward()
    out["cond_compile_s"] = time.perf_counter() - start
    _reset(system)
    return out


def run(quick: bool = False) -> dict:
    out: dict[str, Any] = {}
    for system in ("ours", "torch"):
        proc = subprocess.run([sys.executable, "-m", "minidynamo.bench.checkpoint", "--worker", system]
                              + (["--quick"] if quick else []), capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"checkpoint worker ({system}) failed:\n{proc.stderr[-3000:]}")
        out[system] = json.loads(proc.stdout.strip().splitlines()[-1])
    ours, theirs = out["ours"], out["torch"]
    out["cond_compile_ratio"] = ours["cond_compile_s"] / theirs["cond_compile_s"]
    # each system's time over eager's in its own process, then ours over torch's (eager's drift cancels)
    out["time_ratio"] = {w: (ours[w]["per_call_s"] / ours[w]["eager_per_call_s"])
                         / (theirs[w]["per_call_s"] / theirs[w]["eager_per_call_s"]) for w in WORKLOADS}
    out["same_saved_as_torch"] = {w: (ours[w]["saved_tensors"], ours[w]["saved_bytes"]) ==
                                  (theirs[w]["saved_tensors"], theirs[w]["saved_bytes"]) for w in WORKLOADS}
    return out


def format_report(r: dict) -> str:
    def kib(b):
        return f"{b / 1024:.0f} KiB"

    lines = ["activation checkpointing, training (backend aot_eager): saved for backward, and per-call time",
             f"  {'workload':<20}{'eager':>16}{'ours':>16}{'torch':>16}{'= torch':>8}"
             f"{'eager us':>10}{'ours us':>10}{'torch us':>10}{'ours/torch':>11}"]
    for w in WORKLOADS:
        o, t = r["ours"][w], r["torch"][w]
        cells = [f"{n:>3} / {kib(b):>8}" for n, b in ((o["eager_saved_tensors"], o["eager_saved_bytes"]),
                                                        (o["saved_tensors"], o["saved_bytes"]),
                                                        (t["saved_tensors"], t["saved_bytes"]))]
        eager_us = (o["eager_per_call_s"] + t["eager_per_call_s"]) / 2 * 1e6
        lines.append(f"  {w:<20}{cells[0]:>16}{cells[1]:>16}{cells[2]:>16}"
                     f"{'yes' if r['same_saved_as_torch'][w] else 'NO':>8}"
                     f"{eager_us:>10.0f}{o['per_call_s'] * 1e6:>10.0f}{t['per_call_s'] * 1e6:>10.0f}"
                     f"{r['time_ratio'][w]:>11.2f}")
    lines.append("  (saved: tensors / bytes; eager's checkpointed figure leaves out the regions' inputs, "
                 "which checkpoint keeps itself; ours/torch: each time over eager's in its own process)")
    lines.append(f"  torch.cond model, first training call: ours {r['ours']['cond_compile_s']:.2f} s   "
                 f"torch {r['torch']['cond_compile_s']:.2f} s   ratio {r['cond_compile_ratio']:.2f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m minidynamo.bench.checkpoint")
    p.add_argument("--worker", choices=("eager", "ours", "torch"))
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

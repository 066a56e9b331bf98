"""``python -m minidynamo.bench --frame-hook``: what the PEP 523 frame hook buys and costs.

Place in the pipeline: outside it, beside ``bench/__init__.py`` (whose docstring says how figures
are taken: ``torch.set_num_threads(1)``, medians of paired rounds, a fresh process).

- ``loop_break``: a forward with a graph break inside its loop (a data-dependent ``if``).
  Dynamo skips that frame and compiles the function it calls on every iteration.
  Per-call time of eager, of ours with the frame hook (the skipped frame runs in
  CPython), of ours with explicit calls (it runs on our concrete interpreter), and of
  ``torch.compile`` (backend "eager"); the number of graphs compiled for the callees.
- ``hook_cost``: a call of a plain function, 100k times: with no hook installed; with
  the hook installed and the function's code marked SKIP (torch's, the stdlib's); and a
  user function whose cache says "run in CPython": asked once, then marked SKIP too
  (Note [The frame hook]), so it costs what a SKIP-marked call costs.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any, Callable

ROUNDS = 21


def block(layer, x):
    import torch

    return torch.relu(layer(x)) + x


def _loop_break_model(width: int, depth: int):
    import torch

    class LoopBreak(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))

        def forward(self, x):
            for layer in self.layers:
                x = block(layer, x)
                if x.sum() > 1e9:  # data-dependent: a graph break inside the loop
                    x = x / 2
            return x

    return LoopBreak()


def _paired(fns: dict[str, Callable[[], Any]], calls: int, rounds: int = ROUNDS) -> dict[str, float]:
    """Median seconds per call of each fn, rounds interleaved (bench/__init__.py's Note [Paired rounds])."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[name].append((time.perf_counter() - t0) / calls)
    return {k: statistics.median(v) for k, v in times.items()}


SHAPES = {"matmul_heavy": (256, 32, 4), "python_heavy": (16, 4, 8)}  # width, batch, layers


def loop_break(width: int, batch: int, depth: int, quick: bool = False) -> dict:
    import torch

    import minidynamo as md
    from minidynamo.symbolic import frame_hook
    torch.manual_seed(0)
    model, x = _loop_break_model(width, depth), torch.randn(batch, width)
    with frame_hook.using(True) as hook:
        hooked = md.compile(model, backend="eager")
    with frame_hook.using(False):
        explicit = md.compile(model, backend="eager")
    real = torch.compile(model, backend="eager")
    with torch.no_grad():
        for fn in (hooked, explicit, real):
            torch.testing.assert_close(fn(x), model(x))
        graphs = sum(len(c.entries) for c in hooked._forward.config.frames.values())  # noqa: SLF001
        times = _paired({"eager": lambda: model(x), "hooked": lambda: hooked(x), "explicit": lambda: explicit(x),
                         "torch": lambda: real(x)}, calls=5 if quick else 20, rounds=5 if quick else ROUNDS)
    eager = times["eager"]
    return {"width": width, "batch": batch, "depth": depth, "hook": hook is not None, "callee_graphs": graphs,
            "per_call_s": times, "vs_eager": {k: v / eager for k, v in times.items()}}


def plain(a):
    return a


def _calls(n: int) -> None:
    for i in range(n):
        plain(i)


def hook_cost(n: int = 100_000, rounds: int = ROUNDS) -> dict:
    from minidynamo.backends import lookup_backend
    from minidynamo.symbolic import frame_hook
    from minidynamo.symbolic.eval_frame import CompileConfig, FrameCache

    hook = frame_hook.build()
    if hook is None:
        return {"hook": False, "reason": frame_hook.reason()}
    config = CompileConfig(backend=lookup_backend("eager"), hook=hook)
    config.optimized(plain)
    config.frames[plain.__code__] = FrameCache(fallback="benchmark: always run in CPython", skipped=True)

    def under(callback) -> Callable[[], None]:
        def run() -> None:
            previous = hook.set_callback(callback)
            try:
                _calls(n)
            finally:
                hook.set_callback(previous)
        return run

    hook.set_callback(lambda f, a: hook.SKIP)  # mark plain's code SKIP once
    plain(0)
    hook.set_callback(None)
    skip_marked = _paired({"plain": lambda: _calls(n), "skip": under(lambda f, a: hook.SKIP)}, calls=1, rounds=rounds)
    hook.unskip(plain.__code__)
    asked = _paired({"plain": lambda: _calls(n), "callback": under(config.frame_callback)}, calls=1, rounds=rounds)
    return {"hook": True, "calls": n, "plain_call_s": skip_marked["plain"] / n,
            "skip_marked_call_s": skip_marked["skip"] / n, "user_frame_run_in_cpython_s": asked["callback"] / n,
            "skip_vs_plain": skip_marked["skip"] / skip_marked["plain"],
            "callback_vs_plain": asked["callback"] / asked["plain"]}


def run(quick: bool = False) -> dict:
    import torch

    torch.set_num_threads(1)
    shapes = {"quick": (32, 4, 4)} if quick else SHAPES
    return {"loop_break": {k: loop_break(*v, quick=quick) for k, v in shapes.items()},
            "hook_cost": hook_cost(5_000, 5) if quick else hook_cost()}


def format_report(report: dict) -> str:
    hc = report["hook_cost"]
    lines = ["frame hook: a graph break inside a forward's loop; per call, and times eager"]
    for name, lb in report["loop_break"].items():
        us = {k: v * 1e6 for k, v in lb["per_call_s"].items()}
        lines.append(f"  {name} ({lb['depth']} layers, {lb['batch']}x{lb['width']}, {lb['callee_graphs']} callee "
                     "graphs): " + ", ".join(f"{k} {us[k]:.0f} us ({lb['vs_eager'][k]:.2f}x)" for k in us))
    if hc.get("hook"):
        lines.append(f"  hook cost per call of a plain function: none {hc['plain_call_s'] * 1e9:.0f} ns, "
                     f"SKIP-marked code {hc['skip_marked_call_s'] * 1e9:.0f} ns ({hc['skip_vs_plain']:.2f}x), "
                     f"user frame asked and run in CPython {hc['user_frame_run_in_cpython_s'] * 1e9:.0f} ns "
                     f"({hc['callback_vs_plain']:.1f}x)")
    else:
        lines.append(f"  no frame hook here: {hc['reason']}")
    return "\n".join(lines)


if __name__ == "__main__":
    result = run(quick="--quick" in sys.argv)
    print(json.dumps(result) if "--json" in sys.argv else format_report(result))

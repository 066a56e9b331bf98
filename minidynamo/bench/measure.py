"""One measurement of the benchmark: compile a workload in a fresh process and time it.

Place in the pipeline: outside it; ``bench/__init__.py`` (the driver) asks for each figure with a
spec (workload, system, warm or cold) and gets back this module's :func:`worker` result.
A worker runs in a process of its own: a new interpreter, or with ``--fork`` a child
forked from a zygote that has imported torch, minidynamo and the workload's model
library and nothing else (Note [Fresh processes from a zygote]). No torch file mirrors
it; ``torch.utils.benchmark.Timer`` times calls as :func:`_steady_state` does (gc off,
many calls per measurement).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Callable

from minidynamo.bench.imports import worker_env
from minidynamo.bench.workloads import _BUILDERS, Workload, _call, _compile, _pointwise_chain, _reset, _warmup_fn

WORKER_TIMEOUT_S = 600
ROUND_S = 0.005  # a round's target length (Note [Paired rounds])
MIN_ROUNDS, MAX_ROUNDS, MAX_INNER = 31, 2000, 5000
STEADY_BUDGET_S = 0.5  # per process; cold and warm processes both measure (Note [Paired rounds])


def _timed(fn: Callable) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _store(d: dict, key: str, value: Any) -> None:
    d[key] = value


def worker(spec: dict) -> dict:
    """Run one measurement (in its own process) and return its figures."""
    import torch

    from minidynamo._torch_private import silence_dynamo_logs

    begin = time.perf_counter()
    phases: dict[str, float] = {}
    torch.set_num_threads(1)
    torch.manual_seed(0)
    silence_dynamo_logs()
    system, quick = spec["system"], spec.get("quick", False)
    if spec["workload"] == "pointwise_chain" and "length" in spec:
        wl = _pointwise_chain(quick, spec["length"])
    else:
        wl = _BUILDERS[spec["workload"]](quick)
    phases["build"] = time.perf_counter() - begin

    mark = time.perf_counter()
    if spec.get("warm", True):
        warm = _compile(system, _warmup_fn)
        x = torch.randn(8, requires_grad=True)
        warm(x).backward()
        _reset(system)
        gc.collect()  # Note [A warm compile pays only its own garbage]
    phases["warmup"] = time.perf_counter() - mark

    cold = not spec.get("warm", True)
    if system == "torch":
        from minidynamo.real_passes import counting_backend  # noqa: F401 - ours, imported before the timer
    # Note [The cold figure is compile() and the first call]: torch.compile() imports
    # torch._dynamo before the first call, md.compile() its stages at the first call;
    # a learner's first `compile(f)(x)` pays both, so the cold figure times both.
    if spec.get("list_modules"):  # what this process has imported when the timer starts (tests)
        modules_at_timer = sorted(sys.modules)
    mark = time.perf_counter()
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
    phases["compile"] = time.perf_counter() - mark
    if spec.get("steady", True):
        mark = time.perf_counter()
        result.update(_steady_state(wl, compiled, args, quick))
        phases["steady"] = time.perf_counter() - mark
        if system == "ours" and not cold:
            mark = time.perf_counter()
            result.update(_recording_cost(wl, args, first="off" if spec.get("rep", 0) % 2 == 0 else "on"))
            phases["recording"] = time.perf_counter() - mark
    result["phases_s"] = phases
    if spec.get("list_modules"):
        result["modules_at_timer"] = modules_at_timer
    return result


def _recording_cost(wl: Workload, args: tuple, first: str = "off") -> dict:
    """Our compile latency with the event log recording and without (the issue: one flag check when off).

    One of each per process, after the same function has been compiled once in this
    process, so both are equally warm; which goes first alternates between processes
    (the driver passes ``first``) and the driver takes the median over processes.
    """
    from minidynamo import events

    times: dict[str, float] = {}
    for mode in (first, "on" if first == "off" else "off"):
        _reset("ours")
        gc.collect()  # Note [A warm compile pays only its own garbage]
        compiled = _compile("ours", wl.fn)
        if mode == "on":
            with events.record():
                times[mode] = _timed(lambda: compiled(*args))
        else:
            times[mode] = _timed(lambda: compiled(*args))
    return {"compile_recording_on_s": times["on"], "compile_recording_off_s": times["off"]}


def _steady_state(wl: Workload, compiled: Callable, args: tuple, quick: bool) -> dict:
    """Per-call time of eager and of the compiled function, and the overhead (Note [Paired rounds]).

    Note [Paired rounds]
        The machine's speed drifts over seconds: the same eager call measured 45 us in
        one process and 110 us in another a moment later. So eager and compiled calls
        are timed in alternating rounds (E C, C E, E C, ...: each pair adjacent, the
        order flipping so a drift within a pair cancels over two), with the garbage
        collector off (as ``timeit`` does); a round's overhead is its compiled time per
        call minus the eager time per call of the round next to it.
        - A round is ``inner`` calls, chosen before timing so that a compiled round
          lasts about 5 ms (``ROUND_S``): a 65 us compiled call (mutation_views, its
          eager call 15 us) then runs some 80 times a round, its round far above the
          timer's resolution and the loop's own cost; a 70 ms training step runs once
          (a longer round would only add drift). The old rounds were capped at 50 calls.
        - Rounds: at least 31, then more until ``STEADY_BUDGET_S`` of rounds is spent
          (at most 2000), fixed before any round is timed (never by the result).
        - Ours and torch's are timed in separate processes (torch's FakeTensorMode
          leaves the process's tensor methods slower, which would tax ours),
          alternating, warm and cold workers alike (both have compiled the workload;
          neither's calls differ), so each figure pools 2 x ``--repeats`` processes.
          The driver pools every round and gives the median with a bootstrap
          interval (Note [How sure a figure is] in ``bench/stats.py``).
    """
    def once(f: Callable) -> float:
        return _timed(lambda: _call(f, args, wl.backward))

    per_call = min(once(compiled) for _ in range(3))
    min(once(wl.fn) for _ in range(3))  # eager's first calls too, before any round
    inner = max(1, min(MAX_INNER, round(ROUND_S / max(per_call, 1e-7))))
    min_rounds, budget = (5, 0.05) if quick else (MIN_ROUNDS, STEADY_BUDGET_S)
    eager_times: list[float] = []
    compiled_times: list[float] = []
    gc.collect()
    gc.disable()
    start = time.perf_counter()
    try:
        r = 0
        while r < MAX_ROUNDS and (r < min_rounds or time.perf_counter() - start < budget):
            pair = [(eager_times, wl.fn), (compiled_times, compiled)]
            for times, f in pair if r % 2 == 0 else reversed(pair):
                times.append(_timed(lambda: [_call(f, args, wl.backward) for _ in range(inner)]) / inner)
            r += 1
    finally:
        gc.enable()
    diffs = [c - e for c, e in zip(compiled_times, eager_times)]
    return {
        "eager_call_s": statistics.median(eager_times),
        "compiled_call_s": statistics.median(compiled_times),
        "overhead_s": statistics.median(diffs),
        "overhead_rounds_s": diffs,
        "inner": inner,
    }


# --- fresh processes -------------------------------------------------------------------

# Note [Fresh processes from a zygote]
#     Every figure needs a process that has compiled nothing yet, and starting one is
#     mostly ``import torch`` (1.5-7 s on the benchmark machine) and timm or
#     transformers (as much again): 100 processes spent most of a run importing. Every
#     figure excludes those imports (the worker imported them before any timer), so a
#     zygote process imports them once (torch, minidynamo's package, the workload's
#     model library: ``preload``) and forks one child per measurement; a child starts
#     exactly where a new interpreter would be when its timer starts, without paying
#     the imports again. The zygote compiles nothing and runs no tensor op; what our
#     stages and torch._dynamo import lazily is still imported in each child, inside
#     the cold figure. Small workloads get a zygote without timm or transformers (a
#     child must not find modules loaded that a real process would not have). The
#     fork is Linux's; elsewhere each worker is a new interpreter.
#
#     Measured (mutation_views, our warm compile): 15 ms in a new interpreter, 125-150 ms
#     in a forked child, 24 ms in a forked child of a zygote that ran ``gc.freeze()``,
#     12 ms in a forked child with the collector off. A full collection in the child
#     touches every object it inherited, and each touched page is copied (copy on
#     write): a cost a new interpreter never pays. So forking is not the default
#     (``--fork``): it makes warm compiles read slower, by how often each system
#     collects, not by what it does; ``gc.freeze()`` would make them read faster than
#     a new interpreter's (its collections would skip torch's own objects).

# Note [A warm compile pays only its own garbage]
#     A full collection (generation 2) runs when enough objects have survived since
#     the last one: which compile pays for it depends on what ran before, not on the
#     compile. ``import torch`` leaves about 400k objects behind; torch's warm-up
#     compile allocates enough to trigger the collection during the warm-up, ours
#     does not, so our measured compile paid ~105 ms for torch's import
#     (inputs200 and transformer_block: one full collection in our window, none in
#     torch's, measured with ``gc.callbacks``). So a warm worker collects once after
#     its warm-up, before the timer, for both systems: each compile then pays the
#     collections its own allocations cause. The cold figure does not: a learner's
#     first call pays whatever its process owes.

PRELOADS = {"gpt2_tiny": "transformers", "resnet10t_train": "timm", "resnet18_train": "timm",
            "mobilenetv3_small_train": "timm"}


def preload(key: str) -> None:
    """Import what the workloads of ``key`` build their models from (Note [Fresh processes from a zygote])."""
    import torch  # noqa: F401

    import minidynamo  # noqa: F401
    from minidynamo import _torch_private  # noqa: F401

    if key == "timm":
        from minidynamo import zoo

        zoo._without_broken_torchvision()
        import timm  # noqa: F401
    elif key == "transformers":  # as zoo.gpt2 does before it builds the model
        from minidynamo import zoo

        zoo._without_broken_torchvision()
        zoo._quiet_transformers()
        from transformers import GPT2Config, GPT2LMHeadModel  # noqa: F401


def _child(spec: dict, write_fd: int) -> None:
    """The forked child: one worker, its result (or traceback) as one JSON line on ``write_fd``."""
    try:
        os.dup2(2, 1)  # anything printed goes to stderr, not into the zygote's answers
        signal.alarm(WORKER_TIMEOUT_S)
        text = json.dumps({"ok": worker(spec)})
    except BaseException:  # noqa: BLE001 - reported to the driver, which raises
        text = json.dumps({"error": traceback.format_exc()})
    with os.fdopen(write_fd, "w") as f:
        f.write(text)
    os._exit(0)


def zygote(key: str) -> int:
    """Serve specs read from stdin, one forked child each, answers on stdout (one JSON line each)."""
    sys.dont_write_bytecode = False  # Note [Workers keep bytecode caches]
    preload(key)
    gc.collect()
    for line in sys.stdin:
        spec = json.loads(line)
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _child(spec, write_fd)
        os.close(write_fd)
        with os.fdopen(read_fd) as f:
            text = f.read()
        _, status = os.waitpid(pid, 0)
        if not text:
            text = json.dumps({"error": f"worker died (wait status {status})"})
        sys.stdout.write(text.replace("\n", " ") + "\n")
        sys.stdout.flush()
    return 0


class Zygotes:
    """At most one zygote at a time, for the preload key of the current workload."""

    def __init__(self) -> None:
        self.key: str | None = None
        self.proc: subprocess.Popen | None = None

    def run(self, spec: dict) -> dict:
        key = PRELOADS.get(spec["workload"], "")
        if self.proc is None or key != self.key:
            self.close()
            self.stderr = tempfile.TemporaryFile()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "minidynamo.bench", "--zygote", key], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self.stderr, text=True, env=worker_env())
            self.key = key
        try:
            self.proc.stdin.write(json.dumps(spec) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            self.stderr.seek(0)
            tail = self.stderr.read()[-3000:].decode(errors="replace")
            self.close()
            raise RuntimeError(f"benchmark zygote for {spec} exited:\n{tail}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"benchmark worker {spec} failed:\n{answer['error'][-3000:]}")
        return answer["ok"]

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            self.proc.wait(timeout=60)
            self.proc = None
            self.stderr.close()


def spawn_worker(spec: dict) -> dict:
    """One worker in a new interpreter (``--spawn``, or where there is no fork)."""
    proc = subprocess.run(
        [sys.executable, "-m", "minidynamo.bench", "--worker", json.dumps(spec)],
        capture_output=True, text=True, timeout=WORKER_TIMEOUT_S, env=worker_env(),  # Note [Workers keep bytecode caches]
    )
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark worker {spec} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])

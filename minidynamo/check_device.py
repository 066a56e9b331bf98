"""``python -m minidynamo.check_device [--json PATH]``: md.compile and chapters 06-08's CUDA claims, on this build.

Place in the pipeline: none; it sits outside the core, as the benchmark does, and reads it.
Mirrors no torch file: it runs ``torch.compile(backend="aot_eager")`` and torch's own
``aot_function`` beside ours, and reads the build's dispatcher tables (``torch._C``).
Issue 29: every training graph on a CUDA machine fell back to eager (tangents made on cpu,
``aot/graph_capture.py``'s Note [A tangent lives where its output lives]), and the chapters'
CUDA sentences were written on a CPU-only wheel. This module, run on whatever device the
machine has (cuda when there is one, else cpu), checks both in one command:

1. ``md.compile`` (backend ``aot_eager``) of chapter 13's model, a transformer block and
   ``F.rms_norm``, in training and inference, static and ``dynamic=True``, against eager and
   against ``torch.compile(backend="aot_eager")``: outputs, gradients, graph counts, and any
   warning (an ``AOTFallbackWarning`` means eager ran instead).
2. Every CUDA claim of chapters 06-08, each run on this build: the claim, its chapter and
   cell, what the build shows, and a verdict (holds / version-dependent / wrong; on a
   machine without CUDA, "not checked: no CUDA").

It needs only torch and this package on ``PYTHONPATH`` (no network, no jupyter, widgets or
transformers), and avoids APIs newer than torch 2.11. ``--json PATH`` saves everything;
chapters 06 and 08 show such a file, recorded on a real GPU, from ``notebooks/recorded/``.
``--tests`` first runs ``pytest -m cuda tests/test_devices.py`` (the device-parametrized
tests, their cuda cases) in a child and puts its summary in the report. On a GPU machine,
from the root of a checkout::

    PYTHONPATH=$PWD python -m minidynamo.check_device --tests --json notebooks/recorded/cuda_check.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
import warnings
from typing import Any, Callable

import torch
import torch.nn.functional as F

__all__ = ["Block", "chapter13_model", "compile_cases", "cuda_claims", "main"]

NO_CUDA = "not checked: no CUDA"
TOL = 1e-4


# ---------------------------------------------------------------- the programs

def chapter13_model() -> torch.nn.Module:
    """Chapter 13's model (notebooks/13_end_to_end.ipynb), trained with ``F.mse_loss``."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))


class Block(torch.nn.Module):
    """A transformer-ish block: pre-norm attention and a GELU MLP, each with a residual."""

    def __init__(self, d: int = 16, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.up, self.down = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


def _cases(device: str) -> dict[str, tuple[Callable[[], tuple[Callable, list, list]], Callable[[int], list]]]:
    """name -> (build: () -> (fn, params, first inputs), inputs of batch size n)."""
    def gen(*shape):
        return torch.randn(*shape, device=device)

    def ch13():
        model = chapter13_model().to(device)
        return (lambda x, t: F.mse_loss(model(x), t)), list(model.parameters())

    def block():
        torch.manual_seed(0)
        model = Block().to(device)
        return (lambda x: model(x)), list(model.parameters())

    def rms():
        torch.manual_seed(0)
        w = torch.randn(16, device=device)
        return (lambda x: F.rms_norm(x, (16,), w, 1e-5)), [w]

    return {
        "chapter 13 model": (ch13, lambda n: [gen(n, 4), gen(n, 2)]),
        "transformer block": (block, lambda n: [gen(2, n, 16)]),
        "F.rms_norm": (rms, lambda n: [gen(n, 16)]),
    }


# ---------------------------------------------------------------- md.compile vs eager vs torch.compile

def _run(build, inputs_of, sizes, train: bool, compile_fn) -> dict[str, Any]:
    """Fresh parameters and inputs (seeded); for each size: the output and the parameters' grads."""
    fn, params = build()
    for p in params:
        p.requires_grad_(train)
    fn = compile_fn(fn)
    outs, grads = [], []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in sizes:
            torch.manual_seed(n)
            args = inputs_of(n)
            with contextlib.nullcontext() if train else torch.no_grad():
                out = fn(*args)
            if train:
                for p in params:
                    p.grad = None
                out.float().sum().backward()
                grads.append([p.grad.detach().clone() for p in params])
            outs.append(out.detach().clone())
    return {"outs": outs, "grads": grads, "warnings": [f"{w.category.__name__}: {w.message}"[:300] for w in caught]}


def _max_diff(a: dict, b: dict) -> float:
    pairs = list(zip(a["outs"], b["outs"])) + [(x, y) for ga, gb in zip(a["grads"], b["grads"]) for x, y in zip(ga, gb)]
    if len(a["outs"]) != len(b["outs"]) or len(a["grads"]) != len(b["grads"]):
        return float("inf")
    return max((float((x.double() - y.double()).abs().max()) if x.numel() else 0.0) for x, y in pairs)


def compile_cases(device: str, only: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Every (program, training/inference, static/dynamic) through eager, md.compile and torch.compile.

    ``only``: the names of the programs to run (default all).
    """
    import minidynamo as md
    from minidynamo import events
    from minidynamo._torch_private import dynamo_reset, dynamo_unique_graphs, torch_lookup_backend
    from minidynamo.symbolic import counters

    rows = []
    for name, (build, inputs_of) in _cases(device).items():
        if only and name not in only:
            continue
        for train in (True, False):
            for dynamic in (False, True):
                sizes = (4, 6) if dynamic else (4, 4)

                def md_compile(fn, dynamic=dynamic):
                    md.reset()  # clears counters["graphs"]: the graphs Dynamo handed to the backend
                    return md.compile(fn, backend="aot_eager", dynamic=dynamic or None)

                def torch_compile(fn, dynamic=dynamic):
                    dynamo_reset()
                    return torch.compile(fn, backend=torch_lookup_backend("aot_eager"), dynamic=dynamic or None)

                eager = _run(build, inputs_of, sizes, train, lambda fn: fn)
                with events.record() as log:
                    ours = _run(build, inputs_of, sizes, train, md_compile)
                ours_graphs = counters["graphs"]
                # Note [AOT backends specialize per size] (symbolic/dynamic_shapes.py): a graph whose
                # symbolic AOT trace failed is compiled once per size, silently; say so here.
                per_size = sorted({e.details.get("reason", "")[:200] for e in log if e.kind == "aot_symbolic_failed"})
                before = dynamo_unique_graphs()  # a counter that dynamo_reset leaves as it is
                theirs = _run(build, inputs_of, sizes, train, torch_compile)
                torch_graphs = dynamo_unique_graphs() - before
                diff_ours, diff_torch = _max_diff(ours, eager), _max_diff(theirs, eager)
                ok = (diff_ours <= TOL and not ours["warnings"] and ours_graphs == torch_graphs)
                rows.append({
                    "case": name, "mode": "training" if train else "inference",
                    "shapes": "dynamic=True" if dynamic else "static", "sizes": list(sizes),
                    "max_diff_ours_vs_eager": diff_ours, "max_diff_torch_vs_eager": diff_torch,
                    "graphs_ours": ours_graphs, "graphs_torch": torch_graphs,
                    "aot_per_size_because": per_size,
                    "warnings_ours": ours["warnings"], "warnings_torch": theirs["warnings"],
                    "ok": ok,
                })
    md.reset()
    dynamo_reset()
    return rows


# ---------------------------------------------------------------- chapters 06-08's CUDA claims

def _claim(cid: str, where: str, claim: str, check: Callable[[], tuple[str, str]], cuda: bool) -> dict[str, str]:
    if not cuda:
        return {"id": cid, "where": where, "claim": claim, "shows": "", "verdict": NO_CUDA}
    try:
        shows, verdict = check()
    except Exception as exc:  # noqa: BLE001 - a claim whose check fails is reported, not raised
        shows, verdict = f"the check raised {type(exc).__name__}: {str(exc).splitlines()[0][:200]}", "wrong"
    return {"id": cid, "where": where, "claim": claim, "shows": shows, "verdict": verdict}


def _rms(t, w):
    return F.rms_norm(t, (4,), w, 1e-5)


def _rms_inputs(device):
    g = torch.Generator().manual_seed(1)
    return (torch.randn(2, 4, generator=g).to(device).requires_grad_(),
            torch.randn(4, generator=g).to(device).requires_grad_())


def _fused(ops) -> list[str]:
    return sorted({op for op in ops if "fused" in op})


def _aot_graph_ops(device: str, decompositions: dict) -> tuple[list[str], list[str]]:
    """torch's aot_function of ``_rms`` on ``device``: the call_function targets of its fw and bw graphs."""
    from minidynamo._torch_private import torch_aot_keeping_graphs

    graphs, compiled = torch_aot_keeping_graphs(_rms, decompositions=decompositions)
    compiled(*_rms_inputs(device)).sum().backward()
    return tuple(sorted({str(n.target) for n in graphs[k].graph.nodes if n.op == "call_function"}) for k in ("fw", "bw"))


def _yaml_dispatch(func: str) -> list[str]:
    import pathlib

    import torchgen

    lines = (pathlib.Path(torchgen.__file__).parent / "packaged/ATen/native/native_functions.yaml").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"- func: {func}("))
    keys = []
    for line in lines[start + 2:]:
        if not line.startswith("    ") or ":" not in line:
            break
        keys.append(line.strip().split(":")[0])
    return keys


def cuda_claims(cuda: bool) -> list[dict[str, str]]:
    """Each CUDA sentence of chapters 06-08, checked on this build (only where CUDA is available)."""
    from minidynamo import dispatch
    from minidynamo.decompositions import ops_run

    aten = torch.ops.aten
    rows = []

    def from_tensor_cuda():
        from minidynamo.fake import FakeTensorMode

        mode = FakeTensorMode()
        fc = mode.from_tensor(torch.randn(2, 3), device="cuda")
        with mode:
            out = fc * 2
        keys = str(dispatch.keys(fc, tls=False)) if hasattr(dispatch, "keys") else ""
        ok = out.device.type == "cuda" and "AutogradCUDA" in keys
        return f"{fc.device} -> {out.device}; keys {keys}", "holds" if ok else "wrong"

    rows.append(_claim("06-fake-cuda", "ch06 cell 'The fake cuda device'",
                       "from_tensor(t, device='cuda') gives a fake claiming cuda; ops keep it; its keys are CUDA's",
                       from_tensor_cuda, cuda))

    def factory_under_mode():
        from minidynamo._torch_private import real_fake_tensor_mode
        from minidynamo.fake import FakeTensorMode

        seen = []
        for label, m in [("ours", FakeTensorMode()), ("torch's", real_fake_tensor_mode())]:
            try:
                with m:
                    t = torch.empty(3, device="cuda")
                seen.append(f"{label}: {type(t).__name__} {t.device}")
            except AssertionError as e:
                seen.append(f"{label}: AssertionError {e}")
        ok = all("cuda" in s and "AssertionError" not in s for s in seen)
        return "; ".join(seen), "holds" if ok else "wrong"

    rows.append(_claim("06-factory", "ch06 cell 'torch.empty(3, device=\"cuda\")'",
                       "AssertionError under our mode only on a CPU-only wheel; on a CUDA build ours and torch's "
                       "both give a fake cuda tensor", factory_under_mode, cuda))

    def fake_backward():
        from minidynamo.fake.cuda_demo import fake_cuda_backward_both

        ours, theirs = fake_cuda_backward_both()
        shows = f"ours: {ours.stdout.splitlines()[-1:] or ours.error}; torch's: {theirs.stdout.splitlines()[-1:] or theirs.error}"
        ok = all(r.returncode == 0 and "survived, grad on cuda" in r.stdout for r in (ours, theirs))
        return shows, "holds" if ok else "wrong"

    rows.append(_claim("06-fake-backward", "ch06 cell 'fake_cuda_backward_both'",
                       "the fake cuda leaf's backward aborts only on a CPU-only wheel; on a CUDA build both survive, "
                       "grad on cuda:0", fake_backward, cuda))

    def backward_kernel():
        table = dispatch.kernels_for(aten._fused_rms_norm_backward.default)  # key -> where registered
        ok, cpu = "CUDA" in table, "CPU" in table
        return (f"registered at: {', '.join(table)}; CUDA kernel: {ok}; CPU kernel: {cpu}",
                "holds" if ok and not cpu else "wrong")

    rows.append(_claim("07-fused-backward-kernels", "ch07 cell after 'kernels_for(rms_norm)'",
                       "_fused_rms_norm_backward has no CPU kernel; a CUDA build registers a CUDA one",
                       backward_kernel, cuda))

    def yaml_lists():
        fw, bw = _yaml_dispatch("_fused_rms_norm"), _yaml_dispatch("_fused_rms_norm_backward")
        shows = f"_fused_rms_norm: {fw}; _fused_rms_norm_backward: {bw}"
        as_213 = (fw == ["CUDA", "MPS", "XPU", "CompositeImplicitAutograd"] and bw == ["CUDA", "XPU"])
        has_cuda = "CUDA" in fw and "CUDA" in bw
        return shows, ("holds" if as_213 else f"version-dependent (torch {torch.__version__})") if has_cuda else "wrong"

    rows.append(_claim("08-yaml", "ch08 cell 'native_functions.yaml'",
                       "2.13's yaml: _fused_rms_norm CUDA, MPS, XPU + CompositeImplicitAutograd; "
                       "_fused_rms_norm_backward CUDA, XPU", yaml_lists, cuda))

    def autograd_cuda():
        got = dispatch.computed_kernel(aten._fused_rms_norm.default, "AutogradCUDA")
        return f"AutogradCUDA -> {got}", "holds" if got and got[0] == "autograd kernel" else "wrong"

    rows.append(_claim("08-autograd-cuda", "ch08 Evidence 1",
                       "a CUDA build gives AutogradCUDA of _fused_rms_norm the autograd kernel (not the math kernel)",
                       autograd_cuda, cuda))

    def eager_cuda():
        ops, _, _ = ops_run(_rms, *_rms_inputs("cuda"), backward=True)
        fused = _fused(ops)
        return f"eager cuda ran {fused}", ("holds" if fused == ["aten._fused_rms_norm.default",
                                                                 "aten._fused_rms_norm_backward.default"] else "wrong")

    rows.append(_claim("08-eager-cuda", "ch08 'The answer' (what would differ on a GPU)",
                       "eager on cuda runs both fused ops (a C++ CUDA kernel runs)", eager_cuda, cuda))

    def simulation_matches():
        from minidynamo.simulated_kernels import simulated_fused_kernels

        with simulated_fused_kernels("CPU"):
            sim = _fused(ops_run(_rms, *_rms_inputs("cpu"), backward=True)[0])
        real = _fused(ops_run(_rms, *_rms_inputs("cuda"), backward=True)[0])
        return f"SIMULATION cpu: {sim}; real cuda: {real}", "holds" if sim == real else "wrong"

    rows.append(_claim("08-simulation", "ch08 Evidence 4 (SIMULATION)",
                       "the stand-in CPU kernels make CPU's tables behave as a CUDA build's for CUDA",
                       simulation_matches, cuda))

    def empty_table_bw():
        _, bw_cuda = _aot_graph_ops("cuda", {})
        _, bw_meta = _aot_graph_ops("meta", {})
        key = "aten._fused_rms_norm_backward.default"
        return (f"bw cuda: {bw_cuda}; bw meta: {bw_meta}",
                "holds" if key in bw_cuda and key in bw_meta else "wrong")

    rows.append(_claim("08-empty-table-bw", "ch08 Evidence 3 / 'The answer'",
                       "with an empty table the backward keeps _fused_rms_norm_backward, on cuda as on meta",
                       empty_table_bw, cuda))

    def inductor_table_bw():
        from minidynamo._torch_private import torch_inductor_decompositions

        _, bw = _aot_graph_ops("cuda", torch_inductor_decompositions())
        return f"bw cuda: {bw}", "holds" if not _fused(bw) else "wrong"

    rows.append(_claim("08-inductor-table-bw", "ch08 Evidence 3",
                       "Inductor's table decomposes _fused_rms_norm_backward (on cuda too)", inductor_table_bw, cuda))

    def empty_table_fw():
        fw_cuda, _ = _aot_graph_ops("cuda", {})
        fw_meta, _ = _aot_graph_ops("meta", {})
        ok = _fused(fw_cuda) == ["aten._fused_rms_norm.default"] and not _fused(fw_meta)
        return f"fw cuda: {fw_cuda}; fw meta: {fw_meta}", "holds" if ok else "wrong"

    rows.append(_claim("08-empty-table-fw", "ch08 'The forward graph, beside the backward'",
                       "with an empty table the forward differs: cuda keeps _fused_rms_norm, meta decomposes it",
                       empty_table_fw, cuda))

    def evidence5():
        from minidynamo.fake.cuda_demo import fake_cuda_rms_norm_report

        report = fake_cuda_rms_norm_report()
        line = next((ln for ln in report.splitlines() if ln.startswith("requires_grad, this build")), report[-200:])
        ok = "_fused_rms_norm.default" in line and "_fused_rms_norm_backward.default" in line
        return line, "holds" if ok else "wrong"

    rows.append(_claim("08-evidence5", "ch08 Evidence 5",
                       "a fake cuda tensor with grad runs both fused ops on a CUDA build", evidence5, cuda))

    def md_compile_keeps_fused():
        import minidynamo as md
        from minidynamo.aot import aot_module_simplified

        seen: list[str] = []

        def keep(gm, example_inputs):
            seen.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
            return gm

        md.reset()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = md.compile(_rms, backend=lambda gm, ex: aot_module_simplified(gm, ex, keep, keep))(*_rms_inputs("cuda"))
            out.sum().backward()
        md.reset()
        fused = _fused(seen)
        ok = fused == ["aten._fused_rms_norm.default", "aten._fused_rms_norm_backward.default"] and not caught
        return f"our graphs' fused ops: {fused}; warnings: {len(caught)}", "holds" if ok else "wrong"

    rows.append(_claim("08-md-compile", "issue 29 / ch08",
                       "md.compile of F.rms_norm in training on cuda compiles (no fallback) and keeps both fused "
                       "ops, as torch's AOTAutograd with an empty table", md_compile_keeps_fused, cuda))
    return rows


# ---------------------------------------------------------------- report

def _table(rows: list[dict], cols: list[str], widths: list[int]) -> str:
    def cell(v, w):
        s = str(v)
        return s if len(s) <= w else s[: w - 1] + "…"
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    lines += ["  ".join(cell(r.get(c, ""), w).ljust(w) for c, w in zip(cols, widths)) for r in rows]
    return "\n".join(lines)


def run_cuda_tests() -> dict[str, Any]:
    """``pytest -m cuda tests/test_devices.py`` in a child, from the checkout this package sits in."""
    import pathlib
    import subprocess

    root = pathlib.Path(__file__).resolve().parents[1]
    tests = root / "tests" / "test_devices.py"
    if not tests.exists():
        return {"returncode": None, "summary": f"not run: no {tests} (not a checkout)"}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:cacheprovider", "-o", "addopts=",
           "-m", "cuda", "-q", "-rs", str(tests.relative_to(root))]
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    failed = [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))]
    return {"returncode": proc.returncode, "command": " ".join(cmd[1:]), "summary": lines[-1] if lines else "",
            "failed": failed, "stderr_tail": proc.stderr[-1000:] if proc.returncode not in (0, 5) else ""}


def run_check(device: str | None = None, *, claims: bool = True, only: tuple[str, ...] = (),
              tests: bool = False) -> dict[str, Any]:
    """Everything the command prints, as one dict (what ``--json`` saves)."""
    cuda = torch.cuda.is_available()
    device = device or ("cuda" if cuda else "cpu")
    return {
        "cuda_tests": run_cuda_tests() if tests else None,
        "torch": torch.__version__,
        "cuda_build": torch.version.cuda,
        "device": device,
        "device_name": torch.cuda.get_device_name(0) if cuda else platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "compile_cases": compile_cases(device, only),
        "claims": cuda_claims(cuda) if claims else [],
    }


def format_report(result: dict[str, Any]) -> str:
    head = (f"torch {result['torch']} (CUDA {result['cuda_build'] or 'none'}), device {result['device']} "
            f"({result['device_name']}), Python {result['python']}")
    cases = _table(result["compile_cases"],
                   ["case", "mode", "shapes", "max_diff_ours_vs_eager", "max_diff_torch_vs_eager",
                    "graphs_ours", "graphs_torch", "warnings_ours", "aot_per_size_because", "ok"],
                   [18, 10, 12, 22, 23, 11, 12, 14, 24, 5])
    claims = _table(result["claims"], ["id", "where", "claim", "shows", "verdict"], [24, 34, 60, 70, 30])
    bad = [c for c in result["compile_cases"] if not c["ok"]] + [
        c for c in result["claims"] if c["verdict"] not in ("holds", NO_CUDA) and not c["verdict"].startswith("version")]
    tests = result.get("cuda_tests")
    if tests:
        head += f"\n\npytest -m cuda tests/test_devices.py: {tests['summary']}" + "".join(
            f"\n  {line}" for line in tests.get("failed", []))
        if tests["returncode"] not in (0, None):
            bad.append(tests)
    return "\n\n".join([head, "md.compile vs eager vs torch.compile(backend='aot_eager')", cases,
                        "chapters 06-08: CUDA claims on this build", claims,
                        f"{len(bad)} problem(s)" if bad else "all compile cases ok; no claim wrong"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minidynamo.check_device", description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="PATH", help="also save the result as JSON")
    parser.add_argument("--device", help="device for the compile cases (default: cuda if available, else cpu)")
    parser.add_argument("--no-claims", action="store_true", help="only the compile cases")
    parser.add_argument("--tests", action="store_true",
                        help="first run pytest -m cuda tests/test_devices.py (from a checkout) and report it")
    parser.add_argument("--only", action="append", default=[], metavar="CASE",
                        help="run only this program (repeatable): " + ", ".join(repr(n) for n in _cases("cpu")))
    args = parser.parse_args(argv)
    result = run_check(args.device, claims=not args.no_claims, only=tuple(args.only), tests=args.tests)
    print(format_report(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    bad = [c for c in result["compile_cases"] if not c["ok"]] + [
        c for c in result["claims"] if c["verdict"] == "wrong"]
    tests = result["cuda_tests"]
    return 1 if bad or (tests and tests["returncode"] not in (0, None)) else 0


if __name__ == "__main__":
    sys.exit(main())


# ---------------------------------------------------------------- the chapters read a recorded run

RECORDED = "recorded/cuda_check.json"  # relative to notebooks/, where the chapters run


def show_recorded(prefix: str | tuple[str, ...], path: str = RECORDED, *, compile_cases: bool = False) -> None:
    """Print the claims whose id starts with ``prefix`` from a run recorded with ``--json`` (chapters 06-08).

    ``compile_cases``: also one line per md.compile case (equal to eager, warnings, graphs).

    The file is what ``python -m minidynamo.check_device --json notebooks/recorded/cuda_check.json``
    saved on a CUDA machine; without it, say so.
    """
    import pathlib

    file = pathlib.Path(path)
    if not file.exists():
        print(f"not recorded yet: no {path}. On a CUDA machine run\n"
              f"  python -m minidynamo.check_device --json notebooks/{RECORDED}")
        return
    result = json.loads(file.read_text())
    print(f"recorded run: torch {result['torch']} (CUDA {result['cuda_build']}), device {result['device']} "
          f"({result['device_name']}), Python {result['python']}")
    if compile_cases:
        for row in result["compile_cases"]:
            print(f"md.compile {row['case']:<18} {row['mode']:<10} {row['shapes']:<12} "
                  f"max |ours - eager| {row['max_diff_ours_vs_eager']:.1e}, graphs {row['graphs_ours']} "
                  f"(torch.compile {row['graphs_torch']}), warnings {len(row['warnings_ours'])}: "
                  f"{'ok' if row['ok'] else 'NOT OK'}"
                  + ("; AOT compiled per size (its symbolic trace failed)" if row.get("aot_per_size_because") else ""))
    for row in result["claims"]:
        if row["id"].startswith(prefix):
            print(f"\n[{row['id']}] {row['where']}\n  claim:   {row['claim']}\n  shows:   {row['shows']}\n"
                  f"  verdict: {row['verdict']}")

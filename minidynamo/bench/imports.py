"""The one-time costs of the benchmark: what a first compile imports, and the workers' environment.

Place in the pipeline: beside ``bench/__init__.py``, which prints this breakdown after its
table (Note [Import time of a first compile]) and starts every worker with
:func:`worker_env` (Note [Workers keep bytecode caches]). No torch file mirrors it;
the probe is ``python -X importtime`` of torch's own documentation on import time.
"""

from __future__ import annotations

import os
import subprocess
import sys

# Note [Workers keep bytecode caches]
#     A learner's installed minidynamo has its ``__pycache__``, as torch's site-packages
#     has; an environment with PYTHONDONTWRITEBYTECODE=1 (some sandboxes set it) would
#     compile every module of ours from source in every cold worker (0.3-0.6 s) while
#     torch's come precompiled. So the workers run with bytecode caching on: the warm
#     workers write our caches (git ignores ``__pycache__``) before any cold one starts.


def worker_env() -> dict:
    """The environment of a benchmark worker (Note [Workers keep bytecode caches])."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


PROBE = (
    "import torch\n"
    "import minidynamo as md\n"
    "model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())\n"
    "md.compile(lambda x: model(x).sum())(torch.randn(2, 8)).backward()\n"
)

# Note [Import time of a first compile]
#     Seconds of a learner's first compile can be imports, not tracing: real Dynamo's
#     ``torch._dynamo`` pulls in sympy and half of torch. The probe runs a tiny MLP's
#     first compile and backward in a fresh process (``python -X importtime``) and
#     splits the modules into those ``import torch`` loaded and those the first compile
#     did; the latter are summed, own time per module, into groups by who asks for them:
#       - minidynamo: our stages, imported at the first call;
#       - torch._dynamo: the real Dynamo. Nothing of ours needs it: torch's meta kernels
#         used to import it (Note [torch._dynamo on the first meta kernel] in
#         _torch_private/internals.py); a nonzero figure here is a regression;
#       - torch.distributed: torch's C++ dispatch of a tensor subclass checks for DTensor
#         (importing torch.distributed.tensor) unless a torch_dispatch rule answers first;
#         our FakeTensor's one such op has its rule (Note [The device question has a
#         torch_dispatch rule] in fake/fake_tensor.py): a nonzero figure is a regression;
#       - sympy (torch's meta kernels): sympy, mpmath, torch.utils._sympy and torch's
#         ShapeEnv (torch.fx.experimental.symbolic_shapes). Torch imports them on the first
#         Python meta kernel: ``torch._check`` imports ``symbolic_shapes.expect_true`` on every
#         call, and ``torch._prims_common.elementwise_dtypes`` imports sympy for an isinstance
#         check; in torch 2.13 nearly every aten op's Meta kernel is Python (``activate_meta``
#         in torch/_meta_registrations.py), so ``torch.empty(2, device="meta") * 2`` in a
#         fresh process pays the same. Our own ShapeEnv imports sympy only for symbolic sizes;
#       - networkx: torch's min-cut partitioner uses it; ours has its own max-flow
#         (aot/max_flow.py), so a nonzero figure is a regression;
#       - other torch, other: the rest.
#     ``first_compile_top_s`` lists the biggest imports the first compile started
#     (cumulative), which names each trigger.

GROUPS = ("torch (import torch)", "minidynamo", "torch._dynamo", "torch.distributed", "sympy (torch's meta kernels)",
          "networkx", "other torch", "other")
_SYMPY = ("torch.utils._sympy", "torch.fx.experimental.symbolic_shapes", "torch.fx.experimental.recording",
          "torch.fx.experimental._size_hinting")


def _group(name: str) -> str:
    top = name.split(".")[0]
    if top == "minidynamo":
        return "minidynamo"
    if name.startswith(("torch._dynamo", "torch._inductor")):
        return "torch._dynamo"
    if name.startswith("torch.distributed"):
        return "torch.distributed"
    if top in ("sympy", "mpmath") or name.startswith(_SYMPY):
        return "sympy (torch's meta kernels)"
    if top == "networkx":
        return "networkx"
    return "other torch" if top == "torch" else "other"


def parse_importtime(stderr: str) -> dict:
    """Group ``-X importtime`` lines (Note [Import time of a first compile])."""
    rows = []  # (own s, cumulative s, depth, name), in the order imports finished
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        parts = line[len("import time:"):].split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        name = parts[2].rstrip()
        depth = (len(name) - len(name.lstrip())) // 2
        rows.append((int(parts[0]) / 1e6, int(parts[1]) / 1e6, depth, name.strip()))
    # `import torch` is the probe's first statement: everything up to its top-level line is its
    ends = [i for i, r in enumerate(rows) if r[3] == "torch" and r[2] == 0]
    split = ends[0] + 1 if ends else 0
    groups = dict.fromkeys(GROUPS, 0.0)
    groups["torch (import torch)"] = sum(r[0] for r in rows[:split])
    for own, _, _, name in rows[split:]:
        groups[_group(name)] += own
    ours = sorted(((own, n) for own, _, _, n in rows[split:] if n.startswith("minidynamo")), reverse=True)[:6]
    tops = sorted(((cum, n) for _, cum, depth, n in rows[split:]
                   if depth == 0 and cum > 0.005 and not n.startswith("minidynamo")), reverse=True)[:6]
    return {"groups_s": groups, "ours_top_s": {n: t for t, n in ours}, "first_compile_top_s": {n: t for t, n in tops}}


def import_breakdown() -> dict:
    """``python -X importtime`` of ``import torch`` plus a first ``md.compile(...)(x)``, grouped."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", PROBE],
                          capture_output=True, text=True, timeout=600, env=worker_env())
    return {**parse_importtime(proc.stderr), "ok": proc.returncode == 0}


def format_imports(imports: dict) -> str:
    g = imports["groups_s"]
    first = sum(v for k, v in g.items() if k != "torch (import torch)")
    lines = [
        f"import time of a first md.compile(...)(x), own time per group (ms): import torch "
        f"{g['torch (import torch)'] * 1000:.0f}; then the first compile {first * 1000:.0f}: "
        + ", ".join(f"{k} {v * 1000:.0f}" for k, v in g.items() if k != "torch (import torch)"),
        "  our slowest modules (ms): " + ", ".join(f"{n} {t * 1000:.0f}" for n, t in imports["ours_top_s"].items()),
    ]
    if imports.get("first_compile_top_s"):
        lines.append("  the first compile's biggest other imports (ms, with what they import): " + ", ".join(
            f"{n} {t * 1000:.0f}" for n, t in imports["first_compile_top_s"].items()))
    return "\n".join(lines)

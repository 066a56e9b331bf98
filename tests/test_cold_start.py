"""The cold start (issue 17): a first compile imports nothing heavy it does not need.

Note [torch._dynamo on the first meta kernel] (minidynamo/_torch_private/internals.py): our first
compile must not import the real Dynamo, and once a real ``torch.compile`` runs in the
same process torch must behave as if we had never touched its meta kernels. Note [The
device question has a torch_dispatch rule] (minidynamo/fake/fake_tensor.py): nor
torch.distributed.tensor. sympy does come in, and only from inside a torch kernel we ran
(Note [Import time of a first compile], minidynamo/bench/imports.py). Each check runs
in a fresh interpreter, since the imports of this one are long done.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PROBE = textwrap.dedent("""
    import json, sys
    import torch
    import minidynamo as md
    from minidynamo._torch_private import _DisableWhenDynamoLoaded

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))

    def f(x):
        return (model(x).sigmoid() * 2 + x.sum(-1, keepdim=True)).sum()

    x = torch.randn(4, 8, requires_grad=True)
    ours = md.compile(f)(x)
    ours.backward()
    grad_ours = x.grad.clone()
    x.grad = None
    out = {"dynamo_after_ours": "torch._dynamo" in sys.modules}

    # the one wrapped function addmm's meta kernel calls: still our stand-in, then the real disable
    import torch._decomp
    wrapped = []
    for fn in torch._decomp.global_decomposition_table["post_autograd"].values():
        stack = [fn]
        while stack:
            g = stack.pop()
            c = getattr(g, "__dict__", {}).get("__dynamo_disable")
            if c is not None:
                wrapped.append(g)
            stack += [cell.cell_contents for cell in (getattr(g, "__closure__", None) or ())
                      if callable(getattr(cell, "cell_contents", None))]
            if getattr(g, "__dict__", {}).get("__wrapped__") is not None:
                stack.append(g.__wrapped__)
    stand_ins = [g for g in wrapped if isinstance(g.__dict__["__dynamo_disable"], _DisableWhenDynamoLoaded)]
    out["stand_ins_before"] = len(stand_ins)

    eager = f(x)
    eager.backward()
    grad_eager = x.grad.clone()
    x.grad = None
    theirs = torch.compile(f, backend="aot_eager")(x)
    theirs.backward()
    out["ours_matches_eager"] = bool(torch.allclose(ours, eager)) and bool(torch.allclose(grad_ours, grad_eager))
    out["theirs_matches_eager"] = bool(torch.allclose(theirs, eager)) and bool(torch.allclose(x.grad, grad_eager))
    out["stand_ins_used_by_torch"] = sum(
        1 for g in stand_ins if not isinstance(g.__dict__["__dynamo_disable"], _DisableWhenDynamoLoaded))
    out["real_disable_marked"] = all(
        getattr(g.__dict__["__dynamo_disable"], "_torchdynamo_disable", False)
        for g in stand_ins if not isinstance(g.__dict__["__dynamo_disable"], _DisableWhenDynamoLoaded))
    print(json.dumps(out))
""")


def _run(code: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_first_compile_skips_real_dynamo_and_torch_compile_still_gets_its_disable():
    out = _run(_PROBE)
    assert out["dynamo_after_ours"] is False  # a meta kernel would have imported it (seconds)
    assert out["ours_matches_eager"] and out["theirs_matches_eager"]
    assert out["stand_ins_before"] > 0
    # real torch.compile ran the same meta kernels: each stand-in it met became torch's own disable
    assert out["stand_ins_used_by_torch"] > 0 and out["real_disable_marked"]


# Which heavy modules a fresh process's first compiles import, and who asked: the stack
# at the moment each is first loaded (an import, not importlib.util.find_spec's lookup).
_HEAVY_PROBE = textwrap.dedent("""
    import json, sys, traceback
    import torch
    import minidynamo as md

    WATCH = ("sympy", "torch.fx.experimental.symbolic_shapes", "torch.distributed.tensor", "torch._dynamo",
             "minidynamo.shapes.symbolic_shapes")
    stacks = {}

    class Watch:
        def find_spec(self, name, path=None, target=None):
            if name in WATCH and name not in stacks and name not in sys.modules:
                frames = traceback.extract_stack()[:-1]
                if any(f.name == "_find_and_load" for f in frames):  # a real import
                    stacks[name] = [(f.filename, f.name) for f in frames]
            return None

    sys.meta_path.insert(0, Watch())
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))

    def mlp(x):
        return model(x).sum()

    def views(x, y):
        y.add_(1)
        return x.t().mul(2), x.view(-1)[1:].sigmoid(), y

    x = torch.randn(4, 8, requires_grad=True)
    out = md.compile(mlp)(x)
    out.backward()
    r1 = md.compile(views)(torch.randn(4, 8), torch.randn(3))
    out = {"imported": {n: n in sys.modules for n in WATCH}, "ours_matches_eager": bool(torch.allclose(out, mlp(x)))}
    # the innermost frame of ours under each import: where our code handed control to torch
    out["ours_innermost"] = {n: next(((f, fn) for f, fn in reversed(st) if "/minidynamo/" in f), None)
                             for n, st in stacks.items()}
    print(json.dumps(out))
""")


def test_first_compile_imports_no_dtensor_and_sympy_only_inside_torch_kernels():
    out = _run(_HEAVY_PROBE)
    assert out["ours_matches_eager"]
    imported = out["imported"]
    # torch's C++ subclass dispatch would fetch DTensor at the first in-kernel .device
    assert imported["torch.distributed.tensor"] is False
    assert imported["torch._dynamo"] is False
    # our ShapeEnv (and its sympy) only for symbolic sizes: these graphs are static
    assert imported["minidynamo.shapes.symbolic_shapes"] is False
    # sympy and torch's ShapeEnv: torch's own Python meta kernels import them (torch._check,
    # elementwise_dtypes). Whatever first imported them, it was inside a kernel we called.
    for name in ("sympy", "torch.fx.experimental.symbolic_shapes"):
        if imported[name]:
            filename, function = out["ours_innermost"][name]
            assert filename.endswith("minidynamo/fake/fake_mode.py") and function == "_run_kernel", (name, filename)


def test_stand_in_calls_through_until_dynamo_is_loaded():
    from minidynamo._torch_private import _DisableWhenDynamoLoaded

    calls = []

    def fn(a):
        calls.append(a)
        return a + 1

    stand_in = _DisableWhenDynamoLoaded(fn, True)
    if "torch._dynamo" not in sys.modules:
        assert stand_in(1) == 2 and "__dynamo_disable" not in fn.__dict__
    import torch._dynamo  # noqa: F401  # the oracle: torch's own disable, built on the next call

    assert stand_in(2) == 3 and calls[-1] == 2
    real = fn.__dict__["__dynamo_disable"]
    assert getattr(real, "_torchdynamo_disable", False) and real(5) == 6

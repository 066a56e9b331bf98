"""Run a fake "cuda" tensor through autograd in a subprocess and report what happened.

Place in the pipeline: none; chapters 06 and 08 and their tests use it. A FakeTensor can
claim ``cuda`` on a machine without a GPU (its dispatch keys say CUDA and
AutogradCUDA). In a CPU-only torch build, autograd asks for a CUDA device guard
when it records a fake cuda leaf (``AccumulateGrad`` -> ``InputMetadata``), and
the C++ error it meets is thrown where nothing catches it: the whole process
aborts (SIGABRT). So we only ever try it in a child process.
Mirrors no torch file: it runs ``torch/_subclasses/fake_tensor.py``'s ``FakeTensorMode`` and autograd as they are.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["FakeCudaResult", "fake_cuda_backward", "fake_cuda_backward_both", "fake_cuda_rms_norm_report"]

_OURS = """
import torch
from minidynamo.fake import FakeTensorMode
mode = FakeTensorMode()
w = mode.from_tensor(torch.randn(3, requires_grad=True), device="cuda")
"""

_TORCH = """
import torch
from minidynamo._torch_private import real_fake_tensor_mode, real_fake_tensor_class
mode = real_fake_tensor_mode()
w = real_fake_tensor_class()(mode, torch.empty(3, device="meta", requires_grad=True), torch.device("cuda", 0))
"""

_BODY = """
print("claims", w.device, flush=True)
with mode:
    (w * 2).sum().backward()
print("survived, grad on", w.grad.device, flush=True)
"""


@dataclass
class FakeCudaResult:
    which: str  # "ours" or "torch"
    returncode: int
    stdout: str
    error: str  # the line of stderr that says what went wrong ("" if none)

    @property
    def aborted(self) -> bool:
        return self.returncode == -signal.SIGABRT

    def __str__(self) -> str:
        how = "aborted (SIGABRT)" if self.aborted else f"exit code {self.returncode}"
        lines = [f"{self.which}: {how}"] + [f"  stdout: {line}" for line in self.stdout.splitlines()]
        if self.error:
            lines.append(f"  error: {self.error}")
        return "\n".join(lines)


def fake_cuda_backward(which: str = "ours", timeout: float = 120) -> FakeCudaResult:
    """Make a fake cuda leaf with ``which`` ("ours" or "torch"), backward through it, in a child."""
    if which not in ("ours", "torch"):
        raise ValueError(f"which must be 'ours' or 'torch', got {which!r}")
    code = (_OURS if which == "ours" else _TORCH) + _BODY
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    lines = proc.stderr.splitlines()
    error = next((line for line in lines if "what():" in line), "") or next(
        (line for line in reversed(lines) if "Error" in line), ""
    )
    return FakeCudaResult(which, proc.returncode, proc.stdout.strip(), error.replace("what():", "").strip())


def fake_cuda_backward_both(timeout: float = 120) -> tuple[FakeCudaResult, FakeCudaResult]:
    """(ours, torch's): both children run at the same time (each spends seconds importing torch)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:
        ours = pool.submit(fake_cuda_backward, "ours", timeout)
        theirs = pool.submit(fake_cuda_backward, "torch", timeout)
        return ours.result(), theirs.result()


# Chapter 08: which ops F.rms_norm runs on our fake "cuda" tensor, with and without a
# (simulated) fused CUDA kernel, and what happens once the tensor requires grad: a CPU-only
# wheel aborts in the forward (autograd records the fake cuda leaf); a CUDA build runs
# _fused_rms_norm and, in the backward, _fused_rms_norm_backward.
_RMS_NORM = """
import sys, torch, torch.nn.functional as F
from minidynamo.fake import FakeTensorMode
from minidynamo.decompositions import ops_run
from minidynamo.simulated_kernels import simulated_fused_kernels
from minidynamo.dispatch import keys
mode = FakeTensorMode()
def fake_cuda(requires_grad=False):
    return mode.from_tensor(torch.randn(2, 4, requires_grad=requires_grad), device="cuda")
f = lambda x: F.rms_norm(x, (4,))
build = f"torch {torch.__version__}, " + ("CPU-only" if torch.version.cuda is None else f"CUDA {torch.version.cuda}")
print("build:", build)
x = fake_cuda()
print("our fake cuda tensor's keys:", ", ".join(keys(x, tls=False)))
with mode:
    print("no grad, this build:", ops_run(f, x)[0])
    if torch.version.cuda is None:
        with simulated_fused_kernels("CUDA"):
            print("no grad, SIMULATION stand-in CUDA kernel:", ops_run(f, x)[0])
    else:  # the real CUDA kernel is registered: nothing to simulate
        print("no grad, SIMULATION: not run (this build has the real CUDA kernel)")
sys.stdout.flush()
# Made OUTSIDE the mode: inside it torch.randn would already be a fake *cpu* tensor, which
# from_tensor(..., device="cuda") returns unchanged (it is a fake of this mode), so the
# experiment would ask about cpu (issue 29).
x_grad = fake_cuda(requires_grad=True)
print("requires_grad, the tensor:", x_grad.device, "requires_grad", x_grad.requires_grad, flush=True)
with mode:
    print("requires_grad, this build (forward and backward):", ops_run(f, x_grad, backward=True)[0], flush=True)
print("with requires_grad: forward and backward survived")
"""


def fake_cuda_rms_norm_report(timeout: float = 120.0) -> str:
    """Run the fake-CUDA RMSNorm experiment (our FakeTensor) in a child and report.

    A fake ``cuda`` tensor that meets autograd aborts a CPU-only build (see the
    module docstring); the child keeps the notebook alive and we report its exit.
    """
    import os

    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.run([sys.executable, "-c", _RMS_NORM], capture_output=True, text=True, timeout=timeout, env=env)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode < 0 or proc.returncode == 134:
        why = [ln for ln in proc.stderr.splitlines() if "what():" in ln]
        lines.append(f"with requires_grad: the process aborted (exit status {proc.returncode})")
        lines += [f"  C++ said: {ln.split('what():', 1)[1].strip()}" for ln in why[:1]]
    elif proc.returncode != 0:
        lines.append(f"the child failed (exit status {proc.returncode}): {proc.stderr.strip()[-300:]}")
    return "\n".join(lines)

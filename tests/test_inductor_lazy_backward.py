"""The backward graph reaches Inductor when the first backward runs, as torch's does.

compile_fx's Note [The backward is compiled when it first runs]: torch's AOTAutograd lowers
the backward lazily (``_aot_stage2b_bw_compile``), so a forward that is never differentiated
costs the forward's kernels only. The order of Inductor's compiles is read from torch's
``_compile_fx_inner`` (``inductor_graphs_recorder``) for ours and for ``torch.compile`` alike. Each compile builds C++
(seconds on 2 cores): one tiny module.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import minidynamo as md
from minidynamo._torch_private import inductor_graphs_recorder
from minidynamo.aot.aot_autograd import AOTFallbackWarning

pytestmark = pytest.mark.ch17


@pytest.fixture(autouse=True)
def _fresh():
    md.reset()
    torch._dynamo.reset()
    yield
    md.reset()
    torch._dynamo.reset()


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return F.relu(self.fc(x)) * 2


def _seen_while(compile_fn):
    """Inductor's compiles after the first forward, and after its backward; the grads."""
    torch.manual_seed(0)
    model, x = Tiny(), torch.randn(5, 4)
    with inductor_graphs_recorder() as seen:
        out = compile_fn(model)(x)
        after_forward = [kind for kind, _, _ in seen]
        out.sum().backward()
    return after_forward, [kind for kind, _, _ in seen], {n: p.grad for n, p in model.named_parameters()}


def test_backward_compiled_when_first_backward_runs_as_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("error", AOTFallbackWarning)
        ours = _seen_while(lambda m: md.compile(m, backend="inductor"))
    theirs = _seen_while(lambda m: torch.compile(m, backend="inductor"))
    assert ours[0] == theirs[0]  # after the forward: the forward only (torch: ["forward"])
    assert ours[1] == theirs[1]  # after the backward: the forward, then the backward
    for name, grad in theirs[2].items():
        torch.testing.assert_close(ours[2][name], grad, rtol=1e-4, atol=1e-5)


def test_backward_refused_when_it_first_runs_runs_uncompiled_with_a_warning(monkeypatch):
    import torch._inductor.compile_fx as cfx

    def refuse(*args, **kwargs):
        raise NotImplementedError("refused for the test")

    monkeypatch.setattr(cfx, "compile_fx_backward", refuse)
    torch.manual_seed(0)
    model, x = Tiny(), torch.randn(5, 4)
    eager = copy.deepcopy(model)
    out = md.compile(model, backend="inductor")(x)  # the forward compiles; the backward waits
    with pytest.warns(AOTFallbackWarning) as record:
        out.sum().backward()
    eager(x).sum().backward()
    message = str(record[0].message)
    assert "Inductor refused the backward graph" in message and "runs uncompiled" in message, message
    for (name, p), q in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=name)

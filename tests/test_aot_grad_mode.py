"""Training or inference graph, and grad mode at the call: ours vs eager vs torch's AOTAutograd.

graph_capture's Note [Training or inference graph]: torch 2.13 traces a backward
when some input requires grad, unless the metadata pass (run under the caller's
grad mode) finds no output requiring grad and no grad-requiring input mutated
where autograd sees it. Each case runs through eager, our ``aot_function`` and
``md.compile(backend="aot_eager")``, torch's ``aot_function`` and
``torch.compile(backend="aot_eager")``, in a sequence of grad modes (alternating,
each called twice), and compares values, ``requires_grad``, ``grad_fn`` presence
and the gradients. Which kind of graph was compiled is checked against torch's
choice (its ``inference_compiler`` vs its ``fw_compiler``).
"""

from __future__ import annotations

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import torch_aot_function, torch_make_boxed_func
from minidynamo.aot import aot_function

pytestmark = [pytest.mark.ch11, pytest.mark.usefixtures("real_dynamo")]


def _enable_grad_inside(x, w):
    with torch.enable_grad():
        y = x * w
    return y, x * 2


def _enable_grad_after_outer_part(x, w):
    z = x.sin() * w  # requires grad only when the caller's grad mode is on
    with torch.enable_grad():
        y = z.cos() * w
    return y, z


def _detached_output(x):
    return x.detach() * 2


def _no_grad_inside(x, w):
    with torch.no_grad():
        y = x * w
    return y + 1


def _mutation_under_no_grad(x, w):
    with torch.no_grad():
        x.add_(1)
    return (x * w).detach()


def _view_of_input_only(x):
    return x.view(-1), x.detach() + 1


def _plain_training(x, w):
    return (x.sin() * w).sum(), w.t()


# name -> (function, inputs: which require grad)
CASES = {
    "enable_grad_inside": (_enable_grad_inside, (False, True)),
    "enable_grad_after_outer_part": (_enable_grad_after_outer_part, (False, True)),
    "detached_output": (_detached_output, (True,)),
    "no_grad_inside": (_no_grad_inside, (False, True)),
    "mutation_under_no_grad": (_mutation_under_no_grad, (False, True)),
    "view_of_input_only": (_view_of_input_only, (True,)),
    "plain_training": (_plain_training, (False, True)),
}

GRAD_MODES = (False, False, True, True, False, True)  # alternating, each mode twice in a row


def _inputs(requires: tuple[bool, ...], seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(2, 3, generator=gen).requires_grad_(r) for r in requires]


def _run(fn, requires, grad_mode: bool, seed: int):
    """One call under ``grad_mode``: outputs' (value, requires_grad, has grad_fn), then the leaves' grads."""
    args = _inputs(requires, seed)
    with torch.set_grad_enabled(grad_mode):
        outs = fn(*args)
    outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
    seen = [(o.detach().clone(), o.requires_grad, o.grad_fn is not None) for o in outs]
    loss = [o.sum() for o in outs if o.requires_grad]
    if loss:
        torch.stack(loss).sum().backward()
    grads = [a.grad for a in args]
    return seen, grads, [a.detach() for a in args]


def _same(a, b, who: str, call: int) -> None:
    (seen_a, grads_a, args_a), (seen_b, grads_b, args_b) = a, b
    assert [s[1:] for s in seen_a] == [s[1:] for s in seen_b], f"{who}, call {call}: requires_grad / grad_fn"
    torch.testing.assert_close([s[0] for s in seen_a], [s[0] for s in seen_b], msg=f"{who}, call {call}: values")
    assert [g is None for g in grads_a] == [g is None for g in grads_b], f"{who}, call {call}: which grads"
    torch.testing.assert_close([g for g in grads_a if g is not None], [g for g in grads_b if g is not None],
                               msg=f"{who}, call {call}: grads")
    torch.testing.assert_close(args_a, args_b, msg=f"{who}, call {call}: inputs after the call")


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_mode_sequence_matches_eager_and_torch(name):
    fn, requires = CASES[name]
    md.reset()
    ours_aot = aot_function(fn)
    ours_md = md.compile(fn, backend="aot_eager")
    theirs = torch.compile(fn, backend="aot_eager")
    for call, mode in enumerate(GRAD_MODES):
        eager = _run(fn, requires, mode, call)
        _same(_run(theirs, requires, mode, call), eager, "torch.compile(aot_eager)", call)  # the oracle agrees
        _same(_run(ours_aot, requires, mode, call), eager, "aot_function", call)
        _same(_run(ours_md, requires, mode, call), eager, "md.compile(aot_eager)", call)


def _torch_graph_kind(fn, args, grad_mode: bool) -> str:
    """Which compiler torch's aot_function calls: its inference_compiler or its fw_compiler (training)."""
    called = []

    def compiler(kind):
        def compile_(gm, example_inputs):
            called.append(kind)
            return torch_make_boxed_func(gm)
        return compile_

    compiled = torch_aot_function(fn, compiler("training"), compiler("bw"), inference_compiler=compiler("inference"))
    with torch.set_grad_enabled(grad_mode):
        compiled(*args)
    return called[0]


@pytest.mark.parametrize("grad_mode", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_training_or_inference_as_torch_decides(name, grad_mode):
    fn, requires = CASES[name]
    expected = _torch_graph_kind(fn, _inputs(requires, 0), grad_mode)
    ours = aot_function(fn)
    with torch.set_grad_enabled(grad_mode):
        ours(*_inputs(requires, 0))
    kind = "training" if "CompiledFunction" in ours.artifacts.wrappers else "inference"
    assert kind == expected, f"ours compiled a {kind} graph, torch an {expected} one"


def test_the_decision_differs_between_grad_modes_where_torch_s_does():
    # Not vacuous: the table holds cases where torch picks each kind, and one whose kind follows grad mode.
    kinds = {(name, mode): _torch_graph_kind(fn, _inputs(req, 0), mode)
             for name, (fn, req) in CASES.items() for mode in (False, True)}
    assert kinds[("enable_grad_inside", False)] == "training"
    assert kinds[("detached_output", True)] == "inference"
    assert kinds[("mutation_under_no_grad", True)] == "inference"
    assert kinds[("enable_grad_after_outer_part", False)] == kinds[("enable_grad_after_outer_part", True)]
    assert kinds[("plain_training", False)] == "inference" and kinds[("plain_training", True)] == "training"

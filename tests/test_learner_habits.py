"""What learners do to a model they compile, measured: each habit on a small model and on a
transformers GPT-2 (one layer), through ``md.compile``.

The habits: a ``print`` in ``forward``; a validation pass under ``torch.no_grad()``, then
training; a forward hook and a forward pre-hook registered after the first compile;
``model.eval()`` / ``model.train()`` toggling dropout; an ``if self.debug:`` flag turned on
after compile; ``torch.manual_seed`` inside ``forward``; ``logging`` calls in ``forward``.

Every call is compared with eager (outputs, gradients, what was printed or logged, how
often a hook ran), and ``(graph_count, graph_break_count)`` with the real
``torch._dynamo.explain`` on the same model and input (equal, not only ``<=``).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import io
import logging

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_explain, dynamo_reset

pytestmark = [pytest.mark.filterwarnings("error:minidynamo. tracing"), pytest.mark.usefixtures("real_dynamo")]

log = logging.getLogger("minidynamo.tests.learner_habits")


class Learner(torch.nn.Module):
    """A learner's model: a small MLP with dropout, or a wrapper around a transformers model."""

    def __init__(self, hf=None):
        super().__init__()
        self.hf = hf
        self.lin, self.drop, self.out = torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 3)
        self.habit = None
        self.debug = False

    def body(self, x):
        if self.hf is not None:
            return self.hf(input_ids=x).logits.mean(-1)
        return self.out(self.drop(torch.relu(self.lin(x))))

    def forward(self, x):
        if self.habit == "print":
            print("input", tuple(x.shape))
        if self.habit == "seed":
            torch.manual_seed(123)  # dropout after this is the same on every call
        if self.habit == "logging":
            log.info("forward on %s", tuple(x.shape))
            log.debug("not shown at INFO")
        if self.debug:
            print("debug: input sum", float(x.float().sum()))
        y = self.body(x)
        if self.habit == "print":
            print("output", tuple(y.shape))
        return y


@functools.lru_cache(maxsize=None)
def _base(kind: str):
    torch.manual_seed(0)
    if kind == "small":
        return Learner(), torch.randn(4, 8)
    pytest.importorskip("transformers")
    from minidynamo import zoo

    hf, _, kwargs = zoo.gpt2(n_layer=1)
    torch.manual_seed(0)
    return Learner(hf), kwargs["input_ids"]


def _fresh(kind: str, habit=None, train=False):
    model, x = _base(kind)
    model = copy.deepcopy(model)
    model.habit = habit
    return model.train(train), x


def _run(fn, x, seed=0):
    """fn(x) with the RNG seeded, and what it printed."""
    out = io.StringIO()
    torch.manual_seed(seed)
    with contextlib.redirect_stdout(out):
        y = fn(x)
    return y, out.getvalue()


def _same_counts(model, x, at_most=False):
    with contextlib.redirect_stdout(io.StringIO()):
        ours = md.explain(model, x)
        dynamo_reset()
        theirs = dynamo_explain(model, x)
    mine, its = (ours.graph_count, ours.graph_break_count), (theirs.graph_count, theirs.graph_break_count)
    if at_most:
        assert mine[0] <= its[0] and mine[1] <= its[1], (mine, its, ours.break_reasons, theirs.break_reasons)
    else:
        assert mine == its, (mine, its, ours.break_reasons, theirs.break_reasons)


def _equal(compiled, model, x, seed=0):
    got, got_out = _run(compiled, x, seed)
    want, want_out = _run(model, x, seed)
    torch.testing.assert_close(got, want)
    assert got_out == want_out
    return got, want


KINDS = ["small", pytest.param("gpt2", marks=pytest.mark.slow)]


@pytest.mark.parametrize("kind", KINDS)
def test_print_in_forward(kind):
    model, x = _fresh(kind, "print")
    compiled = md.compile(model, backend="aot_eager")
    for _ in range(2):
        _equal(compiled, model, x)
    _same_counts(model, x)


@pytest.mark.parametrize("kind", KINDS)
def test_validation_under_no_grad_then_training(kind):
    model, x = _fresh(kind, train=True)
    twin = copy.deepcopy(model)
    compiled = md.compile(model, backend="aot_eager")
    with torch.no_grad():
        _equal(compiled, twin, x)
    got, want = _equal(compiled, twin, x, seed=1)
    assert got.grad_fn is not None and want.grad_fn is not None
    got.sum().backward()
    want.sum().backward()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    _same_counts(model, x)


@pytest.mark.parametrize("kind", KINDS)
def test_hooks_registered_after_the_first_compile(kind):
    model, x = _fresh(kind)
    compiled = md.compile(model, backend="aot_eager")
    _equal(compiled, model, x)
    calls = []
    model.register_forward_pre_hook(lambda m, args: calls.append("pre"))
    model.register_forward_hook(lambda m, args, out: out * 2)
    target = model.hf.transformer.h[0].mlp if model.hf is not None else model.lin
    target.register_forward_hook(lambda m, args, out: out + 1)  # on a submodule too
    got, _ = _run(compiled, x)
    n = len(calls)
    want, _ = _run(model, x)
    torch.testing.assert_close(got, want)
    assert calls == ["pre"] * 2 and n == 1, calls
    # torch compiles the top module's `forward` and its forward hook as two frames (measured
    # on the small model: 2 graphs, a break count of 1 with no break reason); ours traces
    # the module call with its hooks (Note [A module call is guarded like torch's _call_impl]): one graph
    _same_counts(model, x, at_most=True)


@pytest.mark.parametrize("kind", KINDS)
def test_eval_train_toggles_dropout(kind):
    model, x = _fresh(kind, train=True)
    compiled = md.compile(model, backend="aot_eager")
    for mode in (True, False, True, False):
        model.train(mode)
        got, _ = _equal(compiled, model, x, seed=7)
        if not mode:  # no dropout: a different seed gives the same output
            torch.testing.assert_close(_run(compiled, x, seed=8)[0], got)
    model.train(True)
    assert not torch.equal(_run(compiled, x, seed=8)[0], _run(compiled, x, seed=9)[0]), "dropout did not run"
    _same_counts(model, x)


@pytest.mark.parametrize("kind", KINDS)
def test_debug_flag_turned_on_after_compile(kind):
    model, x = _fresh(kind)
    compiled = md.compile(model, backend="aot_eager")
    _equal(compiled, model, x)
    _same_counts(model, x)
    model.debug = True
    _, printed = _equal(compiled, model, x)
    assert "debug: input sum" in _run(model, x)[1]
    _same_counts(model, x)
    model.debug = False
    _equal(compiled, model, x)


@pytest.mark.parametrize("kind", KINDS)
def test_manual_seed_inside_forward(kind):
    model, x = _fresh(kind, "seed", train=True)
    compiled = md.compile(model, backend="aot_eager")
    first, _ = _equal(compiled, model, x, seed=1)
    second, _ = _equal(compiled, model, x, seed=2)
    torch.testing.assert_close(first, second)  # the seed inside forward decides the dropout
    _same_counts(model, x)


@pytest.mark.parametrize("kind", KINDS)
def test_logging_in_forward(kind):
    model, x = _fresh(kind, "logging")
    records: list = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    handler = Keep()
    log.addHandler(handler)
    old_level = log.level
    log.setLevel(logging.INFO)
    try:
        compiled = md.compile(model, backend="aot_eager")
        for _ in range(2):
            got, _ = _run(compiled, x)
            ours = list(records)
            records.clear()
            want, _ = _run(model, x)
            torch.testing.assert_close(got, want)
            assert ours == records and len(ours) == 1, (ours, records)
            records.clear()
        _same_counts(model, x)
    finally:
        log.removeHandler(handler)
        log.setLevel(old_level)

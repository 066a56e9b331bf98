"""Real models we did not write through ``md.compile(backend="inductor")``, against ``torch.compile(backend="inductor")``.

The cheapest rows of ``python -m minidynamo.bench.inductor_models`` (issue 30), differential:
DistilBERT (transformers) in inference and in training. Each runs three
ways on copies of one model (eager, ours, torch's Inductor), dropout off: outputs, the loss,
every gradient and buffer of ours equal eager's and torch's within torch's float32 tolerance
for compiled code; no graph of ours runs eagerly; our Dynamo makes as many graphs and graph
breaks as torch's. Each first C++ kernel costs seconds on 2 cores: the models are tiny.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_counters
from minidynamo.aot.aot_autograd import AOTFallbackWarning
from minidynamo.bench.inductor_models import _prepare, _state, _step, build
from minidynamo.symbolic import counters

pytestmark = [pytest.mark.ch17, pytest.mark.usefixtures("real_dynamo")]

TOL = dict(rtol=1e-4, atol=1e-5)  # as tests/test_inductor_backend.py: torch's float32 tolerance, compiled code


@pytest.fixture(autouse=True)
def _fresh():
    md.reset()
    dynamo_counters().clear()  # torch's reset leaves its counters; each test counts its own graphs
    yield
    md.reset()


def _assert_same(a: dict, b: dict, what: str) -> None:
    for group in ("outputs", "grads", "buffers"):
        assert a[group].keys() == b[group].keys(), f"{what}: {group}"
        for k in a[group]:
            torch.testing.assert_close(a[group][k], b[group][k], **TOL, msg=lambda m: f"{what}: {group}.{k}: {m}")


def three_ways(name: str, mode: str) -> None:
    base, args, kwargs = build(name)
    _prepare(base, mode)
    models = [copy.deepcopy(base) for _ in range(3)]
    eager = _state(models[0], _step(models[0], models[0], args, kwargs, mode))
    # no graph of ours may run eagerly: the warning becomes an error, and suppress_errors=False lets
    # an internal error reach the test instead of turning the frame eager with a warning
    with warnings.catch_warnings(), md.config.patch(suppress_errors=False):
        warnings.simplefilter("error", AOTFallbackWarning)
        ours = _state(models[1], _step(md.compile(models[1], backend="inductor"), models[1], args, kwargs, mode))
    theirs = _state(models[2], _step(torch.compile(models[2], backend="inductor"), models[2], args, kwargs, mode))
    _assert_same(ours, eager, f"{name} {mode}: ours vs eager")
    _assert_same(ours, theirs, f"{name} {mode}: ours vs torch's inductor")
    if mode == "train":
        assert ours["grads"], "the loss reached the parameters"
    c = dynamo_counters()
    assert (counters["graphs"], counters["graph_breaks"]) == (
        c["stats"]["unique_graphs"], sum(c["graph_break"].values())), "graphs and graph breaks, ours vs torch's"
    assert counters["eager_fallbacks"] == 0


def test_distilbert_inference():
    three_ways("distilbert", "infer")


def test_distilbert_training():
    three_ways("distilbert", "train")


def _constant_times(x):
    c = torch.tensor(2.0)  # a lifted constant (T5's and DeBERTa-v2's training graphs make one)
    return x * c, c


def test_a_lifted_constant_is_copied_as_torchs():
    """make_fx's Note [A lifted constant is copied]: the same forward ops as torch's aot_function, and
    Inductor compiles the graph (it refused ``lift_fresh`` of a constant: the frame ran eagerly)."""
    from minidynamo._torch_private import torch_aot_keeping_graphs
    from minidynamo.aot import aot_function

    x = torch.randn(3, requires_grad=True)
    graphs, theirs = torch_aot_keeping_graphs(_constant_times)
    theirs(x)[0].sum().backward()
    ours_graphs = []

    def keep(gm, _inputs):
        ours_graphs.append(gm)
        return gm

    aot_function(_constant_times, keep, lambda gm, _inputs: gm)(x)[0].sum().backward()

    def ops(gm):
        return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]

    assert ops(ours_graphs[0]) == ops(graphs["fw"])
    assert "aten.lift_fresh_copy.default" in ops(ours_graphs[0])
    with warnings.catch_warnings(), md.config.patch(suppress_errors=False):
        warnings.simplefilter("error", AOTFallbackWarning)
        ours = md.compile(_constant_times, backend="inductor")(x)
    expected = torch.compile(_constant_times, backend="inductor")(x)
    for a, b in zip(ours, expected):
        torch.testing.assert_close(a, b, **TOL)

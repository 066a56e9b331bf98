"""AOT graphs traced under the Python dispatcher, as torch's (Note [AOT traces under the Python dispatcher]).

torch's ``_create_graph`` (torch/_functorch/_aot_autograd/graph_capture.py) and ``create_aot_state``
(aot_autograd.py) turn ``enable_python_dispatcher()`` on around the graph capture and the metadata
pass, so a CompositeImplicitAutograd op with a ``py_impl`` decomposition (torch/_decomp/decompositions.py)
is traced through it. Each program here is one whose forward graph differs with and without the
dispatcher: ours must record torch's ops (through ``torch.compile``'s ``aot_eager`` recipe and through
``aot_function``), give torch's and eager's results at every call (dropout: the same numbers in the
same positions), and differ from torch's when our dispatcher is turned off (the test can fail).
"""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import minidynamo as md
import minidynamo._torch_private as torch_private
from minidynamo import events
from minidynamo.aot import aot_function
from minidynamo.aot import graph_capture
from minidynamo.aot.aot_autograd import AOTFallbackWarning
from minidynamo.fake import FakeTensorMode, dispatch_cache
from minidynamo._torch_private import (
    dynamo_reset,
    torch_aot_keeping_graphs,
    torch_counting_aot_eager,
    torch_fake_cache_crosscheck_failure,
)

pytestmark = pytest.mark.ch08


def _seeded_modules():
    torch.manual_seed(0)
    return nn.RNN(4, 5, batch_first=True), nn.LSTM(4, 5, batch_first=True)


RNN, LSTM = _seeded_modules()


def dropout_transposed(x):
    return F.dropout(x.t(), 0.5, training=True) * 2


def dropout_module(x):  # nn.Dropout on a transposed activation, as in an attention block
    return nn.functional.dropout(x.transpose(1, 2), 0.25, training=True).sum(-1)


def interpolate_nearest(x):
    return F.interpolate(x, scale_factor=2, mode="nearest") + 1


def interpolate_bilinear(x):
    return F.interpolate(x, scale_factor=2, mode="bilinear") + 1


def rnn_tanh(x, h, *params):
    return torch.rnn_tanh(x, h, params, True, 1, 0.0, True, False, True)[0].sin()


def lstm(x, h, c, *params):
    return torch.lstm(x, (h, c), params, True, 1, 0.0, True, False, True)[0].sin()


def _weights(module):
    return [w.detach().clone().requires_grad_() for w in module._flat_weights]


# name -> (function, inputs); every tensor is an argument, so torch's aot_function takes them too
PROGRAMS = {
    "dropout_transposed": (dropout_transposed, lambda: (torch.randn(4, 6, requires_grad=True),)),
    "dropout_module": (dropout_module, lambda: (torch.randn(2, 3, 5, requires_grad=True),)),
    "interpolate_nearest": (interpolate_nearest, lambda: (torch.randn(1, 2, 3, 3, requires_grad=True),)),
    "interpolate_bilinear": (interpolate_bilinear, lambda: (torch.randn(1, 2, 3, 3, requires_grad=True),)),
    "rnn_tanh": (rnn_tanh, lambda: (torch.randn(2, 3, 4, requires_grad=True), torch.zeros(1, 2, 5), *_weights(RNN))),
    "lstm": (lstm, lambda: (torch.randn(2, 3, 4, requires_grad=True), torch.zeros(1, 2, 5), torch.zeros(1, 2, 5),
                            *_weights(LSTM))),
}
CASES = [(name, training) for name in PROGRAMS for training in (True, False)]
IDS = [f"{n}-{'train' if t else 'infer'}" for n, t in CASES]
CALLS = 2  # the second call runs the compiled graph again: the dispatcher decides what was traced, once


def _ops(gm):
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def _inputs(name, training, call):
    torch.manual_seed(10 + call)
    args = PROGRAMS[name][1]()
    return args if training else tuple(a.detach() for a in args)


def _run(name, training, compiled):
    """Outputs and input gradients of ``CALLS`` calls, each with its own inputs and the same seed as eager's."""
    results = []
    for call in range(CALLS):
        args = _inputs(name, training, call)
        torch.manual_seed(100 + call)
        with contextlib.nullcontext() if training else torch.no_grad():
            out = compiled(*args)
        grads = []
        if training:
            out.sum().backward()
            grads = [a.grad for a in args if a.requires_grad]
        results.append((out.detach(), grads))
    return results


def _assert_same(ours, theirs):
    for (o, og), (t, tg) in zip(ours, theirs, strict=True):
        torch.testing.assert_close(o, t)
        assert len(og) == len(tg)
        for a, b in zip(og, tg):
            torch.testing.assert_close(a, b)


def _our_forward_graphs(compile_and_run):
    with events.record() as log, warnings.catch_warnings():
        warnings.simplefilter("error", AOTFallbackWarning)  # a graph run eagerly would hide the difference
        results = compile_and_run()
    graphs = [_ops(e.details["gm"]) for e in log if e.kind == "aot_graph" and e.details.get("which") == "Forward graph"]
    return graphs, results


def _ours_dynamo(name, training):
    md.reset()
    return _our_forward_graphs(lambda: _run(name, training, md.compile(PROGRAMS[name][0], backend="aot_eager")))


def _theirs_dynamo(name, training):
    dynamo_reset()
    counts, graphs = {}, {}
    results = _run(name, training, torch.compile(PROGRAMS[name][0], backend=torch_counting_aot_eager(counts, graphs)))
    return [_ops(g) for g in graphs.get("aot_fw", [])], results


@contextlib.contextmanager
def _no_python_dispatcher(monkeypatch):
    """Our AOT passes without the Python dispatcher (what we traced before torch's rule was followed)."""
    with monkeypatch.context() as m:
        m.setattr(graph_capture, "enable_python_dispatcher", contextlib.nullcontext)
        m.setattr(torch_private, "enable_python_dispatcher", contextlib.nullcontext)
        yield


@pytest.mark.parametrize(("name", "training"), CASES, ids=IDS)
def test_dynamo_graphs_trace_like_torchs_aot_eager(name, training):
    eager = _run(name, training, PROGRAMS[name][0])
    ours_graphs, ours = _ours_dynamo(name, training)
    theirs_graphs, theirs = _theirs_dynamo(name, training)
    _assert_same(theirs, eager)  # the oracle itself is right
    _assert_same(ours, eager)  # dropout: the same numbers drawn into the same positions
    assert theirs_graphs and ours_graphs == theirs_graphs


@pytest.mark.parametrize(("name", "training"), CASES, ids=IDS)
def test_aot_function_traces_like_torchs(name, training):
    fn = PROGRAMS[name][0]
    eager = _run(name, training, fn)
    ours_graphs, ours = _our_forward_graphs(lambda: _run(name, training, aot_function(fn)))
    theirs_graphs, compiled = torch_aot_keeping_graphs(fn)
    theirs = _run(name, training, compiled)
    _assert_same(theirs, eager)
    _assert_same(ours, eager)
    assert ours_graphs[0] == _ops(theirs_graphs["fw"])


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_without_the_dispatcher_our_graph_differs(name, monkeypatch):
    """The programs exercise the dispatcher: with it off, our forward graph is not torch's."""
    theirs_graphs, _ = _theirs_dynamo(name, True)
    fn, args = PROGRAMS[name][0], _inputs(name, True, 0)
    md.reset()
    torch.manual_seed(0)
    with _no_python_dispatcher(monkeypatch):  # the forward only: lstm's backward then fails (mkldnn_rnn_layer)
        ours_graphs, out = _our_forward_graphs(lambda: md.compile(fn, backend="aot_eager")(*args))
    assert ours_graphs and ours_graphs != theirs_graphs
    if name == "dropout_transposed":  # the C++ kernel draws into a contiguous mask: other positions than eager's
        torch.manual_seed(0)
        eager = fn(*args)
        md.reset()
        torch.manual_seed(0)
        assert torch.equal(md.compile(fn, backend="aot_eager")(*args), eager)  # the dispatcher back on
        assert not torch.equal(out, eager)


def test_the_encoder_in_training_equals_eager_under_aot_eager():
    """nn.TransformerEncoderLayer's dropouts act on transposed activations (the attention's)."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.3, batch_first=True).train()
    x = torch.randn(2, 5, 16)
    outs = []
    for f in (layer, md.compile(layer, backend="aot_eager")):
        torch.manual_seed(1)
        outs.append(f(x))
    torch.testing.assert_close(outs[1], outs[0])


# -- the fake dispatch cache under the dispatcher (Note [Which kernel ran is part of the key]) ----------

def _pad(x):
    return F.pad(x, (0, 0, 0, 1))


SWITCHES = [(False, True), (True, True)]  # (Python dispatcher on, grad on), in this order


def test_torchs_cache_key_lacks_the_dispatcher():
    """The oracle: torch's own crosscheck fails when F.pad is faked without, then with, the dispatcher."""
    x = torch.randn(3, 3, requires_grad=True)
    failure = torch_fake_cache_crosscheck_failure(_pad, [x], SWITCHES)
    assert failure is not None and "constant_pad_nd" in failure
    assert torch_fake_cache_crosscheck_failure(_pad, [x], [SWITCHES[1], SWITCHES[1]]) is None


def test_our_cache_keys_on_the_dispatcher(monkeypatch):
    from minidynamo._torch_private import enable_python_dispatcher

    monkeypatch.setattr(FakeTensorMode, "cache_crosscheck", True)  # every hit runs the kernel and compares
    dispatch_cache.clear_cache()
    x = torch.randn(3, 3, requires_grad=True)
    for python_dispatcher, _grad in SWITCHES * 2:
        mode = FakeTensorMode()
        fx = mode.from_tensor(x)
        with mode, enable_python_dispatcher() if python_dispatcher else contextlib.nullcontext():
            _pad(fx)
    stats = dispatch_cache.stats()
    assert (stats.misses, stats.hits) == (2, 2)  # one entry per dispatcher state, each hit (and checked) once
    dispatch_cache.clear_cache()

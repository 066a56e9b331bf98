"""More model families through md.compile, against torch.compile (backend="aot_eager").

Each family from ``minidynamo.zoo`` (tiny configs, random weights, dropout 0, no downloads),
in inference (eval, no_grad) or training (train, loss.backward()), ours against
``torch.compile(backend="aot_eager")`` field by field: the outputs (loss, logits), every
parameter's gradient and every buffer (float32 tolerance); then ``md.explain`` against
``torch._dynamo.explain``: graph count, break count, and no fallback warning of ours.

The sweep behind it (roberta, xlm-roberta, albert, electra, mpnet, mobilebert, bart, gpt_neo,
gptj, gpt_neox, opt, mistral, qwen2, phi, HF swin; timm regnetx_002, densenet, deit, levit)
matched torch in both modes; four of them, one per kind of architecture, run here. The
constructs that Whisper and Wav2Vec2 reached and ours did not trace as torch does have their
own small tests below, each beside torch on the same program.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo import zoo
from minidynamo._torch_private import dynamo_explain

pytestmark = pytest.mark.usefixtures("real_dynamo")


def _step(fn, model, args, kwargs, train: bool) -> dict:
    """One call (and a backward in training): the output tensors, gradients and buffers."""
    torch.manual_seed(1)
    if train:
        out = fn(*args, **kwargs)
        (out.loss if getattr(out, "loss", None) is not None else out.sum()).backward()
    else:
        with torch.no_grad():
            out = fn(*args, **kwargs)
    outs = {"out": out} if isinstance(out, torch.Tensor) else {k: v for k, v in out.items() if isinstance(v, torch.Tensor)}
    return {"outputs": {k: v.detach() for k, v in outs.items()},
            "grads": {n.removeprefix("_orig_mod."): p.grad for n, p in model.named_parameters() if p.grad is not None},
            "buffers": {n: b.clone() for n, b in model.named_buffers()}}


def _assert_same(theirs: dict, ours: dict) -> None:
    for field in ("outputs", "grads", "buffers"):
        assert ours[field].keys() == theirs[field].keys(), field
        for name in theirs[field]:
            torch.testing.assert_close(ours[field][name], theirs[field][name], msg=lambda m, f=field, n=name: f"{f} {n}: {m}")


CASES = [("roberta", True), ("albert", False), ("bart", True), ("deit_tiny", True)]


@pytest.mark.parametrize("name,train", CASES, ids=[f"{n}-{'train' if t else 'eval'}" for n, t in CASES])
def test_family_matches_torch_compile(name, train):
    model, args, kwargs = zoo.BUILDERS[name]()
    model.train(train)
    ours_model, theirs_model = copy.deepcopy(model), copy.deepcopy(model)
    theirs = _step(torch.compile(theirs_model, backend="aot_eager"), theirs_model, args, kwargs, train)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="minidynamo")  # no fallback, no internal error run eagerly
        ours = _step(md.compile(ours_model, backend="aot_eager"), ours_model, args, kwargs, train)
    _assert_same(theirs, ours)
    md.reset()
    grad = torch.enable_grad if train else torch.no_grad
    with grad():
        ours_e = md.explain(copy.deepcopy(model), *args, **kwargs)
        theirs_e = dynamo_explain(copy.deepcopy(model), *args, **kwargs)
    assert (ours_e.graph_count, len(ours_e.break_reasons)) == (theirs_e.graph_count, theirs_e.graph_break_count), \
        [str(r).splitlines()[0] for r in ours_e.break_reasons]


# --- what Whisper and Wav2Vec2 reached ------------------------------------------------------

def _counts_and_result(fn, *args):
    """(graphs, breaks, result) of ours and of torch on ``fn(*args)``."""
    md.reset()
    ours = md.explain(fn, *args)
    theirs = dynamo_explain(fn, *args)
    ours_out = md.compile(fn, backend="aot_eager")(*args)
    theirs_out = torch.compile(fn, backend="aot_eager")(*args)
    return ((ours.graph_count, len(ours.break_reasons)), ours_out), ((theirs.graph_count, theirs.graph_break_count), theirs_out)


class Settings:
    """transformers' ``PreTrainedConfig``: a plain class with a Python ``__getattribute__`` (its attribute_map)."""

    def __init__(self, layers):
        self.layers = layers

    def __getattribute__(self, key):
        if key == "num_layers":
            key = "layers"
        return super().__getattribute__(key)


def test_deep_copy_of_an_object_made_by_a_deep_copy():
    # Whisper's forward builds two caches, each deep-copying the config it was given: the
    # second copies the first copy, an object made in the trace (its __reduce_ex__)
    def f(x, settings):
        once = copy.deepcopy(settings)
        twice = copy.deepcopy(once)
        twice.layers = 3
        return x * once.num_layers + twice.num_layers

    (ours_counts, ours_out), (theirs_counts, theirs_out) = _counts_and_result(f, torch.ones(2), Settings(2))
    assert ours_counts == theirs_counts == (1, 0)
    torch.testing.assert_close(ours_out, theirs_out)


class Layers:
    """transformers' ``DynamicCache``: no ``__bool__``, a Python ``__len__``."""

    def __init__(self, n):
        self.layers = list(range(n))

    def __len__(self):
        return len(self.layers)


class Flag:
    def __init__(self, on):
        self.on = on

    def __bool__(self):
        return self.on


@pytest.mark.parametrize("made_in_the_trace", [False, True], ids=["from-outside", "made-in-the-trace"])
@pytest.mark.parametrize("n", [0, 2])
def test_truth_of_an_object_through_its_len_and_bool(n, made_in_the_trace):
    # Whisper's attention: ``if is_cross_attention and cache and is_updated``; torch's
    # generic_bool (variables/object_protocol.py) calls the class's __bool__, then __len__
    def f(x, cache, flag):
        if made_in_the_trace:
            cache, flag = Layers(len(cache.layers)), Flag(flag.on)
        y = x + 1 if cache else x - 1
        return y * 2 if flag else y

    (ours_counts, ours_out), (theirs_counts, theirs_out) = _counts_and_result(f, torch.ones(2), Layers(n), Flag(n > 0))
    assert ours_counts == theirs_counts == (1, 0)
    torch.testing.assert_close(ours_out, theirs_out)


def test_a_function_marked_constant_is_called_not_traced():
    # transformers marks its install probes (``is_torch_available``, reached from Wav2Vec2's
    # encoder through ``is_fsdp_managed_module``) ``_dynamo_marked_constant``, what
    # torch._dynamo.assume_constant_result sets: torch calls such a function while tracing
    # and keeps its result (invoke_and_store_as_constant); its body is never traced, so a
    # break inside it (importlib.metadata there, an explicit one here) is no break
    def probe(name):
        torch._dynamo.graph_break()
        return name == "torch"

    probe._dynamo_marked_constant = True

    def f(x):
        y = x * 2  # a graph before the call: a break at it would make two
        return y + 1 if probe("torch") else y - 1

    (ours_counts, ours_out), (theirs_counts, theirs_out) = _counts_and_result(f, torch.ones(2))
    assert ours_counts == theirs_counts == (1, 0)
    torch.testing.assert_close(ours_out, theirs_out)



def test_a_dict_keyed_by_classes_like_torch():
    # huggingface_hub's ``type_validator`` (Whisper's config validates each attribute it sets)
    # reads ``_BASIC_TYPE_VALIDATORS``, a global dict keyed by list, dict, typing.Union...: torch
    # reads it whole, its keys guarded by identity (DICT_KEYS_MATCH), each value by position
    from huggingface_hub.dataclasses import type_validator

    def f(x, layers):
        y = x * 2
        type_validator("layers", layers, list[int])
        return y + len(layers)

    (ours_counts, ours_out), (theirs_counts, theirs_out) = _counts_and_result(f, torch.ones(2), [1, 2])
    assert ours_counts == theirs_counts == (1, 0)
    torch.testing.assert_close(ours_out, theirs_out)

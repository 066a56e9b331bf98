"""An object from outside the frame that is a dict subclass, traced as torch traces it.

torch models such an instance as a ``UserDefinedDictVariable`` (torch/_dynamo/variables/
user_defined.py): the dict methods the class inherits, and those its overrides reach through
``super()``, run on a ``ConstDictVariable`` of the instance's entries, written back after the
graph through the base class (``_manual_dict_setitem``, torch/_dynamo/side_effects.py); a
``__setattr__`` override is inlined and its ``super().__setattr__`` is a store after the graph.
transformers' ``ModelOutput`` is the case every model meets: its ``__init__`` runs as a frame of
its own when a model's ``forward`` breaks before building its output (GPT-2's ``loss_function``).
Ours: Note [The dict inside a dict subclass] (minidynamo/symbolic/variables/dict_subclass.py).

Each program runs eagerly, under ``torch.compile`` and under ``md.compile`` on equal fresh
inputs: the result, and the object's entries and attributes afterwards, are compared; then the
graphs and breaks of both (``explain``), and the graphs each backend was handed over a call sequence.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Optional

import pytest
import torch

import minidynamo as md
from _helpers import Counter, quiet  # tests/ is on sys.path
from minidynamo._torch_private import dynamo_explain_with_gb_types, dynamo_reset


class Registry(dict):
    """A dict subclass that overrides nothing."""


class Loud(collections.OrderedDict):
    """Every write also sets an attribute, through super(), as ModelOutput's ``__setitem__`` does."""

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def drop(self, key):
        return super().pop(key)


class Shouty(dict):
    """A ``__setattr__`` override that mirrors attributes into the entries."""

    def __setattr__(self, name, value):
        if name in self.keys():
            super().__setitem__(name, value)
        super().__setattr__(name, value)


@dataclasses.dataclass
class Out(collections.OrderedDict):
    """transformers' ``ModelOutput`` pattern, written out: a dataclass that is an OrderedDict."""

    loss: Optional[torch.Tensor] = None
    logits: Optional[torch.Tensor] = None

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is not None:
                self[f.name] = v

    def __getitem__(self, k):
        return dict(self.items())[k] if isinstance(k, str) else tuple(self.values())[k]

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)


def _registry():
    r = Registry()
    r["scale"] = 2.0
    return r


def _loud():
    d = Loud()
    d["b"] = torch.ones(4)
    return d


def _shouty():
    s = Shouty()
    dict.__setitem__(s, "w", torch.ones(4))
    object.__setattr__(s, "w", torch.ones(4))
    return s


def _out():
    return Out(logits=torch.ones(4))


def p_read_inherited_methods(d, x):
    return x * d["scale"] + len(d), list(d.keys()), "scale" in d, d.get("missing", 3)


def p_iterate_and_truth(d, x):
    total = x
    for k in d:
        total = total + len(k)
    if d:
        total = total * 2
    return total, sorted(d.items())


def p_write_inherited_setitem(d, x):
    d["new"] = x + 1
    d.update(other=3)
    return len(d), d["new"] * 2


def p_override_through_super(d, x):
    d["a"] = x * 2
    return d.a + d["b"], list(d)


def p_pop_through_super(d, x):
    y = d.drop("b")
    d["c"] = x
    return y + x, list(d)


def p_setattr_override_mirrors(s, x):
    s.w = x * 3
    s.other = 5
    return s["w"] + 1, sorted(s)


def p_model_output_filled(o, x):
    o["logits"] = x * 2
    o.loss = x.sum()
    return o.logits + 1, list(o.keys()), o[0]


def p_model_output_init_frame(o, x):
    Out.__init__(o, logits=x.cos())
    return o.logits * 2


class Plain:
    pass


def _plain():
    p = Plain()
    p.keep = 1
    return p


def p_instance_dict_after_stores(p, x):
    p.a = x + 1
    del p.keep
    seen = p.__dict__.get("a")
    return seen * 2, "keep" in p.__dict__, p.__dict__.get("keep", 7)


def _hf_output():
    from transformers.modeling_outputs import CausalLMOutputWithCrossAttentions

    return CausalLMOutputWithCrossAttentions.__new__(CausalLMOutputWithCrossAttentions)


def p_transformers_output_init_frame(o, x):
    """What GPT-2's forward does after its break: fill a ModelOutput in its own ``__init__`` frame."""
    type(o).__init__(o, loss=x.sum(), logits=x * 2)
    return o.to_tuple()[1] + 1, list(o.keys())


def p_model_output_made_then_written(o, x):
    """Made in the trace, then written: ``loss`` (None before) becomes an attribute but no key."""
    out = Out(logits=x.sin())
    out.loss = x.sum()
    out["logits"] = out.logits * 2
    o["made"] = out
    return out


def p_transformers_output_made_then_written(o, x):
    from transformers.modeling_outputs import CausalLMOutputWithCrossAttentions

    out = CausalLMOutputWithCrossAttentions(logits=x.sin())
    out.loss = x.sum()
    out["logits"] = out.logits * 2
    return out.to_tuple()[0] + 1, list(out.keys()), out


PROGRAMS = {
    "p_read_inherited_methods": (p_read_inherited_methods, _registry),
    "p_iterate_and_truth": (p_iterate_and_truth, _registry),
    "p_write_inherited_setitem": (p_write_inherited_setitem, _registry),
    "p_override_through_super": (p_override_through_super, _loud),
    "p_pop_through_super": (p_pop_through_super, _loud),
    "p_setattr_override_mirrors": (p_setattr_override_mirrors, _shouty),
    "p_model_output_filled": (p_model_output_filled, _out),
    "p_model_output_init_frame": (p_model_output_init_frame, lambda: Out.__new__(Out)),
    "p_instance_dict_after_stores": (p_instance_dict_after_stores, _plain),
    "p_transformers_output_init_frame": (p_transformers_output_init_frame, _hf_output),
    "p_model_output_made_then_written": (p_model_output_made_then_written, _registry),
    "p_transformers_output_made_then_written": (p_transformers_output_made_then_written, _registry),
}


def _state(obj) -> tuple:
    """The entries (in order) and the attributes of an instance."""
    return list(dict.items(obj)) if isinstance(obj, dict) else [], sorted(vars(obj).items())


def _same(a, b) -> bool:
    """Equal values: tensors bit for bit (the ``eager`` backend runs the same kernels), containers item by item."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):  # an instance: its class, entries and attributes
        return type(a) is type(b) and _same(_state(a), _state(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _run(compile_fn, name):
    fn, make = PROGRAMS[name]
    obj, x = make(), torch.linspace(-1, 1, 4)
    with quiet():
        result = compile_fn(fn)(obj, x)
    return result, _state(obj)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_result_and_object_state_equal_eager_and_torch(name):
    expected = _run(lambda f: f, name)
    md.reset()
    ours = _run(lambda f: md.compile(f, backend="eager"), name)
    dynamo_reset()
    theirs = _run(lambda f: torch.compile(f, backend="eager"), name)
    assert _same(theirs, expected), f"torch {theirs} != eager {expected}"
    assert _same(ours, expected), f"ours {ours} != eager {expected}"


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_graphs_and_breaks_equal_torchs(name):
    fn, make = PROGRAMS[name]
    x = torch.linspace(-1, 1, 4)
    with quiet():  # each its own object: the first run writes to it
        md.reset()
        ours = md.explain(fn, make(), x)
        dynamo_reset()
        real, gb_types = dynamo_explain_with_gb_types(fn, make(), x)
    mine = (ours.graph_count, ours.graph_break_count, [r.gb_type for r in ours.break_reasons])
    theirs = (real.graph_count, real.graph_break_count, gb_types)
    assert mine == theirs, f"ours (graphs, breaks, gb types) {mine} != torch's {theirs}"
    assert not ours.break_reasons


def _graphs_over(compile_fn, calls) -> int:
    """Graphs a counting backend was handed over ``calls`` (each a fresh ``(obj, x)``)."""
    counter = Counter()
    compiled = compile_fn(counter)
    with quiet():
        for fn, obj, x in calls:
            compiled(fn)(obj, x)
    return counter.frame_count


def _keys_then_more_keys():
    """The same program on a registry with one key, again with one, then with two: the keys guard."""
    def calls():
        two = _registry()
        two["extra"] = 1.0
        return [(p_read_inherited_methods, _registry(), torch.ones(4)),
                (p_read_inherited_methods, _registry(), torch.ones(4)),
                (p_read_inherited_methods, two, torch.ones(4))]
    return calls


def test_recompiles_on_new_keys_as_torch_does():
    calls = _keys_then_more_keys()
    md.reset()
    cache = {}
    ours = _graphs_over(lambda c: lambda f: cache.setdefault("m", md.compile(f, backend=c)), calls())
    dynamo_reset()
    cache.clear()
    theirs = _graphs_over(lambda c: lambda f: cache.setdefault("t", torch.compile(f, backend=c)), calls())
    assert ours == theirs == 2


def test_written_back_through_the_base_class():
    """The write-back never calls the subclass's overrides: a class whose ``update`` and ``clear``
    raise (ModelOutput's do) still ends with eager's entries."""

    class Strict(collections.OrderedDict):
        def update(self, *a, **k):
            raise RuntimeError("update is not allowed")

        def clear(self):
            raise RuntimeError("clear is not allowed")

    def fill(d, x):
        d["k"] = x + 1
        return x

    d = Strict()
    md.reset()
    with quiet():
        md.compile(fill, backend="eager")(d, torch.zeros(2))
    assert list(d) == ["k"] and torch.equal(d["k"], torch.ones(2))


def test_guard_names_the_keys_as_torch_reads_them():
    """The keys guard reads ``dict.keys`` of the object, as torch's ``list(dict.keys(L['d']))``."""
    md.reset()
    with quiet():
        report = md.explain(p_read_inherited_methods, _registry(), torch.ones(4))
    text = str(report)
    assert "list(dict.keys(L['d'])) == ['scale']" in text, text

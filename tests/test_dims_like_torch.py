"""Which dims are symbolic, and how many graphs, per size sequence: ours against torch 2.13 (issue 26).

Each sequence is run through ``torch.compile`` and ``md.compile`` with a backend that
records every graph's placeholders: a tensor input as its sizes, a SymInt input as its
symbol. Symbols are renamed S0, S1... in order of first appearance in each graph (torch
names them by a hash of their source, ``s77``), so the comparison says which dims got
a symbol and which share one, not what they are called. Results must equal eager's.
Torch's rules: ``_automatic_dynamic`` in torch/_dynamo/variables/builder.py (a changed
dim is ``DimDynamic.DYNAMIC``, a symbol of its own; ``dynamic=True`` makes every dim
``DimDynamic.DUCK``, equal sizes sharing one), ``create_symbol`` in
torch/fx/experimental/symbolic_shapes.py.
"""

from __future__ import annotations

import re

import pytest
import torch

import minidynamo as md

pytestmark = [pytest.mark.ch15]

_SYMBOL = re.compile(r"\bs\d+\b")


class Recorder:
    """A backend keeping, per graph, its placeholders with symbols renamed in order of appearance."""

    def __init__(self) -> None:
        self.graphs: list[list] = []

    def __call__(self, gm, example_inputs):
        names: dict[str, str] = {}

        def canon(text: str) -> str:
            return _SYMBOL.sub(lambda m: names.setdefault(m.group(0), f"S{len(names)}"), text)

        placeholders = []
        for node in gm.graph.nodes:
            if node.op != "placeholder":
                continue
            value = node.meta.get("example_value", node.meta.get("val"))
            if isinstance(value, torch.Tensor):
                placeholders.append(tuple(canon(str(s)) for s in value.shape))
            elif isinstance(value, (torch.SymInt, torch.SymFloat)):
                placeholders.append(canon(str(value)))
        self.graphs.append(placeholders)
        return gm.forward


def dims_per_call(fn, calls, system: str, **kwargs) -> tuple[list, list]:
    """-> (graphs compiled after each call, every graph's placeholders); results checked against eager."""
    recorder = Recorder()
    if system == "torch":
        torch._dynamo.reset()
        cf = torch.compile(fn, backend=recorder, **kwargs)
    else:
        md.reset()
        cf = md.compile(fn, backend=recorder, **kwargs)
    counts = []
    for make in calls:
        args = make()
        got, expected = cf(*args), fn(*args)
        assert torch.allclose(got, expected) if isinstance(expected, torch.Tensor) else got == expected
        counts.append(len(recorder.graphs))
    return counts, recorder.graphs


def assert_like_torch(fn, calls, **kwargs):
    theirs = dims_per_call(fn, calls, "torch", **kwargs)
    ours = dims_per_call(fn, calls, "md", **kwargs)
    assert ours == theirs, f"\n ours:  {ours}\n torch: {theirs}"
    return ours


def _cat(x, y):
    return torch.cat([x, y])


R = torch.randn


def test_automatic_dynamic_gives_equal_sizes_two_symbols():
    """(5,5) then (6,6): two DYNAMIC symbols, so (6,7) and (8,9) reuse the graph (duck sizing would recompile)."""
    counts, graphs = assert_like_torch(_cat, [lambda: (R(5), R(5)), lambda: (R(6), R(6)), lambda: (R(6), R(7)),
                                              lambda: (R(8), R(9))])
    assert counts == [1, 2, 2, 2] and graphs[1] == ["S0", ("S0",), "S1", ("S1",)]


def test_dynamic_true_duck_sizes_equal_sizes():
    counts, graphs = assert_like_torch(_cat, [lambda: (R(5), R(5)), lambda: (R(6), R(7))], dynamic=True)
    assert graphs[0] == ["S0", ("S0",), ("S0",)]  # one symbol for both: DimDynamic.DUCK


def test_mark_dynamic_is_dynamic_not_duck():
    def marked(a, b):
        for t in (a, b):
            (md.mark_dynamic if marked.system == "md" else torch._dynamo.mark_dynamic)(t, 0)
        return a, b

    results = {}
    for system in ("torch", "md"):
        marked.system = system
        recorder = Recorder()
        compile_ = torch.compile if system == "torch" else md.compile
        torch._dynamo.reset(), md.reset()
        cf = compile_(_cat, backend=recorder)
        cf(*marked(R(5), R(5)))
        cf(*marked(R(6), R(7)))
        results[system] = recorder.graphs
    assert results["md"] == results["torch"] and len(results["md"]) == 1


def test_maybe_mark_dynamic_and_mark_static():
    results = {}
    for system in ("torch", "md"):
        recorder = Recorder()
        dyn = md if system == "md" else torch._dynamo
        torch._dynamo.reset(), md.reset()
        cf = (torch.compile if system == "torch" else md.compile)(lambda x: x.sum(0), backend=recorder)
        for n in (5, 6, 7):
            x = R(n, 3)
            dyn.maybe_mark_dynamic(x, 0)
            cf(x)
        for n in (4, 5):  # dim 1 kept static even after it changes
            x = R(2, n)
            dyn.mark_static(x, 1)
            cf(x)
        results[system] = recorder.graphs
    assert results["md"] == results["torch"]


@pytest.mark.parametrize("name, fn, calls", [
    ("changed dim 1, then dim 0", lambda x: x.sum(0), [lambda: (R(4, 5),), lambda: (R(4, 6),), lambda: (R(5, 7),)]),
    ("torch.tensor of a symbolic size", lambda x: x + torch.tensor(x.size(0)),
     [lambda: (R(5),), lambda: (R(6),), lambda: (R(7),)]),
    ("an int argument that changes", lambda x, n: x * n, [lambda: (R(3), 2), lambda: (R(3), 3), lambda: (R(3), 4)]),
    ("the last row, x[x.size(0) - 1]", lambda x: x[x.size(0) - 1],
     [lambda: (R(5),), lambda: (R(6),), lambda: (R(7),), lambda: (R(8),)]),
    ("F.interpolate(size=L * 2)", lambda x: torch.nn.functional.interpolate(x, size=x.size(2) * 2),
     [lambda: (R(1, 2, 5),), lambda: (R(1, 2, 6),), lambda: (R(1, 2, 7),)]),
])
def test_size_sequences_like_torch(name, fn, calls):
    assert_like_torch(fn, calls)


def _with_break(x):
    y = x * 2
    torch._dynamo.graph_break()
    return y + 1


def test_code_resumed_after_a_graph_break_is_dynamic_like_torch():
    counts, graphs = assert_like_torch(_with_break, [lambda: (R(5),), lambda: (R(6),), lambda: (R(7),)])
    assert counts[-1] == 4


def test_shapes_compared_under_symbols_like_torch():
    """``x.shape == y.shape`` on symbolic shapes: a decision per item (a guard), as Python compares tuples."""

    def same_shape(x, y):
        return x + 1 if x.shape == y.shape else x - 1

    calls = [lambda: (R(5), R(5)), lambda: (R(6), R(6)), lambda: (R(7), R(8)), lambda: (R(9), R(9))]
    counts = {s: dims_per_call(same_shape, calls, s)[0] for s in ("torch", "md")}
    assert counts["md"] == counts["torch"]
    # under dynamic=True: no failed symbolic trace retried static
    counts = {s: dims_per_call(same_shape, calls, s, dynamic=True)[0] for s in ("torch", "md")}
    assert counts["md"] == counts["torch"]


def test_config_flags_are_read():
    """``assume_static_by_default=False`` is dynamic=True's DUCK; ``automatic_dynamic_shapes=False`` keeps sizes static."""
    calls = [lambda: (R(5), R(5)), lambda: (R(6), R(7)), lambda: (R(8), R(9))]
    for flags in ({"assume_static_by_default": False}, {"automatic_dynamic_shapes": False},
                  {"force_parameter_static_shapes": True}):
        with torch._dynamo.config.patch(**flags):
            theirs = dims_per_call(_cat, calls, "torch")
        with md.config.patch(**flags):
            ours = dims_per_call(_cat, calls, "md")
        assert ours == theirs, flags

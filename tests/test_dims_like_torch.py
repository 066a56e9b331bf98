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
from _helpers import canonical_placeholders  # tests/ is on sys.path (no package)

pytestmark = [pytest.mark.ch15]

_SYMBOL = re.compile(r"\bs\d+\b")


class Recorder:
    """A backend keeping, per graph, its placeholders with symbols renamed in order of appearance."""

    def __init__(self) -> None:
        self.graphs: list[list] = []

    def __call__(self, gm, example_inputs):
        placeholders = canonical_placeholders(gm, _SYMBOL)
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


# --- non-contiguous inputs (issue 26: "Non-contiguous inputs are never made dynamic") ---------------
# torch gives a changed dim of a view or a transposed input a symbol as of a contiguous one; its
# strides are expressions of the sizes where the layout allows (``x.t()``: ``(1, s0)``) and DUCK
# symbols of their own otherwise (``x[:, ::2]``: a placeholder for the step), a storage offset of 2 or
# more a symbol too (``_compute_symbolic_stride`` / ``_create_symbolic_sizes_strides_storage_offset``
# in torch/fx/experimental/symbolic_shapes.py).

def _seq(make, *sizes):
    return [lambda s=s: (make(*s),) for s in sizes]


NON_CONTIGUOUS = [
    ("x.t()", lambda x: x.t() * 2, _seq(lambda a, b: R(a, b).t(), (4, 5), (4, 6), (4, 7))),
    ("x.t(), reduced", lambda x: (x + 1).sum(0), _seq(lambda a, b: R(a, b).t(), (4, 5), (6, 5), (7, 5))),
    ("x[:, ::2], rows change", lambda x: x * 2, _seq(lambda a, b: R(a, b)[:, ::2], (4, 10), (6, 10), (7, 10))),
    ("x[:, ::2], columns change", lambda x: x * 2, _seq(lambda a, b: R(a, b)[:, ::2], (4, 10), (4, 12), (4, 14))),
    ("x[:, ::2], both change", lambda x: x.sum(), _seq(lambda a, b: R(a, b)[:, ::2], (4, 10), (6, 12), (7, 14))),
    ("x[:, :k]", lambda x: x.sum(1), _seq(lambda k: R(4, 10)[:, :k], (5,), (6,), (7,))),
    ("x[1:]", lambda x: x + 1, _seq(lambda n: R(n)[1:], (10,), (11,), (12,))),
    ("x[2:], an offset symbol", lambda x: x + 1, _seq(lambda n: R(n)[2:], (10,), (11,), (12,))),
    ("x[::2]", lambda x: x * 2, _seq(lambda n: R(n)[::2], (10,), (12,), (14,))),
    ("transpose(1, 2)", lambda x: x.sum(), _seq(lambda n: R(2, 3, n).transpose(1, 2), (5,), (6,), (7,))),
    ("permute, then reshape", lambda x: x.reshape(-1),
     _seq(lambda a, b: R(2, a, b).permute(2, 0, 1), (3, 5), (3, 6), (4, 7))),
    ("expand", lambda x: x * 2, _seq(lambda n: R(1, n).expand(3, n), (4,), (5,), (6,))),
    ("x.t() written in place", lambda x: x.add_(1), _seq(lambda a, b: R(a, b).t(), (4, 5), (4, 6), (4, 7))),
    ("x.t() @ w", lambda x, w: x @ w, [lambda n=n: (R(n, 3).t(), R(n, 2)) for n in (5, 6, 7)]),
    ("contiguous, then x.t()", lambda x: x * 2, [lambda: (R(5, 4),), lambda: (R(4, 6).t(),), lambda: (R(4, 7).t(),)]),
    ("x.t(), then contiguous", lambda x: x * 2, [lambda: (R(4, 5).t(),), lambda: (R(6, 5),), lambda: (R(7, 5),)]),
    ("x * x.stride(0)", lambda x: x * x.stride(0), _seq(lambda a, b: R(a, b).t(), (4, 5), (4, 6), (4, 7))),
    ("x.t() of a leaf that requires grad", lambda x: (x * 2).sum(),
     _seq(lambda a, b: R(a, b, requires_grad=True).t(), (4, 5), (4, 6), (4, 7))),
]


@pytest.mark.parametrize("name, fn, calls", NON_CONTIGUOUS, ids=[c[0] for c in NON_CONTIGUOUS])
def test_non_contiguous_inputs_like_torch(name, fn, calls):
    assert_like_torch(fn, calls)


def test_non_contiguous_under_dynamic_true_like_torch():
    assert_like_torch(lambda x: x.t() * 2, _seq(lambda a, b: R(a, b).t(), (4, 5), (4, 6)), dynamic=True)


def test_non_contiguous_under_aot_like_torch():
    """The symbolic strides reach our AOT: its compiles per call are torch's, results equal eager's."""
    from torch._dynamo.testing import CompileCounterWithBackend

    for name, fn, calls in NON_CONTIGUOUS:
        counts = {}
        for system in ("torch", "md"):
            torch._dynamo.reset(), md.reset()
            counter = CompileCounterWithBackend("aot_eager")
            compiled = torch.compile(fn, backend=counter) if system == "torch" else md.compile(fn, backend="aot_eager")
            seen, graphs = [], 0
            for make in calls:
                args = make()
                expected = fn(*[a.detach().clone() for a in args])  # before a write through x.t()
                with md.events.record() as log:
                    got = compiled(*args)
                graphs += sum(e.kind == "dynamo_graph" for e in log)
                seen.append(counter.frame_count if system == "torch" else graphs)
                assert torch.allclose(got.detach(), expected), (name, system)
            counts[system] = seen
        assert counts["md"] == counts["torch"], name


# --- torch.tensor of symbolic values; torch.kron -----------------------------------------------------

SYMBOLIC_DATA = [
    ("torch.tensor([s0, 3])", lambda x: x.sum() + torch.tensor([x.size(0), 3]), _seq(R, (5,), (6,), (7,))),
    ("torch.tensor([s0, s1])", lambda x: torch.tensor([x.size(0), x.size(1)]) * 2, _seq(R, (5, 3), (6, 4), (7, 5))),
    ("torch.tensor([[s0], [s1]])", lambda x: torch.tensor([[x.size(0)], [x.size(1)]]) * 2,
     _seq(R, (5, 3), (6, 4), (7, 5))),
    ("torch.tensor([s0, 1.5])", lambda x: x.sum() + torch.tensor([x.size(0), 1.5]), _seq(R, (5,), (6,), (7,))),
    ("torch.tensor((s0, 2), dtype)", lambda x: torch.tensor((x.size(0), 2), dtype=torch.float64),
     _seq(R, (5,), (6,), (7,))),
    ("torch.tensor(n), n an int argument", lambda x, n: x + torch.tensor(n),
     [lambda: (R(3), 2), lambda: (R(3), 3), lambda: (R(3), 4)]),
    ("torch.as_tensor(s0) specializes", lambda x: x + torch.as_tensor(x.size(0)), _seq(R, (5,), (6,), (7,))),
]


@pytest.mark.parametrize("name, fn, calls", SYMBOLIC_DATA, ids=[c[0] for c in SYMBOLIC_DATA])
def test_torch_tensor_of_symbols_like_torch(name, fn, calls):
    if "int argument" not in name:
        assert_like_torch(fn, calls)
        return
    # Note [Placeholder order] (test_float_args_like_torch.py): torch realizes x lazily, after n
    theirs, ours = (dims_per_call(fn, calls, system) for system in ("torch", "md"))
    assert ours[0] == theirs[0]
    assert [sorted(map(str, g)) for g in ours[1]] == [sorted(map(str, g)) for g in theirs[1]]


def test_torch_tensor_of_symbols_keeps_its_dtype():
    for name, fn, calls in SYMBOLIC_DATA:
        md.reset()
        compiled = md.compile(fn, backend="eager")
        for make in calls:
            args = make()
            got, expected = compiled(*args), fn(*args)
            assert got.dtype == expected.dtype and torch.equal(got, expected), name


KRON = [
    ("kron 2-d", [lambda: (R(2, 3), R(3, 2)), lambda: (R(3, 4), R(3, 2)), lambda: (R(4, 5), R(2, 3))]),
    ("kron 1-d", [lambda: (R(3), R(4)), lambda: (R(5), R(4)), lambda: (R(6), R(7))]),
]


@pytest.mark.parametrize("name, calls", KRON, ids=[k[0] for k in KRON])
@pytest.mark.parametrize("dynamic", [None, True])
def test_kron_like_torch(name, calls, dynamic):
    """torch.kron with changing sizes: torch 2.13 compiles it per size (its sizes end up guarded)."""
    assert_like_torch(lambda a, b: torch.kron(a, b), calls, dynamic=dynamic)

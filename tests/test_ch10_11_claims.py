"""What chapters 09-11 say about torch, checked against torch (and ours against it).

Each test is one claim a chapter makes in prose; the chapter shows the same fact
in a cell's output, this test keeps it true when torch or minidynamo changes.
"""

from __future__ import annotations

import pytest
import torch

from minidynamo._torch_private import torch_aot_function, torch_collect_metadata, torch_make_boxed_func
from minidynamo.aot import aot_function, collect_metadata

pytestmark = pytest.mark.ch10


def _torch_graphs(fn, *args):
    """The real aot_function: its forward and (after a backward) backward graphs, and its outputs."""
    graphs = {}

    def compiler(name):
        def compile_(gm, example_inputs):
            graphs[name] = gm
            return torch_make_boxed_func(gm)

        return compile_

    return graphs, torch_aot_function(fn, compiler("fw"), compiler("bw"))(*args)


def _placeholders(gm, tangents=True):
    return [n.name for n in gm.graph.nodes if n.op == "placeholder" and (tangents or not n.name.startswith("tangents"))]


# -- chapter 09 -----------------------------------------------------------------


@pytest.mark.ch09
def test_mutations_hidden_from_autograd_is_vacuously_true_for_an_unmutated_input():
    """09: the flag holds for an input with no mutation; a no_grad mutation has its own flag instead."""

    def f(a, b):
        a.mul_(2)
        return a + b

    def under_no_grad(a):
        with torch.no_grad():
            a.mul_(2)
        return a + 1

    args = lambda: (torch.randn(2, requires_grad=True).clone(), torch.randn(2, requires_grad=True))  # noqa: E731
    for meta in (torch_collect_metadata(f, *args()), collect_metadata(f, *args())):
        mutated, untouched = meta.input_info
        assert untouched.mutations_hidden_from_autograd and not untouched.mutates_data
        assert mutated.mutates_data and not mutated.mutations_hidden_from_autograd
    for meta in (torch_collect_metadata(under_no_grad, args()[0]), collect_metadata(under_no_grad, args()[0])):
        (info,) = meta.input_info
        assert info.mutates_data and info.mutations_under_no_grad_or_inference_mode
        assert not info.mutations_hidden_from_autograd


# -- chapter 10 -----------------------------------------------------------------


def test_torch_compiles_the_backward_lazily():
    """10: the backward compiler runs at the first backward, not when the forward runs."""
    graphs, out = _torch_graphs(lambda x: x.sin(), torch.randn(3, requires_grad=True))
    assert "fw" in graphs and "bw" not in graphs
    out.sum().backward()
    assert "bw" in graphs


ONE_OP = {
    "mul_const": (lambda x: x * 2, []),
    "sum": (lambda x: x.sum(), []),
    "sin": (torch.sin, ["primals_1"]),
    "square": (lambda x: x * x, ["primals_1"]),
    "exp": (torch.exp, ["detach"]),
    "tanh": (torch.tanh, ["detach"]),
    "relu": (torch.relu, ["detach"]),
    "div_norm": (lambda x: x / x.norm(), ["primals_1", "linalg_vector_norm", "detach"]),
}


@pytest.mark.parametrize("name", list(ONE_OP))
def test_saved_values_of_one_op_follow_its_backward_formula(name):
    """10: what one op saves is what its backward formula reads; ours saves the same as torch."""
    fn, expected = ONE_OP[name]
    x = torch.randn(3, generator=torch.Generator().manual_seed(0)).requires_grad_()
    graphs, out = _torch_graphs(fn, x)
    out.sum().backward()
    theirs = _placeholders(graphs["bw"], tangents=False)
    assert theirs == expected  # the chapter's prose reads these lists
    compiled = aot_function(fn)
    compiled(x).sum().backward()
    saved = compiled.artifacts.partition.saved_values
    assert [n.name for n in saved] == theirs
    for node in saved:  # a saved "detach" is the detached alias of an op's output
        if node.name.startswith("detach"):
            assert node.target is torch.ops.aten.detach.default and node.args[0].op == "call_function"


def test_tangents_only_for_differentiable_outputs():
    """10: a mutated input autograd sees, x * y and y.sum() get tangents; an alias, an int, a detached output none."""

    def many_outputs(x, y):
        x.mul_(2)
        return x.t(), x * y, y.argmax(), (y * 2).detach(), y.sum()

    def args():
        g = torch.Generator().manual_seed(0)
        return [torch.randn(2, 2, generator=g).requires_grad_().clone(), torch.randn(2, 2, generator=g).requires_grad_()]

    graphs, outs = _torch_graphs(many_outputs, *args())
    torch.autograd.backward([outs[1].sum(), outs[4]])
    torch_tangents = [n for n in _placeholders(graphs["bw"]) if n.startswith("tangents")]
    assert len(torch_tangents) == 3
    compiled = aot_function(many_outputs)
    compiled(*args())
    assert compiled.artifacts.joint.tangent_mask == [True, False, True, False, False, True]
    assert _placeholders(compiled.artifacts.partition.bw_module) == _placeholders(graphs["bw"])


@pytest.mark.parametrize("mutate", [False, True])
def test_duplicate_inputs_are_merged_only_when_one_is_mutated(mutate):
    """10: f(x, x) keeps two graph inputs unless the function mutates one; values and grads equal eager."""

    def twice(a, b):
        if mutate:
            a.mul_(2)
        return (a * b).sum()

    results, placeholders = {}, {}
    for name in ("eager", "ours", "torch"):
        leaf = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        x = leaf.clone()
        if name == "eager":
            out = twice(x, x)
        elif name == "ours":
            compiled = aot_function(twice)
            out = compiled(x, x)
            placeholders[name] = _placeholders(compiled.artifacts.fw_module)
        else:
            graphs, out = _torch_graphs(twice, x, x)
            placeholders[name] = _placeholders(graphs["fw"])
        out.backward()
        results[name] = (out.item(), leaf.grad.tolist())
    assert results["ours"] == results["eager"] == results["torch"]
    assert len(placeholders["torch"]) == (1 if mutate else 2)
    assert placeholders["ours"] == placeholders["torch"]


def test_min_cut_exercise_ours_recomputes_what_torch_recomputes():
    """10, exercise 3: torch's min-cut recomputes mul; ours makes the same decisions on the same function."""
    from minidynamo.aot.min_cut_partition import min_cut_rematerialization_partition
    from minidynamo.exercises import ch10

    saved, recomputed = ch10.torch_min_cut_decisions(ch10.quiz_remat, *ch10.quiz_remat_inputs())
    assert recomputed == ["mul"]
    compiled = aot_function(ch10.quiz_remat, partition_fn=min_cut_rematerialization_partition)
    compiled(*ch10.quiz_remat_inputs()).backward()
    part = compiled.artifacts.partition
    assert sorted(n.name for n in part.saved_values) == sorted(saved)
    assert [n.target.overloadpacket.__name__ for n in part.recomputed] == recomputed

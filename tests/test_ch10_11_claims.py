"""What chapters 09-11 say about torch, checked against torch (and ours against it).

Each test is one claim a chapter makes in prose; the chapter shows the same fact
in a cell's output, this test keeps it true when torch or minidynamo changes.
"""

from __future__ import annotations

import pytest
import torch

from minidynamo._torch_private import (torch_aot_function, torch_aot_keeping_graphs, torch_collect_metadata,
                                       torch_make_boxed_func)
from minidynamo.aot import aot_function, collect_metadata

from _helpers import MulSavedInBackward  # tests/ is on sys.path (no package)

pytestmark = pytest.mark.ch10


def _torch_graphs(fn, *args):
    """The real aot_function: its forward and (after a backward) backward graphs, and its outputs."""
    graphs, compiled = torch_aot_keeping_graphs(fn)
    return graphs, compiled(*args)


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



@pytest.mark.ch09
def test_write_into_an_expanded_view_eager_refuses_torch_pass_2_accepts_ours_refuses():
    """09: eager raises on x.expand(3, 3).add_(1); torch's metadata collection does not; ours refuses like eager."""
    from minidynamo.aot.functional_tensor import FunctionalizationError

    def write_into_expand(x):
        y = x.expand(3, 3)
        y.add_(1)
        return y

    with pytest.raises(RuntimeError, match="more than one element"):
        write_into_expand(torch.zeros(3))
    assert torch_collect_metadata(write_into_expand, torch.zeros(3), keep_input_mutations=True).input_info[0].mutates_data
    with pytest.raises(FunctionalizationError, match="expand"):
        collect_metadata(write_into_expand, torch.zeros(3))

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



def test_aot_eager_means_min_cut_and_kept_input_mutations_in_torch_and_ours():
    """10: torch's aot_eager passes the min-cut partition and keep_inference_input_mutations; so does ours."""
    import inspect

    import minidynamo.backends as our_backends
    from minidynamo._torch_private import torch_lookup_backend

    src = inspect.getsource(torch_lookup_backend("aot_eager"))
    assert "partition_fn=min_cut_rematerialization_partition" in src and "keep_inference_input_mutations=True" in src
    assert "partition_fn" not in torch_lookup_backend("aot_eager_default_partitioner").kwargs
    ours = inspect.getsource(our_backends.aot_eager)
    assert "partition_fn=min_cut_rematerialization_partition" in ours and "keep_inference_input_mutations=True" in ours
    assert "partition_fn" not in inspect.getsource(our_backends.aot_eager_default_partition).split('"""')[-1]

# -- chapter 11 -----------------------------------------------------------------


def _overlapping():
    base = torch.arange(9.0).view(3, 3)
    return base[:2], base[1:]


def _disjoint_rows():
    base = torch.arange(6.0).view(2, 3)
    return base[0], base[1]


def _reads(a, b):
    return a * 2 + b


def _data_mutation(a, b):
    a.mul_(2)
    return b + 1


def _metadata_mutation(a, b):
    a.t_()
    return b + 1


SYNTHETIC_CASES = {
    "overlapping, data mutation": (_data_mutation, _overlapping, 1),
    "one storage, disjoint rows, data mutation": (_data_mutation, _disjoint_rows, 2),
    "overlapping, no mutation": (_reads, _overlapping, 2),
    "overlapping, metadata mutation only": (_metadata_mutation, _overlapping, 2),
}


@pytest.mark.ch11
@pytest.mark.parametrize("case", list(SYNTHETIC_CASES))
def test_synthetic_base_exactly_when_storages_overlap_and_one_input_is_data_mutated(case):
    """11: one graph input (a synthetic base) only for overlapping inputs with a data mutation, in torch and ours."""
    from minidynamo.exercises.ch11 import torch_graph_inputs

    fn, make, expected = SYNTHETIC_CASES[case]
    assert torch_graph_inputs(fn, *make()) == expected
    compiled = aot_function(fn)
    args = make()
    compiled(*args)
    assert sum(n.op == "placeholder" for n in compiled.artifacts.fw_module.graph.nodes) == expected
    eager_args = make()
    fn(*eager_args)
    assert all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(args, eager_args))


def _strided_pairs():
    x = torch.arange(24.0).view(4, 6)
    z = torch.arange(12.0)
    y = torch.arange(16.0).view(4, 4)
    return {
        "even/odd": (z[0::2], z[1::2]), "columns": (y[:, 0], y[:, 1]), "blocks": (y[:2, :2], y[2:, 2:]),
        "rows": (y[0], y[2]), "interleaved rows": (x[:, :2], x[:, 3:5]), "meeting rows": (x[:, :3], x[:, 2:5]),
        "narrow 2-d": (x[::2, :2], x[1::2, 1:3]), "t and itself": (y, y.t()), "empty": (z[:0], z),
        "tail": (z[:6], z[6:]), "3-d": (torch.arange(24.0).view(2, 3, 4)[:, :, :2], torch.arange(24.0).view(2, 3, 4)[:, :, 2:]),
    }


@pytest.mark.ch11
def test_overlap_rule_is_torchs_conservative_one():
    """11: ours may-overlap answers equal torch's compute_overlapping_tensors, sharing no element or not."""
    from minidynamo._torch_private import torch_compute_overlapping_tensors
    from minidynamo.aot.runtime_wrappers import compute_overlapping_inputs

    pairs = _strided_pairs()
    for name, (p, q) in pairs.items():
        assert compute_overlapping_inputs([p, q]) == torch_compute_overlapping_tensors([p, q]), name
    # The chapter's point: torch merges inputs that share no element when it cannot prove it.
    p, q = pairs["even/odd"]
    assert not set(p.tolist()) & set(q.tolist()) and torch_compute_overlapping_tensors([p, q]) == {0, 1}


@pytest.mark.ch11
def test_synthetic_base_exercise_pairs_match_torch():
    """11, exercise 3: ours makes a synthetic base for the same pairs as torch."""
    from minidynamo.exercises import ch11

    for name, args in ch11.quiz_synthetic_pairs().items():
        compiled = aot_function(ch11.quiz_synthetic)
        compiled(*args)
        ours = sum(n.op == "placeholder" for n in compiled.artifacts.fw_module.graph.nodes)
        assert ours == ch11.torch_graph_inputs(ch11.quiz_synthetic, *ch11.quiz_synthetic_pairs()[name]), name


def _torch_alias_routes(fn, *args):
    """Which return of torch's gen_alias_from_base each regeneration left by (the chapter's experiment)."""
    import inspect
    import sys

    from minidynamo._torch_private import torch_gen_alias_from_base

    gen = torch_gen_alias_from_base()
    lines, first = inspect.getsourcelines(gen)
    returns = [n for n, line in enumerate(lines, start=first) if line.strip().startswith("return ")
               and ("patch_requires_grad(out)" in line or "aliased_out" in line)]
    assert len(returns) == 3, "torch's gen_alias_from_base no longer has three routes"
    route = dict(zip(returns, ["view replay", "_view_func", "as_strided"]))
    taken = []

    def profile(frame, event, arg):
        if event == "return" and frame.f_code is gen.__code__:
            taken.append(route.get(frame.f_lineno))

    sys.setprofile(profile)
    try:
        out = torch_aot_function(fn, lambda gm, ex: torch_make_boxed_func(gm))(*args)
    finally:
        sys.setprofile(None)
    return out, taken


@pytest.mark.ch11
def test_view_replay_has_a_middle_route_for_metadata_mutated_inputs():
    """11: torch replays the chain when it recorded one, else (input metadata-mutated) uses _view_func off _base."""

    def view_of_input(x):
        return x.t()[0]

    def view_after_t_(x):
        x.t_()
        return x[0]

    make = lambda: torch.arange(6.0).view(2, 3).requires_grad_().clone()  # noqa: E731
    assert torch_collect_metadata(view_of_input, make()).output_info[0].view_meta_sequence is not None
    assert torch_collect_metadata(view_after_t_, make()).output_info[0].view_meta_sequence is None
    out, taken = _torch_alias_routes(view_of_input, make())
    assert taken == ["view replay"]
    out, taken = _torch_alias_routes(view_after_t_, make())
    assert taken == ["_view_func"]
    ours = aot_function(view_after_t_)(make())
    assert torch.equal(ours, out) and ours.stride() == out.stride() and ours.storage_offset() == out.storage_offset()


def _double_saved(a, x):
    return MulSavedInBackward.apply(a) * x


@pytest.mark.ch11
def test_mutation_in_a_custom_backward_is_copied_back_like_torch():
    """11: eager, torch and ours leave a = 2 and a.grad = 6; torch's backward graph ends with copy_."""
    f9 = _double_saved
    graphs, torch_f9 = torch_aot_keeping_graphs(f9)
    results = []
    for fn in (f9, aot_function(f9), torch_f9):
        a = torch.ones(3, requires_grad=True)
        fn(a, torch.full((3,), 3.0)).sum().backward()
        results.append((a.detach().tolist(), a.grad.tolist()))
    assert results[0] == results[1] == results[2] == ([2.0] * 3, [6.0] * 3)
    last_op = [n for n in graphs["bw"].graph.nodes if n.op == "call_function"][-1]
    assert last_op.target is torch.ops.aten.copy_.default


@pytest.mark.ch11
def test_torch_keeps_training_input_mutations_in_the_graph_with_the_inference_flag():
    """11: keep_inference_input_mutations=True puts BatchNorm's running-stat updates (copy_) in a training graph."""
    import torch.nn.functional as F

    graphs = []

    def bn(x, w, b, rm, rv):
        return F.batch_norm(x, rm, rv, w, b, training=True)

    args = [torch.randn(4, 3, requires_grad=True), torch.ones(3, requires_grad=True),
            torch.zeros(3, requires_grad=True), torch.zeros(3), torch.ones(3)]
    torch_aot_function(bn, lambda gm, ex: graphs.append(gm) or torch_make_boxed_func(gm),
                       keep_inference_input_mutations=True)(*args)
    names = [n.name for n in graphs[0].graph.nodes if n.op == "placeholder"]
    assert names[0] == "primals_1"  # a training graph
    copies = [n for n in graphs[0].graph.nodes if n.target is torch.ops.aten.copy_.default]
    assert [c.args[0].name for c in copies] == ["primals_4", "primals_5"]


def _set_input(x, y):
    x.set_(y)
    return x * 2


def _resize_smaller(x):
    x.resize_(2)
    return x * 2


def _out_into_input(x, y):
    torch.add(x, 1, out=y)
    return y * 2


STORAGE_PROGRAMS = {
    "set_": (_set_input, lambda: (torch.zeros(3), torch.arange(4.0))),
    "resize_": (_resize_smaller, lambda: (torch.arange(4.0),)),
    "out=": (_out_into_input, lambda: (torch.arange(3.0), torch.zeros(3))),
}


@pytest.mark.ch11
@pytest.mark.parametrize("name", list(STORAGE_PROGRAMS))
def test_set_resize_out_match_eager_in_torch_and_ours(name):
    """11: torch and ours compile set_/resize_/out= on inputs (keep_inference_input_mutations), equal to eager."""
    import warnings

    fn, make = STORAGE_PROGRAMS[name]
    eager_args = make()
    eager_out = fn(*eager_args)
    ours = aot_function(fn, keep_inference_input_mutations=True)
    for compiled in (
        torch_aot_function(fn, lambda gm, ex: torch_make_boxed_func(gm), keep_inference_input_mutations=True), ours,
    ):
        args = make()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # chapter 11 shows ours compiling these: no fallback warning
            out = compiled(*args)
        assert torch.equal(out, eager_out)
        assert all(a.shape == b.shape and torch.equal(a, b) for a, b in zip(args, eager_args))
    assert ours.artifacts.fallback is None


@pytest.mark.ch11
def test_runtime_epilogue_widget_reads_the_call():
    """11's widget: its pages are what the call did (write-backs, regenerations), and the call equals eager."""
    from minidynamo.widgets import RuntimeEpilogue
    from minidynamo.widgets.stepper import KERNEL_ONLY

    def epilogue_demo(a, b, x):
        a.add_(1)
        b.t_()
        y = x * 2
        return a.view(-1), b, y.view(3, 2), y[0], x.sum()

    def make():
        return torch.arange(4.0).view(2, 2), torch.arange(6.0).view(2, 3), torch.arange(6.0).view(2, 3).requires_grad_()

    args = make()
    widget = RuntimeEpilogue.run(aot_function(epilogue_demo), *args, title="t")
    rec = widget.record
    assert rec["written"] == [0, 1]
    assert rec["regen"] == {0: "view_replay", 2: "view_replay", 3: "view_replay"}
    assert [rec["before"][i]["version"] for i in range(3)] == [0, 0, 0]
    assert [rec["after"][i]["version"] for i in range(3)] == [1, 1, 0]
    eager_args = make()
    eager_outs = epilogue_demo(*eager_args)
    for e, o in zip(eager_outs, rec["outputs"]):
        assert torch.equal(e, o) and (e._base is None) == (o._base is None)
    assert rec["outputs"][1] is args[1]
    assert len(widget.steps) == 10 and "input 0: written back by the wrapper" in widget.labels
    assert repr(widget) == repr(RuntimeEpilogue.run(aot_function(epilogue_demo), *make(), title="t"))
    assert KERNEL_ONLY in widget.prev_button._dom_classes and KERNEL_ONLY not in widget.slider._dom_classes

"""Chapter 09: mini functionalization and collect_metadata (FakeTensor pass 2) vs the real ones.

Oracles: torch's ``run_functionalized_fw_and_collect_metadata`` (called as torch
2.13's ``create_aot_state`` calls it, with ``PlainAOTInput`` descriptors and
``keep_input_mutations=False``; see ``_torch_private.torch_collect_metadata``) for
the metadata, and eager PyTorch for what functionalization computes.
"""

from __future__ import annotations

import functools

import pytest
import torch

from minidynamo import events
from minidynamo._torch_private import torch_collect_metadata
from minidynamo.aot import OutputType, collect_metadata
from minidynamo.aot.functional_tensor import (
    FunctionalizationError,
    FunctionalTensor,
    FunctionalTensorMode,
    functionalize,
)
from minidynamo.aot.schemas import ViewMeta, replay_views
from minidynamo.corpus.aot_cases import CASES, CASES_BY_NAME
from minidynamo.corpus.metadata_compare import KNOWN_DIFFERENCES, metadata_differences

pytestmark = pytest.mark.ch09



@functools.lru_cache(maxsize=None)
def ours(name: str):
    case = CASES_BY_NAME[name]
    return collect_metadata(case.fn, *case.make_inputs())


@functools.lru_cache(maxsize=None)
def theirs(name: str):
    case = CASES_BY_NAME[name]
    return torch_collect_metadata(case.fn, *case.make_inputs())


# ----------------------------------------------------------------------------- the corpus


def test_corpus_shape():
    assert len(CASES) >= 80
    tags = {t for c in CASES for t in c.tags}
    for needed in (
        "data_mutation", "metadata_mutation", "no_grad_mutation", "out_alias_input", "out_is_input",
        "out_alias_intermediate", "multi_out_alias_intermediate", "intermediate_returned", "out_mutation",
        "aliased_inputs", "dup_input", "non_tensor", "detach", "no_grad_output", "view_chain",
    ):
        assert needed in tags, needed
    # Inputs are fresh and deterministic.
    c = CASES_BY_NAME["mut_data_grad_input"]
    a, b = c.make_inputs(), c.make_inputs()
    assert a[0] is not b[0] and torch.equal(a[0], b[0])


def test_every_output_type_is_demonstrated_by_torch():
    seen = {o.output_type.name for c in CASES for o in theirs(c.name).output_info}
    assert seen == {t.name for t in OutputType}


# ----------------------------------------------------------------------------- differential: metadata


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_metadata_matches_torch(name):
    if name in KNOWN_DIFFERENCES:
        pytest.skip(KNOWN_DIFFERENCES[name])
    assert metadata_differences(ours(name), theirs(name)) == []


def test_metadata_agreement_rate():
    agree = [c.name for c in CASES if not metadata_differences(ours(c.name), theirs(c.name))]
    assert len(agree) >= 0.95 * len(CASES), sorted(set(CASES_BY_NAME) - set(agree))
    # A known difference that no longer differs should leave the list.
    assert not set(KNOWN_DIFFERENCES) & set(agree)


def test_differences_are_detected():
    """The comparison can fail: two different cases' metadata differ."""
    assert metadata_differences(ours("out_view_of_input"), theirs("plain_add"))
    assert metadata_differences(ours("mut_data_grad_input"), theirs("nograd_mut_nonleaf"))


# ----------------------------------------------------------------------------- the view chains


def _eager(case):
    args = case.make_inputs()
    out = case.fn(*args)
    return args, list(out) if isinstance(out, (tuple, list)) else [out]


@pytest.mark.parametrize(
    "name",
    [c.name for c in CASES if any(t in c.tags for t in ("out_alias_input", "out_alias_intermediate",
                                                            "multi_out_alias_intermediate", "intermediate_returned"))],
)
def test_view_chain_replays_to_the_eager_output(name):
    """Replaying an output's recorded chain on its base gives eager's output (values and layout)."""
    meta = ours(name)
    args, outs = _eager(CASES_BY_NAME[name])
    for o, info in zip(outs, meta.output_info):
        chain = info.view_meta_sequence
        replayable = info.output_type in (
            OutputType.alias_of_intermediate,
            OutputType.alias_of_intermediate_save_as_output,
            OutputType.alias_of_intermediate_base_is_user_output,
        ) or (info.output_type is OutputType.alias_of_input and not meta.input_info[info.base_idx].mutates_metadata)
        assert (chain is not None) == replayable, (info.output_type, chain)
        if chain is None:
            continue
        if info.output_type is OutputType.alias_of_input:
            base = args[info.base_idx]
        elif info.output_type is OutputType.alias_of_intermediate_base_is_user_output:
            base = outs[info.base_idx]
        else:
            base = o._base
        with torch.no_grad():
            replayed = replay_views(base, chain)
        assert replayed.shape == o.shape and replayed.stride() == o.stride()
        assert torch.equal(replayed, o.detach())


def test_view_meta_replay_and_str():
    x = torch.arange(12.0).view(3, 4)
    chain = (ViewMeta(torch.ops.aten.t.default), ViewMeta(torch.ops.aten.unbind.int, (0,), (), 2))
    assert torch.equal(replay_views(x, chain), x.t()[2])
    assert str(chain[1]) == "aten.unbind.int(0)[2]"


# ----------------------------------------------------------------------------- functionalization vs eager

_ALIASED = ("aliased_inputs",)  # Note [Each input its own storage]: eager sees cross-input writes, we do not


@pytest.mark.parametrize("name", [c.name for c in CASES if not set(c.tags) & set(_ALIASED)])
def test_functionalized_values_match_eager(name):
    """Outputs and final input values of the functionalized program equal eager's (real tensors)."""
    case = CASES_BY_NAME[name]
    args, eager_outs = _eager(case)
    outs, finals = functionalize(case.fn)(*case.make_inputs())
    outs = list(outs) if isinstance(outs, (tuple, list)) else [outs]
    assert len(outs) == len(eager_outs)
    for o, e in zip(outs, eager_outs):
        assert not isinstance(o, FunctionalTensor)
        if isinstance(e, torch.Tensor):
            assert o.shape == e.shape and torch.equal(o.detach(), e.detach()), (o, e)
        else:
            assert o == e
    for f, a in zip(finals, args):
        if isinstance(a, torch.Tensor):
            assert f.shape == a.shape and torch.equal(f.detach(), a.detach())


@pytest.mark.parametrize("name", ["mut_data_through_view_chain", "meta_and_data", "outmut_base_after_view"])
def test_only_functional_ops_reach_the_fake_mode(name):
    case = CASES_BY_NAME[name]
    with events.record() as log:
        collect_metadata(case.fn, *case.make_inputs())
    ops = [e for e in log if e.kind == "op"]
    assert ops and all(e.pass_name == "aot_metadata" for e in ops)
    assert not [e.op for e in ops if e.mutates], "an in-place op reached the fake mode"
    assert [e.kind for e in log][0] == "pass_begin" and [e.kind for e in log][-1] == "pass_end"
    rewrites = [e for e in log if e.kind == "functionalize" and e.how in ("mutation", "metadata_mutation")]
    assert rewrites and all(not e.replacement.split(".")[1].endswith("_") for e in rewrites)


def test_all_cases_send_no_mutation_below():
    """Across the whole corpus, no op event of pass 2 mutates (torch asserts the same of its graphs)."""
    with events.record() as log:
        for c in CASES[::4]:
            collect_metadata(c.fn, *c.make_inputs())
    assert not [e.op for e in log if e.kind == "op" and e.mutates]


def test_mutation_through_view_updates_base_and_other_views():
    x = torch.zeros(3, 4)
    mode = FunctionalTensorMode()
    with mode:
        fx = mode.to_fun(x)
        col = fx.t()[1]
        row = fx[2]
        col.add_(1)  # writes x[:, 1]
        row.mul_(2)
        assert torch.equal(mode.from_fun(row), torch.tensor([0.0, 2.0, 0.0, 0.0]))
        final = mode.from_fun(fx)
    expected = torch.zeros(3, 4)
    expected[:, 1] += 1
    expected[2] *= 2
    assert torch.equal(final, expected)
    assert torch.equal(x, torch.zeros(3, 4)), "the real input must not be touched"


def test_metadata_mutation_changes_the_wrapper():
    mode = FunctionalTensorMode()
    with mode:
        fx = mode.to_fun(torch.randn(2, 3))
        fx.t_()
        assert fx.shape == (3, 2) and fx.stride() == (1, 3)
        assert mode.from_fun(fx).shape == (3, 2)


# ----------------------------------------------------------------------------- errors


def test_inplace_on_unwrapped_tensor_is_a_clear_error():
    with FunctionalTensorMode() as mode:
        made_inside = torch.ones(2).add_(1)  # tensors made inside the mode are wrapped: fine
        assert torch.equal(mode.from_fun(made_inside), torch.full((2,), 2.0))
    y = torch.ones(2)
    with pytest.raises(FunctionalizationError, match="aten.add_.Tensor: in-place op on a tensor that was not wrapped"):
        with FunctionalTensorMode():
            y.add_(1)


def test_functional_tensor_outside_its_mode():
    mode = FunctionalTensorMode()
    with mode:
        fx = mode.to_fun(torch.ones(2))
    with pytest.raises(FunctionalizationError, match="outside its FunctionalTensorMode"):
        fx + 1


def test_write_into_expanded_view_is_rejected():
    def f(a):
        a.unsqueeze(0).expand(3, 4).add_(1)
        return a

    with pytest.raises(FunctionalizationError, match="expand"):
        collect_metadata(f, torch.zeros(4))


def test_container_argument_is_rejected():
    with pytest.raises(TypeError, match="argument 0 is a list"):
        collect_metadata(lambda xs: xs[0], [torch.ones(1)])


def test_resize_growing_an_input_has_torchs_metadata():
    """resize_ to a larger size: a fresh, bigger value and a metadata mutation, as torch records it."""
    def f(a):
        a.resize_(8)
        return a

    assert metadata_differences(collect_metadata(f, torch.zeros(4)), torch_collect_metadata(f, torch.zeros(4))) == []


def test_storage_mutation_by_storage_is_rejected():
    def f(a, b):
        with torch.no_grad():
            a.set_(b.untyped_storage())
        return a + 1

    # torch refuses it too, below its FakeTensor (tests/test_aot_storage_mutations.py has the family)
    with pytest.raises(RuntimeError) as theirs:
        torch_collect_metadata(f, torch.zeros(4), torch.ones(4))
    with pytest.raises(RuntimeError) as ours:
        collect_metadata(f, torch.zeros(4), torch.ones(4))
    assert str(ours.value).splitlines()[0] == str(theirs.value).splitlines()[0]


# ----------------------------------------------------------------------------- backward under the mode (pass 3 relies on it)


def _grads(case, functional: bool):
    """Gradients of a weighted sum of the outputs w.r.t. leaf copies of the inputs.

    Inputs that require grad are cloned inside (so the case may mutate them), as
    AOTAutograd's joint does; with ``functional`` everything runs on FunctionalTensors,
    including ``torch.autograd.grad``.
    """
    args = case.make_inputs()
    leaves = [a.detach().requires_grad_() if isinstance(a, torch.Tensor) and a.requires_grad else a for a in args]
    mode = FunctionalTensorMode() if functional else None
    with mode if functional else torch.enable_grad():
        ins = [mode.to_fun(x, mirror_leaf=False) for x in leaves] if functional else leaves
        out = case.fn(*[x.clone() if isinstance(x, torch.Tensor) and x.requires_grad else x for x in ins])
        outs = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if isinstance(o, torch.Tensor) and o.requires_grad]
        wrt = [x for x in ins if isinstance(x, torch.Tensor) and x.requires_grad]
        if not outs or not wrt:
            return None
        loss = sum((o * (k + 1)).sum() for k, o in enumerate(outs))
        grads = torch.autograd.grad(loss, wrt, allow_unused=True)
        return [mode.from_fun(g) for g in grads] if functional else list(grads)


@pytest.mark.parametrize(
    "name", [c.name for c in CASES if not set(c.tags) & {"aliased_inputs", "dup_input"}][::2]
)
def test_backward_under_functionalization_matches_eager(name):
    case = CASES_BY_NAME[name]
    eager, ours_ = _grads(case, False), _grads(case, True)
    if eager is None:
        assert ours_ is None
        return
    for e, o in zip(eager, ours_):
        assert (e is None) == (o is None)
        if e is not None:
            assert not isinstance(o, FunctionalTensor) and torch.allclose(e, o)


# ----------------------------------------------------------------------------- random view/mutation programs

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_VIEWS = ("t", "transpose", "select", "slice", "unsqueeze", "view", "diagonal", "unbind", "split", "permute", "detach", "as_strided")
_WRITES = ("add_", "mul_", "copy_", "zero_", "t_", "unsqueeze_")


def _apply(kind: str, x: torch.Tensor, k: int):
    """One step of a random program; ``k`` picks dims/indices. Returns a tensor or None (not applicable)."""
    d = x.dim()
    if kind in ("t", "t_") and d > 2:
        return None
    if kind == "t":
        return x.t()
    if kind == "t_":
        return x.t_()
    if kind == "unsqueeze_":
        return x.unsqueeze_(k % (d + 1)) if d < 4 else None
    if kind == "detach":
        return x.detach()
    if kind == "unsqueeze":
        return x.unsqueeze(k % (d + 1)) if d < 4 else None
    if kind == "view":
        return x.view(-1) if x.is_contiguous() else None
    if d == 0:
        return None
    dim = k % d
    n = x.shape[dim]
    if kind == "transpose":
        return x.transpose(dim, (k // 3) % d)
    if kind == "permute":
        return x.permute(*reversed(range(d)))
    if kind == "select":
        return x.select(dim, k % n) if n else None
    if kind == "slice":
        return x.narrow(dim, k % max(n, 1), max(n - k % max(n, 1) - 1, 0)) if n > 1 else None
    if kind == "diagonal":
        return x.diagonal(0, 0, 1) if d >= 2 else None
    if kind == "unbind":
        return x.unbind(dim)[k % n] if n else None
    if kind == "split":
        return x.split(2, dim)[k % -(-n // 2)] if n else None
    if kind == "as_strided":
        return x.as_strided((2,), (1,), x.storage_offset()) if x.numel() >= 2 and x.is_contiguous() else None
    if kind == "add_":
        return x.add_(k + 1)
    if kind == "mul_":
        return x.mul_(-1.5)
    if kind == "copy_":
        return x.copy_(torch.full(x.shape, float(k)))
    if kind == "zero_":
        return x.zero_()
    raise AssertionError(kind)


def _run_program(program, x):
    tensors = [x]
    for kind, src, k in program:
        # Mostly work on the newest tensors, so that writes land in views of views.
        out = _apply(kind, tensors[-1 - src % min(3, len(tensors))], k)
        if out is not None and kind not in ("t_", "unsqueeze_") and kind in _VIEWS:
            tensors.append(out)
    return tensors


_programs = st.lists(
    st.tuples(st.sampled_from(_VIEWS + _WRITES), st.integers(0, 20), st.integers(0, 20)), min_size=2, max_size=10
)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(_programs)
def test_random_view_and_mutation_programs_match_eager(program):
    """Views, writes through views, metadata mutations, in any order: every tensor's final value equals eager's."""
    eager = _run_program(program, torch.arange(24.0).view(2, 3, 4))
    mode = FunctionalTensorMode()
    with mode:
        ours_ = _run_program(program, mode.to_fun(torch.arange(24.0).view(2, 3, 4)))
        values = [mode.from_fun(t) for t in ours_]
    assert len(values) == len(eager)
    for e, o in zip(eager, values):
        assert e.shape == o.shape and torch.equal(e, o), program


def test_fake_inputs_keep_their_mode():
    """Inputs that are already fake (Dynamo's pass 1 made them) are used as they are, with their mode."""
    from minidynamo.fake import FakeTensorMode

    mode = FakeTensorMode()
    x = mode.from_tensor(torch.randn(2, 3))
    def fn(a):
        return a.t_(), a + 1

    with events.record() as log:
        meta = collect_metadata(fn, x)
    assert metadata_differences(meta, torch_collect_metadata(fn, torch.randn(2, 3))) == []
    assert meta.input_info[0].mutates_metadata
    assert x.shape == (2, 3), "the caller's fake input must not be mutated"
    assert {e.pass_name for e in log if e.kind == "op"} == {"aot_metadata"}


def test_keep_input_mutations_matches_torch():
    """The inference path keeps data-only mutations in the graph: MUTATED_IN_GRAPH vs _OUT_GRAPH as torch decides."""
    mutating = [c for c in CASES if set(c.tags) & {"data_mutation", "no_grad_mutation", "metadata_mutation"}]
    differing, in_graph = [], 0
    for c in mutating:
        a = collect_metadata(c.fn, *c.make_inputs(), keep_input_mutations=True)
        in_graph += sum(i.mutation_type.name == "MUTATED_IN_GRAPH" for i in a.input_info)
        b = torch_collect_metadata(c.fn, *c.make_inputs(), keep_input_mutations=True)
        d = metadata_differences(a, b)
        d += [
            f"input {i} mutation_type: {x.mutation_type.name} vs {y.mutation_type.name}"
            for i, (x, y) in enumerate(zip(a.input_info, b.input_info))
            if x.mutation_type.name != y.mutation_type.name
        ]
        if d:
            differing.append((c.name, d))
    assert len(mutating) >= 30 and not differing, differing
    assert in_graph > 0


# ----------------------------------------------------------------------------- ops that need care


def test_batch_norm_running_stats_are_mutated_inputs():
    """Note [Schemas that hide a mutation]: native_batch_norm writes its running stats."""
    import torch.nn.functional as F

    def bn(x, w, b, running_mean, running_var):
        return F.batch_norm(x, running_mean, running_var, w, b, training=True)

    def inputs():
        g = torch.Generator().manual_seed(0)
        return [torch.randn(4, 3, generator=g, requires_grad=True), torch.rand(3, generator=g, requires_grad=True),
                torch.randn(3, generator=g), torch.zeros(3), torch.ones(3)]

    assert metadata_differences(collect_metadata(bn, *inputs()), torch_collect_metadata(bn, *inputs())) == []
    eager_args = inputs()
    eager_out = bn(*eager_args)
    out, finals = functionalize(bn)(*inputs())
    assert torch.allclose(out, eager_out)
    assert torch.allclose(finals[3], eager_args[3]) and torch.allclose(finals[4], eager_args[4])
    assert not torch.equal(finals[3], torch.zeros(3)), "the running mean must have moved"


def test_dropout_functionalized_matches_eager_with_same_seed():
    """bernoulli_(p) arrives with p dropped (a default); its functional twin needs it filled in."""
    import torch.nn.functional as F

    x = torch.randn(64)
    torch.manual_seed(3)
    eager = F.dropout(x, 0.5, training=True)
    torch.manual_seed(3)
    ours_, _ = functionalize(lambda t: F.dropout(t, 0.5, training=True))(x)
    assert torch.equal(ours_, eager)

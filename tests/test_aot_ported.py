"""The ported AOT corpus (``minidynamo/corpus/aot_ported.py``) and the scenarios of torch's AOT tests.

Cases written after PyTorch's ``test/test_functionalization.py`` and
``test/dynamo/test_aot_autograd.py``, in our own words. Oracles, per case:

* metadata: torch's ``run_functionalized_fw_and_collect_metadata``
  (``_torch_private.torch_collect_metadata``), field by field, with
  ``keep_input_mutations`` False and True (then ``mutation_type`` too);
* ``aot_function`` (default partition; and the ``aot_eager`` configuration: min-cut,
  input mutations kept in the graph; and under ``no_grad``) vs eager, each called twice so
  the cached hot path is compared too: outputs, inputs after the call, aliasing,
  gradients (``test_aot_runtime.run_and_compare``); a fallback to eager counts as a failure;
* ``md.compile(backend="aot_eager")`` vs eager, twice, and its outputs vs
  ``torch.compile(backend="aot_eager")``'s.

The scenarios of the same files (whole compiled calls) are in ``tests/test_aot_ported_scenarios.py``.
"""

from __future__ import annotations

import functools
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import torch_collect_metadata
from minidynamo.aot import aot_function, collect_metadata
from minidynamo.aot.aot_autograd import AOTFallbackWarning
from minidynamo.aot.min_cut_partition import min_cut_rematerialization_partition
from minidynamo.corpus.aot_ported import PORTED_BY_NAME, PORTED_CASES, TORCH_TEST
from minidynamo.corpus.metadata_compare import metadata_differences

from test_aot_ported_scenarios import _TruncWithParam  # tests/ is on sys.path
from test_aot_runtime import _differs_from_eager, _torch_oracle, run_and_compare

pytestmark = pytest.mark.ch11

_PARAMETER_MADE_INSIDE = (
    "an nn.Parameter made inside the traced function becomes a graph constant, so the output loses "
    "requires_grad (torch's aot_function does the same; under Dynamo, md.compile is right)")
# Known gaps, each a strict xfail: (case, check) -> reason.
GAPS: dict[tuple[str, str], str] = {
    ("da_nn_parameter_construction", "aot_function"): _PARAMETER_MADE_INSIDE,
    ("da_parameter_of_an_input", "aot_function"): _PARAMETER_MADE_INSIDE,
    ("da_parameter_of_an_input", "inference"): _PARAMETER_MADE_INSIDE,
}
# Programs functionalization cannot represent: ours must run them eagerly, with this reason in the warning
# (the metadata pass raises it). Torch compiles them and is wrong.
REFUSED = {
    # one tensor passed as several arguments that the op's schema marks as written: eager applies the writes
    # one after another (0.0); torch's aot_function and torch.compile assume no aliasing and return 1.0
    "fz_mutable_op_not_inplace_or_other": "shares memory with another argument",
}
# Where torch's own oracle cannot be run as it stands: case -> why (the check is skipped).
ORACLE_CANNOT = {
    "fz_tensor_list_mixed_functional_nonfunctional": "torch's metadata pass refuses the real tensor the "
    "function closes over ('Please convert all Tensors to FakeTensors first'); Dynamo would lift it to an input",
}
# Where torch's aot_function returns a view where eager returns none (a graph output that is a view of a
# graph intermediate): aliasing is compared with torch's, values and gradients still with eager.
TORCH_ALIASING = {"fz_tensor_ctr"}

NAMES = [c.name for c in PORTED_CASES]


def _gap(name: str, check: str) -> None:
    reason = GAPS.get((name, check))
    if reason:
        pytest.xfail(reason)
    if check == "metadata" and name in ORACLE_CANNOT:
        pytest.skip(ORACLE_CANNOT[name])


@functools.cache
def _aliasing_from_torch(name: str) -> bool:
    """Whether the case's aliasing is compared with torch's aot_function (three tests ask, per case)."""
    return name in TORCH_ALIASING or _differs_from_eager(PORTED_BY_NAME[name])


def _alias_oracle(case):
    if case.name in REFUSED:
        return None
    return _torch_oracle(case.fn) if _aliasing_from_torch(case.name) else None


def test_corpus_cites_a_torch_test_for_every_case():
    assert len(PORTED_CASES) >= 60
    assert set(TORCH_TEST) == set(PORTED_BY_NAME)
    assert all(src.startswith(("test/test_functionalization.py::", "test/dynamo/test_aot_autograd.py::"))
               for src in TORCH_TEST.values())


# ----------------------------------------------------------------------------- metadata


def _collect(collect, case, keep):
    try:
        return collect(case.fn, *case.make_inputs(), keep_input_mutations=keep), None
    except Exception as e:  # noqa: BLE001
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


@pytest.mark.parametrize("keep", [False, True], ids=["keep_mutations_out", "keep_mutations_in"])
@pytest.mark.parametrize("name", NAMES)
def test_metadata_matches_torch(name, keep):
    _gap(name, "metadata")
    case = PORTED_BY_NAME[name]
    theirs, their_error = _collect(torch_collect_metadata, case, keep)
    ours, our_error = _collect(collect_metadata, case, keep)
    if name in REFUSED:
        assert our_error is not None and REFUSED[name] in our_error, our_error
        return
    assert (our_error is None) == (their_error is None), (our_error, their_error)
    if ours is None:
        return
    diffs = metadata_differences(ours, theirs)
    if keep:
        diffs += [f"input {i} mutation_type: {x.mutation_type.name} vs {y.mutation_type.name}"
                  for i, (x, y) in enumerate(zip(ours.input_info, theirs.input_info))
                  if x.mutation_type.name != y.mutation_type.name]
    assert diffs == []


# ----------------------------------------------------------------------------- aot_function vs eager


def _our_fallbacks(caught) -> list[str]:
    """Warnings saying that (part of) the function runs eagerly: AOT's, or Dynamo's whole-frame fallback."""
    return [str(w.message) for w in caught
            if issubclass(w.category, AOTFallbackWarning) or str(w.message).startswith("minidynamo")]


def _run_twice(case, compiled, *, check_grads=True, oracle=None, or_oracle=None):
    """Two calls compared with eager; aliasing with ``oracle``'s (eager's if None), or else ``or_oracle``'s."""
    if case.name in REFUSED:
        return _runs_eagerly_twice(case, compiled)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):  # the second call takes the cached hot path
            try:
                run_and_compare(case.fn, case.make_inputs, compiled, check_grads=check_grads, alias_oracle=oracle)
            except AssertionError as e:
                if or_oracle is None or "alias relations differ" not in str(e):
                    raise
                run_and_compare(case.fn, case.make_inputs, compiled, check_grads=check_grads, alias_oracle=or_oracle)
    assert not _our_fallbacks(caught), "running eagerly is not compiling"


def _runs_eagerly_twice(case, compiled):
    """A REFUSED case: eager's outputs and inputs after the call (it is eager), and a warning saying why."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            args_e, args_c = case.make_inputs(), case.make_inputs()
            outs_e, outs_c = _as_tuple(case.fn(*args_e)), _as_tuple(compiled(*args_c))
            for x, y in zip(outs_e + tuple(args_e), outs_c + tuple(args_c)):
                torch.testing.assert_close(y, x)
    fallbacks = _our_fallbacks(caught)
    assert fallbacks and all(REFUSED[case.name] in m for m in fallbacks), fallbacks


def _as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


@pytest.mark.parametrize("name", NAMES)
def test_aot_function_matches_eager(name):
    _gap(name, "aot_function")
    case = PORTED_BY_NAME[name]
    _run_twice(case, aot_function(case.fn), oracle=_alias_oracle(case))


@pytest.mark.parametrize("name", NAMES)
def test_aot_eager_configuration_matches_eager(name):
    _gap(name, "aot_function")
    case = PORTED_BY_NAME[name]
    compiled = aot_function(case.fn, partition_fn=min_cut_rematerialization_partition,
                            keep_inference_input_mutations=True)
    _run_twice(case, compiled, oracle=_alias_oracle(case))


@pytest.mark.parametrize("name", NAMES)
def test_inference_matches_eager(name):
    _gap(name, "inference")
    case = PORTED_BY_NAME[name]
    with torch.no_grad():
        _run_twice(case, aot_function(case.fn), check_grads=False, oracle=_alias_oracle(case))


# ----------------------------------------------------------------------------- md.compile vs torch.compile


def _outputs(fn, case):
    out = fn(*case.make_inputs())
    return out if isinstance(out, tuple) else (out,)


@pytest.mark.parametrize("name", NAMES)
def test_md_compile_matches_eager_and_torch_compile(name, real_dynamo):
    _gap(name, "md.compile")
    case = PORTED_BY_NAME[name]
    compiled = md.compile(case.fn, backend="aot_eager")
    # Which outputs are views of what, or are the inputs: as eager's, or else as torch.compile's.
    _run_twice(case, compiled, or_oracle=torch.compile(case.fn, backend="aot_eager"))
    if name in REFUSED:
        return  # torch's answer is the wrong one
    ours = _outputs(compiled, case)
    theirs = _outputs(torch.compile(case.fn, backend="aot_eager"), case)
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        if isinstance(t, torch.Tensor):
            assert o.shape == t.shape and o.requires_grad == t.requires_grad
            torch.testing.assert_close(o.detach(), t.detach())
        else:
            assert o == t


# ----------------------------------------------------------------------------- whole models (scenarios)


class _ConvBnResidualLoss(torch.nn.Module):
    """The model of test_aot_sequence_nr / test_eager_sequence_nr, smaller: batch norm's running stats are written."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(4, 4, kernel_size=(1, 1), stride=1, padding="same", bias=True)
        self.bn1 = torch.nn.BatchNorm2d(num_features=4)
        self.relu1 = torch.nn.ReLU()
        self.fc1 = torch.nn.Linear(in_features=2 * 4 * 3 * 3, out_features=1)
        self.loss_fn = torch.nn.L1Loss()

    def forward(self, x, target):
        y = x
        x = self.relu1(self.bn1(self.conv1(x))) + y
        return (self.loss_fn(self.fc1(torch.flatten(x)), target),)


def test_conv_bn_residual_model_trains_like_eager(real_dynamo):
    """Outputs, gradients of inputs and parameters, and the running stats after two training calls."""
    from test_aot_ported_scenarios import three_way

    torch.manual_seed(0)
    model = _ConvBnResidualLoss().train()

    def args(i):
        gen = torch.Generator().manual_seed(i)
        return [torch.rand(2, 4, 3, 3, generator=gen, requires_grad=True), torch.rand(1, generator=gen)]

    three_way(lambda m: m, args, module=model)


def test_duplicated_arguments_beside_a_global(real_dynamo):
    """test_arg_dupe_via_dynamo_recompiles_many_with_global: the function also reads a global tensor."""
    from test_aot_ported_scenarios import _clones, three_way

    torch.manual_seed(0)
    model = _TruncWithGlobal()
    three_way(lambda m: m, lambda i: _clones(i, i == 0) + [2, 2], module=model)


_GLOBAL_Z = torch.randn(3, 3, generator=torch.Generator().manual_seed(7))


class _TruncWithGlobal(_TruncWithParam):
    def forward(self, a, b, e, f):  # noqa: D102 - torch's test adds a global to the sum
        a.trunc_()
        b.trunc_()
        return (a + b + _GLOBAL_Z + self.mean) * e * f


class _LayerNormGrad(torch.nn.Module):
    """test_layer_norm_double_backward_dynamic_shapes's model: a gradient with create_graph=True inside forward."""

    def __init__(self, dim=8):
        super().__init__()
        self.layer_norm = torch.nn.LayerNorm(dim)

    def forward(self, x):
        x = x.clone().requires_grad_(True)
        y = self.layer_norm(x)
        (grad,) = torch.autograd.grad(y, x, grad_outputs=torch.ones_like(y), create_graph=True, allow_unused=True)
        return y, grad


def test_gradient_taken_inside_forward(real_dynamo):
    """Batch sizes 3, 5, 7: the outputs and the inner gradient as eager's.

    No gradient of them is taken: that would be a second order through the compiled graphs,
    which torch refuses (and so does ours, test_aot_ported_scenarios.py::test_double_backward_raises_like_torch).
    torch.compile(backend="aot_eager") itself raises here in torch 2.13 ("This backward function was compiled
    with non-empty donated buffers which requires create_graph=False"), so only eager is the oracle.
    """
    from test_aot_ported_scenarios import three_way

    torch.manual_seed(0)
    three_way(lambda m: m, lambda i: [torch.randn(3 + 2 * i, 8, generator=torch.Generator().manual_seed(i))],
              calls=3, module=_LayerNormGrad(), grads=False, with_torch=False)

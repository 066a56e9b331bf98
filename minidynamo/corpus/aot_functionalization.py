"""AOT cases after PyTorch's ``test/test_functionalization.py``, written afresh for this corpus.

Place in the pipeline: none; a second AOT corpus beside ``aot_cases.CASES`` (same
``AOTCase`` shape and conventions, see ``aot_cases.py``), run by
``tests/test_aot_ported.py`` through ``collect_metadata`` (vs torch's
``run_functionalized_fw_and_collect_metadata``), ``aot_function`` (vs eager, twice)
and ``md.compile(backend="aot_eager")`` (vs ``torch.compile(backend="aot_eager")``).
It is kept out of ``CASES`` so that chapter 09's table over ``CASES`` stays as it is.

Each case is named ``fz_<the torch test it follows>`` (``TORCH_TEST[name]`` says which).
The torch tests check a functionalized graph's text; these check what such a program
computes, means and differentiates, so where torch's input needs no grad we often give
it one (a mutated input that requires grad is a non-leaf, ``ng``). The cases for
``set_``/``resize_`` live in ``tests/test_aot_storage_mutations.py``; the ones that
exercise torch's C++ wrappers only (``test_freeze``, ``test_mixed_wrappers_*``,
``test_save_for_backwards_segfault``, ``TestViewMetaSerialization``) have no
counterpart in a Python functionalization.
"""

from __future__ import annotations

import torch

from .aot_testing import AOTCase, case, g, ng, r

__all__ = ["PORTED_CASES", "TORCH_TEST"]

PORTED_CASES: list[AOTCase] = []
TORCH_TEST: dict[str, str] = {}  # case name -> "file::test" it is written after


def ported(source: str, *tags: str, inputs):
    def deco(fn):
        case(*tags, inputs=inputs, registry=PORTED_CASES)(fn)
        TORCH_TEST[fn.__name__] = source
        return fn

    return deco


def fz(test: str, *tags: str, inputs):
    return ported(f"test/test_functionalization.py::{test}", *tags, inputs=inputs)


# ----------------------------------------------------------------------------- views of a mutated input


@fz("test_multiple_views_of_same_base", "data_mutation", inputs=lambda: [ng(4)])
def fz_multiple_views_of_same_base(x):
    y, z = x.view(-1), x.view(-1)  # made before the write, read after it
    x.add_(1)
    return z + 1, y * 2


@fz("test_simple", "data_mutation", "out_alias_input", inputs=lambda: [ng(4, 2)])
def fz_simple(x):
    y = x.view(4, 2)
    y.add_(torch.ones(4, 2))
    return y, x * x


@fz("test_inplace_on_non_view", "data_mutation", "out_alias_input", inputs=lambda: [ng(4, 2)])
def fz_inplace_on_non_view(x):
    y = x.view(4, 2)
    x.add_(torch.ones(4, 2))  # the base is written; the view made earlier returns the new values
    return y


@fz("test_aliases_maintained_after_pass_when_reapplying_views", "data_mutation", "out_alias_input",
    inputs=lambda: [ng(4, 2)])
def fz_aliases_maintained(x):
    y, z = x.view(4, 2), x.view(4, 2)
    y.add_(torch.ones(4, 2))
    return y, z


@fz("test_python_functionalization", "data_mutation", inputs=lambda: [ng(2)])
def fz_python_functionalization(x):
    x_view = x.view(-1)
    x.mul_(2)
    return x_view + 1


@fz("test_as_strided", "data_mutation", "out_is_input", inputs=lambda: [ng(9)])
def fz_as_strided(x):
    x.as_strided((2,), (2,), 1).add_(1)
    return x


@fz("test_diagonal_mutated_input", "data_mutation", "out_is_input", inputs=lambda: [ng(2, 2)])
def fz_diagonal_mutated_input(x):
    x.diagonal().add_(torch.ones(2))
    return x


# A write into one of several views from one op is refused by autograd: these inputs need no grad.
@fz("test_split", "data_mutation", "view_chain", "multi_output_view", inputs=lambda: [r(4, 2)])
def fz_split(x):
    _, y2 = x.split(2)
    y3 = y2.diagonal()
    y3.add_(torch.ones(2))
    return y3, x * x


@fz("test_split_with_sizes", "data_mutation", "view_chain", "multi_output_view", inputs=lambda: [r(4, 2)])
def fz_split_with_sizes(x):
    y1, _ = x.split_with_sizes([2, 2])
    y3 = y1.diagonal()
    y3.add_(torch.ones(2))
    return y3, x * x


@fz("test_optional_tensor_list", "data_mutation", "out_alias_input", inputs=lambda: [ng(4, 2)])
def fz_optional_tensor_list(x):
    y = x.view(8)
    y.index_put_((torch.arange(4),), torch.arange(4, dtype=y.dtype), accumulate=False)
    return y


@fz("test_scalars", "data_mutation", inputs=lambda: [ng(4, 2)])
def fz_scalars(x):
    y = x.view(4, 2)
    y.add_(1)
    z = 2 * y
    z.div_(1)
    return z


def _add_one_to_first_row(x):
    y = x[0]  # dies when this helper returns; the write must survive it
    y.add_(1)


@fz("test_nested_functions_propagate_updates", "data_mutation", inputs=lambda: [ng(2, 2)])
def fz_nested_functions_propagate_updates(x):
    _add_one_to_first_row(x)
    return x + x


# ----------------------------------------------------------------------------- metadata and data mutation together


@fz("test_slice", "metadata_mutation", "data_mutation", "out_is_input", inputs=lambda: [ng(4, 2)])
def fz_slice(x):
    x.transpose_(1, 0)
    x[0:2].add_(torch.ones(4))
    return x


@fz("test_view_inplace", "metadata_mutation", "data_mutation", "out_is_input", inputs=lambda: [ng(4, 2)])
def fz_view_inplace(x):
    x.transpose_(1, 0)
    x[0].add_(torch.ones(4))
    return x


@fz("test_unbind", "metadata_mutation", "data_mutation", "out_is_input", inputs=lambda: [r(4, 2)])
def fz_unbind(x):
    x.transpose_(1, 0)
    y, _ = x.unbind(0)
    y.add_(torch.ones(4))
    return x


# ----------------------------------------------------------------------------- intermediates


@fz("test_diagonal", "out_mutation", "out_alias_intermediate", inputs=lambda: [g(2, 2)])
def fz_diagonal(x):
    y = x.clone().diagonal()
    y.add_(torch.ones(2))
    return x * x, y


@fz("test_fill_", "out_mutation", inputs=lambda: [g(2, 2)])
def fz_fill_(x):
    y = x + x
    y.diagonal().fill_(0)
    return y


@fz("test_view_clone_view_inplace", "out_mutation", "out_alias_intermediate", inputs=lambda: [g(2, 4, 3, 3)])
def fz_view_clone_view_inplace(x):
    r_ = x.view(1, 8, 3, 3).clone().view(x.shape)
    r_.relu_()
    return r_


@fz("test_everything", "out_mutation", "view_chain", "metadata_mutation", inputs=lambda: [r(4, 2)])
def fz_everything(x):
    x2 = x + x
    z0 = x2.view(8).reshape(2, 4)
    z1 = z0.transpose(1, 0)
    z1.unsqueeze_(0)
    z1.squeeze_()
    z2, _ = z1.split(2)
    z2.add_(torch.ones(2, 2))
    z4 = z0[0] + z2.reshape(4)
    return z2, z4


@fz("test_advanced_indexing_correct_strides", "out_mutation", "out_alias_intermediate", inputs=lambda: [g(2, 2)])
def fz_advanced_indexing_correct_strides(a):
    b = a.clone()[:, 1]
    return b.masked_fill_(torch.ones_like(b, dtype=torch.bool), 0)


@fz("test_copy_stride_mismatch", "out_mutation", inputs=lambda: [g(2, 2)])
def fz_copy_stride_mismatch(x):
    y = torch.empty_strided((2, 2), (5, 1))
    y.copy_(x)  # the copy keeps y's strides
    return y


def _copy_into_diagonal(x):
    y = torch.zeros(2, 2).diagonal().copy_(x)
    return y.add_(x)


@fz("test_copy_", "out_mutation", inputs=lambda: [g(2)])
def fz_copy_same_shape(x):
    return _copy_into_diagonal(x)


@fz("test_copy_", "out_mutation", inputs=lambda: [g(1)])
def fz_copy_broadcast(x):
    return _copy_into_diagonal(x)


@fz("test_copy_", "out_mutation", "no_grad_output", inputs=lambda: [torch.ones(2, dtype=torch.long)])
def fz_copy_other_dtype(x):
    return _copy_into_diagonal(x)


@fz("test_index_mutation_on_non_input", "out_mutation", inputs=lambda: [g(2)])
def fz_index_mutation_on_non_input(x):
    tmp = torch.zeros(10)
    tmp[5].fill_(1)
    return tmp, tmp * x.sum()


@fz("test_advanced_indexing", "out_mutation", inputs=lambda: [g(3, 1)])
def fz_advanced_indexing(val):
    x = torch.zeros(3, 3)
    x[:, torch.tensor([0])] = val * 2
    return x


@fz("test_tensor_ctr", "out_mutation", inputs=lambda: [g(3)])
def fz_tensor_ctr(x):
    y = torch.tensor((1, 2, 3))
    y.view(-1).add_(1)
    return y, x * y


@fz("test_metadata_change", "out_mutation", "no_grad_output", inputs=lambda: [r(4, 2)])
def fz_metadata_change(x):
    return x.clone().ge_(0)  # an in-place comparison keeps the float dtype


# ----------------------------------------------------------------------------- ops and inputs of other kinds


@fz("test_channels_last_contiguous", "out_is_input", "strided_input",
    inputs=lambda: [g(2, 3, 3, 2).permute(0, 3, 1, 2)])
def fz_channels_last_contiguous(x):
    return x.contiguous(memory_format=torch.channels_last)  # already so: x itself


@fz("test_expand_symint", "out_alias_input", inputs=lambda: [g(2, 2)])
def fz_expand_symint(x):
    return x.expand(x.size(0), x.size(1))


@fz("test_tensor_list_composite", "plain", inputs=lambda: [g(2, 2)])
def fz_tensor_list_composite(x):
    return torch.block_diag(x, x)


_NONFUNCTIONAL_INDEX = torch.ones(2, dtype=torch.long)  # a tensor the function closes over


@fz("test_tensor_list_mixed_functional_nonfunctional", "plain", inputs=lambda: [g(2, 2)])
def fz_tensor_list_mixed_functional_nonfunctional(x):
    return x[torch.ones(2, dtype=torch.long), _NONFUNCTIONAL_INDEX]


@fz("test_instance_norm", "data_mutation",
    inputs=lambda: [g(2, 3, 4, 5), torch.zeros(3), torch.ones(3)])
def fz_instance_norm(x, running_mean, running_var):
    return torch.instance_norm(x, None, None, running_mean, running_var, use_input_stats=True,
                               momentum=0.1, eps=1e-5, cudnn_enabled=False)


@fz("test_batch_norm", "data_mutation", inputs=lambda: [g(4, 3, 2, 2), torch.zeros(3), torch.ones(3)])
def fz_batch_norm_without_affine(x, running_mean, running_var):
    return torch.batch_norm(x, None, None, running_mean, running_var, True, 0.1, 1e-5, False)


@fz("test_mutable_op_not_inplace_or_other", "data_mutation", inputs=lambda: [torch.ones(1)])
def fz_mutable_op_not_inplace_or_other(x):
    # Neither in-place nor out=: its schema marks the running min/max, scale and zero point as written.
    return torch.ops.aten._fused_moving_avg_obs_fq_helper(x, x, x, x, x, x, x, 1.0, 0, 1, 0)


@fz("test_python_functionalization_lift_fresh", "plain", inputs=lambda: [g(4)])
def fz_lift_fresh(x):
    return torch.tensor([0.0]) + x


@fz("test_python_functionalization_lift_functional_tensor", "plain", inputs=lambda: [g(4)])
def fz_lift_functional_tensor(x):
    return torch.ops.aten.lift.default(x + 1)


@fz("test_python_functionalization_zero_tensor", "out_mutation", inputs=lambda: [r(4)])
def fz_zero_tensor(x):
    out = x + torch.ops.aten._efficientzerotensor([4])
    out.mul_(2)
    return out


def _complex(n: int) -> torch.Tensor:
    return torch.complex(r(n), r(n))


@fz("test_python_functionalization_is_conj", "non_tensor", inputs=lambda: [_complex(4)])
def fz_is_conj(x):
    out = x.conj()
    return out, out.is_conj()


@fz("test_python_functionalization_is_neg", "non_tensor", inputs=lambda: [_complex(4)])
def fz_is_neg(x):
    out = x.neg()
    return out, out.is_neg()


@fz("test_python_functionalization_conj", "out_mutation", inputs=lambda: [_complex(4)])
def fz_conj_then_mutate(x):
    y = x.clone().conj()
    y.mul_(2)
    return torch.view_as_real(y.resolve_conj())


@fz("test_python_functionalization_neg", "plain", inputs=lambda: [g(4)])
def fz_neg_view(x):
    return x._neg_view().resolve_neg() + 1


# ----------------------------------------------------------------------------- out= into fresh tensors


# out= ops are not differentiable: plain inputs.
@fz("test_simple_out", "out_mutation", inputs=lambda: [r(4, 2)])
def fz_simple_out(x):
    z = torch.empty(())
    torch.add(x.view(4, 2), torch.ones(4, 2), out=z)  # z is resized to (4, 2)
    return z * z


@fz("test_multi_out", "out_mutation", inputs=lambda: [torch.arange(8, dtype=torch.float32)])
def fz_multi_out(x):
    out_min, out_max = torch.empty(0), torch.empty(0)
    torch.aminmax(x, dim=0, out=(out_max, out_min))
    return out_max, out_min


@fz("test_cat", "out_mutation", inputs=lambda: [r(2, 2)])
def fz_cat_out(x):
    out = torch.empty(0)
    torch.cat((x,), out=out)
    return out


@fz("test_metadata_change_out_op", "out_mutation", inputs=lambda: [torch.tensor([1]), torch.tensor([1])])
def fz_add_out_changes_dtype(t, y):
    return torch.add(t, y, out=torch.ones(1))  # int inputs, a float out= tensor

"""AOT cases: inputs that alias or repeat, non-tensors, ``detach`` and no-grad outputs, custom Functions, strided inputs.

Place in the pipeline: part of the AOT corpus (``aot_cases.py``), with the cases ported (in
our words) from PyTorch's ``test/test_functionalization.py`` and
``test/dynamo/test_aot_autograd.py`` at the end. Mirrors the input-alias and dedup cases of
``test/functorch/test_aotdispatch.py``.
"""

from __future__ import annotations

import torch

from .aot_testing import case, g, ng, r


# ----------------------------------------------------------------------------- two inputs aliasing one base


def _two_rows_of_base():
    base = ng(4, 4)
    return [base[0], base[1]]


def _overlapping_views():
    base = ng(4, 4)
    return [base, base.view(-1)]


def _two_rows_no_grad():
    base = r(4, 4)
    return [base[0], base[2]]


@case("aliased_inputs", inputs=_two_rows_of_base)
def alias_inputs_read_only(a, b):
    return a * b


@case("aliased_inputs", "data_mutation", inputs=_two_rows_of_base)
def alias_inputs_mutate_one(a, b):
    a.mul_(2)
    return a + b


@case("aliased_inputs", "data_mutation", inputs=_overlapping_views)
def alias_inputs_overlapping_mutate(a, b):
    b.add_(1)
    return a.sum()


@case("aliased_inputs", "data_mutation", inputs=_two_rows_no_grad)
def alias_inputs_no_grad_mutate_both(a, b):
    a.add_(1)
    b.add_(2)
    return a * b


@case("aliased_inputs", "out_alias_input", inputs=_overlapping_views)
def alias_inputs_return_views(a, b):
    return a.t(), b[2:]


@case("aliased_inputs", "out_is_input", inputs=_two_rows_of_base)
def alias_inputs_return_input(a, b):
    return b, a + 1


# ----------------------------------------------------------------------------- the same tensor passed twice


def _same_twice_grad():
    x = g(3)
    return [x, x]


def _same_twice_mutable():
    x = ng(3)
    return [x, x]


@case("dup_input", inputs=_same_twice_grad)
def dup_read_only(a, b):
    return a * b


@case("dup_input", "data_mutation", inputs=_same_twice_mutable)
def dup_mutate_one(a, b):
    a.mul_(2)
    return b + 1


@case("dup_input", "out_is_input", inputs=_same_twice_grad)
def dup_return_second(a, b):
    return b


@case("dup_input", "out_alias_input", inputs=_same_twice_grad)
def dup_return_views(a, b):
    return a.view(-1), b[1:]


# ----------------------------------------------------------------------------- non-tensor inputs and outputs


@case("non_tensor", inputs=lambda: [g(3), 2])
def nt_int_input(a, k):
    return a * k


@case("non_tensor", inputs=lambda: [g(3), 0.5, True])
def nt_float_bool_inputs(a, s, flag):
    return a * s if flag else a


@case("non_tensor", inputs=lambda: [g(3)])
def nt_int_output(a):
    return a * 2, 7


@case("non_tensor", inputs=lambda: [g(3, 4)])
def nt_shape_output(a):
    return a.sum(), a.shape[0], 1.5


@case("non_tensor", "out_alias_input", inputs=lambda: [3, g(3, 4)])
def nt_int_first_then_view(k, a):
    return a[k - 1], k


@case("non_tensor", inputs=lambda: [r(3), None])
def nt_none_input(a, z):
    return a + 1 if z is None else a


# ----------------------------------------------------------------------------- detach


@case("detach", inputs=lambda: [g(3)])
def detach_input(a):
    return a.detach()


@case("detach", inputs=lambda: [g(3)])
def detach_intermediate(a):
    return (a * 2).detach()


@case("detach", inputs=lambda: [g(3)])
def detach_and_grad_output(a):
    return a.detach() * 2, a * 3


@case("detach", "out_is_input", inputs=lambda: [g(3)])
def detach_input_and_input(a):
    return a, a.detach()


# ----------------------------------------------------------------------------- outputs not requiring grad


@case("no_grad_output", inputs=lambda: [g(3), r(3)])
def nograd_out_from_no_grad_input(a, b):
    return a * 2, b * 2


@case("no_grad_output", inputs=lambda: [g(3)])
def nograd_out_integer_op(a):
    return (a > 0), a.argmax()


@case("no_grad_output", "out_alias_input", inputs=lambda: [g(3, 4)])
def nograd_view_under_no_grad(a):
    with torch.no_grad():
        v = a.view(-1)
    return v


@case("no_grad_output", "out_alias_intermediate", inputs=lambda: [g(3, 4)])
def nograd_intermediate_view_under_no_grad(a):
    b = a * 2
    with torch.no_grad():
        v = b.view(-1)
    return v, b.t()


# ----------------------------------------------------------------------------- custom autograd.Function


class _ViewFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class _DoubleFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


@case("custom_function", "out_alias_input", inputs=lambda: [g(3)])
def custom_fn_view_of_input(a):
    return _ViewFn.apply(a)


@case("custom_function", inputs=lambda: [g(3)])
def custom_fn_non_view(a):
    return _DoubleFn.apply(a) + 1


# ----------------------------------------------------------------------------- inputs that are views / not contiguous


@case("data_mutation", "strided_input", inputs=lambda: [ng(4, 4)[1]])
def strided_mutate_input_that_is_a_view(a):
    a.mul_(2)
    return a + 1


@case("data_mutation", "strided_input", inputs=lambda: [r(4, 3).t()])
def strided_mutate_noncontiguous_input(a):
    a.add_(1)
    return a * 2


@case("data_mutation", "strided_input", inputs=lambda: [ng(4, 3).t()])
def strided_mutate_noncontiguous_grad_input(a):
    a.add_(1)
    return a * 2


@case("out_alias_input", "strided_input", inputs=lambda: [ng(4, 3).t()])
def strided_view_of_noncontiguous_input(a):
    return a[0]


@case("metadata_mutation", "strided_input", inputs=lambda: [r(4, 3).t()])
def strided_meta_mutate_noncontiguous(a):
    a.t_()
    return a + 1


# ------------------------------------------- ported (in our words) from PyTorch's tests
# test/test_functionalization.py and test/dynamo/test_aot_autograd.py: the kinds of program
# those files check, written afresh for this corpus.


@case("data_mutation", "view_chain", inputs=lambda: [r(4, 4)])
def port_diagonal_view_mutated(a):
    a.diagonal().add_(1)  # a write through a non-contiguous view of the input
    return a * 2


@case("data_mutation", "view_chain", inputs=lambda: [r(2, 3)])
def port_unsqueeze_view_mutated(a):
    a.unsqueeze(0).mul_(3)
    return a.sum(0)


@case("data_mutation", inputs=lambda: [r(3, 4), r(4)])
def port_copy_broadcast_into_input(a, b):
    a.copy_(b)  # b broadcast over a's rows
    return a + 1


@case("data_mutation", "view_chain", inputs=lambda: [r(4, 4)])
def port_two_views_of_input_mutated(a):
    a[0].add_(1)
    a[:, 1].mul_(2)
    return a.clone()


@case("data_mutation", inputs=lambda: [r(5), r(2)])
def port_index_put_on_input(a, v):
    a[torch.tensor([0, 3])] = v
    return a * 1


@case("data_mutation", "out_alias_input", inputs=lambda: [ng(3, 3)])
def port_mutate_then_return_view(a):
    a.mul_(2)
    return a[1:]


@case("data_mutation", inputs=lambda: [r(4), g(4)])
def port_mutate_no_grad_input_used_by_grad(a, w):
    a.add_(1)  # the mutated value is what the grad-requiring op sees
    return (a * w).sum()


@case("out_alias_intermediate", "view_chain", inputs=lambda: [g(2, 3)])
def port_views_of_intermediate_chain(a):
    y = a * 2
    return y.t().unsqueeze(0), y.view(-1)[1:]


@case("no_grad_mutation", inputs=lambda: [ng(3), g(3)])
def port_no_grad_mutation_then_use(a, w):
    with torch.no_grad():
        a.mul_(0.5)
    return a * w


@case("data_mutation", "strided_input", inputs=lambda: [r(6)[::2]])
def port_strided_input_fill(a):
    a.fill_(1.0)
    return a + 1

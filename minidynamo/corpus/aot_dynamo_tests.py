"""AOT cases after PyTorch's ``test/dynamo/test_aot_autograd.py``, written afresh for this corpus.

Place in the pipeline: none; part of the ported AOT corpus (``aot_functionalization.PORTED_CASES``,
its docstring says how it is run). Each case is named ``da_<the torch test it follows>``.
The torch tests that are about a whole ``torch.compile`` call (recompiles on
duplicated or overlapping arguments, graph breaks, grad mode leaking out of the
frame, several backward calls) are scenarios, not functions of tensors, and live in
``tests/test_aot_ported.py``; those about torch's own machinery (donated buffers'
log lines, ``seq_nr``, ``joint_custom_pass``, ``aot_export_joint_simple``,
``data_ptr`` access in custom ops) have no counterpart here.
"""

from __future__ import annotations

import torch

from .aot_functionalization import ported
from .aot_testing import g, ng, r

__all__: list[str] = []


def da(test: str, *tags: str, inputs):
    return ported(f"test/dynamo/test_aot_autograd.py::{test}", *tags, inputs=inputs)


# ----------------------------------------------------------------------------- mutations of inputs


@da("test_mutation", "no_grad_mutation", "out_is_input", inputs=lambda: [g(4), r(4)])
def da_mutation(param, y):
    prev = torch.is_grad_enabled()
    try:
        torch.set_grad_enabled(False)  # the function form, not the context manager
        param.add_(y)
    finally:
        torch.set_grad_enabled(prev)
    return y


def _stack_and_scores():
    return [ng(2, 4, 4, 9), g(2, 3, 8, 9)]


@da("test_mutation1", "data_mutation", "out_alias_input", inputs=_stack_and_scores)
def da_mutation1(stack, scores):
    stack[:, :-1, :, 4:] = scores[:, :, :4, :5]
    return stack.view(1, 2, 16, 9)


@da("test_negative_testing_mutation", "out_mutation", "out_alias_intermediate", inputs=_stack_and_scores)
def da_negative_testing_mutation(stack, scores):
    stack = torch.sin(stack)  # now an intermediate: the input is not written
    stack[:, :-1, :, 4:] = scores[:, :, :4, :5]
    return stack.view(1, 2, 16, 9)


@da("test_negative_testing", "out_mutation", inputs=lambda: [g(4), g(4)])
def da_negative_testing(x, y):
    return torch.sin(x).add_(y)


@da("test_aot_autograd_expand_mutation_functionalizes", "out_mutation", "out_alias_intermediate",
    inputs=lambda: [torch.arange(6)])
def da_expand_mutation_functionalizes(x):
    y = x.expand(3, *x.shape)
    y[0, 0].add_(5)  # one element, which every row of y shows
    return y


@da("test_aot_autograd_expand_mutation_backwards", "data_mutation",
    inputs=lambda: [torch.arange(6, dtype=torch.float), g(6)])
def da_expand_mutation_backwards(x, z):
    y = x.expand(3, *x.shape)
    y[1, 1].mul_(5)  # writes x[1]
    return y * z


# ----------------------------------------------------------------------------- inputs that overlap


def _overlapping_three():
    base = r(20)
    return [base[:5], base[7:13], base[9:]]  # the last two share elements 9-12


def _non_overlapping_three():
    base = r(20)
    return [base[:5], base[7:13], base[13:15]]


def _add_one_to_each(*args):
    for a in args:
        a.add_(1)
    return args[0]


@da("test_inputs_overlapping_with_mutation_recompile", "aliased_inputs", "data_mutation", "out_is_input",
    inputs=_overlapping_three)
def da_overlapping_with_mutation(a, b, c):
    return _add_one_to_each(a, b, c)


@da("test_inputs_overlapping_with_mutation_recompile", "aliased_inputs", "data_mutation", "out_is_input",
    inputs=_non_overlapping_three)
def da_views_not_overlapping_with_mutation(a, b, c):
    return _add_one_to_each(a, b, c)


def _a_b_overlap():
    base = r(20)
    return [base[:5], base[4:9], base[10:15], base[15:]]


def _a_b_c_overlap():
    base = r(20)
    return [base[:5], base[4:9], base[8:13], base[15:]]


def _mul_first_sum_all(a, b, c, d):
    a.mul_(2)
    return a + b + c + d


@da("test_different_inputs_overlapping_set_with_mutation", "aliased_inputs", "data_mutation", inputs=_a_b_overlap)
def da_overlap_a_b(a, b, c, d):
    return _mul_first_sum_all(a, b, c, d)


@da("test_different_inputs_overlapping_set_with_mutation", "aliased_inputs", "data_mutation", inputs=_a_b_c_overlap)
def da_overlap_a_b_c(a, b, c, d):
    return _mul_first_sum_all(a, b, c, d)


def _two_overlapping_halves():
    base = r(20)
    return [base[:10], base[5:15]]


@da("test_no_storage_overlap_guards_no_mutation", "aliased_inputs", inputs=_two_overlapping_halves)
def da_overlap_without_mutation(a, b):
    return a + b


@da("test_no_storage_overlap_guards_no_aliasing", "data_mutation", "out_is_input", inputs=lambda: [r(20)[:10], r(20)[5:15]])
def da_mutation_without_overlap(a, b):
    a.add_(1)
    b.add_(1)
    return a


def _splits_and_one_across():
    base = r(200)
    return [*base.split(10), base[4:44]]  # 20 disjoint views, one more across the first four


@da("test_inputs_overlapping_with_mutation_stress", "aliased_inputs", "data_mutation", "out_is_input",
    inputs=_splits_and_one_across)
def da_overlapping_with_mutation_stress(*args):
    return _add_one_to_each(*args)


# ----------------------------------------------------------------------------- custom autograd.Functions


class _GradIsSavedInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x)
        return y.view_as(y) * 1

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return x, grad  # x's gradient is x itself


@da("test_grad_inputs_alias_inputs", "custom_function", inputs=lambda: [g(1), g(1)])
def da_grad_inputs_alias_inputs(x, y):
    return _GradIsSavedInput.apply(x, y)


class _TangentCopiedInto(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone(), x.clone()

    @staticmethod
    def backward(ctx, grad1, grad2):
        return grad1.copy_(grad2)  # writes one incoming gradient


@da("test_autograd_function_tangent_mutation", "custom_function", inputs=lambda: [g(4)])
def da_autograd_function_tangent_mutation(x):
    return _TangentCopiedInto.apply(x)


# ----------------------------------------------------------------------------- parameters made inside


@da("test_nn_parameter_construction", "plain", inputs=lambda: [r(4, 4)])
def da_nn_parameter_construction(x):
    return x.sin() + torch.nn.Parameter(torch.ones(1))


@da("test_donated_buffer6", "plain", inputs=lambda: [r(16)])
def da_parameter_of_an_input(x):
    p = torch.nn.Parameter(x + 123)
    return p, p.sin()


@da("test_alias_inputs", "out_alias_intermediate", inputs=lambda: [])
def da_alias_inputs():
    a = torch.tensor([1])[0:1]
    b = a.squeeze()
    a[0] = 0
    a[0] = 2
    return b


# ----------------------------------------------------------------------------- the programs of the donated-buffer tests
# (torch checks which saved values its backward may free; here, what they compute and differentiate)


@da("test_donated_buffer1", "plain", inputs=lambda: [g(3, 3)])
def da_relu_saved_mask(x):
    return torch.nn.functional.relu(x)


@da("test_donated_buffer2", "plain", inputs=lambda: [r(4, 4), g(4, 4), g(4, 4)])
def da_add_then_matmul(inp, param1, param2):
    return torch.matmul(inp + param1, param2)


@da("test_donated_buffer3", "plain", inputs=lambda: [r(4, 4), g(4, 4), g(4, 4)])
def da_exp_then_matmul(inp, param1, param2):
    return torch.matmul(torch.exp(inp + param1), param2)  # exp saves its output


@da("test_donated_buffer5", "plain", inputs=lambda: [g(3, 2), g(2, 2)])
def da_view_mm_relu(x, z):
    return torch.mm(x.view(2, 3), x) + torch.nn.functional.relu(z)

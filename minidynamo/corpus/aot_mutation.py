"""AOT cases: plain functions, and mutations of inputs (data, metadata, under no_grad).

Place in the pipeline: part of the AOT corpus (``aot_cases.py``), run by every AOT stage's
tests and chapter 09's metadata comparison. Mirrors the mutation cases of PyTorch's
``test/functorch/test_aotdispatch.py`` and ``test/test_functionalization.py``.
"""

from __future__ import annotations

import torch

from .aot_testing import case, g, ng, r


# ----------------------------------------------------------------------------- plain


@case("plain", inputs=lambda: [g(3, 4), g(3, 4)])
def plain_add(a, b):
    return a + b


@case("plain", inputs=lambda: [g(3, 4)])
def plain_two_outputs(a):
    return a.sin(), a.cos()


@case("plain", "no_grad_output", inputs=lambda: [r(3, 4), r(3, 4)])
def plain_no_grad_inputs(a, b):
    return a * b


@case("plain", inputs=lambda: [g(3, 4), r(4, 2)])
def plain_mixed_grad(a, b):
    return a @ b


@case("plain", inputs=lambda: [g(5)])
def plain_reduction(a):
    return a.sum()


@case("plain", "no_grad_output", inputs=lambda: [g(3)])
def plain_output_under_no_grad(a):
    with torch.no_grad():
        b = a * 2
    return b, a * 3


# ----------------------------------------------------------------------------- input data mutation


@case("data_mutation", inputs=lambda: [r(3, 4)])
def mut_data_no_grad_input(a):
    a.mul_(2)
    return a + 1


@case("data_mutation", inputs=lambda: [ng(3, 4)])
def mut_data_grad_input(a):
    a.mul_(2)
    return a + 1


@case("data_mutation", inputs=lambda: [ng(3, 4), g(3, 4)])
def mut_data_one_of_two(a, b):
    a.add_(b)
    return a * b


@case("data_mutation", inputs=lambda: [ng(3, 4), ng(3, 4)])
def mut_data_both(a, b):
    a.add_(1)
    b.mul_(a)
    return a - b


@case("data_mutation", inputs=lambda: [r(3, 4)])
def mut_data_no_output(a):
    a.add_(1)
    return ()


@case("data_mutation", inputs=lambda: [ng(4, 4)])
def mut_data_through_slice(a):
    a[0].add_(1)
    return a.sum()


@case("data_mutation", "view_chain", inputs=lambda: [ng(4, 4)])
def mut_data_through_view_chain(a):
    a.t()[1:3].unsqueeze(0).mul_(3)
    return a * 2


@case("data_mutation", inputs=lambda: [ng(4), g(4)])
def mut_data_copy_(a, b):
    a.copy_(b)
    return a.sum()


@case("data_mutation", inputs=lambda: [ng(4)])
def mut_data_zero_(a):
    a.zero_()
    return a + 1


@case("data_mutation", inputs=lambda: [r(4), r(4)])
def mut_data_twice(a, b):
    a.add_(b)
    a.mul_(b)
    return a


@case("data_mutation", inputs=lambda: [ng(4, 4)])
def mut_data_setitem(a):
    a[1] = 0.0
    return a * 2


@case("data_mutation", inputs=lambda: [ng(4), r(4)])
def mut_data_input_used_after(a, b):
    c = a * b
    a.add_(1)
    return c, a * b


@case("data_mutation", "non_tensor", inputs=lambda: [ng(4), 3])
def mut_data_by_int(a, k):
    a.mul_(k)
    return a + k


@case("data_mutation", inputs=lambda: [ng(2, 3)])
def mut_data_out_of_place_fill(a):
    a.fill_(2.0)
    return a.sum(), a.clone()


# ----------------------------------------------------------------------------- metadata mutation


@case("metadata_mutation", inputs=lambda: [r(3, 4)])
def meta_t_(a):
    a.t_()
    return a + 1


@case("metadata_mutation", inputs=lambda: [ng(3, 4)])
def meta_t_grad(a):
    a.t_()
    return a * 2


@case("metadata_mutation", inputs=lambda: [r(2, 3, 4)])
def meta_transpose_(a):
    a.transpose_(0, 2)
    return a.sum(0)


@case("metadata_mutation", inputs=lambda: [r(3, 4)])
def meta_unsqueeze_(a):
    a.unsqueeze_(0)
    return a * 2


@case("metadata_mutation", inputs=lambda: [r(1, 4)])
def meta_squeeze_(a):
    a.squeeze_(0)
    return a * 2


@case("metadata_mutation", inputs=lambda: [r(4, 4)])
def meta_as_strided_(a):
    a.as_strided_((2, 2), (1, 2))
    return a + 1


@case("metadata_mutation", "data_mutation", inputs=lambda: [ng(3, 4)])
def meta_and_data(a):
    a.mul_(2)
    a.t_()
    return a + 1


@case("metadata_mutation", "out_is_input", inputs=lambda: [r(3, 4)])
def meta_t_return_input(a):
    a.t_()
    return a


@case("metadata_mutation", "out_alias_input", inputs=lambda: [r(3, 4)])
def meta_t_return_view(a):
    a.t_()
    return a.unsqueeze(0)


@case("metadata_mutation", inputs=lambda: [r(3, 4)])
def meta_t_twice(a):
    a.t_()
    a.t_()
    return a * 2


# ----------------------------------------------------------------------------- mutation under no_grad


@case("no_grad_mutation", inputs=lambda: [g(3, 4)])
def nograd_mut_leaf(a):
    with torch.no_grad():
        a.mul_(2)
    return a + 1


@case("no_grad_mutation", inputs=lambda: [ng(3, 4)])
def nograd_mut_nonleaf(a):
    with torch.no_grad():
        a.add_(1)
    return a * a


@case("no_grad_mutation", inputs=lambda: [g(4), g(4)])
def nograd_mut_one_grad_other(a, b):
    with torch.no_grad():
        a.add_(b)
    return a * b


@case("no_grad_mutation", "data_mutation", inputs=lambda: [ng(4)])
def nograd_then_grad_mutation(a):
    with torch.no_grad():
        a.add_(1)
    a.mul_(2)
    return a.sum()


@case("no_grad_mutation", inputs=lambda: [r(4)])
def nograd_mut_no_grad_input(a):
    with torch.no_grad():
        a.mul_(3)
    return a + 1


@case("no_grad_mutation", "detach", inputs=lambda: [g(4)])
def mut_through_detach(a):
    a.detach().mul_(2)
    return a + 1


@case("no_grad_mutation", inputs=lambda: [g(4, 4)])
def nograd_mut_slice_of_leaf(a):
    with torch.no_grad():
        a[0].fill_(1.0)
    return a * 2

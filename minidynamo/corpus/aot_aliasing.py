"""AOT cases: outputs that alias inputs or intermediates, are inputs, or are mutated.

Place in the pipeline: part of the AOT corpus (``aot_cases.py``). Mirrors the output-alias
cases of PyTorch's ``test/functorch/test_aotdispatch.py`` (``OutputType.alias_of_input``,
``alias_of_intermediate``, ...).
"""

from __future__ import annotations

import torch

from .aot_testing import case, g, ng, r


# ----------------------------------------------------------------------------- outputs aliasing inputs


@case("out_alias_input", inputs=lambda: [g(3, 4)])
def out_view_of_input(a):
    return a.view(12)


@case("out_alias_input", inputs=lambda: [g(3, 4)])
def out_transpose_of_input(a):
    return a.t()


@case("out_alias_input", inputs=lambda: [r(3, 4)])
def out_view_of_no_grad_input(a):
    return a[1]


@case("out_alias_input", inputs=lambda: [g(3, 4), g(3, 4)])
def out_views_of_two_inputs(a, b):
    return a.t(), b.view(-1), a + b


@case("out_alias_input", "view_chain", inputs=lambda: [g(4, 6)])
def out_view_of_view_of_input(a):
    return a.t()[2:].unsqueeze(0)


@case("out_alias_input", inputs=lambda: [g(3, 4)])
def out_two_views_of_one_input(a):
    return a.view(-1), a.t()


@case("out_alias_input", inputs=lambda: [g(2, 3)])
def out_expand_of_input(a):
    return a.unsqueeze(0).expand(4, 2, 3)


@case("out_alias_input", inputs=lambda: [g(4, 4)])
def out_diagonal_of_input(a):
    return a.diagonal()


@case("out_alias_input", inputs=lambda: [g(4, 4)])
def out_as_strided_of_input(a):
    return a.as_strided((2, 2), (4, 1), 1)


@case("out_alias_input", "data_mutation", inputs=lambda: [ng(3, 4)])
def out_view_of_mutated_input(a):
    a.add_(1)
    return a.view(-1)


@case("out_alias_input", "multi_output_view", inputs=lambda: [g(4, 3)])
def out_unbind_of_input(a):
    return a.unbind(0)


@case("out_alias_input", "multi_output_view", inputs=lambda: [g(6, 2)])
def out_split_of_input(a):
    return a.split(2)


@case("out_alias_input", "multi_output_view", inputs=lambda: [g(6, 2)])
def out_one_chunk_of_input(a):
    return a.chunk(3)[1]


@case("out_alias_input", inputs=lambda: [g(3, 4)])
def out_reshape_view_of_input(a):
    return a.reshape(4, 3)


# ----------------------------------------------------------------------------- outputs that ARE inputs


@case("out_is_input", inputs=lambda: [g(3)])
def out_is_input_grad(a):
    return a


@case("out_is_input", inputs=lambda: [r(3)])
def out_is_input_no_grad(a):
    return a


@case("out_is_input", inputs=lambda: [g(3), g(3)])
def out_is_input_and_compute(a, b):
    return a * b, b


@case("out_is_input", "data_mutation", inputs=lambda: [ng(3)])
def out_is_mutated_input(a):
    a.mul_(2)
    return a


@case("out_is_input", inputs=lambda: [g(3)])
def out_is_input_twice(a):
    return a, a


@case("out_is_input", "no_grad_mutation", inputs=lambda: [g(3)])
def out_is_input_mutated_under_no_grad(a):
    with torch.no_grad():
        a.add_(1)
    return a


# ----------------------------------------------------------------------------- outputs aliasing intermediates


@case("out_alias_intermediate", inputs=lambda: [g(3, 4)])
def inter_single_view(a):
    b = a * 2
    return b.view(-1)


@case("out_alias_intermediate", inputs=lambda: [g(3, 4)])
def inter_single_transpose(a):
    return (a + 1).t()


@case("out_alias_intermediate", "no_grad_output", inputs=lambda: [r(3, 4)])
def inter_view_no_grad(a):
    return (a * 2).view(-1)


@case("out_alias_intermediate", "view_chain", inputs=lambda: [g(4, 4)])
def inter_view_chain(a):
    return (a * 2).t()[1:].unsqueeze(0)


@case("out_alias_intermediate", "data_mutation", inputs=lambda: [g(3, 4)])
def inter_view_then_mutated(a):
    b = a * 2
    c = b.view(-1)
    c.add_(1)
    return c


# ----------------------------------------------------------------------------- several outputs aliasing one intermediate


@case("multi_out_alias_intermediate", inputs=lambda: [g(3, 4)])
def inter_two_views(a):
    b = a * 2
    return b.view(-1), b.t()


@case("multi_out_alias_intermediate", inputs=lambda: [g(3, 4)])
def inter_three_views(a):
    b = a.sin()
    return b[0], b[1], b[2]


@case("multi_out_alias_intermediate", inputs=lambda: [g(3, 4)])
def inter_two_views_two_bases(a):
    b = a * 2
    c = a * 3
    return b.view(-1), c.t(), b.t(), c.view(-1)


@case("multi_out_alias_intermediate", "multi_output_view", inputs=lambda: [g(4, 3)])
def inter_unbind(a):
    return (a * 2).unbind(0)


@case("multi_out_alias_intermediate", "multi_output_view", "intermediate_returned", inputs=lambda: [g(4, 3)])
def inter_unbind_and_base(a):
    b = a * 2
    return (b, *b.unbind(0))


@case("multi_out_alias_intermediate", "multi_output_view", inputs=lambda: [g(6, 2)])
def inter_split_plus_view(a):
    b = a * 2
    x, y = b.split(3)
    return x, y, b.view(-1)


@case("multi_out_alias_intermediate", "view_chain", inputs=lambda: [g(4, 4)])
def inter_view_of_view_and_view(a):
    b = a + 1
    c = b.t()
    return c[0], c.view(-1) if c.is_contiguous() else c.reshape(-1)


@case("multi_out_alias_intermediate", "no_grad_output", inputs=lambda: [r(3, 4)])
def inter_two_views_no_grad(a):
    b = a * 2
    return b.view(-1), b.t()


@case("multi_out_alias_intermediate", "detach", inputs=lambda: [g(3, 4)])
def inter_view_and_detached_view(a):
    b = a * 2
    return b.view(-1), b.view(-1).detach()


# ----------------------------------------------------------------------------- the intermediate itself returned


@case("intermediate_returned", inputs=lambda: [g(3, 4)])
def inter_base_and_view(a):
    b = a * 2
    return b, b.view(-1)


@case("intermediate_returned", inputs=lambda: [g(3, 4)])
def inter_view_and_base(a):
    b = a * 2
    return b.view(-1), b


@case("intermediate_returned", inputs=lambda: [g(3, 4)])
def inter_base_and_two_views(a):
    b = a.exp()
    return b.t(), b, b[0]


@case("intermediate_returned", "detach", inputs=lambda: [g(3, 4)])
def inter_out_and_its_detach(a):
    b = a * 2
    return b, b.detach()


@case("intermediate_returned", "view_chain", inputs=lambda: [g(3, 4)])
def inter_base_and_view_of_view(a):
    b = a * 2
    return b, b.t()[0]


# ----------------------------------------------------------------------------- mutation of outputs


@case("out_mutation", inputs=lambda: [g(3, 4)])
def outmut_intermediate(a):
    b = a * 2
    b.add_(1)
    return b


@case("out_mutation", "out_alias_input", "data_mutation", inputs=lambda: [ng(3, 4)])
def outmut_view_of_input(a):
    b = a.view(-1)
    b.mul_(2)
    return b


@case("out_mutation", "intermediate_returned", inputs=lambda: [g(3, 4)])
def outmut_base_after_view(a):
    b = a * 2
    v = b.view(-1)
    b.add_(1)
    return b, v


@case("out_mutation", "metadata_mutation", inputs=lambda: [g(3, 4)])
def outmut_metadata_of_intermediate(a):
    b = a * 2
    b.t_()
    return b


@case("out_mutation", inputs=lambda: [g(3, 4), r(3, 4)])
def outmut_intermediate_copy_(a, c):
    b = a.clone()
    b.copy_(c)
    return b

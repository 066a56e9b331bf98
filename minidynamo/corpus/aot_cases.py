"""The shared AOTAutograd test corpus: small functions full of mutation and aliasing.

Place in the pipeline: none; tests of every AOT stage run these cases (metadata in
``tests/test_aot_metadata.py``, joint graph / runtime wrappers in chapter 10-11 tests) and
chapter 09 shows the metadata comparison over all of them.

Shape::

    CASES: list[AOTCase]            # >= 80 cases
    case.name                       # unique, the function's name
    case.fn(*args)                  # returns one value or a tuple (flat: tensors and plain Python values)
    case.make_inputs()              # a FRESH list of args each call, same values every call (seeded)
    case.tags                       # categories below, e.g. ("data_mutation", "out_alias_input")
    CASES_BY_NAME[name]

Conventions every case follows, so any stage can run it eagerly and compare:

* The function is valid in eager PyTorch on the inputs ``make_inputs`` builds (inputs
  that are mutated and require grad are built as non-leaves, ``randn(...).requires_grad_().clone()``).
* Gradients: compare ``torch.autograd.grad`` of the outputs that require grad with
  respect to the tensor inputs that require grad (inputs may be non-leaves, so ``.grad``
  is not populated on them). ``case.grad_inputs(args)`` lists those inputs.
* Aliasing inputs are built from one base inside ``make_inputs`` (tag ``aliased_inputs``);
  the same tensor passed twice has tag ``dup_input``.
* Non-tensor inputs and outputs are ints, floats and bools (tag ``non_tensor``).

Tags: data_mutation, metadata_mutation, no_grad_mutation, out_alias_input, out_is_input,
out_alias_intermediate, multi_out_alias_intermediate, intermediate_returned, out_mutation,
aliased_inputs, dup_input, non_tensor, detach, no_grad_output, view_chain, multi_output_view,
custom_function, strided_input, plain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

__all__ = ["AOTCase", "CASES", "CASES_BY_NAME"]

_gen = torch.Generator()


@dataclass
class AOTCase:
    name: str
    fn: Callable[..., Any]
    factory: Callable[[], list] = field(repr=False)
    tags: tuple[str, ...] = ()
    seed: int = 0

    def make_inputs(self) -> list:
        _gen.manual_seed(self.seed)
        return list(self.factory())

    @staticmethod
    def grad_inputs(args) -> list[torch.Tensor]:
        """The tensor inputs that require grad, each once (for torch.autograd.grad)."""
        out: list[torch.Tensor] = []
        for a in args:
            if isinstance(a, torch.Tensor) and a.requires_grad and not any(a is b for b in out):
                out.append(a)
        return out


CASES: list[AOTCase] = []


def case(*tags: str, inputs: Callable[[], list]):
    def deco(fn):
        CASES.append(AOTCase(fn.__name__, fn, inputs, tags, seed=len(CASES)))
        return fn

    return deco


# Input builders (all draw from the seeded generator).
def r(*shape: int) -> torch.Tensor:
    """A plain tensor, no grad."""
    return torch.randn(*shape, generator=_gen)


def g(*shape: int) -> torch.Tensor:
    """A leaf that requires grad (must not be mutated outside no_grad)."""
    return torch.randn(*shape, generator=_gen).requires_grad_()


def ng(*shape: int) -> torch.Tensor:
    """A non-leaf that requires grad (may be mutated)."""
    return torch.randn(*shape, generator=_gen).requires_grad_().clone()


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


CASES_BY_NAME: dict[str, AOTCase] = {c.name: c for c in CASES}
assert len(CASES_BY_NAME) == len(CASES), "duplicate case names"

"""Functions called with a sequence of sizes, ported from PyTorch's own Dynamo tests (chapter 15).

Place in the pipeline: none; inputs for ``dynamic_compare`` (ours against
``torch.compile`` on the same calls) and ``tests/test_dynamic_shapes.py``. Each case
restates, in its own code, a situation a test in PyTorch's test/dynamo checks:
test_recompiles.py (automatic dynamic, scalar/tensor swaps, parameters stay static,
closed-over ints, the cache limit), test_unspec.py (int arguments that change,
``max``/``min`` of sizes, ``isinstance`` of a size), test_misc.py and
test_dynamic_shapes.py (shape arithmetic, in-place int ops on sizes, factories from
sizes, ``view``/``reshape`` with computed sizes, control flow on sizes, 0/1 sizes,
``mark_dynamic``/``mark_static``, ``dynamic=True/False``). ``origin`` names the
test of test_recompiles.py a case restates (those were read from PyTorch's source);
the cases whose ``origin`` starts with "ours:" were written here on the themes of the
other three files, from what they test, and do not name a real PyTorch test.
The expected counts are not written here: torch is run on the same calls.
"""

from __future__ import annotations

import math

import torch

from .dynamic_compare import Case

__all__ = ["PORTED"]

torch.manual_seed(0)
_W = torch.nn.Parameter(torch.randn(3, 2))
_LIN = torch.nn.Linear(4, 4)


def _v(n):
    return (torch.randn(n),)


def _m(n):
    return (torch.randn(n, 4),)


def _pair(n):
    return (torch.randn(n), torch.randn(n))


# --- test_recompiles.py ------------------------------------------------------------------


def mul_two(x, y):
    return x * y


def bool_flop(flag, y):
    if flag:
        return y * 2
    return y * y


def matmul_param(x):
    return x @ _W


def add_int(x, n):
    return x + n


def closure_of(i):
    def g(y):
        return y + i

    return g


def call_closure(x, g):
    return g(x)


def _tensor_or_int(spec):
    n, scalar = spec
    return (torch.randn(n), n if scalar else torch.randn(n))


# --- test_unspec.py ---------------------------------------------------------------------


def int_scale_shift(x, a, b):
    return x * a + b


def loop_n_times(x, n):
    for _ in range(n):
        x = x + 1
    return x


def branch_on_int(x, n):
    if n > 3:
        return x + 1
    return x - 1


def int_in_tuple(x, n):
    if n in (1, 3, 5):  # each == is a decision on the SymInt n
        return x + 1
    return x - 1


def arange_int(x, n):
    return torch.arange(n) + x.sum()


def view_by_int(x, n):
    return x.view(n, -1).sum(0)


def max_min_size(x):
    return x * max(x.size(0), 4) + min(x.size(0), 2)


def isinstance_size(x):
    if isinstance(x.size(0), int):
        return x + 1
    return x - 1


def float_scale(x, a):
    return x * a


def int_of_size_ratio(x):
    return x * int(x.size(0) / 2) + float(x.size(0))


# --- test_misc.py / test_dynamic_shapes.py -----------------------------------------------


def size_binops(x):
    y = x.shape[0] + 1
    z = 2 * x.shape[0] - 3
    return x + y + z


def size_inplace_binops(x):
    p = x.shape[0]
    p += 2
    p -= 1
    p *= 3
    p //= 2
    return x + p


def view_floordiv(x):
    return x.view(x.size(0) // 2, 2, -1).sum(1)


def new_zeros_from_size(x):
    return x.new_zeros(x.size(0)) + x.sum(1)


def new_ones_like_shape(x):
    return x.new_ones(x.shape) * x


def arange_size(x):
    return torch.arange(x.size(0)) * x.sum(1)


def ones_from_shape(x):
    return torch.ones(x.shape) + x


def reshape_flat(x):
    return x.reshape(x.size(0) * x.size(1)) * 2


def reshape_minus_one(x):
    return x.reshape(-1, 2)


def square_or_not(x):
    if x.size(0) == x.size(1):
        return x @ x
    return x.sum()


def numel_branch(x):
    if x.numel() > 10:
        return x.sum(0)
    return x * 2


def len_scale(x):
    return x * len(x)


def sum_of_shape(x):
    return x + sum(x.shape)


def last_dim_neg(x):
    return x / x.size(-1)


def chunk_even(x):
    a, b = x.chunk(2)
    return a - b


def repeat_rows(x):
    return x.repeat(2, 1).sum(0)


def expand_square(x):
    return x.expand(x.size(0), x.size(0)) + 1


def attention_scores(q, k):
    return (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(-1)


def scaled_by_sqrt(x):
    return x / math.sqrt(x.size(0))


class _ViewAs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = _LIN

    def forward(self, x, n):
        return self.lin(x).view(n, -1)


_VIEW_AS = _ViewAs()


def size_into_module(x):
    return _VIEW_AS(x, x.size(0))


def module_times_batch(x):
    return _LIN(x) * x.size(0)


def stack_sizes(x):
    return x + torch.tensor([x.size(0), x.size(1)]).sum()


def two_dim_mark(spec):
    return (torch.randn(*spec),)


def _md01(args, dyn, st):
    dyn(args[0], [0, 1])


def _ms0(args, dyn, st):
    st(args[0], 0)


PORTED: dict[str, Case] = {
    # test_recompiles.py: test_automatic_dynamic_reduce_recompiles (default, False, True)
    "reduce_recompiles": Case(mul_two, _pair, [2, 3, 4, 4, 5, 5, 6], origin="test_automatic_dynamic_reduce_recompiles"),
    "reduce_recompiles_static": Case(mul_two, _pair, [2, 3, 4, 4, 5, 5, 6], dynamic=False,
                                     origin="test_automatic_dynamic_reduce_recompiles"),
    "reduce_recompiles_dynamic": Case(mul_two, _pair, [2, 3, 4, 4, 5, 5, 6], dynamic=True,
                                      origin="test_automatic_dynamic_reduce_recompiles"),
    "true_false_flop": Case(bool_flop, lambda s: (s[0], torch.randn(s[1])),
                            [(True, 2), (False, 2), (True, 3), (True, 4), (True, 5)],
                            origin="test_recompiles_true_false_flop"),
    "tensor_scalar_change": Case(mul_two, _tensor_or_int, [(2, False), (3, True), (4, False), (4, False), (5, True),
                                                            (5, True), (6, False)],
                                 origin="test_automatic_dynamic_tensor_scalar_change"),
    "parameter_stays_static": Case(matmul_param, lambda n: (torch.nn.Parameter(torch.randn(n, 3)),), [1, 10, 11, 15, 15],
                                   origin="test_dynamic_shape_parameter_recompile"),
    "int_cache_limit_static": Case(add_int, lambda i: (torch.ones(3), i), list(range(10)), dynamic=False,
                                   origin="test_no_recursive_compile_after_cache_limit_hit"),
    "closed_over_int": Case(call_closure, lambda i: (torch.randn(5), closure_of(i)), list(range(6)),
                            origin="test_automatic_dynamic_on_closed_ints"),
    "sizes_3_2_1_0": Case(lambda x: x * x, _v, [3, 2, 1, 0], origin="test_automatic_dynamic_shapes_mark_as_unbacked"),
    "branch_lt_10": Case(lambda x: x * 1 if x.size(0) < 10 else x + 10, _v, [3, 2, 12, 13, 4],
                         origin="test_automatic_dynamic_shapes_mark_as_oblivious"),
    # test_unspec.py
    "int_arg_changes": Case(add_int, lambda n: (torch.randn(3), n), [2, 3, 4, 5], origin="ours: no_recompiles"),
    "int_arg_zero_one": Case(add_int, lambda n: (torch.randn(3), n), [0, 1, 2, 3, 4], origin="ours: unspec_int"),
    "int_arg_dynamic_true": Case(add_int, lambda n: (torch.randn(3), n), [2, 3, 4], dynamic=True,
                                 origin="ours: unspec_int (dynamic=True)"),
    "two_int_args": Case(int_scale_shift, lambda s: (torch.randn(3), s[0], s[1]), [(2, 1), (2, 5), (3, 5), (4, 6)],
                         origin="ours: multiple_consecutive_int_args"),
    "int_and_size_equal": Case(add_int, lambda n: (torch.randn(n), n), [2, 3, 4], origin="ours: unspec_int_and_size"),
    "loop_range_int": Case(loop_n_times, lambda n: (torch.randn(3), n), [2, 3, 4, 5], origin="ours: unspec_int_range"),
    "branch_on_int": Case(branch_on_int, lambda n: (torch.randn(3), n), [2, 3, 4, 5, 6], origin="ours: unspec_int_guard"),
    "arange_of_int": Case(arange_int, lambda n: (torch.randn(3), n), [2, 3, 4, 5], origin="ours: arange_unspec_int"),
    "view_by_int": Case(view_by_int, lambda n: (torch.randn(12), n), [2, 3, 4, 6], origin="ours: view_unspec_int"),
    "max_min_of_size": Case(max_min_size, _v, [2, 3, 5, 6], origin="ours: builtin_max_min"),
    "isinstance_of_size": Case(isinstance_size, _v, [2, 3, 4], origin="ours: isinstance_symint"),
    "float_arg_changes": Case(float_scale, lambda a: (torch.randn(3), a), [2.0, 3.0, 4.5], origin="ours: unspec_float"),
    "int_float_of_size": Case(int_of_size_ratio, _v, [2, 3, 4, 7], origin="ours: sym_int_sym_float"),
    # test_misc.py / test_dynamic_shapes.py
    "size_binops": Case(size_binops, _m, [2, 3, 4], origin="ours: int_shape_binops"),
    "size_inplace_binops": Case(size_inplace_binops, _m, [2, 3, 4], origin="ours: int_shape_inplace_binops"),
    "size_inplace_binops_dynamic": Case(size_inplace_binops, _m, [2, 3, 4], dynamic=True,
                                        origin="ours: int_shape_inplace_binops_dynamic_shapes"),
    "view_floordiv": Case(view_floordiv, _m, [2, 4, 6, 8], origin="ours: view_floordiv_size"),
    "new_zeros_from_size": Case(new_zeros_from_size, _m, [2, 3, 4], origin="ours: new_zeros_size"),
    "new_ones_like_shape": Case(new_ones_like_shape, _m, [2, 3, 4], dynamic=True, origin="ours: new_ones_shape"),
    "arange_of_size": Case(arange_size, _m, [2, 3, 4, 5], origin="ours: arange_length"),
    "ones_from_shape": Case(ones_from_shape, _m, [2, 3, 4], origin="ours: torch_size_factory"),
    "reshape_flat": Case(reshape_flat, two_dim_mark, [(2, 3), (2, 4), (3, 4), (5, 4)],
                         origin="ours: reshape_computed_size"),
    "reshape_minus_one": Case(reshape_minus_one, lambda n: (torch.randn(2 * n),), [2, 3, 4], dynamic=True,
                              origin="ours: reshape_minus_one"),
    "square_or_not": Case(square_or_not, two_dim_mark, [(3, 3), (4, 4), (4, 5), (5, 5), (6, 7)],
                          origin="ours: size_eq_branch"),
    "numel_branch": Case(numel_branch, _m, [2, 3, 4, 5], origin="ours: numel_guard"),
    "len_scale": Case(len_scale, _m, [2, 3, 4], origin="ours: len_of_tensor"),
    "sum_of_shape": Case(sum_of_shape, two_dim_mark, [(2, 3), (3, 4), (4, 5)], origin="ours: sum_of_sizes"),
    "last_dim_negative_index": Case(last_dim_neg, lambda n: (torch.randn(3, n),), [2, 3, 4], origin="ours: size_dim"),
    "chunk_even": Case(chunk_even, _m, [4, 6, 8], origin="ours: chunk_symbolic"),
    "repeat_rows": Case(repeat_rows, _m, [2, 3, 4], origin="ours: repeat_dynamic"),
    "expand_square": Case(expand_square, lambda n: (torch.randn(n, 1),), [2, 3, 4], origin="ours: expand_symint"),
    "attention_seq_len": Case(attention_scores, lambda s: (torch.randn(2, s, 8), torch.randn(2, s, 8)), [4, 5, 6, 7],
                              origin="ours: sdpa_like_dynamic_seq"),
    "sqrt_of_size": Case(scaled_by_sqrt, _v, [2, 3, 4, 9], origin="ours: math_sqrt_symint"),
    "size_into_module": Case(size_into_module, _m, [2, 3, 4], origin="ours: size_passed_to_module"),
    "module_times_batch": Case(module_times_batch, _m, [2, 3, 4, 5], origin="ours: nn_module_dynamic_batch"),
    "tensor_of_sizes": Case(stack_sizes, two_dim_mark, [(2, 3), (3, 4), (4, 5)], origin="ours: tensor_from_sizes"),
    "two_dims_change_apart": Case(lambda x: x.sum(1) + x.size(1), two_dim_mark, [(2, 3), (2, 4), (3, 4), (5, 6)],
                                  origin="ours: automatic_dynamic_two_dims"),
    "zero_then_sizes": Case(lambda x: x + 1, _v, [0, 2, 3, 4], origin="ours: zero_size_specialized"),
    "sizes_then_one": Case(lambda x: x + 1, _v, [2, 3, 1, 4, 0], origin="ours: one_size_after_dynamic"),
    "mark_dynamic_two_dims": Case(lambda x: x.sum(0) * x.size(1), two_dim_mark, [(2, 3), (4, 5), (6, 7)], mark=_md01,
                                  origin="ours: mark_dynamic_multiple_dims"),
    "mark_static_dynamic_true": Case(lambda x: x * 2, _m, [2, 3, 4], dynamic=True, mark=_ms0,
                                     origin="ours: mark_static_with_dynamic_true"),
    # found by tests/test_dynamo_hypothesis.py: `in` compared a SymInt by identity (silently False)
    "int_in_tuple": Case(int_in_tuple, lambda n: (torch.randn(3), n), [0, 1, 2, 3, 4, 5, 6], origin="ours: int_in_tuple"),
}


if __name__ == "__main__":  # pragma: no cover - the measurement, printed
    from .dynamic_compare import main

    main(PORTED)

"""Chapter 3 cases, values: arithmetic, comparisons, names and cells, attributes, containers, subscripts, unpacking.

Place in the pipeline: part of the differential corpus (``dynamo_cases.py``), each case run
eagerly, through ``md.compile`` and through torch's Dynamo. Mirrors the same kinds of
functions in PyTorch's ``test/dynamo/test_functions.py``.
"""

from __future__ import annotations

import torch

from .dynamo_testing import T, tracing
from .dynamo_helpers import Config, GW, NAMES, OFFSET, Pair, Point, SCALE


# ===========================================================================
# Chapter 3: tracing
# ===========================================================================

# --- arithmetic -------------------------------------------------------------


@tracing(lambda: (T(3, 4), T(3, 4, seed=1)), aot=True)
def add_tensors(x, y):
    return x + y


@tracing(lambda: (T(3, 4), T(3, 4, seed=1)), aot=True)
def sub_mul_div(x, y):
    return (x - y) * y / 2


@tracing(lambda: (T(3, 4),))
def scalar_on_left(x):
    return 2 - x + 3 * x


@tracing(lambda: (T(3, 4),))
def pow_neg(x):
    return -(x**2) + x.abs() ** 0.5


@tracing(lambda: (T(3, 4), T(4, 5, seed=1)), aot=True)
def matmul_operator(x, w):
    return x @ w


@tracing(lambda: (T(3, 4), 7))
def int_arithmetic(x, n):
    k = (n * 3 + 1) // 2 % 5 - n**2
    return x * k


@tracing(lambda: (T(3, 4), 2.5))
def float_arithmetic(x, s):
    return x * (s / 2 + 0.25) - s


@tracing(lambda: (T(3, 4), 6))
def bit_ops_on_ints(x, n):
    return x + ((n & 3) | (n ^ 1) << 1) - (n >> 1)


@tracing(lambda: (T(3, 4),))
def inplace_int(x):
    k = 1
    k += 2
    k *= 3
    return x + k


@tracing(lambda: (T(3, 4),))
def tensor_floordiv_mod(x):
    return (x * 10) // 3 + (x * 10) % 3


@tracing(lambda: (T(3, 4), T(3, 4, seed=1)))
def tensor_inplace_ops(x, y):
    z = x.clone()
    z += y
    z *= 2
    return z


@tracing(lambda: (T(3, 4), T(3, 4, seed=1)))
def mutate_input(x, y):
    x.add_(y)
    return x * 2


@tracing(lambda: (T(3, 4),))
def mutate_input_only(x):
    x.mul_(3)


@tracing(lambda: (T(3, 4),))
def constant_return(x):
    return 42


@tracing(lambda: (T(3, 4),))
def mixed_tuple_return(x):
    return x + 1, 3, "s", None


# --- comparisons, is, in, bool ops ------------------------------------------


@tracing(lambda: (T(3, 4), 3))
def compare_ints(x, n):
    if n > 2 and n <= 5:
        return x + 1
    return x - 1


@tracing(lambda: (T(3, 4), 4))
def chained_compare(x, n):
    if 0 < n < 10 != n:
        return x * 2
    return x


@tracing(lambda: (T(3, 4), T(3, 4, seed=1)), aot=True)
def tensor_compare(x, y):
    return (x > y).float() + (x <= 0).to(torch.float32)


@tracing(lambda: (T(3, 4), None))
def is_none(x, y):
    if y is None:
        return x + 1
    return x + y


@tracing(lambda: (T(3, 4), T(3, 4, seed=1)))
def is_not_none(x, y):
    if y is not None:
        return x + y
    return x


@tracing(lambda: (T(3, 4), "b"))
def in_tuple(x, key):
    if key in NAMES:
        return x * 2
    return x


@tracing(lambda: (T(3, 4),))
def not_in_list(x):
    xs = [1, 2, 3]
    if 4 not in xs:
        return x + 4
    return x


@tracing(lambda: (T(3, 4), {"a": 1, "b": 2}))
def in_dict(x, d):
    out = x
    if "a" in d:
        out = out + d["a"]
    if "z" in d:
        out = out * 100
    return out


@tracing(lambda: (T(3, 4), True, False))
def bool_ops(x, a, b):
    if a and not b:
        x = x + 1
    if a or b:
        x = x * 2
    return x


@tracing(lambda: (T(3, 4), 0))
def or_default(x, n):
    k = n or 5
    return x * k


@tracing(lambda: (T(3, 4), T(3, 4, seed=1)))
def tensor_is_same(x, y):
    if x is y:
        return x
    return x - y


@tracing(lambda: (T(3, 4),))
def tensor_logical(x):
    return torch.logical_and(x > 0, x < 1) | (x > 2)


# --- locals, globals, closures, cells ---------------------------------------


@tracing(lambda: (T(3, 4),))
def global_scalar(x):
    return x * SCALE + OFFSET


@tracing(lambda: (T(3, 4),), aot=True)
def global_tensor(x):
    return x @ GW


def _make_closure():
    k = 5
    w = T(4, seed=3)

    def closure_reads(x):
        return x * k + w

    return closure_reads


CASES_closure_reads = tracing(lambda: (T(3, 4),))(_make_closure())


def _make_cell_writer():
    def cell_written(x):
        total = 0

        def bump(v):
            nonlocal total
            total += v

        bump(2)
        bump(3)
        return x * total

    return cell_written


tracing(lambda: (T(3, 4),))(_make_cell_writer())


@tracing(lambda: (T(3, 4),))
def inner_closure(x):
    a = 2

    def inner(y):
        return y * a

    return inner(x) + inner(1)


@tracing(lambda: (T(3, 4),))
def shadowed_local(x):
    x = x + 1
    x = x * 2
    y = x
    x = 0
    return y + x


# --- attributes -------------------------------------------------------------


@tracing(lambda: (T(3, 4), Config()))
def object_attrs(x, cfg):
    if cfg.use_relu:
        x = torch.relu(x)
    return x * cfg.scale


@tracing(lambda: (Point(T(3), T(3, seed=1)),))
def object_tensor_attrs(p):
    return p.x * p.y


@tracing(lambda: (T(3, 4),))
def new_object_local(x):
    p = Point(x, x + 1)
    return p.x + p.y


@tracing(lambda: (Pair(T(3), T(3, seed=1)),))
def namedtuple_fields(p):
    return p.first - p.second + p[0]


# --- tuples, lists, dicts ---------------------------------------------------


@tracing(lambda: (T(3, 4),))
def build_tuple(x):
    t = (x, x + 1, 2)
    return t[1] * t[2] + t[0]


@tracing(lambda: ([T(3), T(3, seed=1), T(3, seed=2)],), aot=True)
def list_of_tensors(xs):
    return xs[0] + xs[1] * xs[2]


@tracing(lambda: ({"a": T(3), "b": T(3, seed=1)},))
def dict_of_tensors(d):
    return d["a"] * d["b"]


@tracing(lambda: (T(3, 4),))
def return_dict(x):
    return {"double": x * 2, "neg": -x}


@tracing(lambda: (T(3, 4),))
def return_list(x):
    return [x, x + 1]


@tracing(lambda: (T(3, 4),))
def nested_containers(x):
    d = {"a": [x, (x * 2, 3)], "b": {"c": x - 1}}
    return d["a"][1][0] + d["b"]["c"] * d["a"][1][1]


@tracing(lambda: (T(3, 4),))
def tuple_concat(x):
    t = (x,) + (x * 2,)
    l = [x] + [x + 1] * 2
    return t[1] + l[2] + len(l)


@tracing(lambda: (T(3, 4),))
def set_membership(x):
    s = {1, 2, 3}
    if 2 in s:
        return x + len(s)
    return x


# --- slices and subscripts --------------------------------------------------


@tracing(lambda: (T(5, 6),), aot=True)
def tensor_slices(x):
    return x[1:3] + x[-2:, :][0]


@tracing(lambda: (T(5, 6),))
def tensor_step_slice(x):
    return x[::2, 1::2]


@tracing(lambda: (T(2, 3, 4),))
def tensor_ellipsis_none(x):
    return x[..., 0] + x[:, None, :, 1].squeeze(1)


@tracing(lambda: (T(5, 6),))
def tensor_int_index(x):
    return x[2] * x[-1]


@tracing(lambda: (T(5, 6), torch.tensor([0, 2, 4])))
def tensor_index_tensor(x, idx):
    return x[idx]


@tracing(lambda: (T(5, 6),))
def tensor_bool_mask_where(x):
    return torch.where(x > 0, x, torch.zeros_like(x))


@tracing(lambda: (T(3, 4),))
def list_slices(x):
    xs = [x, x * 2, x * 3, x * 4]
    ys = xs[1:3]
    zs = xs[::-1]
    return ys[0] + zs[0]


@tracing(lambda: (T(3, 4),))
def tuple_negative_index(x):
    t = (1, 2, x)
    return t[-1] * t[-2]


@tracing(lambda: (T(5, 6),), aot=True)
def tensor_setitem(x):
    y = x.clone()
    y[0] = 1.0
    y[:, 2] = y[:, 3] * 2
    return y


@tracing(lambda: (T(5, 6),))
def tensor_setitem_input(x):
    x[1:3] = 0.0
    return x.sum()


@tracing(lambda: (T(3, 4),))
def list_setitem(x):
    xs = [x, x, x]
    xs[1] = x * 2
    xs[-1] = xs[1] + 1
    return xs[0] + xs[1] + xs[2]


@tracing(lambda: (T(3, 4),))
def dict_setitem(x):
    d = {}
    d["a"] = x
    d["b"] = d["a"] * 2
    d["a"] = 0
    return d["b"] + d["a"]


# --- unpacking --------------------------------------------------------------


@tracing(lambda: ((T(3), T(3, seed=1)),))
def unpack_tuple(pair):
    a, b = pair
    return a * b


@tracing(lambda: ([T(3), T(3, seed=1), T(3, seed=2), T(3, seed=3)],))
def unpack_starred(xs):
    first, *middle, last = xs
    return first + last + middle[0] * len(middle)


@tracing(lambda: (T(3, 4),))
def unpack_shape(x):
    n, m = x.shape
    return x.reshape(m, n) * n


@tracing(lambda: (T(6, 4),))
def unpack_chunk(x):
    a, b, c = x.chunk(3)
    return a + b * c


@tracing(lambda: (T(3, 4),))
def swap_values(x):
    a, b = x, x * 2
    a, b = b, a
    return a - b


@tracing(lambda: (T(3, 4),))
def nested_unpack(x):
    (a, b), c = (x, x + 1), x + 2
    return a * b + c

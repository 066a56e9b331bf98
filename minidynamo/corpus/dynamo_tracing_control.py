"""Chapter 3 cases, control: branches and loops, comprehensions, calls, nested functions, inlined methods.

Place in the pipeline: part of the differential corpus (``dynamo_cases.py``). Mirrors the
same kinds of functions in PyTorch's ``test/dynamo/test_functions.py`` and
``test/dynamo/test_misc.py``.
"""

from __future__ import annotations

import torch

from .dynamo_testing import T, tracing
from .dynamo_helpers import (
    helper_add, helper_default, helper_kw, helper_nested, helper_recursive, helper_star, Point
)


# --- control flow -----------------------------------------------------------


@tracing(lambda: (T(3, 4),), aot=True)
def for_range(x):
    for i in range(3):
        x = x * 2 + i
    return x


@tracing(lambda: (T(3, 4),))
def for_range_step(x):
    total = x
    for i in range(10, 0, -3):
        total = total + i
    return total


@tracing(lambda: ([T(3), T(3, seed=1), T(3, seed=2)],))
def for_list(xs):
    out = torch.zeros(3)
    for t in xs:
        out = out + t
    return out


@tracing(lambda: (T(3, 4),))
def for_tuple_const(x):
    for s in (1, 2.5, -1):
        x = x * s
    return x


@tracing(lambda: ({"a": T(3), "b": T(3, seed=1)},))
def for_dict_items(d):
    out = 0
    for k, v in d.items():
        out = out + v * len(k)
    return out


@tracing(lambda: ({"a": T(3), "b": T(3, seed=1)},))
def for_dict_keys_values(d):
    keys = list(d.keys())
    vals = list(d.values())
    return vals[0] * len(keys) + vals[-1]


@tracing(lambda: ([T(3), T(3, seed=1)], [2, 3]))
def for_zip(xs, ks):
    out = 0
    for t, k in zip(xs, ks):
        out = out + t * k
    return out


@tracing(lambda: ([T(3), T(3, seed=1), T(3, seed=2)],))
def for_enumerate(xs):
    out = xs[0] * 0
    for i, t in enumerate(xs):
        out = out + t * i
    return out


@tracing(lambda: (T(3, 4),))
def for_enumerate_start(x):
    for i, s in enumerate([1, 2], start=1):
        x = x + i * s
    return x


@tracing(lambda: (T(3, 4),))
def while_counter(x):
    i = 0
    while i < 4:
        x = x + i
        i += 1
    return x


@tracing(lambda: (T(3, 4),))
def while_break_continue(x):
    i = 0
    while True:
        i += 1
        if i == 2:
            continue
        if i > 4:
            break
        x = x * 1.5
    return x


@tracing(lambda: (T(3, 4),))
def for_break_else(x):
    for i in range(5):
        if i == 3:
            break
        x = x + 1
    else:
        x = x * 100
    return x


@tracing(lambda: (T(3, 4),))
def nested_loops(x):
    for i in range(2):
        for j in range(3):
            x = x + i * j
    return x


@tracing(lambda: (T(3, 4), 2))
def if_elif_else(x, mode):
    if mode == 0:
        return x
    elif mode == 1:
        return x + 1
    elif mode == 2:
        return x * 2
    else:
        return -x


@tracing(lambda: (T(3, 4), 5))
def ternary(x, n):
    return x * 2 if n > 3 else x * 3


@tracing(lambda: (T(3, 4),))
def loop_over_tensor_rows(x):
    out = []
    for row in x:
        out.append(row.sum())
    return torch.stack(out)


# --- comprehensions ---------------------------------------------------------


@tracing(lambda: (T(3, 4),))
def list_comprehension(x):
    ys = [x * i for i in range(3)]
    return ys[0] + ys[1] + ys[2]


@tracing(lambda: (T(3, 4),))
def comprehension_with_if(x):
    ys = [x + i for i in range(6) if i % 2 == 0]
    return torch.stack(ys).sum(0)


@tracing(lambda: (T(3, 4),))
def dict_comprehension(x):
    d = {f"k{i}": x * i for i in range(3)}
    return d["k2"] - d["k1"]


@tracing(lambda: ([T(3), T(3, seed=1)],))
def comprehension_over_input(xs):
    return sum([t * 2 for t in xs])


@tracing(lambda: (T(3, 4),))
def nested_comprehension(x):
    grid = [[i * j for j in range(3)] for i in range(2)]
    return x * grid[1][2]


# --- calls ------------------------------------------------------------------


@tracing(lambda: (T(3, 4),), aot=True)
def call_helper(x):
    return helper_add(x, x * 2)


@tracing(lambda: (T(3, 4),))
def call_keyword(x):
    return helper_add(b=x, a=3)


@tracing(lambda: (T(3, 4),))
def call_defaults(x):
    return helper_default(x) + helper_default(x, 3, z=1)


@tracing(lambda: (T(3, 4),))
def call_star_args(x):
    return helper_star(x, x * 2, 1)


@tracing(lambda: (T(3, 4),))
def call_with_unpacked_list(x):
    args = [x, x + 1]
    return helper_add(*args)


@tracing(lambda: (T(3, 4),))
def call_kwargs(x):
    return helper_kw(x=x, s=4) + helper_kw(x=x)


@tracing(lambda: (T(3, 4),))
def call_double_star(x):
    kw = {"a": x, "b": 2}
    return helper_add(**kw)


@tracing(lambda: (T(3, 4),))
def call_nested_helpers(x):
    return helper_nested(x) + helper_nested(x * 2)


@tracing(lambda: (T(3, 4),))
def call_recursive(x):
    return helper_recursive(x, 3)


@tracing(lambda: (T(3, 4),))
def own_varargs(x, *rest):
    return x + len(rest)


@tracing(lambda: (T(3, 4), T(3, 4, seed=1)))
def call_builtin_max_min(x, y):
    return max(2, 5, 3) * x + min(1, -1) * y


@tracing(lambda: (T(3, 4),))
def call_builtin_abs_round(x):
    return x * abs(-3) + round(2.6) + int(3.9) + float(2)


# --- nested defs and lambdas ------------------------------------------------


@tracing(lambda: (T(3, 4),))
def nested_def(x):
    def double(y):
        return y * 2

    return double(double(x))


@tracing(lambda: (T(3, 4),))
def lambda_local(x):
    f = lambda y, k=3: y * k  # noqa: E731
    return f(x) + f(x, 1)


@tracing(lambda: (T(3, 4),))
def lambda_closure(x):
    b = 4
    g = lambda y: y + b  # noqa: E731
    return g(x)


@tracing(lambda: (T(3, 4),))
def function_as_value(x):
    ops = [torch.sin, torch.cos, helper_nested]
    out = x
    for op in ops:
        out = op(out)
    return out


@tracing(lambda: (T(3, 4),))
def nested_def_default_closure(x):
    def scale(y, k=2):
        return y * k + x

    return scale(x, 5)


# --- inlined methods --------------------------------------------------------


@tracing(lambda: (Point(T(3), T(3, seed=1)),))
def method_call(p):
    return p.norm2()


@tracing(lambda: (Point(T(3), T(3, seed=1)),))
def method_returning_object(p):
    q = p.scaled(3)
    return q.x - q.y


@tracing(lambda: (T(3), T(3, seed=1)))
def static_and_class_method(a, b):
    p = Point.make(a)
    return Point.origin_dist(p.x, b)

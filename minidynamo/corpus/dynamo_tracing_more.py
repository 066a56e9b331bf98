"""Chapter 3 cases, the rest: strings, list and dict methods, side effects that outlive the frame, corners.

Place in the pipeline: part of the differential corpus (``dynamo_cases.py``). The globals
the side-effect cases write (``COUNTER``, ``LOG``, ``STATE``) live here with their
``reset``/``observe``. Mirrors PyTorch's ``test/dynamo/test_misc.py`` and the side-effect
cases of ``test/dynamo/test_functions.py``.
"""

from __future__ import annotations

import torch

from .dynamo_testing import T, tracing
from .dynamo_helpers import _mod, Counting, Holder


COUNTER = 0
LOG: list = []
STATE = {"calls": 0}


def _reset_globals():
    global COUNTER
    COUNTER = 0
    LOG.clear()
    STATE["calls"] = 0


def _observe_globals():
    return {"COUNTER": COUNTER, "LOG": list(LOG), "STATE": dict(STATE)}


# --- f-strings and str methods on constants ---------------------------------


@tracing(lambda: (T(3, 4),))
def fstring_keys(x):
    d = {}
    for i in range(2):
        d[f"layer{i}"] = x * i
    return d["layer1"]


@tracing(lambda: (T(3, 4), "Relu"))
def str_methods(x, act):
    if act.lower() == "relu" and act.startswith("R"):
        return torch.relu(x)
    return x


@tracing(lambda: (T(3, 4),))
def str_join_format(x):
    s = "-".join(["a", "b"]) + "{}".format(3)
    return x * len(s), s.upper()


@tracing(lambda: (T(3, 4), 7))
def fstring_return(x, n):
    return x + n, f"n={n:03d} {n / 2:.1f}"


# --- list and dict methods --------------------------------------------------


@tracing(lambda: (T(3, 4),))
def list_append_extend_pop(x):
    xs = [x]
    xs.append(x + 1)
    xs.extend([x * 2, x * 3])
    last = xs.pop()
    first = xs.pop(0)
    return last + first + len(xs)


@tracing(lambda: (T(3, 4),))
def list_insert_index_reverse(x):
    ks = [1, 2, 3]
    ks.insert(0, 9)
    ks.reverse()
    return x * ks.index(9) + ks.count(2)


@tracing(lambda: (T(3, 4),))
def dict_methods(x):
    d = {"a": x}
    d.update({"b": x * 2})
    d.setdefault("c", x + 1)
    v = d.pop("a")
    return v + d.get("b") + d.get("zz", 0) + len(d.keys()) + sum(d.values())


@tracing(lambda: (T(3, 4),))
def dict_items_sorted(x):
    d = {"b": 2, "a": 1}
    out = x
    for k in sorted(d):
        out = out * d[k]
    return out


@tracing(lambda: ([T(3)],))
def append_to_input_list(xs):
    xs.append(xs[0] * 2)
    return xs[-1] + 1


@tracing(lambda: ({"a": T(3)},))
def setitem_on_input_dict(d):
    d["b"] = d["a"] + 1
    return d["b"] * 2


# --- side effects on objects that outlive the frame -------------------------


@tracing(lambda: (T(3, 4), Holder()))
def object_attr_side_effect(x, h):
    h.count = h.count + 1
    h.items.append(3)
    return x * h.count


@tracing(lambda: (_mod(Counting), T(2, 4)))
def module_attr_side_effect(m, x):
    return m(x)


@tracing(lambda: (T(3, 4),), reset=_reset_globals, observe=_observe_globals)
def global_write(x):
    global COUNTER
    COUNTER = COUNTER + 1
    return x * COUNTER


@tracing(lambda: (T(3, 4),), reset=_reset_globals, observe=_observe_globals)
def global_list_append(x):
    LOG.append("called")
    return x + len(LOG)


@tracing(lambda: (T(3, 4),), reset=_reset_globals, observe=_observe_globals)
def global_dict_update(x):
    STATE["calls"] += 1
    return x * STATE["calls"]


@tracing(lambda: (T(3, 4), Holder()))
def new_attr_on_object(x, h):
    h.extra = x * 2
    return h.extra + 1


# --- more corners of the subset ---------------------------------------------


@tracing(lambda: (T(3, 4),))
def return_input_unchanged(x):
    return x


@tracing(lambda: (T(3, 4),))
def inplace_on_view_of_input(x):
    x[0].add_(1)
    return x.sum()


@tracing(lambda: (T(3, 4),))
def list_sort_and_dict_iter(x):
    ks = [3, 1, 2]
    ks.sort()
    d = {"a": 1, "b": 2}
    out = x
    for k in d:
        out = out * d[k] + ks[0]
    return out


@tracing(lambda: (T(3, 4),))
def percent_format(x):
    s = "%s-%d" % ("a", 3)
    return x * len(s)


@tracing(lambda: (T(3, 4), T(3, 4, seed=1)))
def unbound_tensor_method(x, y):
    return torch.Tensor.add(x, y) * torch.Tensor.mul(x, 2)


@tracing(lambda: (T(3, 4),))
def size_compare_tuple(x):
    if x.shape == (3, 4):
        return x + 1
    return x


@tracing(lambda: (T(3, 4),))
def min_of_shape(x):
    return x * min(x.shape) + max(x.size())


@tracing(lambda: ([T(3)],))
def isinstance_tuple_types(xs):
    if isinstance(xs, (list, tuple)):
        return xs[0] * 2
    return xs


@tracing(lambda: ([T(3), T(3, seed=1)],))
def generator_expression(xs):
    return sum(t * 2 for t in xs)


@tracing(lambda: (T(3, 4),))
def try_except_no_raise(x):
    try:
        y = x + 1
    except ValueError:
        y = x - 1
    return y


@tracing(lambda: (T(3, 4),))
def enable_grad_block(x):
    with torch.enable_grad():
        y = x * 2
    return y


@tracing(lambda: (T(3, 4),))
def assert_statement(x):
    assert x.dim() == 2, "expected 2-d"
    return x.t()


@tracing(lambda: (T(2, 3, 4),))
def star_unpack_size(x):
    *lead, last = x.size()
    return x.reshape(-1, last) * len(lead)


@tracing(lambda: (T(3, 4),))
def tuple_returning_nested_def(x):
    def split(t):
        return t * 2, t + 1

    a, b = split(x)
    return a - b


@tracing(lambda: (T(3, 4),))
def del_local(x):
    y = x + 1
    z = y * 2
    del y
    return z

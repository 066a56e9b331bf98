"""Graph breaks against torch's: a second held-out probe set, ported from PyTorch's tests.

The first held-out set (``test_breaks_like_torch_heldout.py``) was written by us. This one
takes its programs' ideas from PyTorch's own Dynamo tests (``test/dynamo/``:
``test_misc.py``, ``test_repros.py``, ``test_functions.py``, ``test_generator.py``,
``test_ctx_manager.py``, ``test_logging.py``, ``test_error_messages.py``,
``test_higher_order_ops.py``, ``test_sets.py``, ``test_dicts.py``, ``test_list.py``,
``test_modules.py``), rewritten in our own words as small programs a learner or a library
writes: print/logging/warnings, data-dependent branches, ``.item()``/``.tolist()``,
builtins and the standard library, generators, context managers, closures, classes,
modules, containers, strings. Each runs through ``torch._dynamo.explain`` and
``md.explain`` with the first set's ``compare`` (graphs, breaks, each break's registry
``gb_type``, each break's line in this file). Where we still differ, ``KNOWN`` says why
and the case is a strict xfail.
"""

from __future__ import annotations

import abc
import bisect
import collections
import contextlib
import copy
import dataclasses
import datetime
import enum
import functools
import heapq
import inspect
import io
import itertools
import json
import logging
import math
import operator
import os
import platform
import sys
import textwrap
import time
import typing
import warnings

import pytest
import torch
import torch.nn as nn

import minidynamo as md
from test_breaks_like_torch_heldout import compare  # tests/ is on sys.path

pytestmark = [pytest.mark.ch05, pytest.mark.usefixtures("real_dynamo")]

log = logging.getLogger("heldout2_breaks")
log.addHandler(logging.NullHandler())
log.propagate = False


# --- print, logging, warnings (test_logging.py, test_error_messages.py test_unsupported_builtin) -------

def p_print_constant(x):
    y = x.sin()
    print("step")
    return y * 2


def p_print_kwargs(x):
    y = x + 1
    print("a", "b", sep="-", end="")
    return y


def p_print_tensor(x):
    y = x * 3
    print(y)
    return y - 1


def p_print_shape_fstring(x):
    y = x.relu()
    print(f"{x.shape} {x.dtype}")
    return y


def p_logger_warning(x):
    y = x.cos()
    log.warning("w %d", 1)
    return y + 1


def p_logger_is_enabled(x):
    y = x + 1
    if log.isEnabledFor(logging.DEBUG):
        y = y * 2
    return y


def p_get_logger(x):
    lg = logging.getLogger("heldout2_breaks.child")
    return x + len(lg.name)


def p_warnings_category(x):
    y = x.exp()
    warnings.warn("deprecated", DeprecationWarning)
    return y.sum()


def p_repr_tensor(x):
    y = x + 1
    s = repr(y)
    return y, s


def p_str_format_shape(x):
    s = "{}-{}".format(x.shape[0], x.dim())
    return x + len(s)


def p_fstring_size_no_break(x):
    s = f"n={x.size(0)}"
    return x * len(s)


# --- data-dependent control flow and scalars (test_misc.py, test_repros.py) -------------------------

def p_if_tensor_truth(x):
    y = x.sum()
    if y:
        return x + 1
    return x - 1


def p_if_item_compare(x):
    y = x * 2
    if y[0].item() > 0:
        return y
    return -y


def p_int_of_sum(x):
    y = x.abs()
    n = int(y.sum())
    return y + n


def p_float_of_mean(x):
    y = x + 1
    f = float(y.mean())
    return y * f


def p_bool_all(x):
    y = x.sin()
    ok = bool((y < 2).all())
    return y + ok


def p_range_of_argmax(x):
    acc = x * 0
    for _ in range(int(x.argmax())):
        acc = acc + 1
    return acc


def p_tolist_first(x):
    y = x + 1
    first = y.tolist()[0]
    return y * first


def p_index_by_item(x):
    i = x.argmin().item()
    return x[i] + 1


def p_torch_nonzero(x):
    y = x.cos()
    return torch.nonzero(y > 0.5)


def p_unique(x):
    y = x.round()
    return torch.unique(y)


def p_masked_select(x):
    y = x * 2
    return y[y > 0]


def p_torch_equal(x):
    y = x + 0
    if torch.equal(x, y):
        return y
    return x


def p_allclose(x):
    y = x.clone()
    return torch.allclose(x, y), y + 1


def p_min_of_tolist(x):
    y = x * 2
    return y + min(y.tolist())


def p_while_item(x):
    y = x.abs()
    n = 0
    while y.sum().item() < 100 and n < 50:
        y = y * 2
        n += 1
    return y


def p_len_nonzero(x):
    y = x.sin()
    k = len(y.nonzero())
    return y * k


# --- builtins and the standard library (test_functions.py, test_misc.py) ----------------------------

def p_id_as_key(x):
    d = {id(x): 2}
    return x * d[id(x)]


def p_hash_string(x):
    h = hash("abc") % 7
    return x + h


def p_isinstance_tuple(x):
    if isinstance(x, (int, float, torch.Tensor)):
        return x + 1
    return x


def p_getattr_default(x):
    scale = getattr(x, "scale_missing", 3)
    return x * scale


def p_sorted_dict_keys(x):
    d = {"b": 2, "a": 1, "c": 3}
    acc = x
    for k in sorted(d.keys()):
        acc = acc + d[k]
    return acc


def p_map_filter_zip(x):
    vals = list(map(lambda v: v * 2, filter(lambda v: v % 2 == 0, range(6))))
    acc = x
    for a, b in zip(vals, vals[1:]):
        acc = acc + a * b
    return acc


def p_enumerate_reversed(x):
    parts = [x, x * 2, x * 3]
    acc = x * 0
    for i, p in enumerate(reversed(parts)):
        acc = acc + i * p
    return acc


def p_functools_partial(x):
    add3 = functools.partial(torch.add, other=3)
    return add3(x)


def p_functools_reduce(x):
    return functools.reduce(operator.mul, [x, x + 1, x + 2])


@functools.lru_cache(maxsize=None)
def _cached_factor(n):
    return n * 2


def p_lru_cache(x):
    return x * _cached_factor(3)


def p_itertools_product(x):
    acc = x
    for a, b in itertools.product(range(2), range(3)):
        acc = acc + a * b
    return acc


def p_itertools_accumulate(x):
    sums = list(itertools.accumulate([1, 2, 3]))
    return x * sums[-1]


def p_operator_itemgetter(x):
    get = operator.itemgetter(1)
    return get([x, x + 1, x + 2]) * 2


def p_divmod_round(x):
    q, r = divmod(17, 5)
    return x * q + round(2.6) + r


def p_chr_ord(x):
    return x + ord(chr(65)) - 64


def p_str_methods(x):
    parts = "a,b,c".split(",")
    name = "-".join(p.upper() for p in parts)
    return x * len(name.strip())


def p_format_spec(x):
    s = f"{3.14159:.2f}"
    return x + float(s)


def p_int_parse(x):
    return x + int("3") + float("1.5")


def p_callable_type(x):
    if callable(torch.sin) and type(x) is torch.Tensor:
        return x.sin()
    return x


def p_all_any_generator(x):
    flags = [True, True, False]
    if all(f for f in flags[:2]) and any(flags):
        return x + 1
    return x


def p_sum_of_tensors(x):
    return sum([x, x * 2, x * 3])


def p_max_of_ints(x):
    return x * max(3, 7, 5) + abs(-2)


def p_dir_object(x):
    y = x + 1
    names = dir(y)
    return y, len(names)


def p_time_time(x):
    y = x + 1
    t0 = time.time()
    return y, t0


def p_json_dumps(x):
    y = x * 2
    s = json.dumps({"a": 1})
    return y + len(s)


def p_os_path_join(x):
    p = os.path.join("a", "b")
    return x + len(p)


def p_copy_list(x):
    items = [x, x + 1]
    other = copy.copy(items)
    return other[1] * 2


def p_dynamo_disable(x):
    y = x + 1
    z = _not_traced(y)
    return z * 2


@torch._dynamo.disable
def _not_traced(y):
    return y - 1


def p_graph_break_plain(x):
    y = x.sin()
    torch._dynamo.graph_break()
    return y.cos()


# --- generators (test_generator.py) -----------------------------------------------------------------

def _gen_three():
    yield 1
    yield 2
    yield 3


def p_gen_next(x):
    g = _gen_three()
    return x + next(g) + next(g)


def _gen_tensors(t):
    yield t.sin()
    yield t.cos()


def _gen_outer(t):
    yield from _gen_tensors(t)
    yield t + 3


def p_yield_from(x):
    return sum(_gen_outer(x))


def _gen_with_break(t):
    yield t + 1
    torch._dynamo.graph_break()
    yield t + 2


def p_gen_graph_break_inside(x):
    a, b = _gen_with_break(x)
    return a * b


def _gen_returns(t):
    yield t
    return 5


def _gen_delegates(t, out):
    r = yield from _gen_returns(t)
    out.append(r)


def p_gen_return_value(x):
    out = []
    for v in _gen_delegates(x, out):
        x = x + v
    return x * out[0]


def _gen_counter(t):
    i = 0
    while True:
        yield t + i
        i += 1


def p_gen_infinite_zip(x):
    return list(zip(range(3), _gen_counter(x)))


def p_gen_list(x):
    return torch.stack(list(_gen_tensors(x)))


def p_genexpr_tensor_sum(x):
    return sum(x[i] * i for i in range(4))


def p_gen_to_dict(x):
    return dict((k, x + k) for k in range(2))


def p_gen_send(x):
    def acc():
        total = 0
        while True:
            v = yield total
            total += v

    g = acc()
    next(g)
    g.send(2)
    return x * g.send(3)


# --- context managers (test_ctx_manager.py) ---------------------------------------------------------

@torch.no_grad()
def _no_grad_helper(t):
    return t * 2


def p_no_grad_decorator(x):
    return _no_grad_helper(x) + 1


def p_set_grad_enabled(x):
    with torch.set_grad_enabled(False):
        y = x * 2
    return y + 1


def p_autocast_cpu(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.mm(x.view(2, 2), x.view(2, 2))
    return y.float() + 1


@contextlib.contextmanager
def _scaled(k):
    yield k * 2


def p_contextmanager_func(x):
    with _scaled(3) as s:
        y = x * s
    return y + 1


class _Tracker:
    def __init__(self):
        self.depth = 0

    def __enter__(self):
        self.depth += 1
        return self

    def __exit__(self, *exc):
        self.depth -= 1
        return False


def p_user_cm_break_inside(x):
    with _Tracker():
        y = x + 1
        torch._dynamo.graph_break()
        y = y * 2
    return y


def p_user_cm_value(x):
    with _Tracker() as t:
        y = x + t.depth
    return y


def p_nullcontext(x):
    with contextlib.nullcontext():
        return x * 2


def p_inference_mode(x):
    with torch.inference_mode():
        y = x + 1
    return y * 2


def p_no_grad_print_inside(x):
    with torch.no_grad():
        y = x * 2
        print("inside")
        y = y + 1
    return y


# --- closures (test_functions.py) -------------------------------------------------------------------

def p_closure_nonlocal(x):
    count = 0

    def bump(t):
        nonlocal count
        count += 1
        return t + count

    y = bump(bump(x))
    return y * count


def _make_scaler(k):
    def scale(t):
        return t * k
    return scale


def p_closure_factory(x):
    return _make_scaler(3)(x) + 1


def p_lambda_default(x):
    fns = [lambda t, k=k: t + k for k in range(3)]
    return fns[2](x)


def p_closure_print(x):
    def report(t):
        print("report")
        return t + 1

    return report(x * 2)


# --- classes (test_misc.py, test_functions.py) ------------------------------------------------------

class _WithProperty:
    def __init__(self, k):
        self._k = k

    @property
    def k(self):
        return self._k * 2


_PROP = _WithProperty(3)


def p_property(x):
    return x * _PROP.k


class _Dynamic:
    def __getattr__(self, name):
        return len(name)


_DYN = _Dynamic()


def p_getattr_dunder(x):
    return x + _DYN.abcd


class _Callable:
    def __call__(self, t):
        return t * 4


_CALL = _Callable()


def p_call_dunder(x):
    return _CALL(x) + 1


class _A:
    def f(self, t):
        return t + 1


class _B(_A):
    def f(self, t):
        return super().f(t) * 2


class _C(_B):
    def f(self, t):
        return super().f(t) - 3


def p_super_chain(x):
    return _C().f(x)


class _Maker:
    scale = 2

    @classmethod
    def make(cls, t):
        return t * cls.scale

    @staticmethod
    def shift(t):
        return t + 1


def p_classmethod_staticmethod(x):
    return _Maker.shift(_Maker.make(x))


def p_new_object_in_frame(x):
    c = _WithProperty(5)
    return x + c.k


@dataclasses.dataclass
class _Cfg:
    scale: float = 2.0
    shift: int = 1


def p_dataclass(x):
    cfg = _Cfg(scale=3.0)
    return x * cfg.scale + cfg.shift


_Point = collections.namedtuple("_Point", ["a", "b"])


def p_namedtuple(x):
    p = _Point(x, x * 2)
    return p.a + p.b + len(p)


# --- nn.Module (test_modules.py, test_hooks.py) -----------------------------------------------------

class _Counted(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls += 1
        return self.lin(x)


_COUNTED = _Counted()


def p_module_buffer_update(x):
    return _COUNTED(x) * 2


_HOOKED = nn.Linear(4, 4)
_HOOKED.register_forward_hook(lambda mod, inp, out: out * 2)


def p_forward_hook(x):
    return _HOOKED(x) + 1


_STACK = nn.ModuleList([nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4)])


def p_module_list(x):
    for layer in _STACK:
        x = layer(x)
    return x


_HEADS = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})


def p_module_dict(x):
    return [head(x) for _, head in _HEADS.items()]


def p_named_parameters(x):
    total = x.sum() * 0
    for name, p in _STACK.named_parameters():
        if name.endswith("weight"):
            total = total + p.sum()
    return total


class _Printing(nn.Module):
    def forward(self, x):
        y = x * 2
        print("in forward")
        return y + 1


_PRINTING = _Printing()


def p_module_print_forward(x):
    return _PRINTING(x) - 1


# --- containers (test_sets.py, test_dicts.py, test_list.py) -----------------------------------------

def p_set_ops(x):
    a, b = {1, 2, 3}, {2, 3, 4}
    return x * len((a | b) - (a & b))


def p_dict_view_ops(x):
    d = {"a": 1, "b": 2}
    common = d.keys() & {"a", "z"}
    return x + len(common)


def p_dict_update_pop(x):
    d = {"a": x}
    d.update(b=x * 2)
    y = d.pop("a")
    return y + d["b"]


def p_ordereddict(x):
    d = collections.OrderedDict(a=1, b=2)
    d.move_to_end("a")
    return x * next(iter(d.values()))


def p_defaultdict(x):
    d = collections.defaultdict(list)
    d["t"].append(x)
    d["t"].append(x + 1)
    return torch.stack(d["t"])


def p_frozenset_in(x):
    allowed = frozenset({"relu", "gelu"})
    if "relu" in allowed:
        return x.relu()
    return x


def p_list_sort_key(x):
    pairs = [(3, "c"), (1, "a"), (2, "b")]
    pairs.sort(key=lambda p: p[0])
    return x + pairs[0][0]


def p_list_slice_assign(x):
    items = [x, x, x, x]
    items[1:3] = [x + 1]
    return torch.stack(items)


def p_dict_comprehension(x):
    d = {k: x * k for k in range(3)}
    return d[2] + d[1]


def p_tuple_unpack_star(x):
    first, *rest = [x, x + 1, x + 2]
    return first + sum(rest)


# --- tensor attributes (test_misc.py) ---------------------------------------------------------------

def p_tensor_data_mul(x):
    y = x + 1
    y.data.mul_(2)
    return y


def p_grad_is_none(x):
    if x.grad is None:
        return x + 1
    return x


def p_requires_grad_inside(x):
    y = x.detach().clone()
    y.requires_grad_()
    return y * 2


def p_dtype_str(x):
    s = str(x.dtype)
    return x + len(s)


def p_tensor_new_attr_read(x):
    return x * x.ndim + x.numel()


# --- more of the same kinds: shapes, flags, stdlib helpers, classes, modules, autograd ----------------

def p_print_in_loop(x):
    for i in range(2):
        x = x + i
        print(i)
    return x


def p_graph_break_in_loop(x):
    for _ in range(2):
        x = x * 2
        torch._dynamo.graph_break()
    return x


def p_shape_compare_tuple(x):
    if x.shape == (4,):
        return x + 1
    return x


def p_shape_unpack(x):
    a, b = x.view(2, 2).shape
    return x * (a + b)


def p_percent_format(x):
    s = "%d items" % x.shape[0]
    return x + len(s)


def p_requires_grad_branch(x):
    if x.requires_grad:
        return x * 2
    return x + 2


def p_device_type_branch(x):
    if x.device.type == "cpu":
        return x + 1
    return x


def p_is_grad_enabled_branch(x):
    if torch.is_grad_enabled():
        return x * 3
    return x


def p_default_dtype(x):
    return x.to(torch.get_default_dtype()) + 1


def p_is_leaf_branch(x):
    y = x * 2
    if y.is_leaf:
        return y
    return y + 1


def p_grad_fn_none(x):
    y = x + 1
    return y if y.grad_fn is None else y * 2


def p_tuple_of_tensor(x):
    a, b, c, d = tuple(x)
    return a + b + c + d


def p_list_of_shape(x):
    dims = list(x.view(2, 2).shape)
    return x * sum(dims)


def p_hasattr_tensor(x):
    if hasattr(x, "shape"):
        return x + 1
    return x


def p_type_name(x):
    return x + len(type(x).__name__)


def p_getattr_torch_fn(x):
    fn = getattr(torch, "relu")
    return fn(x)


def p_dict_get_default(x):
    d = {"a": 1}
    return x * d.get("b", 5)


def p_dict_setdefault(x):
    d = {}
    d.setdefault("t", []).append(x)
    return d["t"][0] + 1


def p_sorted_items_key(x):
    d = {"a": 3, "b": 1}
    order = [k for k, _ in sorted(d.items(), key=lambda kv: kv[1])]
    return x + len(order[0])


def p_counter(x):
    c = collections.Counter("abca")
    return x * c["a"]


def p_deque(x):
    q = collections.deque([1, 2])
    q.appendleft(0)
    q.pop()
    return x + sum(q)


def p_heapq(x):
    h = [3, 1, 2]
    heapq.heapify(h)
    return x + heapq.heappop(h)


def p_bisect(x):
    i = bisect.bisect_left([1, 3, 5], 4)
    return x * i


def p_math_prod(x):
    return x * math.prod([2, 3])


def p_chain_from_iterable(x):
    flat = list(itertools.chain.from_iterable([[1, 2], [3]]))
    return x + len(flat)


def p_islice_generator(x):
    return sum(itertools.islice(_gen_counter(x), 2))


def p_count_zip(x):
    acc = x
    for i, k in zip(itertools.count(), [5, 6]):
        acc = acc + i * k
    return acc


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args) + 1
    return wrapper


@_logged
def _wrapped_double(t):
    return t * 2


def p_functools_wraps(x):
    return _wrapped_double(x)


def p_attrgetter(x):
    get = operator.attrgetter("shape")
    return x * len(get(x))


def p_any_data_dependent(x):
    parts = [x, x + 1]
    if any(t.sum() > 0 for t in parts):
        return x + 1
    return x


def p_next_iter_dict(x):
    d = {"first": 2, "second": 3}
    return x * d[next(iter(d))]


def p_cat_genexpr(x):
    return torch.cat(tuple(x * i for i in range(3)))


def p_assert_isinstance(x):
    assert isinstance(x, torch.Tensor), "needs a tensor"
    return x + 1


def p_assert_shape(x):
    assert x.shape[0] == 4
    return x * 2


def p_manual_seed_inside(x):
    torch.manual_seed(0)
    return x + torch.rand(4)


def p_datetime_now(x):
    y = x + 1
    t = datetime.datetime.now()
    return y, t


def p_perf_counter(x):
    y = x * 2
    t = time.perf_counter()
    return y, t


def p_platform_system(x):
    y = x + 1
    name = platform.system()
    return y, name


class _Color(enum.Enum):
    RED = 1
    BLUE = 2


def p_enum_compare(x):
    c = _Color.RED
    if c is _Color.RED:
        return x + c.value
    return x


class _Pair(typing.NamedTuple):
    a: int
    b: int


def p_typing_namedtuple(x):
    p = _Pair(2, 3)
    return x * p.a + p.b


@dataclasses.dataclass(frozen=True)
class _Frozen:
    k: int = 3


def p_frozen_dataclass(x):
    f = _Frozen(4)
    return x * f.k


def p_dataclass_fields(x):
    names = [f.name for f in dataclasses.fields(_Cfg)]
    return x + len(names)


def p_dataclass_asdict(x):
    d = dataclasses.asdict(_Cfg())
    return x * d["scale"]


class _Cached:
    @functools.cached_property
    def value(self):
        return 7


def p_cached_property(x):
    return x + _Cached().value


class _WithSlots:
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k


def p_slots_object(x):
    return x * _WithSlots(3).k


class _Base2:
    def __init__(self, k):
        self.k = k


class _Child2(_Base2):
    def __init__(self, k):
        super().__init__(k * 2)


def p_super_init_new_object(x):
    return x + _Child2(3).k


class _Settable:
    def __init__(self):
        self._v = 1

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, value):
        self._v = value * 2


def p_property_setter(x):
    s = _Settable()
    s.v = 5
    return x + s.v


class _Trainable(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        if self.training:
            x = x * 2
        return self.lin(x) + len(self.__class__.__name__)


_TRAINABLE = _Trainable()


def p_module_training_flag(x):
    return _TRAINABLE(x)


_SEQ = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4))


def p_sequential_slice(x):
    return _SEQ[:2](x)


_PRE_HOOKED = nn.Linear(4, 4)


def _printing_pre_hook(mod, args):
    print("pre hook")


_PRE_HOOKED.register_forward_pre_hook(_printing_pre_hook)


def p_pre_hook_print(x):
    return _PRE_HOOKED(x) * 2


class _NoGradMethod(nn.Module):
    @torch.no_grad()
    def forward(self, x):
        return x * 2


_NO_GRAD_MOD = _NoGradMethod()


def p_no_grad_method(x):
    return _NO_GRAD_MOD(x) + 1


class _PrintingFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        print("fwd")
        return t * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


def p_autograd_function_print(x):
    return _PrintingFn.apply(x) + 1


def p_exit_stack(x):
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.no_grad())
        y = x * 2
    return y + 1


def p_environ_item(x):
    y = x + 1
    user = os.environ.get("PATH", "")
    return y * len(user[:1])


def p_retain_grad(x):
    y = x * 2
    y.retain_grad()
    return y + 1


def p_checkpoint_print(x):
    def body(t):
        print("inside checkpoint")
        return t.sin()

    return torch.utils.checkpoint.checkpoint(body, x, use_reentrant=False)


def p_cond_print_branch(x):
    def yes(t):
        print("yes")
        return t + 1

    def no(t):
        return t - 1

    return torch.cond(x.sum() > 0, yes, no, (x,))


# --- strings, compile-time flags, printing variants, more containers and closures -------------------

def p_print_stderr(x):
    y = x + 1
    print("err", file=sys.stderr)
    return y * 2


def p_print_flush(x):
    y = x.cos()
    print("flush", flush=True)
    return y


def p_logger_debug_tensor_arg(x):
    y = x + 1
    log.debug("value %s", y)
    return y * 2


def _warn_helper(t):
    warnings.warn("from helper")
    return t + 1


def p_warn_in_helper(x):
    y = x * 2
    return _warn_helper(y)


def p_is_compiling(x):
    if torch.compiler.is_compiling():
        return x + 1
    return x - 1


def p_dynamo_is_compiling(x):
    if torch._dynamo.is_compiling():
        return x * 2
    return x


def p_jit_is_scripting(x):
    if torch.jit.is_scripting():
        return x
    return x + 3


def p_str_replace_startswith(x):
    name = "layer.0.weight".replace(".", "_")
    if name.startswith("layer"):
        return x + len(name)
    return x


def p_str_maketrans(x):
    table = str.maketrans("ab", "xy")
    return x + len("aabb".translate(table))


def p_str_partition_format(x):
    head, _, tail = "k=v".partition("=")
    return x * len(f"{head:>4}{tail!r}")


def p_bytes_decode(x):
    return x + len(b"abc".decode())


def p_textwrap_dedent(x):
    y = x + 1
    s = textwrap.dedent("  a\n  b")
    return y * len(s)


def p_math_isclose(x):
    if math.isclose(0.1 + 0.2, 0.3):
        return x + 1
    return x


def p_methodcaller(x):
    up = operator.methodcaller("upper")
    return x + len(up("abc"))


def p_sys_getsizeof(x):
    y = x * 2
    n = sys.getsizeof([1, 2])
    return y + n


def p_inspect_isfunction(x):
    if inspect.isfunction(_make_scaler):
        return x + 1
    return x


def p_functools_cache(x):
    return x * _cached_square(3)


@functools.cache
def _cached_square(n):
    return n * n


class _Shape(abc.ABC):
    @abc.abstractmethod
    def area(self):
        ...


class _Square(_Shape):
    def __init__(self, k):
        self.k = k

    def area(self):
        return self.k * self.k


def p_abc_subclass(x):
    return x * _Square(2).area()


def p_closure_in_loop(x):
    fns = []
    for k in range(3):
        def add(t, k=k):
            return t + k
        fns.append(add)
    return fns[1](x) + fns[2](x)


def p_nonlocal_list(x):
    seen = []

    def record(t):
        seen.append(t)
        return t * 2

    y = record(x)
    return y + len(seen)


def p_set_add_discard(x):
    s = set()
    s.add(1)
    s.add(2)
    s.discard(1)
    return x + len(s)


def p_set_comprehension(x):
    s = {i % 3 for i in range(10)}
    return x * len(s)


def p_set_issubset(x):
    if {1, 2} <= {1, 2, 3}:
        return x + 1
    return x


def p_dict_values_sum(x):
    d = {"a": x, "b": x * 2}
    return sum(d.values())


def p_dict_items_sorted_by_key(x):
    d = {"b": x * 2, "a": x}
    return [v for _, v in sorted(d.items())][0]


def p_dict_merge_operator(x):
    d = {"a": 1} | {"b": 2}
    return x + len(d)


def p_dict_keys_list(x):
    d = {"a": x, "b": x}
    return x * len(list(d.keys()))


def p_list_index_count(x):
    items = [1, 2, 2, 3]
    return x * items.index(3) + items.count(2)


def p_list_reverse_copy(x):
    items = [x, x + 1]
    items.reverse()
    return items[0]


def p_nested_tuple_unpack(x):
    (a, b), c = (x, x + 1), x + 2
    return a + b + c


def p_starred_call(x):
    args = (x, 1)
    return torch.add(*args)


def p_kwargs_call(x):
    kw = {"alpha": 2}
    return torch.add(x, x, **kw)


def p_gen_close(x):
    g = _gen_three()
    first = next(g)
    g.close()
    return x + first


def p_gen_in_generator_expression_any(x):
    if any(v > 2 for v in _gen_three()):
        return x + 1
    return x


def p_enumerate_generator(x):
    acc = x
    for i, v in enumerate(_gen_tensors(x)):
        acc = acc + i * v
    return acc


def p_yield_tensor_break_print(x):
    def gen(t):
        yield t + 1
        print("between")
        yield t + 2

    return sum(gen(x))


# --- modules' state, tensors in f-strings, class machinery --------------------------------------------

def p_fstring_tensor(x):
    y = x + 1
    s = f"{y}"
    return y, s


def p_str_of_dtype_device(x):
    return x + len(f"{x.dtype}-{x.device}")


def p_state_dict_keys(x):
    keys = list(_STACK.state_dict().keys())
    return x + len(keys)


def p_named_modules(x):
    n = 0
    for _, m in _SEQ.named_modules():
        n += 1
    return x * n


def p_parameters_count(x):
    total = sum(p.numel() for p in _SEQ.parameters())
    return x + total


def p_module_children(x):
    for child in _SEQ.children():
        x = child(x)
    return x


def p_module_train_eval_flag(x):
    mode = _SEQ.training
    return x + int(mode)


def p_buffer_read(x):
    return x + _COUNTED.calls


def p_isinstance_module(x):
    if isinstance(_SEQ[0], nn.Linear):
        return _SEQ[0](x)
    return x


def p_getattr_module_by_name(x):
    layer = getattr(_STACK, "0")
    return layer(x)


class _Registry(type):
    names: list = []

    def __new__(mcs, name, bases, ns):
        cls = super().__new__(mcs, name, bases, ns)
        mcs.names.append(name)
        return cls


class _Registered(metaclass=_Registry):
    scale = 3


def p_metaclass_attr(x):
    return x * _Registered.scale


def p_class_getitem(x):
    alias = list[int]
    return x + len(alias.__args__)


def p_isinstance_typing(x):
    if isinstance(x, typing.Sequence):
        return x
    return x + 1


def p_staticmethod_on_instance(x):
    return _Maker().shift(x)


def p_dunder_add(x):
    class V:
        def __init__(self, t):
            self.t = t

        def __add__(self, other):
            return V(self.t + other.t)

    return (V(x) + V(x * 2)).t


def p_dunder_len_bool(x):
    class Box:
        def __len__(self):
            return 0

    if Box():
        return x + 1
    return x - 1


def p_dunder_iter(x):
    class Pair:
        def __iter__(self):
            yield 1
            yield 2

    a, b = Pair()
    return x * a + b


def p_dunder_contains(x):
    class Evens:
        def __contains__(self, v):
            return v % 2 == 0

    return x + (4 in Evens())


def p_dunder_getitem(x):
    class Table:
        def __getitem__(self, k):
            return k * 2

    return x + Table()[3]


def p_tensor_grad_read(x):
    g = x.grad
    return x + (0 if g is None else 1)


def p_tensor_data_read(x):
    d = x.data
    return d * 2


def p_detach_requires_grad(x):
    y = x.detach()
    return y.requires_grad_(False) + 1


def p_tensor_item_in_fstring(x):
    y = x.sum()
    return x, f"{y.item():.2f}"


def p_tensor_shape_in_exception_message(x):
    if x.dim() != 1:
        raise ValueError(f"expected 1-d, got {x.shape}")
    return x + 1


# --- not held out: constructs the fixes above made traceable, checked against torch and eager -------

@contextlib.contextmanager
def _cm_mutates(t):
    t.add_(1)
    yield t * 2
    t.sub_(1)


def f_contextmanager_ops(x):
    x = x.clone()
    with _cm_mutates(x) as y:
        z = y + 1
    return z, x


@contextlib.contextmanager
def _cm_plain():
    yield


def f_contextmanager_break_inside(x):
    y = x + 1
    with _cm_plain():
        y = y * 2
        torch._dynamo.graph_break()
        y = y + 1
    return y


def f_contextmanager_nested(x):
    with _cm_plain(), torch.no_grad():
        with _cm_plain():
            y = x * 3
    return y + 1


@contextlib.contextmanager
def _cm_kwargs(a, b=2):
    yield a * b


def f_contextmanager_kwargs(x):
    with _cm_kwargs(3, b=4) as k:
        return x * k


def f_gen_send_none_first(x):
    def g():
        v = yield 1
        yield v

    it = g()
    it.send(None)
    return x + it.send(5)


class _LazyAttrs:
    def __init__(self):
        self.base = 2

    def __getattr__(self, name):
        return self.base * 10


def f_getattr_on_new_object(x):
    return x + _LazyAttrs().xyz


def f_autocast_disabled(x):
    with torch.autocast("cpu", enabled=False):
        y = x.view(2, 2) @ x.view(2, 2)
    return y


def f_autocast_break_inside(x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = torch.mm(x.view(2, 2), x.view(2, 2))
        torch._dynamo.graph_break()
        z = torch.mm(y, y)
    return z


def f_inference_mode_break_inside(x):
    with torch.inference_mode():
        y = x + 1
        torch._dynamo.graph_break()
        z = y * 2
    return z


def f_count_in_for(x):
    for i in itertools.count(2):
        if i > 4:
            break
        x = x + i
    return x


def f_checkpoint_break_after_op(x):
    y = x + 1

    def body(t):
        print("inside")
        return t.cos()

    return torch.utils.checkpoint.checkpoint(body, y, use_reentrant=False) * 2


# --- the set ----------------------------------------------------------------------------------------

PROGRAMS = {name: fn for name, fn in dict(globals()).items() if name.startswith("p_")}
NEEDS_GRAD = {"p_requires_grad_branch", "p_is_leaf_branch", "p_grad_fn_none", "p_retain_grad",
              "p_autograd_function_print", "p_checkpoint_print"}

# Where we still differ from torch, and why (each a strict xfail).
_TRACES = "torch traces it whole (no break); "
_ONE_OP = ("torch cuts at a checkpoint only after two ops (symbolic_convert.py is_non_empty_graph: "
           "count_calls() > 1): with one op before the break at a LOAD_ATTR it runs the frame eagerly (no "
           "graph, no reason); ours cuts after one op (the first set's h_del_global, same cause): ")
KNOWN: dict[str, str] = {
    "p_gen_return_value": "torch's trace loses the value `yield from` returns (None: TorchRuntimeError at "
                          "x * out[0]); eager and ours use 5",
}


FIXED = {name: fn for name, fn in dict(globals()).items() if name.startswith("f_")}
KNOWN_FIXED: dict[str, str] = {}


def compare2(name):
    return compare(name, PROGRAMS, NEEDS_GRAD, __file__)


# Where we differ from torch on 3.12 and 3.13 only (strict xfails there; equal on 3.11).
KNOWN_FROM_312: dict[str, str] = {}


def _marks(n):
    if n in KNOWN:
        return pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN[n], strict=True))
    if n in KNOWN_FROM_312:
        return pytest.param(n, marks=pytest.mark.xfail(sys.version_info >= (3, 12), reason=KNOWN_FROM_312[n],
                                                       strict=True))
    return n


@pytest.mark.parametrize("name", [_marks(n) for n in PROGRAMS])
def test_heldout2_break_matches_torch(name):
    mine, theirs = compare2(name)
    assert mine == theirs, f"ours (graphs, breaks, gb types, lines) {mine} != torch's {theirs}"


def test_the_second_probe_set_is_large_and_its_known_differences_are_real_programs():
    assert len(PROGRAMS) >= 80
    assert set(KNOWN) <= set(PROGRAMS), sorted(set(KNOWN) - set(PROGRAMS))


def test_issue_31_bar_on_the_second_heldout_set():
    """Issue 31: break counts, registry entries and lines equal torch's on at least 95% of the programs."""
    assert len(KNOWN) <= len(PROGRAMS) * 0.05, sorted(KNOWN)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_FIXED[n], strict=True))
                                  if n in KNOWN_FIXED else n for n in FIXED])
def test_fixed_construct_breaks_like_torch(name):
    mine, theirs = compare(name, FIXED, set(), __file__)
    assert mine == theirs, f"ours (graphs, breaks, gb types, lines) {mine} != torch's {theirs}"


@pytest.mark.parametrize("name", list(FIXED))
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_fixed_construct_runs_like_eager(name, backend):
    fn = FIXED[name]
    torch.manual_seed(0)
    x = torch.randn(4)
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = fn(x.clone())
        md.reset()
        got = md.compile(fn, backend=backend)(x.clone())
    for g, e in zip(_leaves(got), _leaves(expected), strict=True):
        torch.testing.assert_close(g, e, atol=1e-2, rtol=1e-2)


def _leaves(value) -> list:
    return [v for item in value for v in _leaves(item)] if isinstance(value, (tuple, list)) else [value]

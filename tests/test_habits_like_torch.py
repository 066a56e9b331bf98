"""Learners' habits, held out: ~120 short programs through ``md.compile`` and ``torch.compile``, field by field.

A learner calls ``md.compile`` the way they call ``torch.compile`` and compares what they see.
Each program here is such a session, written in our own words in the spirit of PyTorch's
test/dynamo/test_recompiles.py, test_misc.py, test_unspec.py, test_dynamic_shapes.py,
test_compile.py and test_repros.py: a generator that takes the system's API (``api.compile``,
``api.mark_dynamic``, ``api.patch``, ``api.reset``) and yields calls. It runs once through ours
and once through torch (each after ``md.reset()`` / ``torch._dynamo.reset()``, the RNG seeded),
with one recording backend, and these fields must be equal:

* per call: the result (or the exception's type and first line), what it printed, which
  compiled graphs ran (numbered in compile order; ``()`` for an eager call) and the number of
  compiles so far;
* every graph's placeholders, a tensor as its sizes, a SymInt/SymFloat as its symbol, symbols
  renamed S0, S1... in order of appearance (torch names them by a hash of their source): which
  dims became dynamic, and which share a symbol;
* the recompile reasons, per function, one per entry checked (torch's
  ``torch._dynamo.utils.guard_failures``, filled by ``guards.py: get_guard_fail_reason``; ours
  the ``recompile`` events ``frame_cache.py`` emits), without the frame's number.

A few programs compare ``explain`` instead (graph count, break count, each break's registry
``gb_type``). A difference we cannot fix yet is a strict xfail in ``KNOWN`` with its reason.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import warnings
from collections import namedtuple

import pytest
import torch

import minidynamo as md
from _global_state import default_dtype, deterministic  # tests/ is on sys.path (no package)
from _helpers import canonical_placeholders, explain_both
from minidynamo import events
from minidynamo._torch_private import (
    dynamo_all_guard_failures,
    dynamo_config_patch,
    dynamo_warnings,
    dynamo_mark_dynamic,
    dynamo_mark_static,
    dynamo_maybe_mark_dynamic,
    dynamo_reset,
)

pytestmark = [pytest.mark.ch04, pytest.mark.usefixtures("real_dynamo")]

_SYMBOL = re.compile(r"\b[su]\d+\b|\bzuf\d+\b")


class Recorder:
    """A backend numbering the graphs it is handed, recording which one runs and each graph's placeholders."""

    def __init__(self) -> None:
        self.ran: list[int] = []
        self.graphs: list[list] = []

    def __call__(self, gm, example_inputs):
        number = len(self.graphs)
        placeholders = canonical_placeholders(gm, _SYMBOL, others=True)
        # sorted: the placeholders' order is test_dims_like_torch's and the graph-naming tests' field;
        # here what counts is which dims are symbols and which share one
        self.graphs.append(sorted(placeholders, key=repr))

        def run(*args):
            self.ran.append(number)
            return gm(*args)

        return run


class Api:
    """What a program may call: the same names for both systems."""

    def __init__(self, system: str, recorder: Recorder) -> None:
        self.system, self.rec = system, recorder

    def compile(self, fn=None, **kw):
        kw.setdefault("backend", self.rec)
        return (md.compile if self.system == "ours" else torch.compile)(fn, **kw)

    def mark_dynamic(self, t, dim):
        (md.mark_dynamic if self.system == "ours" else dynamo_mark_dynamic)(t, dim)

    def maybe_mark_dynamic(self, t, dim):
        (md.maybe_mark_dynamic if self.system == "ours" else dynamo_maybe_mark_dynamic)(t, dim)

    def mark_static(self, t, dim):
        (md.mark_static if self.system == "ours" else dynamo_mark_static)(t, dim)

    def patch(self, **kw):
        return (md.config.patch if self.system == "ours" else dynamo_config_patch)(**kw)

    def reset(self):
        (md.reset if self.system == "ours" else dynamo_reset)()


def _value(v):
    """A result as plain data both systems' results can be compared by."""
    if isinstance(v, torch.Tensor):
        if v.device.type == "meta":
            return ("T", str(v.dtype), tuple(v.shape), "meta")
        vals = [round(float(x), 4) for x in v.detach().to(torch.float64).flatten().tolist()] if not v.is_complex() \
            else [str(x) for x in v.detach().flatten().tolist()]
        return ("T", str(v.dtype), tuple(v.shape), v.requires_grad, vals)
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [_value(x) for x in v])
    if isinstance(v, dict):
        return ("dict", [(k, _value(x)) for k, x in v.items()])
    if isinstance(v, float):
        return round(v, 4)
    if dataclasses.is_dataclass(v):
        return (type(v).__name__, [_value(getattr(v, f.name)) for f in dataclasses.fields(v)])
    return v


_RESUME = re.compile(r"^(___resume_at_\d+_\d+|torch_dynamo_resume_in_\w+_at_\d+)$")
# Note [FullGraphError is our Unsupported]: fullgraph=True with a break raises torch's ``Unsupported``
# (torch/_dynamo/exc.py), ours a ``FullGraphError`` (symbolic/exc.py); both messages open with the
# registry's gb_type, which is what is compared.
_SAME_ERROR = {"FullGraphError": "Unsupported"}


def _by_function(reasons: dict) -> dict:
    """Resume functions renamed ``resume 1``, ``resume 2``... in order of first recompile (torch names one
    ``torch_dynamo_resume_in_f_at_LINE``, ours ``___resume_at_OFFSET_N``)."""
    out, n = {}, 0
    for name, rs in reasons.items():
        if _RESUME.match(name):
            n += 1
            name = f"resume {n}"
        out[name] = rs
    return out


def _strip(reason: str) -> str:
    """``0/1: tensor 'x' size mismatch ...`` -> ``1: tensor 'x' size mismatch ...`` (frame numbers differ);
    an object's id (``___check_type_id(n, 140602390183136)``) -> ``<id>``."""
    return re.sub(r"\b\d{9,}\b", "<id>", reason.split("/", 1)[-1].split("  ")[0].split("\n")[0].rstrip())


def run(program, system: str, patch: dict | None = None) -> dict:
    md.reset()
    dynamo_reset()
    rec = Recorder()
    api = Api(system, rec)
    calls = []
    torch.manual_seed(0)
    with contextlib.ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        log = stack.enter_context(events.record()) if system == "ours" else None
        if patch:
            stack.enter_context(api.patch(**patch))
        for thunk in program(api):
            before = len(rec.ran)
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    result = _value(thunk())
            except Exception as e:  # noqa: BLE001 - the error is a field compared with torch's
                result = ("raised", _SAME_ERROR.get(type(e).__name__, type(e).__name__), (str(e).strip().splitlines() or [""])[0][:120])
            calls.append((result, out.getvalue(), tuple(rec.ran[before:]), len(rec.graphs)))
    if system == "ours":
        reasons: dict = {}
        for e in log:
            if e.kind == "recompile":
                reasons.setdefault(e.function, []).extend(_strip(r) for r in e.details.get("reasons") or [])
    else:
        reasons = {name: [_strip(r) for r in rs] for name, rs in dynamo_all_guard_failures().items()}
    md.reset()
    dynamo_reset()
    return {"calls": calls, "graphs": rec.graphs, "reasons": _by_function(reasons)}


PROGRAMS: dict = {}


def program(name=None, patch=None):
    def register(fn):
        PROGRAMS[name or fn.__name__] = (fn, patch)
        return fn
    return register


R = torch.randn


def _calls(f, *arg_lists):
    """One thunk per argument tuple."""
    for args in arg_lists:
        yield lambda args=args: f(*args)


def _over(fn, *arg_lists, **compile_kw):
    """A program: compile ``fn`` once, call it with each argument tuple."""
    def prog(api):
        return _calls(api.compile(fn, **compile_kw), *arg_lists)
    return prog


def _register(name, prog, patch=None):
    PROGRAMS[name] = (prog, patch)


# --- Python scalars as arguments: ints, floats, bools, strings, None (test_unspec.py, test_recompiles.py) --------

def mul_n(x, n):
    return x * n


def add_f(x, f):
    return x + f


def view_n(x, n):
    return x.reshape(n, -1)


def loop_n(x, n):
    for _ in range(n):
        x = x + 1
    return x


def if_flag(x, flag):
    return x.sin() if flag else x.cos()


def act(x, name):
    if name == "relu":
        return torch.relu(x)
    if name == "gelu":
        return torch.nn.functional.gelu(x)
    return x


def maybe_add(x, y):
    return x + 1 if y is None else x + y


def if_float(x, f):
    if f > 1.0:
        return x * f
    return x - f


def kw_scale(x, *, scale=2):
    return x * scale


def f_string(x, n):
    return x + len(f"step {n}")


def isinstance_num(x, n):
    return x * 2 if isinstance(n, int) else x * n


def ones_n(x, n):
    return x.sum() + torch.ones(n).sum()


X3 = torch.arange(6.0).reshape(2, 3)
_register("int_changing", _over(mul_n, (X3, 1), (X3, 2), (X3, 3), (X3, 2), (X3, 7)))
_register("int_zero_one_then_more", _over(mul_n, (X3, 0), (X3, 1), (X3, 2), (X3, 3), (X3, 1)))
_register("int_negative", _over(mul_n, (X3, -1), (X3, -2), (X3, 5)))
_register("int_shapes_a_view", _over(view_n, (torch.ones(12), 2), (torch.ones(12), 3), (torch.ones(12), 4),
                                     (torch.ones(12), 6)))
_register("int_loop_count", _over(loop_n, (X3, 1), (X3, 2), (X3, 3), (X3, 2)))
_register("int_sizes_a_factory", _over(ones_n, (X3, 2), (X3, 3), (X3, 4)))
_register("int_dynamic_false", _over(mul_n, (X3, 1), (X3, 2), (X3, 3), dynamic=False))
_register("int_dynamic_true", _over(mul_n, (X3, 2), (X3, 3), (X3, 1), dynamic=True))
_register("float_changing", _over(add_f, (X3, 0.5), (X3, 1.5), (X3, 2.5), (X3, 0.5)))
_register("float_in_an_if", _over(if_float, (X3, 0.5), (X3, 2.0), (X3, 3.0), (X3, 0.25)))
_register("float_then_int", _over(add_f, (X3, 0.5), (X3, 1), (X3, 2), (X3, 1.5)))
_register("float_dynamic_true", _over(add_f, (X3, 0.5), (X3, 1.5), dynamic=True))
_register("float_specialized", _over(add_f, (X3, 0.5), (X3, 1.5), (X3, 2.5)), {"specialize_float": True})
_register("int_specialized", _over(mul_n, (X3, 1), (X3, 2), (X3, 3)), {"specialize_int": True})
_register("bool_flag", _over(if_flag, (X3, True), (X3, False), (X3, True), (X3, False)))
_register("string_mode", _over(act, (X3, "relu"), (X3, "gelu"), (X3, "relu"), (X3, "none"), (X3, "gelu")))
_register("none_then_tensor", _over(maybe_add, (X3, None), (X3, X3), (X3, None)))
_register("int_in_an_fstring", _over(f_string, (X3, 5), (X3, 50), (X3, 500)))
_register("isinstance_int_then_float", _over(isinstance_num, (X3, 2), (X3, 2.5), (X3, 3)))


def p_kwarg_changing(api):
    f = api.compile(kw_scale)
    for kw in ({}, {"scale": 3}, {"scale": 4}, {}):
        yield lambda kw=kw: f(X3, **kw)


def p_positional_then_keyword(api):
    f = api.compile(mul_n)
    yield lambda: f(X3, 2)
    yield lambda: f(X3, n=2)
    yield lambda: f(x=X3, n=3)


_register("kwarg_changing", p_kwarg_changing)
_register("positional_then_keyword", p_positional_then_keyword)


# --- lists, tuples, dicts, dataclasses (test_misc.py, test_recompiles.py) --------------------------------------

def sum_list(xs):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out


def reshape_to(x, shape):
    return x.reshape(shape)


def scale_list(x, factors):
    return x * factors[0] + factors[1]


def dict_sum(d):
    return sum(v for v in d.values())


def dict_mode(x, cfg):
    return x * cfg["scale"] if cfg["on"] else x


def nested(xs):
    return xs[0][0] + xs[1][0] * len(xs[1])


def enumerate_list(xs):
    out = 0
    for i, x in enumerate(xs):
        out = out + i * x
    return out


def comprehension(xs):
    return torch.stack([x * 2 for x in xs]).sum(0)


def star_args(*xs):
    return sum_list(xs)


def kwargs_dict(x, **kw):
    return x + sum(kw.values())


@dataclasses.dataclass
class Batch:
    x: torch.Tensor
    scale: int


@dataclasses.dataclass(frozen=True)
class Frozen:
    x: torch.Tensor
    scale: float


Pair = namedtuple("Pair", ["a", "b"])


def use_batch(b):
    return b.x * b.scale


def use_pair(p):
    return p.a - p.b


T = torch.arange(4.0)
_register("list_length_changes", _over(sum_list, ([T, T],), ([T, T, T],), ([T, T],), ([T] * 4,)))
_register("tuple_of_ints_shape", _over(reshape_to, (torch.ones(12), (3, 4)), (torch.ones(12), (4, 3)),
                                       (torch.ones(12), (2, 6)), (torch.ones(12), (2, 2, 3))))
_register("list_of_ints_values", _over(scale_list, (T, [1, 2]), (T, [1, 3]), (T, [2, 3]), (T, [1, 2])))
_register("list_of_floats", _over(scale_list, (T, [0.5, 1.0]), (T, [1.5, 2.0]), (T, [0.5, 1.0])))
_register("dict_keys_change", _over(dict_sum, ({"a": T, "b": T},), ({"a": T, "c": T},), ({"a": T, "b": T, "c": T},)))
_register("dict_values_change", _over(dict_mode, (T, {"on": True, "scale": 2}), (T, {"on": True, "scale": 3}),
                                      (T, {"on": False, "scale": 3}), (T, {"on": True, "scale": 4})))
_register("nested_lists", _over(nested, ([[T], [T]],), ([[T], [T, T]],), ([[T, T], [T]],)))
_register("enumerate_a_list", _over(enumerate_list, ([T, T],), ([T, T, T],), ([T, T, T],)))
_register("list_comprehension", _over(comprehension, ([T, T],), ([T, T, T],), ([T],)))
_register("star_args_count", _over(star_args, (T, T), (T, T, T), (T,)))
_register("kwargs_names_change", lambda api: (
    lambda f: (lambda: f(T, a=1), lambda: f(T, a=1, b=2), lambda: f(T, c=3), lambda: f(T, a=1)))(api.compile(kwargs_dict)))
_register("dataclass_int_changes", _over(use_batch, (Batch(T, 2),), (Batch(T, 3),), (Batch(T, 4),), (Batch(T * 2, 4),)))
_register("frozen_dataclass_float", _over(use_batch, (Frozen(T, 0.5),), (Frozen(T, 1.5),), (Frozen(T, 0.5),)))
_register("namedtuple", _over(use_pair, (Pair(T, T),), (Pair(T, T + 1),), (Pair(torch.ones(5), torch.ones(5)),)))
_register("list_of_sizes", _over(sum_list, ([torch.ones(2), torch.ones(2)],), ([torch.ones(3), torch.ones(3)],),
                                 ([torch.ones(4), torch.ones(4)],)))


def p_list_appended_between_calls(api):
    xs = [T]
    f = api.compile(sum_list)
    for _ in range(3):
        yield lambda: f(xs)
        xs.append(T)


def p_dict_mutated_between_calls(api):
    cfg = {"on": True, "scale": 2}
    f = api.compile(dict_mode)
    for scale in (2, 3, 3, 5):
        cfg["scale"] = scale
        yield lambda: f(T, cfg)


_register("list_appended_between_calls", p_list_appended_between_calls)
_register("dict_mutated_between_calls", p_dict_mutated_between_calls)


# --- tensor properties: dtype, device, requires_grad, ndim, contiguity, sizes (test_recompiles.py) -----------

def affine(x):
    return x * 2 + 1


def two(x, y):
    return x * y + x


A = torch.arange(6.0).reshape(2, 3)
_register("dtype_changes", _over(affine, (A,), (A.double(),), (A,), (A.half(),), (A.double(),)))
_register("int_tensor_then_float", _over(affine, (torch.arange(3),), (torch.arange(3.0),), (torch.arange(3),)))
_register("bfloat16", _over(affine, (A.bfloat16(),), (A,), (A.bfloat16(),)))
_register("requires_grad_changes", _over(affine, (A,), (A.clone().requires_grad_(),), (A,)))
_register("ndim_changes", _over(affine, (torch.ones(3),), (torch.ones(3, 1),), (torch.ones(3, 1, 1),), (torch.ones(3),)))
_register("contiguity_changes", _over(affine, (A,), (A.t(),), (A.t().contiguous(),), (A.t(),)))
_register("sliced_stride", _over(affine, (torch.arange(8.0),), (torch.arange(16.0)[::2],), (torch.arange(8.0),)))
_register("sizes_grow", _over(affine, (torch.ones(2),), (torch.ones(3),), (torch.ones(4),), (torch.ones(5),)))
_register("size_one_then_more", _over(affine, (torch.ones(1),), (torch.ones(2),), (torch.ones(3),), (torch.ones(1),)))
_register("size_zero", _over(affine, (torch.ones(0),), (torch.ones(2),), (torch.ones(0),)))
_register("second_dim_changes", _over(affine, (torch.ones(2, 3),), (torch.ones(2, 4),), (torch.ones(2, 5),),
                                      (torch.ones(3, 5),)))
_register("one_of_two_inputs_changes", _over(two, (torch.ones(3), torch.ones(3)), (torch.ones(4), torch.ones(1)),
                                             (torch.ones(5), torch.ones(1)), (torch.ones(5), torch.ones(5))))
_register("broadcast_sizes", _over(two, (torch.ones(2, 3), torch.ones(3)), (torch.ones(4, 3), torch.ones(3)),
                                   (torch.ones(4, 5), torch.ones(5))))
_register("same_tensor_twice", lambda api: (lambda f, a, b: (lambda: f(a, b), lambda: f(a, a), lambda: f(b, a)))(
    api.compile(two), torch.ones(3), torch.full((3,), 2.0)))
_register("zero_dim", _over(affine, (torch.tensor(2.0),), (torch.tensor(3.0),), (torch.ones(1),)))
_register("view_then_base", lambda api: (lambda f, base: (lambda: f(base), lambda: f(base[1:]), lambda: f(base)))(
    api.compile(affine), torch.arange(4.0)))
_register("meta_device", _over(affine, (torch.ones(3),), (torch.ones(3, device="meta"),), (torch.ones(3),)))
_register("sizes_dynamic_false", _over(affine, (torch.ones(2),), (torch.ones(3),), (torch.ones(4),), dynamic=False))
_register("sizes_dynamic_true", _over(affine, (torch.ones(2),), (torch.ones(3),), (torch.ones(1),), dynamic=True))
_register("square_sizes_dynamic_true", _over(affine, (torch.ones(2, 2),), (torch.ones(3, 4),), dynamic=True))
_register("sizes_no_automatic_dynamic", _over(affine, (torch.ones(2),), (torch.ones(3),), (torch.ones(4),)),
          {"automatic_dynamic_shapes": False})
_register("assume_dynamic_by_default", _over(affine, (torch.ones(2),), (torch.ones(3),)),
          {"assume_static_by_default": False})
_register("complex_tensor", _over(affine, (torch.ones(2, dtype=torch.complex64),), (torch.ones(2),)))


def p_requires_grad_then_backward(api):
    f = api.compile(affine)
    for rg in (True, True, False):
        x = torch.ones(3, requires_grad=rg)

        def step(x=x):
            y = f(x).sum()
            if x.requires_grad:
                y.backward()
                return x.grad
            return y
        yield step


def p_shape_arithmetic(api):
    def g(x):
        n = x.shape[0]
        return x.reshape(n // 2, 2) * n
    f = api.compile(g)
    for n in (4, 6, 8, 6):
        yield lambda n=n: f(torch.ones(n))


def p_len_of_tensor(api):
    def g(x):
        return x * len(x)
    f = api.compile(g)
    for n in (2, 3, 4):
        yield lambda n=n: f(torch.ones(n))


def p_size_in_python_if(api):
    def g(x):
        if x.size(0) > 3:
            return x.sum()
        return x.mean()
    f = api.compile(g)
    for n in (2, 3, 5, 6, 2):
        yield lambda n=n: f(torch.ones(n))


_register("requires_grad_then_backward", p_requires_grad_then_backward)
_register("shape_arithmetic", p_shape_arithmetic)
_register("len_of_tensor", p_len_of_tensor)
_register("size_in_python_if", p_size_in_python_if)


# --- methods and modules (test_modules.py, test_recompiles.py) ---------------------------------------------

class Scaler:
    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return x * self.k

    def __call__(self, x):
        return x - self.k


class Net(torch.nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.lin = torch.nn.Linear(width, 2)
        self.drop = torch.nn.Dropout(0.5)
        self.scale = 1

    def forward(self, x):
        return self.drop(self.lin(x)) * self.scale


class BN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(x)


X4 = torch.arange(8.0).reshape(2, 4) / 8


def p_method_two_instances(api):
    a, b = Scaler(2), Scaler(3)
    fa, fb = api.compile(a.apply), api.compile(b.apply)
    yield from _calls(fa, (T,), (T,))
    yield from _calls(fb, (T,), (T,))
    yield lambda: fa(T)


def p_method_attribute_changes(api):
    s = Scaler(2)
    f = api.compile(s.apply)
    for k in (2, 3, 3, 4.5):
        s.k = k
        yield lambda: f(T)


def p_callable_object(api):
    f = api.compile(Scaler(2))
    yield from _calls(f, (T,), (T * 2,))


def p_module_two_instances(api):
    torch.manual_seed(0)
    a, b = Net().eval(), Net().eval()
    fa, fb = api.compile(a), api.compile(b)
    yield from _calls(fa, (X4,), (X4,))
    yield from _calls(fb, (X4,), (X4,))


def p_module_train_flag_flipped(api):
    torch.manual_seed(0)
    m = Net()
    f = api.compile(m)
    for mode in (False, True, False, True):
        m.train(mode)
        yield lambda mode=mode: f(X4) if not mode else f(X4).shape


def p_batchnorm_train_eval(api):
    torch.manual_seed(0)
    m = BN()
    f = api.compile(m)
    for mode in (True, False, True):
        m.train(mode)
        yield lambda: (f(X4), m.bn.running_mean.clone())


def p_module_int_attribute(api):
    torch.manual_seed(0)
    m = Net().eval()
    f = api.compile(m)
    for s in (1, 2, 3, 3):
        m.scale = s
        yield lambda: f(X4)


def p_module_to_double(api):
    torch.manual_seed(0)
    m = Net().eval()
    f = api.compile(m)
    yield lambda: f(X4)
    m.double()
    yield lambda: f(X4.double())


def p_param_requires_grad_flipped(api):
    torch.manual_seed(0)
    m = Net().eval()
    f = api.compile(m)
    yield lambda: f(X4)
    m.lin.weight.requires_grad_(False)
    yield lambda: f(X4)
    m.lin.weight.requires_grad_(True)
    yield lambda: f(X4)


def p_module_batch_sizes(api):
    torch.manual_seed(0)
    f = api.compile(Net().eval())
    for n in (2, 3, 4, 3):
        yield lambda n=n: f(torch.ones(n, 4))


def p_module_called_in_a_function(api):
    torch.manual_seed(0)
    nets = [Net().eval(), Net().eval(), Net(width=4).eval()]

    def apply(m, x):
        return m(x).relu()
    f = api.compile(apply)
    for m in nets:
        yield lambda m=m: f(m, X4)


def p_sequential(api):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    f = api.compile(m)
    yield from _calls(f, (X4,), (X4 * 2,), (torch.ones(3, 4),))


def p_compiled_module_method(api):
    torch.manual_seed(0)
    m = Net().eval()
    m.compile_me = api.compile(m.forward)
    yield from _calls(m.compile_me, (X4,), (X4,))


def p_module_replaced_submodule(api):
    torch.manual_seed(0)
    m = Net().eval()
    f = api.compile(m)
    yield lambda: f(X4)
    m.drop = torch.nn.Identity()
    yield lambda: f(X4)


for _p in (p_method_two_instances, p_method_attribute_changes, p_callable_object, p_module_two_instances,
           p_module_train_flag_flipped, p_batchnorm_train_eval, p_module_int_attribute, p_module_to_double,
           p_param_requires_grad_flipped, p_module_batch_sizes, p_module_called_in_a_function, p_sequential,
           p_compiled_module_method, p_module_replaced_submodule):
    _register(_p.__name__[2:], _p)


# --- globals and closures changed between calls (test_recompiles.py: test_global_*) -------------------------

G_INT = 2
G_FLAG = True
G_T = torch.ones(3)
G_LIST = [1]


def g_scale():
    return 1


def uses_g_int(x):
    return x * G_INT


def uses_g_flag(x):
    return x + 1 if G_FLAG else x - 1


def uses_g_t(x):
    return x + G_T


def uses_g_fn(x):
    return x * g_scale()


def uses_g_list(x):
    return x * len(G_LIST)


def _set(name, value):
    globals()[name] = value


def _globals_program(fn, name, values):
    def prog(api):
        old = globals()[name]
        f = api.compile(fn)
        try:
            for v in values:
                def call(v=v):
                    _set(name, v)
                    return f(torch.ones(3))
                yield call
        finally:
            _set(name, old)
    return prog


_register("global_int_changes", _globals_program(uses_g_int, "G_INT", [2, 3, 3, 4]))
_register("global_float_changes", _globals_program(uses_g_int, "G_INT", [0.5, 1.5, 2.5]))
_register("global_flag_flips", _globals_program(uses_g_flag, "G_FLAG", [True, False, True]))
_register("global_tensor_reassigned", _globals_program(uses_g_t, "G_T", [torch.ones(3), torch.zeros(3),
                                                                        torch.full((3,), 2.0)]))
_register("global_tensor_new_shape", _globals_program(uses_g_t, "G_T", [torch.ones(3), torch.ones(1),
                                                                       torch.ones(3, dtype=torch.float64)]))
_register("global_function_replaced", _globals_program(uses_g_fn, "g_scale", [g_scale, lambda: 2, lambda: 3]))
_register("global_list_replaced", _globals_program(uses_g_list, "G_LIST", [[1], [1, 2], [1, 2, 3]]))


def p_global_list_appended(api):
    old = list(G_LIST)
    f = api.compile(uses_g_list)
    try:
        for _ in range(3):
            yield lambda: f(torch.ones(3))
            G_LIST.append(0)
    finally:
        G_LIST[:] = old


def p_closure_cell_changes(api):
    k = 2

    def g(x):
        return x * k
    f = api.compile(g)
    for v in (2, 3, 3):
        k = v
        yield lambda: f(torch.ones(3))


def p_closure_made_in_a_loop(api):
    for k in (2, 3, 4):
        def g(x, k=k):
            return x * k
        yield lambda g=g: api.compile(g)(torch.ones(3))


def p_closure_over_tensor(api):
    def make(w):
        def g(x):
            return x @ w
        return g
    for w in (torch.ones(3, 2), torch.ones(3, 2) * 2, torch.ones(3, 4)):
        yield lambda w=w: api.compile(make(w))(torch.ones(2, 3))


_register("global_list_appended", p_global_list_appended)
_register("closure_cell_changes", p_closure_cell_changes)
_register("closure_made_in_a_loop", p_closure_made_in_a_loop)
_register("closure_over_tensor", p_closure_over_tensor)


# --- grad mode and other global state around the call (test_recompiles.py, test_global_state) ---------------

def p_no_grad_around(api):
    f = api.compile(affine)
    x = torch.ones(3, requires_grad=True)
    yield lambda: f(x)
    with torch.no_grad():
        yield lambda: f(x)
    yield lambda: f(x)


def _under(ctx_factory, fn=affine, make_x=lambda: torch.ones(3, requires_grad=True)):
    def prog(api):
        f = api.compile(fn)
        x = make_x()
        yield lambda: f(x)

        def inside():
            with ctx_factory():
                return f(x)
        yield inside
        yield inside
        yield lambda: f(x)
    return prog


def set_grad_inside(x):
    with torch.no_grad():
        y = x * 2
    return y + x


def enable_grad_inside(x):
    with torch.enable_grad():
        return x * 2


_register("no_grad_around", p_no_grad_around)
_register("no_grad_context_twice", _under(torch.no_grad))
_register("inference_mode_around", _under(torch.inference_mode))
_register("enable_grad_inside_no_grad", _under(torch.no_grad, enable_grad_inside))
_register("no_grad_inside", _under(torch.enable_grad, set_grad_inside))
_register("autocast_around", _under(lambda: torch.autocast("cpu", dtype=torch.bfloat16),
                                    lambda x: x @ x.t(), lambda: torch.ones(2, 2)))
_register("default_dtype_changes", _under(lambda: default_dtype(torch.float64), lambda x: x + torch.ones(3),
                                          lambda: torch.ones(3)))
_register("deterministic_algorithms", _under(lambda: deterministic(), affine, lambda: torch.ones(3)))




# --- how the compile is called (test_compile.py, tutorials) -------------------------------------------------

def p_decorator(api):
    @api.compile
    def g(x):
        return x.relu() + 1
    yield from _calls(g, (T,), (T - 2,), (torch.ones(5),))


def p_decorator_with_arguments(api):
    @api.compile(dynamic=True, fullgraph=True)
    def g(x):
        return x.relu() + 1
    yield from _calls(g, (T,), (torch.ones(5),), (torch.ones(1),))


def p_compiled_in_a_loop_same_fn(api):
    for n in (3, 3, 4, 3):
        yield lambda n=n: api.compile(affine)(torch.ones(n))


def p_lambda_compiled_in_a_loop(api):
    for n in (3, 3, 4):
        yield lambda n=n: api.compile(lambda x: x.cos() * 2)(torch.ones(n))


def p_two_wrappers_different_dynamic(api):
    f, g = api.compile(affine, dynamic=False), api.compile(affine, dynamic=True)
    yield from _calls(f, (torch.ones(2),), (torch.ones(3),))
    yield from _calls(g, (torch.ones(4),), (torch.ones(5),))


def p_reset_between_calls(api):
    f = api.compile(affine)
    yield lambda: f(torch.ones(3))
    yield lambda: f(torch.ones(3))
    yield lambda: api.reset()
    yield lambda: f(torch.ones(3))
    yield lambda: f(torch.ones(4))


def p_compiled_calls_compiled(api):
    inner = api.compile(lambda x: x.sin())

    def outer(x):
        return inner(x) + 1
    f = api.compile(outer)
    yield from _calls(f, (T,), (T,), (torch.ones(5),))


def p_inner_compiled_called_first(api):
    def inner(x):
        return x.exp()

    def outer(x):
        return inner(x) * 2
    fi, fo = api.compile(inner), api.compile(outer)
    yield from _calls(fi, (T,))
    yield from _calls(fo, (T,), (T,))


def p_fullgraph_no_break(api):
    f = api.compile(affine, fullgraph=True)
    yield from _calls(f, (T,), (torch.ones(2),), (torch.ones(3),))


def with_print(x):
    print("inside", x.shape)
    return x + 1


def data_dependent_if(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def item_use(x):
    return x * x.sum().item()


def tolist_use(x):
    return sum(x.tolist()) + x


def _fullgraph(fn, *arg_lists):
    return _over(fn, *arg_lists, fullgraph=True)


_register("fullgraph_with_print", _fullgraph(with_print, (T,), (T,)))
_register("fullgraph_data_dependent_if", _fullgraph(data_dependent_if, (T,), (-T,)))
_register("fullgraph_item", _fullgraph(item_use, (T,)))
_register("fullgraph_item_captured", _fullgraph(item_use, (T,), (T * 2,)), {"capture_scalar_outputs": True})
_register("fullgraph_tolist", _fullgraph(tolist_use, (T,)))


def my_backend(gm, example_inputs):
    return gm.forward


def p_mode_reduce_overhead_custom_backend(api):
    """The callable gets ``mode=`` and does not take it: torch's BackendCompilerFailed."""
    yield lambda: api.compile(affine, backend=my_backend, mode="reduce-overhead")(T)


def p_mode_custom_backend_suppressed(api):
    """With suppress_errors the failed backend's frame runs eagerly."""
    yield lambda: api.compile(affine, backend=my_backend, mode="reduce-overhead")(T)
    yield lambda: api.compile(affine, backend=my_backend, mode="reduce-overhead")(T)


def p_custom_backend_raises(api):
    def bad_backend(gm, example_inputs):
        raise NotImplementedError("this backend cannot compile yet")
    yield lambda: api.compile(affine, backend=bad_backend)(T)


def p_mode_reduce_overhead_eager(api):
    yield lambda: api.compile(affine, backend="eager", mode="reduce-overhead")(T)


def p_mode_and_options(api):
    yield lambda: api.compile(affine, mode="max-autotune", options={"x": 1})


def p_mode_default(api):
    yield lambda: api.compile(affine, mode="default")(T)


def p_options_with_eager_backend(api):
    yield lambda: api.compile(affine, backend="eager", options={"trace.enabled": False})(T)


def p_unknown_backend(api):
    """The error's class and its first clause (torch's then points to ``torch._dynamo.list_backends()``,
    ours lists the names)."""
    def call():
        try:
            api.compile(affine, backend="no_such_backend")(T)
        except Exception as e:  # noqa: BLE001 - compared with torch's
            return type(e).__name__, str(e).split(",")[0]
    yield call


def p_disable_true(api):
    yield lambda: api.compile(affine, disable=True)(T)


def p_compile_none_model(api):
    yield lambda: api.compile(None)(None)


for _p in (p_decorator, p_decorator_with_arguments, p_compiled_in_a_loop_same_fn, p_lambda_compiled_in_a_loop,
           p_two_wrappers_different_dynamic, p_reset_between_calls, p_compiled_calls_compiled,
           p_inner_compiled_called_first, p_fullgraph_no_break, p_mode_reduce_overhead_custom_backend,
           p_mode_reduce_overhead_eager, p_custom_backend_raises,
           p_mode_and_options, p_mode_default, p_options_with_eager_backend, p_unknown_backend, p_disable_true,
           p_compile_none_model):
    _register(_p.__name__[2:], _p)

_register("mode_reduce_overhead_custom_backend", p_mode_reduce_overhead_custom_backend, {"suppress_errors": False})
_register("custom_backend_raises", p_custom_backend_raises, {"suppress_errors": False})
_register("custom_backend_raises_suppressed", p_custom_backend_raises, {"suppress_errors": True})
_register("mode_custom_backend_suppressed", p_mode_custom_backend_suppressed, {"suppress_errors": True})


# --- marks: mark_dynamic, maybe_mark_dynamic, mark_static (test_dynamic_shapes.py, test_misc.py) ------------

def _marked(mark, dim, sizes, fn=affine, **kw):
    def prog(api):
        f = api.compile(fn, **kw)
        for n in sizes:
            def call(n=n):
                x = torch.ones(n, 3)
                getattr(api, mark)(x, dim)
                return f(x)
            yield call
    return prog


_register("mark_dynamic_first_call", _marked("mark_dynamic", 0, (4, 5, 6)))
_register("mark_dynamic_dim1", _marked("mark_dynamic", 1, (4, 4)))
_register("mark_dynamic_size_one", _marked("mark_dynamic", 0, (1, 2)))
_register("maybe_mark_dynamic", _marked("maybe_mark_dynamic", 0, (4, 5, 6)))
_register("mark_static_then_sizes", _marked("mark_static", 0, (4, 5, 6)))
_register("mark_static_dynamic_true", _marked("mark_static", 0, (4, 5), dynamic=True))
_register("mark_dynamic_dynamic_false", _marked("mark_dynamic", 0, (4, 5), dynamic=False))


def p_mark_dynamic_only_second_call(api):
    f = api.compile(affine)
    yield lambda: f(torch.ones(4, 3))
    x = torch.ones(5, 3)
    api.mark_dynamic(x, 0)
    yield lambda: f(x)
    yield lambda: f(torch.ones(6, 3))


def p_mark_dynamic_specialized_by_code(api):
    def g(x):
        return x.reshape(2, 2) if x.shape[0] == 4 else x
    f = api.compile(g)

    def call():
        x = torch.ones(4)
        api.mark_dynamic(x, 0)
        try:
            return f(x)
        except Exception as e:  # noqa: BLE001 - the class and the line naming the dim (torch's first line
            return type(e).__name__, str(e).splitlines()[1].split(". If")[0]  # names TORCH_LOGS)
    yield call


def p_maybe_mark_dynamic_specialized_by_code(api):
    def g(x):
        return x.reshape(2, 2) if x.shape[0] == 4 else x
    f = api.compile(g)

    def call(n):
        x = torch.ones(n)
        api.maybe_mark_dynamic(x, 0)
        return f(x)
    yield lambda: call(4)
    yield lambda: call(5)


def p_mark_dynamic_bounded_by_code(api):
    def g(x):
        return x * 2 if x.shape[0] > 2 else x
    f = api.compile(g)

    def call(n):
        x = torch.ones(n)
        api.mark_dynamic(x, 0)
        try:
            return f(x)
        except Exception as e:  # noqa: BLE001 - the class and the line naming the dim
            return type(e).__name__, str(e).splitlines()[1].split(". If")[0]
    for n in (4, 5, 2):
        yield lambda n=n: call(n)


_register("maybe_mark_dynamic_specialized_by_code", p_maybe_mark_dynamic_specialized_by_code)
_register("mark_dynamic_bounded_by_code", p_mark_dynamic_bounded_by_code)
_register("mark_dynamic_only_second_call", p_mark_dynamic_only_second_call)
_register("mark_dynamic_specialized_by_code", p_mark_dynamic_specialized_by_code)


# --- the limit: recompile_limit / cache_size_limit (test_recompiles.py: test_*_limit) ------------------------

def _strings(n):
    return _over(act, *[(X3, s) for s in ["relu", "gelu", "a", "b", "relu", "c"][:n]])


_register("recompile_limit_two_strings", _strings(6), {"recompile_limit": 2})
_register("cache_size_limit_alias", _strings(6), {"cache_size_limit": 2})
_register("recompile_limit_one_dtypes", _over(affine, (A,), (A.double(),), (A.half(),), (A,)),
          {"recompile_limit": 1})
_register("recompile_limit_sizes_dynamic_false", _over(affine, *[(torch.ones(n),) for n in (2, 3, 4, 5, 2, 4)],
                                                      dynamic=False), {"recompile_limit": 3})
_register("accumulated_limit", _over(affine, (A,), (A.double(),), (A.half(),), (A,)),
          {"accumulated_recompile_limit": 2})
_register("default_limit_many_strings", _over(act, *[(X3, s) for s in "abcdefghijkl"]))
_register("error_on_recompile", _over(affine, (torch.ones(2),), (torch.ones(2, 2),)), {"error_on_recompile": True})


# --- printing, .item(), .tolist(), data-dependent control flow (test_misc.py, test_repros.py) ---------------

def print_tensor(x):
    y = x * 2
    print("y is", y)
    return y + 1


def print_twice(x):
    print("a")
    x = x + 1
    print("b")
    return x * 2


def item_in_if(x):
    if x.max().item() > 2:
        return x * 2
    return x


def item_as_size(x):
    n = x.sum().int().item()
    return torch.ones(n) * 2


def tolist_loop(x):
    out = 0
    for v in x.tolist():
        out = out + v
    return x + out


def float_of_tensor(x):
    return x * float(x.mean())


def bool_of_tensor(x):
    return x + 1 if bool(x.any()) else x - 1


def nonzero_use(x):
    return x.nonzero().sum()


_register("print_in_function", _over(with_print, (T,), (T,), (torch.ones(5),)))
_register("print_a_tensor", _over(print_tensor, (T,), (T + 1,)))
_register("print_twice", _over(print_twice, (T,), (T,), (torch.ones(2),)))
_register("data_dependent_if", _over(data_dependent_if, (T,), (-T,), (T,)))
_register("item_off", _over(item_use, (T,), (T * 2,), (torch.ones(5),)))
_register("item_on", _over(item_use, (T,), (T * 2,), (torch.ones(5),)), {"capture_scalar_outputs": True})
_register("item_in_if_off", _over(item_in_if, (T,), (T / 10,)))
_register("item_in_if_on", _over(item_in_if, (T,), (T / 10,)), {"capture_scalar_outputs": True})
_register("item_as_size_off", _over(item_as_size, (torch.ones(3),), (torch.ones(4),)))
_register("item_as_size_on", _over(item_as_size, (torch.ones(3),), (torch.ones(4),)), {"capture_scalar_outputs": True})
_register("tolist_off", _over(tolist_use, (T,), (T * 2,)))
_register("tolist_on", _over(tolist_use, (T,), (T * 2,)), {"capture_scalar_outputs": True})
_register("tolist_int_off", _over(tolist_use, (torch.arange(4),), (torch.arange(4) * 2,)))
_register("tolist_int_on", _over(tolist_use, (torch.arange(4),), (torch.arange(4) * 2,)),
          {"capture_scalar_outputs": True})
_register("tolist_loop", _over(tolist_loop, (T,), (T + 1,)))
_register("float_of_tensor", _over(float_of_tensor, (T,), (T * 3,)))
_register("bool_of_tensor", _over(bool_of_tensor, (T,), (T * 0,)))
_register("nonzero_off", _over(nonzero_use, (T,), (T - 2,)))
_register("nonzero_on", _over(nonzero_use, (T,), (T - 2,)), {"capture_dynamic_output_shape_ops": True})


# --- errors, returns and other everyday things -----------------------------------------------------------------

def raises_value_error(x, n):
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return x * n


def assert_shape(x):
    assert x.shape[0] == 3, "expected 3 rows"
    return x + 1


def returns_python(x):
    return x.shape[0], "done", None


def returns_dict(x):
    return {"y": x + 1, "n": x.dim()}


def inplace_on_input(x):
    x.add_(1)
    return x


def random_inside(x):
    return x + torch.rand(x.shape)


def seed_inside(x):
    torch.manual_seed(3)
    return x + torch.randn(x.shape)


def shape_mismatch(x, y):
    return x @ y


def try_except(x):
    try:
        return x + undefined_name  # noqa: F821 - a NameError, caught
    except NameError:
        return x - 1


def calls_numpy(x):
    import numpy as np
    return torch.from_numpy(np.ones(4, dtype=np.float32)) + x


def uses_math(x, n):
    import math
    return x * math.sqrt(n)


def str_method(x, name):
    return x * 2 if name.upper() == "DOUBLE" else x


def recursion(x, n):
    return x if n == 0 else recursion(x + 1, n - 1)


def generator_sum(xs):
    return sum(x * 2 for x in xs)


def clone_detach(x):
    return x.detach().clone() * 2


_register("user_value_error", _over(raises_value_error, (T, 1), (T, -1), (T, 2)))
_register("assert_on_shape", _over(assert_shape, (torch.ones(3),), (torch.ones(4),)))
_register("returns_python_values", _over(returns_python, (torch.ones(3),), (torch.ones(4),)))
_register("returns_a_dict", _over(returns_dict, (torch.ones(3),), (torch.ones(3, 1),)))
_register("inplace_on_input", lambda api: (lambda f, x: (lambda: f(x), lambda: f(x), lambda: x.clone()))(
    api.compile(inplace_on_input), torch.zeros(3)))
_register("torch_rand_inside", lambda api: (lambda f: (lambda: (torch.manual_seed(1), f(torch.zeros(3)))[1],
                                                       lambda: (torch.manual_seed(1), f(torch.zeros(3)))[1]))(
    api.compile(random_inside)))
_register("manual_seed_inside", _over(seed_inside, (torch.zeros(3),), (torch.zeros(3),)))
_register("shape_mismatch_error", _over(shape_mismatch, (torch.ones(2, 3), torch.ones(3, 2)),
                                        (torch.ones(2, 3), torch.ones(2, 3))))
_register("try_except_name_error", _over(try_except, (T,), (T,)))
_register("numpy_inside", _over(calls_numpy, (torch.ones(4),), (torch.zeros(4),)))
_register("math_sqrt_of_int", _over(uses_math, (T, 4), (T, 9), (T, 16)))
_register("string_method", _over(str_method, (T, "double"), (T, "other"), (T, "Double")))
_register("recursion_depth_changes", _over(recursion, (T, 1), (T, 2), (T, 3)))
_register("generator_expression", _over(generator_sum, ([T, T],), ([T, T, T],)))
_register("detach_clone", _over(clone_detach, (T,), (T.clone().requires_grad_(),)))


# --- more everyday habits (test_repros.py, test_misc.py) ------------------------------------------------------

import enum  # noqa: E402 - kept beside the programs that use it


class Mode(enum.Enum):
    TRAIN = "train"
    EVAL = "eval"


def index_i(x, i):
    return x[i] * 2


def slice_n(x, n):
    return x[:n] + 1


def zeros_n(x, n):
    return torch.zeros(n) + x.sum()


def new_ones_n(x, n):
    return x.new_ones(n) * 3


def sum_dim(x, d):
    return x.sum(dim=d)


def cat_all(xs):
    return torch.cat(xs)


def tensor_from_list(x, values):
    return x + torch.tensor(values)


def by_enum(x, mode):
    return x * 2 if mode is Mode.TRAIN else x


def lookup(x, table, key):
    return x * table[key]


def loop_over_size(x):
    out = x
    for i in range(x.shape[0]):
        out = out + i
    return out


def bool_tensor(x, mask):
    return x * mask


def transpose_t(x):
    return x.T @ x


COUNTER = [0]


def counts_calls(x):
    COUNTER[0] += 1
    return x + COUNTER[0]


def appends_to(x, log):
    log.append(x.sum())
    return x * 2


class Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * self.calls


_register("index_with_int", _over(index_i, (T, 0), (T, 1), (T, 2), (T, -1)))
_register("slice_with_int", _over(slice_n, (T, 1), (T, 2), (T, 3)))
_register("zeros_of_int_size", _over(zeros_n, (T, 2), (T, 3), (T, 4)))
_register("new_ones_of_int_size", _over(new_ones_n, (T, 2), (T, 3), (T, 4)))
_register("sum_over_dim_int", _over(sum_dim, (A, 0), (A, 1), (A, 0), (A, -1)))
_register("cat_list_length", _over(cat_all, ([T, T],), ([T, T, T],), ([T],)))
_register("tensor_from_python_list", _over(tensor_from_list, (T, [1.0, 2.0, 3.0, 4.0]), (T, [4.0, 3.0, 2.0, 1.0])))
_register("enum_argument", _over(by_enum, (T, Mode.TRAIN), (T, Mode.EVAL), (T, Mode.TRAIN)))
_register("dict_lookup_by_string", _over(lookup, (T, {"a": 1, "b": 2}, "a"), (T, {"a": 1, "b": 2}, "b"),
                                         (T, {"a": 1, "b": 3}, "b")))
_register("loop_over_a_size", _over(loop_over_size, (torch.ones(2),), (torch.ones(3),), (torch.ones(4),)))
_register("bool_mask_tensor", _over(bool_tensor, (T, T > 1), (T, T > 2)))
_register("transpose_property", _over(transpose_t, (A,), (A.t().contiguous(),), (torch.ones(4, 3),)))
_register("global_counter_mutated", lambda api: (lambda f: (lambda: f(T), lambda: f(T), lambda: COUNTER[0]))(
    api.compile(counts_calls)) if COUNTER.__setitem__(0, 0) is None else ())
_register("argument_list_appended_inside", lambda api: (lambda f, log: (lambda: f(T), lambda: f(T), lambda: len(log)))(
    api.compile(appends_to), []))
_register("module_attribute_mutated_inside", lambda api: (lambda m: (lambda f: (lambda: f(T), lambda: f(T),
                                                                                lambda: m.calls))(api.compile(m)))(
    Counting()))


def p_dataclass_mutated_between_calls(api):
    b = Batch(T, 2)
    f = api.compile(use_batch)
    for k in (2, 3, 3):
        b.scale = k
        yield lambda: f(b)


def p_eval_then_no_grad(api):
    torch.manual_seed(0)
    m = Net()
    f = api.compile(m)
    yield lambda: f(X4).shape
    m.eval()
    with torch.no_grad():
        yield lambda: f(X4)

    def inside():
        with torch.no_grad():
            return f(X4)
    yield inside


def p_mutable_default(api):
    def g(x, acc=[]):  # noqa: B006 - the habit under test
        acc.append(1)
        return x * len(acc)
    f = api.compile(g)
    yield from _calls(f, (T,), (T,), (T,))


_register("dataclass_mutated_between_calls", p_dataclass_mutated_between_calls)
_register("eval_then_no_grad", p_eval_then_no_grad)
_register("mutable_default_argument", p_mutable_default)


# --- the program list's test ----------------------------------------------------------------------------------

# name -> why ours differs from torch (a strict xfail: it must fail, and is removed once it passes)
KNOWN: dict[str, str] = {
    # torch's own behaviour is the odd one
    "int_in_an_fstring": "torch's odd one: once n is a SymInt, torch's BUILD_STRING cannot format it ('BUILD_STRING "
                         "type error') and the frame runs eagerly for good; ours specializes n (guard n == 50) and "
                         "compiles each value",
    "sequential": "torch compiles nn.Sequential's call through a wrapper frame named 'inner' whose guard reads "
                  "'args[0]'; ours compiles Sequential.forward, whose argument is 'input'",
    # Note [The user's exception reaches them unchanged] (frame_cache.py): on purpose
    "shape_mismatch_error": "on purpose: an op that fails on its fake inputs is the user's error and reaches them as "
                            "eager raises it (RuntimeError); torch wraps it in TorchRuntimeError",
    # shape guards
    "mark_dynamic_bounded_by_code": "both raise ConstraintViolationError when the code's bounds pin the marked dim to "
                                    "2, but torch's graph (compiled before the error) has x of size 2 as its input "
                                    "where ours has no input",
    "maybe_mark_dynamic_specialized_by_code": "torch's graph for the branch that returns x keeps x as an input "
                                              "beside its size symbol; ours keeps only the symbol",
    # resume functions
    "print_in_function": "after the size changes torch compiles the part before print as a graph of its own with no "
                         "inputs (it returns the symbolic size the print reads); ours has no graph there",
    "item_in_if_off": "torch's resume graph for the branch that returns x takes x as an input; ours has no input",
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN[n]))
                                  if n in KNOWN else n for n in PROGRAMS])
def test_a_learners_program_sees_what_torch_shows(name):
    prog, patch = PROGRAMS[name]
    theirs = run(prog, "torch", patch)
    ours = run(prog, "ours", patch)
    for field in ("calls", "graphs", "reasons"):
        assert ours[field] == theirs[field], f"{field}:\n ours:  {ours[field]}\n torch: {theirs[field]}"


# --- explain: graph count, break count, each break's registry gb_type (torch._dynamo.explain) ---------------

EXPLAIN = {
    "print": (print_twice, (T,)),
    "data_dependent_if": (data_dependent_if, (T,)),
    "item_off": (item_use, (T,)),
    "tolist_off": (tolist_use, (T,)),
    "nonzero_off": (nonzero_use, (T,)),
    "numpy": (calls_numpy, (T,)),
    "no_break": (affine, (T,)),
    "module": (Net().eval(), (X4,)),
    "bool_of_tensor": (bool_of_tensor, (T,)),
    "try_except": (try_except, (T,)),
    "print_in_loop": (lambda x: [print(i) or x for i in range(2)][-1] + 1, (T,)),
    "helper_with_break": (lambda x: with_print(x * 2) - 1, (T,)),
    "item_in_if": (item_in_if, (T,)),
    "tolist_loop": (tolist_loop, (T,)),
    "float_of_tensor": (float_of_tensor, (T,)),
    "print_a_tensor": (print_tensor, (T,)),
}

KNOWN_EXPLAIN: dict[str, str] = {
}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_EXPLAIN[n]))
                                  if n in KNOWN_EXPLAIN else n for n in EXPLAIN])
def test_explain_counts_and_break_types_are_torchs(name):
    fn, args = EXPLAIN[name]
    mine, its, *_ = explain_both(fn, *args)
    assert mine == its


def test_the_set_is_the_size_the_brief_asks():
    assert len(PROGRAMS) + len(EXPLAIN) >= 120


def name_len(x, name):
    return x + len(name)


def test_the_recompile_limit_warning_opens_as_torchs():
    """``torch._dynamo hit config.recompile_limit (2)`` / ``function: 'f' (file:line)`` / ``last reason: 0/1: ...``
    (torch/_dynamo/convert_frame.py): ours the same three lines, ``minidynamo`` for ``torch._dynamo``."""
    def head(text):
        lines = text.replace("torch._dynamo hit", "minidynamo hit").splitlines()[:3]
        return [line.split("  #")[0].rstrip() for line in lines]

    md.reset()
    dynamo_reset()
    with dynamo_warnings() as records, dynamo_config_patch(recompile_limit=2):
        f = torch.compile(name_len, backend="eager")
        for s in "abcd":
            f(T, s)
    with warnings.catch_warnings(record=True) as caught, md.config.patch(recompile_limit=2):
        warnings.simplefilter("always")
        f = md.compile(name_len, backend="eager")
        for s in "abcd":
            f(T, s)
    ours = [str(w.message) for w in caught if "recompile_limit" in str(w.message)]
    md.reset()
    dynamo_reset()
    assert len(ours) == len(records) == 1
    assert head(ours[0]) == head(records[0])

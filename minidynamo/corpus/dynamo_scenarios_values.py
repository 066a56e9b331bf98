"""Scenarios on Python values a trace depends on, and on grad mode (see ``dynamo_scenarios``).

Place in the pipeline: part of the scenario corpus. Ported, in our own words, from
PyTorch's test/dynamo/test_misc.py (``test_boolarg``, ``test_dynamo_side_effect`` and
learner-shaped relatives: dataclasses, isinstance, closures, caught KeyErrors, dicts
keyed by dtypes and enums, f-strings of ``.item()``), test_functions.py (a mutable
default) and test_ctx_manager.py (grad mode set by calls, decorators and blocks).
"""

from __future__ import annotations

import dataclasses
import enum

import torch

from .dynamo_scenarios_base import _x, scenario


# --- test_misc.py ------------------------------------------------------------------


def _boolarg(a, b, flag):
    if flag:
        return a - b
    return b - a


@scenario("test_misc.py::test_boolarg")
def bool_none_arguments(compile):
    a, b = _x(4, 4), _x(4, 4, seed=1)
    f = compile(_boolarg)
    for flag in (True, False, None, True, 0, 1):
        f(a, b, flag)


class _GlobalContext:
    def __init__(self):
        self._tensors = {}
        self.entered = 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        return False


def _with_user_context(x):
    with _GlobalContext() as ctx:
        z = x + 1
        ctx._tensors["6"] = x + 2
    return z, ctx._tensors, ctx.entered


@scenario("test_misc.py::test_dynamo_side_effect")
def user_context_manager_object(compile):
    f = compile(_with_user_context)
    f(_x(4, 4))
    f(_x(4, 4, seed=1))


@dataclasses.dataclass
class _Settings:
    scale: float
    steps: int
    name: str = "run"


def _with_settings(x, s):
    for _ in range(s.steps):
        x = x * s.scale
    return x, f"{s.name}:{s.steps}"


@scenario("test_misc.py::test_dataclass_* (a dataclass argument changed between calls)")
def dataclass_argument_mutated(compile):
    s = _Settings(0.5, 2)
    f = compile(_with_settings)
    f(_x(3), s)
    s.steps = 3
    f(_x(3), s)
    s.name = "eval"
    f(_x(3), s)
    f(_x(3), _Settings(2.0, 1))


def _lookup_or_default(x, table):
    try:
        w = table["w"]
    except KeyError:
        w = 1.0
    return x * w


@scenario("test_misc.py::test_user_defined_exceptions (a KeyError caught in the frame)")
def keyerror_caught_then_key_added(compile):
    table = {}
    f = compile(_lookup_or_default)
    f(_x(3), table)
    table["w"] = 3.0
    f(_x(3), table)


class _Base:
    k = 2


class _Derived(_Base):
    k = 5


def _isinstance_branch(x, obj):
    if isinstance(obj, _Derived):
        return x * obj.k + 1
    return x * obj.k


@scenario("test_misc.py::test_isinstance_* (the argument's class changes)")
def isinstance_of_argument_class(compile):
    f = compile(_isinstance_branch)
    f(_x(3), _Base())
    f(_x(3), _Derived())
    f(_x(3), _Base())


def _make_scaler(t):
    def scale(x):
        return x * t

    return scale


def _apply(x, fn):
    return fn(x) + 1


@scenario("test_misc.py::test_closure_* (a closure over a tensor, rebuilt per call)")
def closure_over_a_different_tensor(compile):
    f = compile(_apply)
    f(_x(3), _make_scaler(_x(3, seed=1)))
    f(_x(3), _make_scaler(_x(3, seed=2)))
    f(_x(3), _make_scaler(2.0))
    f(_x(3), _make_scaler(3.0))


# --- test_ctx_manager.py ------------------------------------------------------------


@torch.no_grad()
def _frozen_stats(x):
    return x.mean() * 2


def _grad_switches(x):
    y = x * 2
    torch.set_grad_enabled(False)
    z = y * 3
    torch.set_grad_enabled(True)
    return y + z + _frozen_stats(x), z.requires_grad


@scenario("test_ctx_manager.py::test_set_grad_enabled_* / no_grad decorator inlined")
def grad_mode_as_calls_and_decorator(compile):
    f = compile(_grad_switches)
    f(_x(3).requires_grad_())
    f(_x(3))
    with torch.no_grad():
        f(_x(3).requires_grad_())


def _with_enable_grad(x):
    with torch.enable_grad():
        y = x * 2
    return y, y.requires_grad


def _enable_grad_under_no_grad_then_grad(compile):
    f = compile(_with_enable_grad)
    w = _x(3).requires_grad_()
    with torch.no_grad():
        f(w)
    f(w)
    return f


@scenario("test_ctx_manager.py::test_enable_grad_* (called under no_grad, then not)")
def enable_grad_inside_caller_no_grad(compile):
    f = _enable_grad_under_no_grad_then_grad(compile)
    with torch.inference_mode():
        f(_x(3))


# --- test_functions.py / test_misc.py: values a learner's code keeps between calls ----


def _remember(x, seen=[]):  # noqa: B006  (the mutable default is the point)
    seen.append(x.shape[0])
    return x * len(seen)


@scenario("test_functions.py::test_default_* (a mutable default list that grows)")
def mutable_default_grows(compile):
    _remember.__defaults__[0].clear()
    f = compile(_remember)
    for _ in range(3):
        f(_x(2))
    f.note(list(_remember.__defaults__[0]))


class _Layers:
    def __init__(self):
        self.weights = [torch.ones(3), torch.ones(3) * 2]
        self.names = {"first": 0}


def _zip_weights(x, holder):
    for i, w in enumerate(holder.weights):
        x = x * w + i
    for name, k in holder.names.items():
        x = x + len(name) * k
    return x


@scenario("test_misc.py::test_list_* / test_dict_* (containers on an object changed in place)")
def object_containers_changed_in_place(compile):
    holder = _Layers()
    f = compile(_zip_weights)
    f(_x(3), holder)
    holder.weights.append(torch.ones(3) * 3)
    f(_x(3), holder)
    holder.weights[0] = torch.zeros(3)
    f(_x(3), holder)
    holder.names["second"] = 2
    f(_x(3), holder)


def _report(x):
    loss = (x * x).mean()
    print(f"loss {loss.item():.3f} over {x.shape[0]} rows")
    return loss * 2


@scenario("test_misc.py::test_print_* (an f-string of .item() in the loop body)")
def fstring_of_item_printed(compile):
    f = compile(_report)
    f(_x(4, 2))
    f(_x(4, 2, seed=1))
    f(_x(5, 2))


class _Act(enum.Enum):
    RELU = "relu"
    TANH = "tanh"


G_BY_DTYPE = {torch.float32: 2.0, torch.float64: 3.0}
G_BY_ENUM = {_Act.RELU: torch.relu, _Act.TANH: torch.tanh}


def _table_lookup(x, act):
    return G_BY_ENUM[act](x) * G_BY_DTYPE[x.dtype]


@scenario("test_misc.py::test_dict_* (dicts keyed by a dtype and by an enum)")
def dicts_keyed_by_dtype_and_enum(compile):
    G_BY_DTYPE[torch.float32] = 2.0
    f = compile(_table_lookup)
    f(_x(3), _Act.RELU)
    f(_x(3), _Act.TANH)
    G_BY_DTYPE[torch.float32] = 5.0
    f(_x(3), _Act.TANH)
    f(_x(3).double(), _Act.RELU)


@scenario("test_ctx_manager.py::test_enable_grad_* through aot_eager (called under no_grad)", backend="aot_eager")
def enable_grad_inside_caller_no_grad_aot(compile):
    _enable_grad_under_no_grad_then_grad(compile)


@torch.no_grad()
def _noisy_frozen(x):
    y = x * 2
    print("inside, grad mode", torch.is_grad_enabled())
    return y + 1


def _calls_noisy(x):
    a = x.sin()
    b = _noisy_frozen(x)
    return a + b, b.requires_grad, torch.is_grad_enabled()


@scenario("test_ctx_manager.py (a graph break inside a @torch.no_grad()-decorated callee)")
def break_inside_a_no_grad_decorated_callee(compile):
    f = compile(_calls_noisy)
    f(_x(3).requires_grad_())
    f.note(torch.is_grad_enabled())
    f(_x(3, seed=1).requires_grad_())

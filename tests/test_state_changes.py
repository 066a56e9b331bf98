"""The state-change corpus: call, change something the trace depended on, call again; always eager's answer.

Each case builds a small "world" twice from the same seed: one called eagerly, one
through ``md.compile``. Both are called, then the same change is made to both (grad
mode, inference mode, autocast, the default dtype, a module attribute, a global of
another module, a hook added or removed, ``forward`` replaced, ``__defaults__``, the
same object passed twice), then both are called again. Every output, every object
the call could write to, and after a backward the gradients of the parameters, must
be what eager gives. A silently wrong answer fails the suite; the count of cases
right is printed by ``test_corpus_size``.

The cases are our own, after the kinds that PyTorch's own Dynamo tests check
(test/dynamo/test_modules.py: hooks, ``forward`` on the instance, ``training``;
test_ctx_manager.py: grad mode, inference mode, autocast; test_misc.py: defaults,
closures, globals, the default dtype). ``test_recompiles_like_torch`` asks
``torch.compile`` whether the change recompiles and expects the same of us.
"""

from __future__ import annotations

import contextlib
import enum
import types
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import pytest
import torch

import minidynamo as md

import _state_helpers as helpers  # noqa: E402 - tests/ is on sys.path (no package)
from _global_state import default_dtype, deterministic  # noqa: E402

pytestmark = pytest.mark.ch04


@dataclass
class World:
    fn: Callable  # a function or an nn.Module
    args: Callable[[], tuple]  # fresh arguments for one call
    change: Callable[["World"], Any] = lambda w: None  # changes the world; may return a context for call 2
    state: Callable[["World"], Any] = lambda w: None  # what a call may have written to
    before: Callable[[], Any] = contextlib.nullcontext  # the context of call 1
    extra: dict = field(default_factory=dict)


CASES: dict[str, Callable[[], World]] = {}
BACKENDS: dict[str, str] = {}


def case(name: str, backend: str = "eager"):
    def register(build):
        assert name not in CASES, name
        CASES[name] = build
        BACKENDS[name] = backend
        return build

    return register


# --- comparing -----------------------------------------------------------------------

def assert_same(got, want, where="output"):
    assert type(got) is type(want), f"{where}: {type(got).__name__} != {type(want).__name__}"
    if isinstance(got, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape, f"{where}: {got.dtype}{tuple(got.shape)}"
        assert got.requires_grad == want.requires_grad, f"{where}: requires_grad {got.requires_grad}"
        assert (got.grad_fn is None) == (want.grad_fn is None), f"{where}: grad_fn {got.grad_fn}"
        assert got.is_inference() == want.is_inference(), f"{where}: is_inference"
        torch.testing.assert_close(got.detach(), want.detach(), msg=lambda m: f"{where}: {m}")
    elif isinstance(got, (list, tuple)):
        assert len(got) == len(want), f"{where}: length {len(got)} != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same(g, w, f"{where}[{i}]")
    elif isinstance(got, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k in got:
            assert_same(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(got, float) and got != got:
        assert want != want, f"{where}: nan != {want}"
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


def _grads(world: World) -> list:
    fn = world.fn
    if isinstance(fn, torch.nn.Module):
        return [p.grad for p in fn.parameters()]
    return []


def _context(ctx):
    return ctx if hasattr(ctx, "__enter__") else contextlib.nullcontext()


def _change(world: World):
    torch.manual_seed(1)  # a change that makes a new module gives both worlds the same one
    return _context(world.change(world))


def _call(world: World, fn: Callable, ctx) -> Any:
    with ctx:
        out = fn(*world.args())
    return out


def _backward(out) -> None:
    leaves = [t for t in (out if isinstance(out, (tuple, list)) else [out])
              if isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is not None]
    if leaves:
        sum(t.float().sum() for t in leaves).backward()


def run_case(name: str) -> list:
    """Both worlds through call 1, the change, call 2; returns the compiled entries' count history."""
    md.reset()
    torch.manual_seed(0)
    eager = CASES[name]()
    torch.manual_seed(0)
    world = CASES[name]()
    compiled = md.compile(world.fn, backend=BACKENDS[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in (1, 2):
            ctx_e = eager.before() if step == 1 else _change(eager)
            try:
                want = _call(eager, eager.fn, ctx_e)
            except Exception as e:  # noqa: BLE001 - the user's own error: compiled must raise it too
                ctx_c = world.before() if step == 1 else _change(world)
                with pytest.raises(type(e)):
                    _call(world, compiled, ctx_c)
                return compiled
            ctx_c = world.before() if step == 1 else _change(world)
            got = _call(world, compiled, ctx_c)
            assert_same(got, want, f"call {step}")
            assert_same(world.state(world), eager.state(eager), f"state after call {step}")
            _backward(want)
            _backward(got)
            assert_same(_grads(world), _grads(eager), f"parameter grads after call {step}")
    return compiled


# --- 1. global state: grad mode, inference mode, autocast, default dtype, determinism ------

GLOBAL_CHANGES = {
    "no_grad": torch.no_grad,
    "set_grad_enabled_false": lambda: torch.set_grad_enabled(False),  # off when made, restored on exit
    "inference_mode": torch.inference_mode,
    "autocast_bf16": lambda: torch.autocast("cpu", dtype=torch.bfloat16),
    "autocast_f16": lambda: torch.autocast("cpu", dtype=torch.float16),
    "default_float64": lambda: default_dtype(torch.float64),
    "deterministic": deterministic,
}


def _linear_world():
    return World(torch.nn.Linear(3, 2), lambda: (torch.ones(4, 3),))


def _mlp_world():
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(3, 8), torch.nn.Linear(8, 2)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    return World(MLP(), lambda: (torch.ones(4, 3),))


def _ones_world():
    return World(lambda x: x + torch.ones(3), lambda: (torch.arange(3.0),))


def _is_grad_world():
    w = torch.ones(3, requires_grad=True)
    return World(lambda x: x * w if torch.is_grad_enabled() else x - 1, lambda: (torch.arange(3.0),))


def _default_dtype_world():
    return World(lambda x: (x * 2, torch.get_default_dtype()), lambda: (torch.arange(3.0),))


def _autocast_query_world():
    return World(lambda x: x + 1 if torch.is_autocast_enabled("cpu") else x - 1, lambda: (torch.arange(3.0),))


def _matmul_world():
    w, x = torch.randn(3, 3), torch.randn(2, 3)
    return World(lambda x: (x @ w).sum(0), lambda: (x.clone(),))


def _deterministic_world():
    return World(lambda x: x + 1 if torch.are_deterministic_algorithms_enabled() else x * 3,
                 lambda: (torch.arange(3.0),))


GLOBAL_WORLDS = {"linear": _linear_world, "mlp": _mlp_world, "ones": _ones_world, "is_grad": _is_grad_world,
                 "default_dtype": _default_dtype_world, "autocast_query": _autocast_query_world,
                 "matmul": _matmul_world, "deterministic_query": _deterministic_world}

for _wname, _build in GLOBAL_WORLDS.items():
    for _cname, _ctx in GLOBAL_CHANGES.items():
        def _after(build=_build, ctx=_ctx):  # call 1 as usual, call 2 under the change
            w = build()
            w.change = lambda w, ctx=ctx: ctx()
            return w

        def _first(build=_build, ctx=_ctx):  # call 1 under the change (a validation pass), call 2 as usual
            w = build()
            w.before = ctx
            return w

        backend = "aot_eager" if _wname in ("linear", "mlp", "is_grad") else "eager"
        case(f"{_wname}-then-{_cname}", backend)(_after)
        case(f"{_cname}-then-{_wname}", backend)(_first)


# --- 2. modules: forward on the instance, hooks, attributes ---------------------------------

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.scale = 2.0
        self.act = torch.relu

    def forward(self, x):
        h = self.lin(x) * self.scale
        return self.act(h) if self.act is not None else h


def _net(change, state=lambda w: None) -> World:
    return World(Net(), lambda: (torch.ones(2, 3),), change=change, state=state)


case("forward-replaced-by-lambda")(lambda: _net(lambda w: setattr(w.fn, "forward", lambda x: x * 100)))
case("forward-replaced-by-bound-method")(lambda: _net(
    lambda w: setattr(w.fn, "forward", types.MethodType(lambda self, x: self.lin(x) - 1, w.fn))))


def _forward_restored():
    w = _net(lambda w: delattr(w.fn, "forward"))
    w.fn.forward = lambda x: x * 7
    return w


case("forward-override-removed")(_forward_restored)


def _hooked(register, where="top", remove=False, state=False):
    def build():
        log = []
        w = _net(None)
        target = w.fn if where == "top" else w.fn.lin

        def change(w):
            if remove:
                w.extra["handle"].remove()
            else:
                register(target, log)

        if remove:
            w.extra["handle"] = register(target, log)
        w.change = change
        w.state = lambda w: list(log)
        return w

    return build


def _fwd_hook(m, log):
    return m.register_forward_hook(lambda mod, inp, out: out * 2)


def _pre_hook(m, log):
    return m.register_forward_pre_hook(lambda mod, inp: (inp[0] * 3,))


def _pre_hook_single(m, log):
    return m.register_forward_pre_hook(lambda mod, inp: inp[0] + 1)  # a non-tuple result is wrapped


def _observer(m, log):
    return m.register_forward_hook(lambda mod, inp, out: log.append(len(log)))  # returns None: out unchanged


def _kw_hook(m, log):
    return m.register_forward_hook(lambda mod, args, kwargs, out: out + len(kwargs), with_kwargs=True)


def _kw_pre_hook(m, log):
    return m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 2,), kwargs), with_kwargs=True)


def _two_hooks(m, log):
    m.register_forward_hook(lambda mod, inp, out: out + 1)
    return m.register_forward_hook(lambda mod, inp, out: out * 3)  # order matters: (out + 1) * 3


for _where in ("top", "sub"):
    for _hname, _reg in {"forward-hook": _fwd_hook, "pre-hook": _pre_hook, "pre-hook-single": _pre_hook_single,
                         "observer-hook": _observer, "kwargs-hook": _kw_hook, "kwargs-pre-hook": _kw_pre_hook,
                         "two-hooks": _two_hooks}.items():
        case(f"{_hname}-added-{_where}")(_hooked(_reg, _where))
        case(f"{_hname}-removed-{_where}")(_hooked(_reg, _where, remove=True))


def _add_one(module, inp, out):
    return out + 1


def _global_hook():
    def change(w):  # global: both worlds see one hook, registered once
        if _add_one not in torch.nn.modules.module._global_forward_hooks.values():  # noqa: SLF001
            torch.nn.modules.module.register_module_forward_hook(_add_one)

    return _net(change)


@pytest.fixture(autouse=True)
def _no_global_hooks_left():
    yield
    mm = torch.nn.modules.module
    mm._global_forward_hooks.clear()  # noqa: SLF001


case("global-module-hook-added")(_global_hook)


def _weight_norm():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # weight_norm is deprecated in favour of parametrizations
        m = torch.nn.utils.weight_norm(torch.nn.Linear(3, 3))

    def change(w):
        with torch.no_grad():
            w.fn.weight_g.mul_(2)  # the pre-hook recomputes weight from g and v on every call

    return World(m, lambda: (torch.ones(2, 3),), change=change)


case("weight-norm-pre-hook-reads-changed-g")(_weight_norm)
case("module-scale-attribute")(lambda: _net(lambda w: setattr(w.fn, "scale", 3.5)))
case("module-activation-swapped")(lambda: _net(lambda w: setattr(w.fn, "act", torch.tanh)))
case("module-activation-none")(lambda: _net(lambda w: setattr(w.fn, "act", None)))
case("module-activation-from-other-module")(lambda: _net(lambda w: setattr(w.fn, "act", helpers.activation)))
case("submodule-replaced")(lambda: _net(lambda w: setattr(w.fn, "lin", torch.nn.Linear(3, 3))))
case("submodule-replaced-by-identity")(lambda: _net(lambda w: setattr(w.fn, "lin", torch.nn.Identity())))
case("parameter-replaced")(lambda: _net(lambda w: setattr(w.fn.lin, "weight", torch.nn.Parameter(torch.ones(3, 3)))))
case("parameter-requires-grad-off")(lambda: _net(lambda w: w.fn.lin.weight.requires_grad_(False)))
case("parameter-changed-in-place")(lambda: _net(lambda w: torch.nn.init.constant_(w.fn.lin.weight.data, 0.5)))


class Dropper(torch.nn.Module):
    def forward(self, x):
        return x * 2 if self.training else x - 1


case("train-to-eval")(lambda: World(Dropper(), lambda: (torch.ones(3),), change=lambda w: w.fn.eval()))


def _eval_to_train():
    w = World(Dropper(), lambda: (torch.ones(3),), change=lambda w: w.fn.train())
    w.fn.eval()
    return w


case("eval-to-train")(_eval_to_train)


class WithHelper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def helper(self, x):
        return x + 1

    def forward(self, x):
        return self.helper(self.lin(x))


case("module-method-replaced-on-instance")(lambda: World(WithHelper(), lambda: (torch.ones(3),),
                                                        change=lambda w: setattr(w.fn, "helper", lambda x: x * 5)))


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)])
        self.seq = torch.nn.Sequential(torch.nn.Linear(3, 3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.seq(x)


case("modulelist-appended")(lambda: World(Stack(), lambda: (torch.ones(3),),
                                          change=lambda w: w.fn.layers.append(torch.nn.Linear(3, 3))))
case("modulelist-item-replaced")(lambda: World(Stack(), lambda: (torch.ones(3),),
                                               change=lambda w: w.fn.layers.__setitem__(0, torch.nn.Identity())))
case("sequential-appended")(lambda: World(Stack(), lambda: (torch.ones(3),),
                                          change=lambda w: w.fn.seq.append(torch.nn.ReLU())))
case("hook-on-listed-layer")(lambda: World(Stack(), lambda: (torch.ones(3),),
                                           change=lambda w: _fwd_hook(w.fn.layers[1], None)))
case("module-from-other-module-global")(lambda: World(
    helpers.Block(), lambda: (torch.ones(3),), change=lambda w: setattr(helpers, "SCALE", 5.0)))


# --- 3. functions: globals, closures, defaults, methods -------------------------------------

G_FACTOR = 2


def _uses_global(x):
    return x * G_FACTOR


def _restore(module, name):
    """A change to a module global, undone after the test (both worlds share the module)."""
    _RESTORE.append((module, name, getattr(module, name)))


_RESTORE: list = []


@pytest.fixture(autouse=True)
def _restore_globals():
    yield
    while _RESTORE:
        module, name, value = _RESTORE.pop()
        setattr(module, name, value)


_this = __import__(__name__, fromlist=["_"])


def _set(module, name, value):
    def change(w):
        if not any(m is module and n == name for m, n, _ in _RESTORE):
            _restore(module, name)
        setattr(module, name, value)

    return change


case("own-global-changed")(lambda: World(_uses_global, lambda: (torch.ones(3),), change=_set(_this, "G_FACTOR", 5)))
case("other-module-global-via-function")(lambda: World(lambda x: helpers.scaled(x), lambda: (torch.ones(3),),
                                                       change=_set(helpers, "SCALE", 4.0)))
case("other-module-tensor-global")(lambda: World(lambda x: helpers.shifted(x), lambda: (torch.ones(3),),
                                                 change=_set(helpers, "OFFSET", torch.full((3,), 7.0))))


def _method_world(change, method="apply"):
    scaler = helpers.Scaler(1.5)
    return World(lambda x: getattr(scaler, method)(x), lambda: (torch.ones(3),), change=change,
                 extra={"scaler": scaler})


case("other-module-global-via-method")(lambda: _method_world(_set(helpers, "SCALE", 3.0)))
case("other-module-global-via-property")(lambda: World(
    (lambda s: lambda x: x * s.factor)(helpers.Scaler(2.0)), lambda: (torch.ones(3),),
    change=_set(helpers, "SCALE", 6.0)))


def _flags_change(w):
    _restore(helpers, "FLAGS")
    helpers.FLAGS = {"double": True}


case("other-module-global-dict-replaced")(lambda: _method_world(_flags_change, "maybe_double"))
case("method-replaced-on-instance")(lambda: _method_world(
    lambda w: setattr(w.extra["scaler"], "apply", lambda x: x - 9)))
case("object-attribute-changed")(lambda: _method_world(lambda w: setattr(w.extra["scaler"], "k", 4.0)))


def _class_method_patch():
    class Local:
        def go(self, x):
            return x + 1

    obj = Local()
    return World(lambda x: obj.go(x), lambda: (torch.ones(3),), change=lambda w: setattr(Local, "go", lambda s, x: x * 8))


case("method-replaced-on-class")(_class_method_patch)


def _class_attr():
    class Cfg:
        k = 2

    obj = Cfg()
    return World(lambda x: x * obj.k, lambda: (torch.ones(3),), change=lambda w: setattr(Cfg, "k", 9))


case("class-attribute-changed")(_class_attr)


def _closure_world():
    k = 2

    def f(x):
        return x * k

    def change(w):
        nonlocal k
        k = 11

    return World(f, lambda: (torch.ones(3),), change=change)


case("closure-cell-changed")(_closure_world)


def _inlined_closure_world():
    k = 2

    def inner(x):
        return x * k

    def change(w):
        nonlocal k
        k = 13

    return World(lambda x: inner(x) + 1, lambda: (torch.ones(3),), change=change)


case("inlined-closure-cell-changed")(_inlined_closure_world)


def _defaults_root():
    def f(x, k=2):
        return x * k

    return World(f, lambda: (torch.ones(3),), change=lambda w: setattr(f, "__defaults__", (5,)))


def _defaults_inlined():
    def g(x, k=2):
        return x * k

    return World(lambda x: g(x) - 1, lambda: (torch.ones(3),), change=lambda w: setattr(g, "__defaults__", (6,)))


def _kwdefaults_root():
    def f(x, *, k=2):
        return x * k

    return World(f, lambda: (torch.ones(3),), change=lambda w: f.__kwdefaults__.__setitem__("k", 7))


def _kwdefaults_inlined():
    def g(x, *, k=2):
        return x * k

    return World(lambda x: g(x), lambda: (torch.ones(3),), change=lambda w: setattr(g, "__kwdefaults__", {"k": 8}))


def _tensor_default():
    def g(x, b=torch.ones(3)):
        return x + b

    return World(lambda x: g(x), lambda: (torch.ones(3),),
                 change=lambda w: setattr(g, "__defaults__", (torch.full((3,), 4.0),)))


def _method_default():
    class K:
        def go(self, x, k=2):
            return x * k

    obj = K()
    return World(lambda x: obj.go(x), lambda: (torch.ones(3),), change=lambda w: setattr(K.go, "__defaults__", (3,)))


case("defaults-of-compiled-function")(_defaults_root)
case("defaults-of-inlined-function")(_defaults_inlined)
case("kwdefaults-of-compiled-function-in-place")(_kwdefaults_root)
case("kwdefaults-of-inlined-function")(_kwdefaults_inlined)
case("tensor-default-replaced")(_tensor_default)
case("method-defaults-changed")(_method_default)


def _global_fn_swapped():
    _restore(_this, "G_HELPER")
    return World(lambda x: G_HELPER(x), lambda: (torch.ones(3),), change=_set(_this, "G_HELPER", torch.sin))


G_HELPER = torch.cos
case("global-function-swapped")(_global_fn_swapped)
case("other-module-function-swapped")(lambda: World(lambda x: helpers.activation(x) * 1, lambda: (torch.ones(3) - 2,),
                                                    change=_set(helpers, "activation", torch.abs)))

G_LIST = [1, 2]
G_DICT = {"a": 1}


def _global_list():
    def f(x):
        return x * len(G_LIST)

    _restore(_this, "G_LIST")
    return World(f, lambda: (torch.ones(3),), change=lambda w: G_LIST.__setitem__(slice(None), [1, 2, 3]))


def _global_dict():
    def f(x):
        return x + sum(G_DICT.values())

    _restore(_this, "G_DICT")
    return World(f, lambda: (torch.ones(3),), change=lambda w: G_DICT.update(b=5))


case("global-list-grew")(_global_list)
case("global-dict-new-key")(_global_dict)


# --- 4. one object through two names ---------------------------------------------------------

def _appender(a, b, x):
    a.append(1)
    return x + len(b)


def _two_lists_then(alias_first: bool):
    calls = {"n": 0}

    def args():
        calls["n"] += 1
        aliased = (calls["n"] == 1) == alias_first
        if aliased:
            lst = [0]
            return lst, lst, torch.zeros(1)
        return [0], [0], torch.zeros(1)

    return World(_appender, args)


case("same-list-twice-then-two-lists")(lambda: _two_lists_then(True))
case("two-lists-then-same-list-twice")(lambda: _two_lists_then(False))


def _global_also_argument():
    box = [1]

    def f(c, x):
        c.append(2)
        return x + len(G_BOX)

    def args():
        _this.G_BOX = box  # this world's list is the global while it is called
        return box, torch.zeros(1)

    return World(f, args, state=lambda w: list(box))


case("global-list-also-an-argument")(_global_also_argument)


def _dict_twice():
    def f(a, b, x):
        a["new"] = 1
        return x + len(b)

    return World(f, lambda: ((d := {"k": 0}), d, torch.zeros(1)))


case("same-dict-twice")(_dict_twice)


def _object_twice():
    class Box:
        def __init__(self):
            self.v = 1

    def f(a, b, x):
        a.v = 5
        return x * b.v

    shared = Box()
    return World(f, lambda: (shared, shared, torch.ones(1)), state=lambda w: shared.v)


case("same-object-twice-attribute-write")(_object_twice)


def _nested_alias():
    def f(outer, inner, x):
        inner.append(9)
        return x + len(outer[0])

    return World(f, lambda: ((inner := [1]) and [inner], inner, torch.zeros(1)))


case("list-inside-list-and-argument")(_nested_alias)


def _dict_views_after_insert():
    def f(d, x):
        k, v, i = d.keys(), d.values(), d.items()
        d["c"] = 3
        return x + len(k), list(k), list(v), list(i)

    return World(f, lambda: ({"a": 1, "b": 2}, torch.zeros(1)))


case("dict-views-see-a-later-insert")(_dict_views_after_insert)


# --- 5. constants of every kind, traced with one value then called with another --------------

class Mode(str, enum.Enum):
    NONE = "none"
    SUM = "sum"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Color(enum.Enum):
    RED = "r"
    BLUE = "b"


def _branch(x, c):
    return x + 1 if c == CONSTANT_PAIRS_FIRST.get(type(c), c) else x - 1


CONSTANT_VALUES = {
    "int": (3, 4), "float": (1.5, 2.5), "inf": (float("inf"), 1.0), "-inf": (float("-inf"), float("inf")),
    "nan": (float("nan"), 0.0), "str": ("a", "b"), "bytes": (b"x", b"y"), "none": (None, 0), "bool": (True, False),
    "tuple": ((1, "a", None), (1, "a", 2)), "nested-tuple": (((1, 2), (3,)), ((1, 2), (4,))),
    "dtype": (torch.float32, torch.float64), "device": (torch.device("cpu"), torch.device("meta")),
    "str-enum": (Mode.NONE, Mode.SUM), "int-enum": (Level.LOW, Level.HIGH), "enum": (Color.RED, Color.BLUE),
    "complex": (1 + 2j, 3j), "size": (torch.Size([2, 3]), torch.Size([3])), "slice": (slice(0, 2), slice(1, 3)),
    "range": (range(3), range(4)), "frozenset": (frozenset({1}), frozenset({2})),
}
CONSTANT_PAIRS_FIRST: dict = {}


def _const_world(first, second):
    def f(x, c):
        if isinstance(c, torch.device):
            return x.new_ones(1, device=c).cpu() if c.type != "meta" else x * 0, c.type
        return (x + 1, repr(c)) if c == first or (c != c and first != first) else (x - 1, repr(c))

    calls = {"n": 0}

    def args():
        calls["n"] += 1
        return torch.zeros(2), first if calls["n"] == 1 else second

    return World(f, args)


for _kind, (_a, _b) in CONSTANT_VALUES.items():
    case(f"constant-{_kind}-changed")(lambda a=_a, b=_b: _const_world(a, b))
    case(f"constant-{_kind}-kept")(lambda a=_a: _const_world(a, a))


# --- a class attribute the trace inlined, reassigned on the class (Note [A class attribute the trace used])

def _class_forward_world(replace):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x):
            return self.lin(x) + 1

    net = Net()
    return World(net, lambda: (torch.ones(2, 3),), change=lambda w: replace(type(w.fn)))


case("class-forward-replaced")(lambda: _class_forward_world(
    lambda cls: setattr(cls, "forward", lambda self, x: self.lin(x) * 100)))


def _class_forward_called_world():
    world = _class_forward_world(lambda cls: setattr(cls, "forward", lambda self, x: self.lin(x) - 5))
    net = world.fn
    world.fn = lambda x: net(x) * 2  # the module called from a compiled function, not compiled itself
    world.change = lambda w: setattr(type(net), "forward", lambda self, x: self.lin(x) - 5)
    return world


case("class-forward-replaced-called-inside")(_class_forward_called_world)


def _class_attr_world(kind):
    class Thing:
        @property
        def k(self):
            return 2.0

        @staticmethod
        def s(x):
            return x + 1

        @classmethod
        def c(cls, x):
            return x * 3

    thing = Thing()
    fns = {"property": lambda x: x * thing.k, "staticmethod": lambda x: thing.s(x) + Thing.s(x),
           "classmethod": lambda x: thing.c(x)}
    changes = {"property": lambda: setattr(Thing, "k", property(lambda self: 5.0)),
               "staticmethod": lambda: setattr(Thing, "s", staticmethod(lambda x: x * 10)),
               "classmethod": lambda: setattr(Thing, "c", classmethod(lambda cls, x: x - 7))}
    return World(fns[kind], lambda: (torch.arange(3.0),), change=lambda w: changes[kind]())


for _kind in ("property", "staticmethod", "classmethod"):
    case(f"class-{_kind}-replaced")(lambda _kind=_kind: _class_attr_world(_kind))


# --- torch.backends flags read by the trace (Note [torch.backends flags are guarded]) ----

@contextlib.contextmanager
def _flipped(module, attr, value):
    old = getattr(module, attr)
    setattr(module, attr, value)
    try:
        yield
    finally:
        setattr(module, attr, old)


def _backend_flag_world(module, attr, value):
    src = f"def fn(x):\n    return x + 1 if torch.backends.{module.__name__.split('.')[-1]}.{attr} == {value!r} else x - 1\n"
    scope = {"torch": torch}
    exec(src, scope)  # noqa: S102 - the flag read as an attribute chain, as user code reads it
    return World(scope["fn"], lambda: (torch.ones(3),), change=lambda w: _flipped(module, attr, value))


for _module, _attr, _value in ((torch.backends.cudnn, "enabled", False), (torch.backends.cudnn, "benchmark", True),
                               (torch.backends.mkldnn, "enabled", False), (torch.backends.cudnn, "deterministic", True)):
    case(f"backend-flag-{_module.__name__.split('.')[-1]}-{_attr}")(
        lambda m=_module, a=_attr, v=_value: _backend_flag_world(m, a, v))


# --- the tests -----------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(CASES))
def test_state_change_matches_eager(name):
    run_case(name)


def test_corpus_size():
    assert len(CASES) >= 100, len(CASES)


@pytest.mark.parametrize("kind", list(CONSTANT_VALUES))
def test_a_constant_guard_holds_for_the_value_it_was_traced_with(kind):
    """Called again with the same value: the entry is reused, no recompile (the guard is valid Python)."""
    compiled = run_case(f"constant-{kind}-kept")
    assert len(compiled.cache.entries) == 1 and not compiled.cache.recompiles, compiled.cache.recompiles
    for guard in compiled.cache.entries[0].guards:
        compile(guard.expr, "<guard>", "eval")


# Changes torch.compile recompiles for (counted with its own backend), and the same asked of us.
# Not here: a hook added to a submodule after compile. Torch does not recompile for it
# (torch._dynamo.config.skip_nnmodule_hook_guards) and so ignores the hook; ours
# recompiles and runs it, as eager does (the corpus above checks the result).
RECOMPILE_ORACLE = ["linear-then-no_grad", "ones-then-default_float64", "forward-replaced-by-lambda",
                    "defaults-of-inlined-function", "other-module-global-via-method", "parameter-changed-in-place",
                    "module-scale-attribute", "own-global-changed", "no_grad-then-linear", "train-to-eval"]


def _frames_torch(name: str) -> int:
    torch._dynamo.reset()
    torch.manual_seed(0)
    world = CASES[name]()
    frames = []

    def backend(gm, example_inputs):
        frames.append(gm)
        return gm.forward

    compiled = torch.compile(world.fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with world.before():
            compiled(*world.args())
        n = len(frames)
        with _change(world):
            compiled(*world.args())
    torch._dynamo.reset()
    while _RESTORE:  # undo a change to a module global before our own run makes it again
        module, attr, value = _RESTORE.pop()
        setattr(module, attr, value)
    return len(frames) - n


@pytest.mark.parametrize("name", RECOMPILE_ORACLE)
def test_recompiles_like_torch(name):
    torch_recompiled = _frames_torch(name) > 0
    compiled = run_case(name)
    entries = compiled.cache.entries if hasattr(compiled, "cache") else []
    ours = len(compiled.cache.recompiles) > 0 or len(entries) > 1
    if isinstance(compiled, md.symbolic.eval_frame.OptimizedModule):
        ours = ours or bool(compiled._call_impl.cache.entries)  # noqa: SLF001 - a hook moved it to the call path
    assert ours == torch_recompiled, f"torch recompiled: {torch_recompiled}, ours: {ours}"

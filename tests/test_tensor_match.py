"""The C++ TENSOR_MATCH (Note [TENSOR_MATCH runs in C++]): it must say what the Python guards say.

Differential: for many pairs (tensor traced, tensor passed) the C++ ``TensorMatch``,
the readable Python guards it replaces, and torch's own C++ TENSOR_MATCH
(``TensorGuards``) are evaluated; they must agree on every pair. A check function built with and without the extension must agree too,
and the Python one stays what runs where the extension is missing.
"""

from __future__ import annotations

import contextlib
import os
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo.symbolic import tensor_match
from minidynamo.symbolic.guard_codegen import CheckFunction
from minidynamo.symbolic.guards import GuardSet
from minidynamo.symbolic.source import LocalSource

from _global_state import default_dtype, deterministic  # tests/ is on sys.path (no package)
from _helpers import setting as _set

pytestmark = pytest.mark.ch04


def _layouts() -> list:
    base = torch.randn(4, 6)
    with warnings.catch_warnings():  # "nested tensors are a prototype"
        warnings.simplefilter("ignore")
        nested = torch.nested.nested_tensor([torch.randn(2), torch.randn(3)])
    return [
        torch.randn(4, 6), base.t(), base[:, ::2], base[1:3], torch.randn(4, 1), torch.randn(1, 6),
        torch.empty_strided((4, 1), (1, 7)), torch.randn(6).expand(4, 6), torch.randn(0, 6), torch.randn(()),
        torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last), torch.randn(24),
        torch.randn(4, 6, dtype=torch.float64), torch.zeros(4, 6, dtype=torch.int64), torch.ones(4, 6, dtype=torch.bool),
        torch.randn(4, 6, requires_grad=True), torch.randn(4, 6, requires_grad=True) * 2,
        torch.nn.Parameter(torch.randn(4, 6)), torch.empty(4, 6, device="meta"), torch.empty(6, 4, device="meta").t(),
        torch.randn(4, 6).to_sparse(), nested, torch.randn(4, 6, dtype=torch.complex64).conj(),
    ]


def _python_says(gs: GuardSet, value) -> bool:
    """The readable TENSOR_MATCH guards, evaluated one by one (an error is a failed guard)."""
    scope = dict(gs.scope, L={"x": value}, G={})
    for g in gs.guards:
        if g.kind != "TENSOR_MATCH":
            continue
        try:
            if not eval(g.expr, scope):  # noqa: S307
                return False
        except Exception:  # noqa: BLE001
            return False
    return True


def _cpp_says(match, value) -> bool:
    try:
        return match(value)
    except RuntimeError:  # sizes or strides that cannot be read (sparse, nested)
        return False


def test_the_extension_is_built():
    """The README's install builds it; a broken build must not pass quietly as a slower CI."""
    if os.environ.get("MINIDYNAMO_PYTHON_GUARDS"):
        pytest.skip("MINIDYNAMO_PYTHON_GUARDS is set")
    assert tensor_match.get() is not None, tensor_match.reason()


def test_cpp_and_python_tensor_match_agree_on_every_pair():
    TensorMatch = tensor_match.get()
    if TensorMatch is None:
        pytest.skip(tensor_match.reason())
    layouts = _layouts()
    disagreements, passes = [], 0
    for traced in layouts:
        if traced.is_sparse or traced.is_nested:
            continue  # nothing is traced for these: their strides cannot even be read
        gs = GuardSet()
        gs.TENSOR_MATCH(LocalSource("x"), traced, "test")
        match = TensorMatch(*gs.tensor_specs["L['x']"])
        for passed in layouts:
            if type(passed) is not type(traced):
                continue  # TYPE_MATCH, in Python, runs first
            py, cpp = _python_says(gs, passed), _cpp_says(match, passed)
            passes += py
            if py != cpp:
                disagreements.append((tuple(traced.shape), traced.stride(), passed.dtype, tuple(passed.shape), py, cpp))
    assert not disagreements, disagreements
    assert passes > len(layouts) // 2  # each tensor at least passes its own guard: the test can tell


def test_tensor_match_agrees_with_torchs_tensor_check():
    """The oracle: torch's own C++ TENSOR_MATCH (``TensorGuards``, static sizes and strides) on the same pairs.

    Sparse and nested tensors are left out: torch's check reads their strides
    unguarded. Torch also compares dispatch keys; none of these pairs differ in
    them without differing in dtype, so the verdicts must be equal.
    """
    from torch._C._dynamo.guards import TensorGuards

    TensorMatch = tensor_match.get()
    if TensorMatch is None:
        pytest.skip(tensor_match.reason())
    layouts = [t for t in _layouts() if not (t.is_sparse or t.is_nested)]
    disagreements, passes = [], 0
    for traced in layouts:
        gs = GuardSet()
        gs.TENSOR_MATCH(LocalSource("x"), traced, "test")
        ours = TensorMatch(*gs.tensor_specs["L['x']"])
        theirs = TensorGuards(traced, dynamic_dims_sizes=[list(traced.shape)],
                              dynamic_dims_strides=[list(traced.stride())])
        for passed in layouts:
            if type(passed) is not type(traced):
                continue
            torch_says = theirs.check(passed)
            passes += torch_says
            if torch_says != _cpp_says(ours, passed):
                disagreements.append((tuple(traced.shape), traced.stride(), traced.dtype, tuple(passed.shape),
                                      passed.stride(), passed.dtype, torch_says))
    assert not disagreements, disagreements
    assert passes >= len(layouts)  # each tensor passes torch's guard built for itself


def test_tensor_match_refuses_what_is_not_a_tensor():
    TensorMatch = tensor_match.get()
    if TensorMatch is None:
        pytest.skip(tensor_match.reason())
    match = TensorMatch(torch.float32, None, (2,), None, False)
    assert match(torch.zeros(2)) is True
    assert match([0.0, 0.0]) is False and match(None) is False
    with pytest.raises(TypeError, match="dtype"):
        TensorMatch("float32", None, (2,), None, False)
    with pytest.raises(TypeError, match="one tensor"):
        match(torch.zeros(2), torch.zeros(2))


def _inputs(n):
    return tuple(torch.randn(3) for _ in range(n))


def _entry_check(f, args, *, python: bool):
    """The check function of ``f``'s entry, built with the Python guards only or with the extension."""
    md.reset()  # the cache lives on f's code object: a second md.compile(f) would be served by the first entry
    with tensor_match.python_guards() if python else contextlib.nullcontext():
        compiled = md.compile(f, backend="eager")
        compiled(*args)
    return compiled.cache.entries[0].check


def test_alike_inputs_share_one_matcher_and_the_check_is_the_same_without_it():
    if tensor_match.get() is None:
        pytest.skip(tensor_match.reason())

    def f(*xs):
        xs[0].add_(1)
        return torch.stack(xs[1:]).sum(0)

    args = _inputs(20)
    python_check = _entry_check(f, args, python=True)
    cpp_check = _entry_check(f, args, python=False)
    assert "___tensor_match" not in python_check.source and ".is_contiguous()" in python_check.source
    # Note [A sequence of tensors is one C++ call]: one ItemsMatch for the 20 items, sharing one TensorMatch
    assert cpp_check.source.count("___items_match_0(___s0)") == 1 and "___tensor_match_0(" not in cpp_check.source
    assert sum(k.startswith("___tensor_match_") for k in cpp_check.scope) == 1
    frames = [
        args, _inputs(20), _inputs(19), (*_inputs(19), torch.randn(4)), (*_inputs(19), torch.randn(3).double()),
        (*_inputs(19), torch.randn(3, requires_grad=True)), (*_inputs(19), torch.randn(6)[::2]),
        (args[0], *args[:19]), (*_inputs(19), 3.0),
    ]
    results = []
    for xs in frames:
        L = {"xs": xs}
        assert cpp_check(L, globals()) == python_check(L, globals()), [type(x).__name__ for x in xs][-1]
        results.append(cpp_check(L, globals()))
    assert results[:2] == [True, True] and not any(results[2:])


def test_no_aliasing_in_cpp_says_what_the_unrolled_identity_tests_say():
    """NO_TENSOR_ALIASING (Note [Distinct tensors stay distinct]): one C++ call against the ``is`` tests."""
    if tensor_match.get() is None:
        pytest.skip(tensor_match.reason())

    def f(*xs):
        xs[1].add_(1)
        xs[4].mul_(2)
        return torch.stack(xs).sum(0)

    args = _inputs(6)
    python_check = _entry_check(f, args, python=True)
    cpp_check = _entry_check(f, args, python=False)
    # every input of the guard is an item of xs: its identity tests run inside the items' one ItemsMatch call
    assert "___items_match_0(" in cpp_check.source and "___no_aliasing" not in cpp_check.source + python_check.source
    seen = set()
    for i in range(6):
        for j in range(6):  # xs[j] passed again as xs[i]: a miss whenever one tensor is reached twice (as torch)
            xs = list(_inputs(6))
            xs[i] = xs[j]
            L = {"xs": tuple(xs)}
            ours, reference = cpp_check(L, globals()), python_check(L, globals())
            assert ours == reference == (i == j), (i, j)
            seen.add(ours)
    assert seen == {True, False}


def test_items_match_with_inputs_outside_the_sequence_and_lists_says_what_python_says():
    """A written input outside ``xs`` keeps the separate ``___no_aliasing`` call; a list is fused as a tuple."""
    if tensor_match.items_match() is None:
        pytest.skip(tensor_match.reason())

    def f(a, xs, *ys):
        a.add_(1)
        xs[2].mul_(2)
        return torch.stack([*xs, *ys]).sum(0) + a

    base = (torch.randn(3), [torch.randn(3) for _ in range(4)], *_inputs(3))
    python_check = _entry_check(f, base, python=True)
    cpp_check = _entry_check(f, base, python=False)
    assert "___items_match_1(" in cpp_check.source and "___no_aliasing(8, " in cpp_check.source  # every pair
    p = torch.nn.Parameter(torch.randn(3))
    seen = set()
    for k in range(4):
        for change in ("same", "alias_a", "alias_item", "dtype", "parameter", "short", "tuple", "grad"):
            a, xs, ys = base[0], list(base[1]), list(base[2:])
            if change == "alias_a":
                xs[k] = a
            elif change == "alias_item":
                xs[k] = xs[2] if k != 2 else xs[0]
                ys[k % 3] = xs[2]
            elif change == "dtype":
                xs[k] = xs[k].double()
            elif change == "parameter":
                ys[k % 3] = p
            elif change == "short":
                xs = xs[:k]
            elif change == "tuple":
                xs = tuple(xs)
            elif change == "grad":
                xs[k] = torch.randn(3, requires_grad=True)
            L = {"a": a, "xs": xs, "ys": tuple(ys)}
            ours, reference = cpp_check(L, globals()), python_check(L, globals())
            assert ours == reference, (k, change)
            seen.add((change, ours))
    assert ("same", True) in seen and {c for c, ok in seen if not ok} >= {"alias_a", "alias_item", "dtype",
                                                                            "parameter", "short", "tuple", "grad"}


def test_dynamic_tensor_match_in_cpp_says_what_python_says():
    """A dynamic input's TensorMatch has -1 for its dynamic sizes; the SHAPE_ENV guards check those."""
    if tensor_match.get() is None:
        pytest.skip(tensor_match.reason())

    def f(x, y):
        return (x * 2).sum(0) + y

    def entry(python: bool):
        md.reset()  # a fresh cache on f's code object
        with tensor_match.python_guards() if python else contextlib.nullcontext():
            compiled = md.compile(f, backend="eager", dynamic=True)
            compiled(torch.randn(5, 3), torch.randn(3))
        return compiled.cache.entries[0].check

    python_check, cpp_check = entry(True), entry(False)
    assert "___tensor_match_" in cpp_check.source and "___tensor_match_" not in python_check.source
    base = torch.randn(8, 6)
    frames = [(torch.randn(5, 3), torch.randn(3)), (torch.randn(9, 3), torch.randn(3)), (torch.randn(9, 4), torch.randn(4)),
              (torch.randn(9, 4), torch.randn(3)), (torch.randn(1, 3), torch.randn(3)), (base.t(), torch.randn(8)),
              (torch.randn(5, 3, 1), torch.randn(3)), (torch.randn(15), torch.randn(3)),
              (torch.randn(5, 3).double(), torch.randn(3)), (torch.randn(5, 3, requires_grad=True), torch.randn(3)),
              (base[:, :3], torch.randn(3)), (torch.randn(5, 3), 1.0)]
    results = []
    for x, y in frames:
        L = {"x": x, "y": y}
        assert cpp_check(L, globals()) == python_check(L, globals()), (tuple(x.shape), getattr(y, "shape", y))
        results.append(cpp_check(L, globals()))
    assert results[0] and results[1] and not all(results)


def test_items_match_refuses_bad_arguments():
    ItemsMatch = tensor_match.items_match()
    if ItemsMatch is None:
        pytest.skip(tensor_match.reason())
    m = tensor_match.get()(torch.float32, None, (3,), None, False)
    check = ItemsMatch((0, 2), (torch.Tensor, torch.Tensor), (m, m), (0,), (0, 1, 2))
    t = torch.randn(3)
    assert check((t, None, torch.randn(3))) is True and check([t, 1, torch.randn(3)]) is True
    assert check((t, None, t)) is False and check((t,)) is False and check("abc") is False
    assert check((torch.nn.Parameter(t), None, torch.randn(3))) is False
    with pytest.raises(TypeError):
        ItemsMatch((0,), (torch.Tensor,), ("not a matcher",), (), ())
    with pytest.raises(ValueError):
        ItemsMatch((0, 1), (torch.Tensor,), (m,), (), ())


# --- GlobalState (Note [Global state is one guard]) ----------------------------------

def _state_changes() -> list:
    """Context managers that each change one field of the global state a trace depends on."""
    return [
        ("nothing", contextlib.nullcontext), ("no_grad", torch.no_grad), ("enable_grad", torch.enable_grad),
        ("inference_mode", torch.inference_mode),
        ("autocast_cpu_bf16", lambda: torch.autocast("cpu", dtype=torch.bfloat16)),
        ("autocast_cpu_f16", lambda: torch.autocast("cpu", dtype=torch.float16)),
        ("autocast_cuda", lambda: torch.autocast("cuda", enabled=True)),
        ("default_float64", lambda: default_dtype(torch.float64)),
        ("deterministic", lambda: deterministic(True)),
        ("deterministic_warn_only", lambda: deterministic(True, True)),
        # the rest of torch's GlobalStateGuard (torch/csrc/dynamo/guards.cpp)
        ("allow_tf32", lambda: _flag(torch.backends.cuda.matmul, "allow_tf32", True)),
        ("fp16_reduce", lambda: _flag(torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction", False)),
        ("fp16_reduce_no_splitk", lambda: _flag(torch.backends.cuda.matmul, "allow_fp16_reduced_precision_reduction",
                                                (False, False))),
        ("bf16_reduce", lambda: _flag(torch.backends.cuda.matmul, "allow_bf16_reduced_precision_reduction", False)),
        ("num_threads", lambda: _set(torch.get_num_threads, torch.set_num_threads, 1)),
        ("disable_torch_function_subclass", torch._C.DisableTorchFunctionSubclass),
        ("disable_torch_function", torch._C.DisableTorchFunction),
        ("autocast_cache", lambda: _set(torch.is_autocast_cache_enabled, torch.set_autocast_cache_enabled, False)),
    ]




def _flag(obj, name: str, value):
    return _set(lambda: getattr(obj, name), lambda v: setattr(obj, name, v), value)


@pytest.mark.parametrize("traced_under", [c for _, c in _state_changes()], ids=[n for n, _ in _state_changes()])
def test_cpp_and_python_global_state_agree(traced_under):
    """Traced under one state, checked under every state: the one C++ call says what the five guards say."""
    from minidynamo.symbolic.guards import GuardSet

    if tensor_match.global_state() is None:
        pytest.skip(tensor_match.reason())
    with warnings.catch_warnings():  # autocast on a device this build lacks warns
        warnings.simplefilter("ignore")
        with traced_under():
            gs = GuardSet()
            gs.GLOBAL_STATE()
        for _, checked_under in _state_changes():
            with checked_under():
                python = all(eval(g.expr, dict(gs.scope)) for g in gs.guards)  # noqa: S307
                assert gs.global_state() is python
        with traced_under():
            assert gs.global_state() is True


# --- ModuleMatch (Note [A module's layout is one C++ call]) ---------------------------


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.seq = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(4, 4))
        self.ml = torch.nn.ModuleList([torch.nn.Linear(4, 4)])

    def forward(self, x):
        x = self.bn(self.conv(x)).mean((2, 3))
        return self.ml[0](self.seq(x)).sum()


def _net_changes() -> list:
    """(name, change of a fresh _Net): hooks, tables, children, an instance forward, each one at a time."""
    import collections

    def reorder(m):
        m.seq._modules = dict(reversed(list(m.seq._modules.items())))

    def ordered(m):
        m.conv._parameters = collections.OrderedDict(m.conv._parameters)

    def ordered_moved(m):
        m.conv._parameters = collections.OrderedDict(m.conv._parameters)
        m.conv._parameters.move_to_end("weight")

    return [
        ("nothing", lambda m: None),
        ("forward_hook", lambda m: m.conv.register_forward_hook(lambda *a: None)),
        ("forward_pre_hook", lambda m: m.seq[1].register_forward_pre_hook(lambda *a: None)),
        ("backward_hook", lambda m: m.bn.register_full_backward_hook(lambda *a: None)),
        ("instance_forward", lambda m: setattr(m.ml[0], "forward", lambda x: x)),
        ("bias_none", lambda m: setattr(m.conv, "bias", None)),
        ("new_parameter", lambda m: m.conv.register_parameter("extra", torch.nn.Parameter(torch.ones(1)))),
        ("new_buffer", lambda m: m.bn.register_buffer("extra", torch.ones(1))),
        ("appended_child", lambda m: m.seq.append(torch.nn.ReLU())),
        ("replaced_child", lambda m: m.seq.__setitem__(0, torch.nn.Tanh())),
        ("same_kind_child", lambda m: m.ml.__setitem__(0, torch.nn.Linear(4, 4))),
        ("deleted_child", lambda m: delattr(m, "ml")),
        ("new_weight_same_shape", lambda m: setattr(m.conv, "weight", torch.nn.Parameter(torch.randn(4, 3, 3, 3)))),
        ("new_weight_other_shape", lambda m: setattr(m.conv, "weight", torch.nn.Parameter(torch.randn(4, 3, 5, 5)))),
        ("reordered_children", reorder),
        ("ordered_dict_table", ordered),
        ("ordered_dict_moved", ordered_moved),
    ]


@pytest.mark.parametrize("change", [c for _, c in _net_changes()], ids=[n for n, _ in _net_changes()])
def test_cpp_module_match_says_what_the_python_guards_say(change):
    """One ModuleMatch call per module agrees with the readable guards, one by one, on every change."""
    if tensor_match.module_match() is None:
        pytest.skip(tensor_match.reason())
    torch.manual_seed(0)
    net = _Net()

    def f(x):
        return net(x)

    x = torch.randn(2, 3, 6, 6)
    python_check = _entry_check(f, (x,), python=True)
    cpp_check = _entry_check(f, (x,), python=False)
    assert "___module_match" in cpp_check.source and "___module_match" not in python_check.source
    change(net)
    L = {"x": x, "net": net}
    readable = cpp_check.first_failure(L, globals())[0] is None
    assert cpp_check(L, globals()) is readable
    assert python_check(L, globals()) is readable


def test_module_match_refuses_what_is_not_a_module():
    if tensor_match.module_match() is None:
        pytest.skip(tensor_match.reason())
    match = tensor_match.module_match()([], [("weight", False), ("bias", True)], [], True)
    assert match(torch.nn.Linear(2, 2, bias=False)) is True
    assert match(torch.nn.Linear(2, 2)) is False
    with pytest.raises(AttributeError):
        match(3)  # no __dict__: the Python guard raises too, and the check function says False
    assert "parameters=[('weight', False), ('bias', True)]" in repr(match)

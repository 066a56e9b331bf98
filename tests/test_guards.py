"""Guards, the cache and recompiles (chapter 4): the mechanics of minidynamo.symbolic.

Differential where a counterpart exists: results are compared with eager; what
recompiles is compared with what the real Dynamo guards on (shape, dtype,
requires_grad, a Python constant).
"""

from __future__ import annotations

import sys
import types
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo.symbolic import counters

# an internal tracing error must fail these tests, not fall back to eager quietly
pytestmark = [pytest.mark.ch04, pytest.mark.filterwarnings("error:minidynamo. tracing")]


def f(x, n):
    y = x * n
    if n > 2:
        y = y + 1
    return torch.relu(y)


def _call(cf, *args):
    out = cf(*args)
    torch.testing.assert_close(out, f(*args))
    return out


def test_second_call_interprets_no_bytecode():
    cf = md.compile(f, backend="eager")
    x = torch.randn(3, 4)
    _call(cf, x, 3)
    assert counters["instructions"] > 0 and counters["frames_traced"] == 1
    counters.clear()
    _call(cf, x, 3)
    _call(cf, torch.randn(3, 4), 3)  # new values, same metadata: same entry
    assert counters["instructions"] == 0
    assert counters["frames_traced"] == 0
    assert counters["cache_hits"] == 2


@pytest.mark.parametrize(
    "change, expected_guard",
    [
        (lambda x: (torch.randn(5, 4), 3), "L['x'].shape"),
        (lambda x: (x.double(), 3), "L['x'].dtype"),
        (lambda x: (x.clone().requires_grad_(), 3), "L['x'].requires_grad"),
        (lambda x: (x.t(), 3), "L['x'].shape"),
        (lambda x: (torch.randn(4, 3).t(), 3), "L['x'].stride()"),
        (lambda x: (x, 1), "L['n']"),
    ],
    ids=["shape", "dtype", "requires_grad", "transpose", "stride", "constant"],
)
def test_guard_failure_recompiles_and_names_the_guard(change, expected_guard):
    cf = md.compile(f, backend="eager")
    x = torch.randn(3, 4)
    _call(cf, x, 3)
    with md.events.record() as log:
        _call(cf, *change(x))
    assert counters["recompiles"] == 1 and counters["frames_traced"] == 2
    record = cf.cache.recompiles[0]
    assert record.guard.value_expr.startswith(expected_guard), record
    assert [e for e in log if e.kind == "recompile"][0].guard == record.guard.expr
    assert "is now" in str(record)
    counters.clear()
    _call(cf, x, 3)  # the first entry is still there
    assert counters["frames_traced"] == 0


def test_guards_are_readable_python_with_sources_and_reasons():
    scale = 2.0

    def g(x):
        return x * scale + G_OFFSET

    out = md.explain(g, torch.randn(2))
    exprs = [gd.expr for gd in out.guards]
    assert "L['x'].shape == (2,)" in exprs
    assert "L['scale'] == 2.0" in exprs  # a closure value read by the trace
    assert "G['G_OFFSET'] == 1" in exprs  # a global read by the trace
    for guard in out.guards:  # the global state (grad mode, ...) is no value of the frame: no source
        assert (guard.source is not None or guard.kind in ("GLOBAL_STATE", "TORCH_FUNCTION_STATE", "DEFAULT_DEVICE")
                ) and guard.why  # torch's GlobalStateSource guards
        compile(guard.expr, "<guard>", "eval")


G_OFFSET = 1


def test_global_change_recompiles():
    global G_OFFSET

    def g(x):
        return x + G_OFFSET

    cf = md.compile(g, backend="eager")
    x = torch.randn(2)
    torch.testing.assert_close(cf(x), x + 1)
    G_OFFSET = 5
    try:
        torch.testing.assert_close(cf(x), x + 5)
        assert counters["recompiles"] == 1
    finally:
        G_OFFSET = 1


def test_cache_limit_falls_back_to_eager_with_a_warning():
    cf = md.compile(f, backend="eager", dynamic=False)  # else n turns into a SymInt on its first change
    x = torch.randn(2)
    for n in range(8):
        _call(cf, x, n)
    assert len(cf.cache.entries) == 8
    with pytest.warns(UserWarning, match=r"hit config.recompile_limit \(8\)[\s\S]*last reason: \d+/7: n == 7"):
        _call(cf, x, 100)
    counters.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _call(cf, x, 101)  # eager now: no trace, no new warning
    assert counters["frames_traced"] == 0


def test_module_parameters_are_guarded_inputs():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    out = md.explain(model, torch.randn(5, 4))
    exprs = [g.expr for g in out.guards]
    assert "L['self']._modules['0']._parameters['weight'].shape == (3, 4)" in exprs
    # the module by type and layout, not identity (Note [Modules are guarded by type and structure])
    assert any(e.startswith("type(L['self']) is ") for e in exprs)
    assert "[(k, v is None) for k, v in L['self']._modules.items()] == [('0', False), ('1', False), ('2', False)]" in exprs
    placeholders = [n.name for n in out.graphs[0].graph.nodes if n.op == "placeholder"]
    assert "l_self_modules_0_parameters_weight_" in placeholders and len(placeholders) == 5


def test_guard_events_are_emitted():
    with md.events.record() as log:
        md.explain(f, torch.randn(2), 3)
    kinds = {e.guard_kind for e in log if e.kind == "guard"}
    assert {"TENSOR_MATCH", "CONSTANT_MATCH", "TYPE_MATCH"} <= kinds


@pytest.mark.parametrize(
    "shape, order",
    [((3, 4), (0, 1)), ((3, 4), (1, 0)), ((3, 1), (0, 1)), ((1, 4), (1, 0)), ((2, 3, 4), (2, 0, 1)),
     ((2, 1, 4), (1, 0, 2)), ((5,), (0,)), ((0, 3), (1, 0)), ((), ())],
)
@pytest.mark.parametrize("guards", ["python", "c++"])
def test_tensor_guard_passes_exactly_when_shape_and_strides_equal(shape, order, guards):
    """Note [is_contiguous() as the stride guard]: the cheap guard is exact.

    Entries are compiled for a contiguous tensor of ``shape``; then tensors of the
    same shape with other memory layouts must pass the guards exactly when their
    strides equal the compiled one's (torch's TENSOR_MATCH compares strides). Both
    the Python guards and the C++ TensorMatch (Note [TENSOR_MATCH runs in C++]).
    """
    from minidynamo.symbolic import tensor_match
    from minidynamo.symbolic.guard_codegen import CheckFunction
    from minidynamo.symbolic.guards import GuardSet
    from minidynamo.symbolic.source import LocalSource

    compiled_for = torch.randn(shape)
    gs = GuardSet()
    gs.TENSOR_MATCH(LocalSource("x"), compiled_for, "test")
    if guards == "c++" and tensor_match.get() is None:
        pytest.skip(tensor_match.reason())
    if guards == "python":
        with tensor_match.python_guards():
            check = CheckFunction(gs)
    else:
        check = CheckFunction(gs)
    assert ("___tensor_match" in check.source) == (guards == "c++")
    inv = [order.index(i) for i in range(len(order))]
    other = torch.randn([shape[i] for i in order]).permute(inv) if shape else torch.randn(())
    strided = torch.empty_strided(shape, [s * 2 for s in compiled_for.stride()]) if shape else torch.randn(())
    # contiguous too, but with another stride on every size-1 dimension
    odd = torch.empty_strided(shape, [st if sz > 1 else 7 for sz, st in zip(shape, compiled_for.stride())])
    for candidate in (compiled_for.clone(), other, strided, odd, torch.randn(shape).contiguous()):
        assert candidate.shape == compiled_for.shape
        assert check({"x": candidate}, {}) == (candidate.stride() == compiled_for.stride()), (
            candidate.stride(), compiled_for.stride(), check.source)


def test_same_tensor_twice_recompiles_like_torch(real_dynamo):
    """Note [Distinct tensors stay distinct]: a graph traced for two tensors is not reused for one."""
    import torch._dynamo.testing

    def f(a, b):
        a.add_(1)
        return a + b

    cf = md.compile(f, backend="aot_eager")
    torch_backend = torch._dynamo.testing.CompileCounter()
    tf = torch.compile(f, backend=torch_backend)
    for fn in (cf, tf):
        fn(torch.zeros(2), torch.zeros(2))
    outs = {}
    for name, fn in (("ours", cf), ("torch", tf), ("eager", f)):
        z = torch.zeros(2)
        outs[name] = (fn(z, z), z)
    torch.testing.assert_close(outs["ours"], outs["eager"])
    torch.testing.assert_close(outs["torch"], outs["eager"])
    assert len(cf.cache.entries) == torch_backend.frame_count == 2
    record = cf.cache.recompiles[0]
    assert record.guard.kind == "NO_TENSOR_ALIASING"
    assert record.change == "L['a'] and L['b'] are now the same tensor"
    z = torch.zeros(2)
    cf(z, z)
    assert len(cf.cache.entries) == 2  # the second entry (one tensor, reached twice) is reused


def test_no_aliasing_guard_checks_every_pair_and_leaves_parameters_out(real_dynamo):
    """Torch guards aliasing between every pair of tensor sources but parameters (guards.py NO_TENSOR_ALIASING)."""
    import torch._dynamo.testing

    lin = torch.nn.Linear(3, 3)

    def g(x, y, z):
        y.add_(1)
        return lin(x) + y + z

    cf = md.compile(g, backend="eager")
    torch_backend = torch._dynamo.testing.CompileCounter()
    tf = torch.compile(g, backend=torch_backend)
    for fn in (cf, tf):
        fn(torch.randn(3), torch.randn(3), torch.randn(3))
    guard = [gd for gd in cf.cache.entries[0].check.guards if gd.kind == "NO_TENSOR_ALIASING"]
    assert len(guard) == 1 and sorted(guard[0].operands[0]) == ["L['x']", "L['y']", "L['z']"]
    assert sorted(guard[0].operands[1]) == ["L['x']", "L['y']", "L['z']"]  # lin's parameters left out
    for pair in [(0, 1), (1, 2)]:  # y passed again as x or as z: a miss, and eager's answer
        args = [torch.randn(3) for _ in range(3)]
        args[pair[0]] = args[pair[1]]
        ref = [a.clone() for a in args]
        ref[pair[0]] = ref[pair[1]]
        torch.testing.assert_close(cf(*args), g(*ref))
    x = torch.randn(3)
    counts = []
    for fn, count in ((cf, lambda: len(cf.cache.entries)), (tf, lambda: torch_backend.frame_count)):
        before = count()
        fn(x, torch.randn(3), x)  # x twice, though the graph writes only y: both recompile
        counts.append(count() - before)
    assert counts[0] == counts[1] == 1


def test_a_graph_that_writes_no_input_still_guards_aliasing(real_dynamo):
    """``a is b`` was folded while tracing: ``g(z, z)`` after ``g(x, y)`` must not reuse the entry (issue 26)."""
    import torch._dynamo.testing

    def g(a, b):
        return a + 100 if a is b else a + b

    cf = md.compile(g, backend="eager")
    torch_backend = torch._dynamo.testing.CompileCounter()
    tf = torch.compile(g, backend=torch_backend)
    x, y, z = torch.ones(2), torch.ones(2) * 2, torch.ones(2) * 3
    for fn in (cf, tf):
        torch.testing.assert_close(fn(x, y), g(x, y))
        torch.testing.assert_close(fn(z, z), g(z, z))
    assert len(cf.cache.entries) == torch_backend.frame_count == 2


def test_overlapping_view_of_a_mutated_input(real_dynamo):
    # Dynamo guards no storage overlap (neither does torch's with static shapes); mini AOT keys
    # its compiled variants on the inputs' aliasing (aot_autograd: Note [Aliasing is part of the compile key]).
    def f(a, b):
        a.add_(1)
        return a + b

    cf = md.compile(f, backend="aot_eager")
    cf(torch.zeros(2), torch.zeros(2))
    z, z_eager = torch.zeros(2), torch.zeros(2)
    torch.testing.assert_close(cf(z, z[:]), f(z_eager, z_eager[:]))


def _timm_like():
    """Nested containers of every kind a CNN uses: Sequential, ModuleList, ModuleDict, a child None."""
    torch.manual_seed(0)
    blocks = torch.nn.Sequential(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)),
                                 torch.nn.ReLU())
    heads = torch.nn.ModuleDict({"fc": torch.nn.Linear(4, 2)})
    extra = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2, bias=False)])

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks, self.heads, self.extra, self.unused = blocks, heads, extra, None
            self.register_buffer("scale", torch.ones(2))

        def forward(self, x):
            x = self.blocks(x).mean((2, 3))
            return (self.extra[-1](self.extra[0](self.heads["fc"](x))) * self.scale).sum()

    return Net()


def test_module_attributes_are_read_from_their_tables_and_are_the_same_objects():
    """Note [Module attributes are read from their tables]: each fast read is the object its name reads."""
    net = _timm_like()
    x = torch.randn(2, 3, 6, 6)
    compiled = md.compile(net)
    compiled(x)
    entry = compiled.cache.entries[0]
    gs_reads = [line.split(" = ", 1)[1] for line in entry.check.source.splitlines() if " = " in line]
    assert any("._parameters['weight']" in r for r in gs_reads) and any("._modules['0']" in r for r in gs_reads)
    assert "._modules['blocks']._modules['0']._modules['0']._parameters['weight']" in entry.transformed_source
    assert "._buffers['scale']" in entry.transformed_source and "._modules['1']._parameters['weight']" in \
        entry.transformed_source  # extra[-1] is _modules['1']
    from minidynamo.symbolic.guards import GuardSet

    L, G = {"self": net, "x": x}, {}
    sources = {g.source.name(): g.source for g in entry.guards if g.source is not None}
    gs = GuardSet()
    for g in entry.guards:  # the layouts, as the trace recorded them
        if g.kind == "NN_MODULE_LAYOUT" and g.source.name() not in gs.module_layouts:
            gs.NN_MODULE_LAYOUT(g.source, eval(g.source.name(), {"L": L, "G": G}), "test")  # noqa: S307
    # each member of a module is named by its table's item already (Note [A module's member is an item of its
    # table], source.py); the fast read is the name itself or, where it is not, reads the same object
    assert len([n for n in sources if "._modules[" in n or "._parameters[" in n]) > 10
    for name in sources:
        read, named = (eval(e, {"L": L, "G": G, "sys": sys}) for e in (gs.read_expr(sources[name]), name))  # noqa: S307
        assert read is named or (isinstance(read, types.MethodType) and read == named), name  # a new bound method


def test_a_compiled_call_runs_no_module_getattr():
    """The hot path of a CNN-like model reads no attribute through Module.__getattr__ (guards nor arguments)."""
    import sys

    net = _timm_like()
    x = torch.randn(2, 3, 6, 6)
    compiled = md.compile(net)
    compiled(x).backward()
    calls = []

    def profile(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code)

    sys.setprofile(profile)
    try:
        compiled(x)
    finally:
        sys.setprofile(None)
    assert torch.nn.Module.__getattr__.__code__ not in calls
    assert torch.nn.Sequential.__getitem__.__code__ not in calls


def test_a_hook_or_a_replaced_attribute_after_the_call_still_recompiles():
    """The fast reads rest on the layout guards: changing a module's tables or hooks is still seen."""
    net = _timm_like()
    x = torch.randn(2, 3, 6, 6)
    compiled = md.compile(net)
    expected = net(x)
    assert torch.allclose(compiled(x), expected)
    seen = []
    handle = net.heads["fc"].register_forward_hook(lambda m, a, out: seen.append(1) or out * 2)
    assert torch.allclose(compiled(x), net(x)) and seen  # the hook ran, in the compiled call too
    handle.remove()
    net.extra[0] = torch.nn.Linear(2, 2)  # a new child: same type and shapes, new weights
    assert torch.allclose(compiled(x), net(x))
    net.blocks[0][0].bias = None
    assert torch.allclose(compiled(x), net(x))
    net.blocks[0][0].weight = torch.nn.Parameter(torch.randn(4, 3, 3, 3))
    assert torch.allclose(compiled(x), net(x))


def test_class_attribute_guard_as_dict_lookups_sees_a_forward_replaced_on_the_class_or_its_base():
    """Note [A class attribute guard without inspect]: inherited forward, replaced on the subclass or the base."""
    class Base(torch.nn.Module):
        def forward(self, x):
            return x + 1

    class Child(Base):
        pass

    m = Child()
    compiled = md.compile(lambda x: m(x))
    x = torch.randn(3)
    assert torch.equal(compiled(x), x + 1)
    source = compiled.cache.entries[0].check.source
    assert "'forward' not in" in source and "__dict__.get('forward')" in source and "getattr_static" not in source
    Base.forward = lambda self, x: x * 3
    assert torch.equal(compiled(x), x * 3)
    Child.forward = lambda self, x: x - 2
    assert torch.equal(compiled(x), x - 2)


def test_a_module_global_read_through_the_module_bound_once_still_recompiles():
    """Note [A module is bound once]: the check function reads a module's ``__dict__`` bound at compile time."""
    import sys
    import types

    mod = types.ModuleType("_md_test_bound_module")
    sys.modules[mod.__name__] = mod
    try:
        exec("class Scaler:\n    def apply(self, x):\n        return x * SCALE\nSCALE = 2\n", vars(mod))  # noqa: S102
        scaler = mod.Scaler()

        def f(x):
            return scaler.apply(x)

        fn = md.compile(f, backend="eager")
        x = torch.ones(2)
        assert fn(x).tolist() == f(x).tolist() == [2.0, 2.0]
        guards = [str(g) for g in fn.cache.entries[0].guards]
        assert any("sys.modules['_md_test_bound_module'].__dict__['SCALE'] == 2" in g for g in guards), guards
        assert "sys.modules" not in fn.cache.entries[0].check.source  # the readable guard stays; the check reads the bound dict
        mod.SCALE = 3  # a rebinding still fails the guard
        assert fn(x).tolist() == f(x).tolist() == [3.0, 3.0] and len(fn.cache.entries) == 2
        sys.modules[mod.__name__] = types.ModuleType(mod.__name__)  # the method still reads its own module's globals
        assert fn(x).tolist() == f(x).tolist() == [3.0, 3.0]
    finally:
        sys.modules.pop(mod.__name__, None)


def test_a_singleton_identity_test_stands_for_its_type_test():
    """Note [An identity test with a singleton implies the type]: ``flag is True`` alone in the check
    function; 1 for True, 0 or False for None still miss the entry, as their type guards say."""
    def f(x, flag, opt):
        return x + 1 if flag and opt is None else x - 1

    compiled = md.compile(f, backend="eager")
    x = torch.zeros(2)
    assert torch.equal(compiled(x, True, None), f(x, True, None))
    source = compiled.cache.entries[0].check.source
    assert "is True" in source and "is bool" not in source and "type(None)" not in source
    assert any(g.expr.endswith("is bool") for g in compiled.cache.entries[0].guards)
    for args in ((1, None), (True, 0), (True, False), (False, None)):
        assert torch.equal(compiled(x, *args), f(x, *args)), args
    assert len(compiled.cache.entries) == 5

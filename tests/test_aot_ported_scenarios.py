"""Scenarios of PyTorch's ``test/dynamo/test_aot_autograd.py``: whole compiled calls, eager vs ours vs torch's.

Written in our own words after torch's tests about a ``torch.compile`` call rather than a
function of tensors: recompiles on duplicated, overlapping or grad-changing arguments,
graph breaks, grad mode changed inside the frame, backward called again, data-dependent
ops. Each runs eagerly, through ``md.compile(backend="aot_eager")`` and through
``torch.compile(backend="aot_eager")`` on fresh identical arguments, called twice:
outputs, the inputs after the call, gradients w.r.t. the leaves behind the inputs, and
which outputs have a ``grad_fn`` must agree; a fallback to eager counts as a failure.
The per-function cases of the same files are in ``tests/test_aot_ported.py``.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo import events
from minidynamo._torch_private import torch_lookup_backend
from minidynamo.aot import aot_function
from minidynamo.aot.aot_autograd import AOTFallbackWarning

from test_aot_runtime import leaves_behind  # tests/ is on sys.path

pytestmark = pytest.mark.ch11


def _frames(log) -> int:
    return sum(e.kind == "pass_begin" and e.pass_name == "dynamo" for e in log)


class _TorchCounter:
    """torch's aot_eager backend, counting the graphs it is given."""

    def __init__(self):
        self.graphs = 0
        self.backend = torch_lookup_backend("aot_eager")

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.backend(gm, example_inputs)


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _result(fn, args, params=(), grads=True):
    """Outputs, the inputs after the call, the gradients w.r.t. the leaves behind the inputs, grad_fn kinds."""
    leaves = leaves_behind(args) + list(params)
    outs = _flat(fn(*args))
    diff = [o for o in outs if isinstance(o, torch.Tensor) and o.grad_fn is not None]
    if not grads:
        diff = []
    grads = None
    if diff and leaves:
        grads = torch.autograd.grad(sum(o.sum() for o in diff), leaves, allow_unused=True)
    after = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
    return [o.detach() if isinstance(o, torch.Tensor) else o for o in outs], after, grads, [
        (o.requires_grad, o.grad_fn is None) for o in outs if isinstance(o, torch.Tensor)]


def _assert_same(a, b, what):
    a, b = _flat_all(a), _flat_all(b)
    assert len(a) == len(b), what
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            assert isinstance(y, torch.Tensor), what
            assert x.shape == y.shape, what
            if "grads" not in what:  # a gradient's layout is autograd's business (an expand of ones, say)
                assert x.stride() == y.stride(), what
            torch.testing.assert_close(y, x, msg=lambda m: f"{what}: {m}")
        else:
            assert x == y, what


def _flat_all(x):
    if isinstance(x, (tuple, list)):
        return [z for y in x for z in _flat_all(y)]
    return [x]


def _params(module) -> list:
    return [] if module is None else [p for p in module.parameters() if p.requires_grad]


def three_way(fn, make_args, calls=2, *, module=None, torch_kwargs=None, grads=True, with_torch=True):
    """Eager, md.compile and torch.compile(aot_eager) on fresh identical args, ``calls`` times each.

    ``make_args(i)`` builds call i's arguments. Returns (our frames, torch's graphs).
    With ``module``, ``fn(m)`` gives the function to call for module copy ``m``. ``with_torch=False``:
    torch's is not called (where it raises and eager does not; the test says why).
    """
    counter = _TorchCounter()
    mods = [copy.deepcopy(module) for _ in range(3)] if module is not None else [None] * 3
    eager = fn(mods[0]) if module is not None else fn
    ours = md.compile(fn(mods[1]) if module is not None else fn, backend="aot_eager")
    theirs = torch.compile(fn(mods[2]) if module is not None else fn, backend=counter, **(torch_kwargs or {}))
    with events.record() as log:
        for i in range(calls):
            e = _result(eager, make_args(i), _params(mods[0]), grads)
            with warnings.catch_warnings():
                warnings.simplefilter("error", AOTFallbackWarning)
                o = _result(ours, make_args(i), _params(mods[1]), grads)
            t = _result(theirs, make_args(i), _params(mods[2]), grads) if with_torch else e
            for what, x, y, z in zip(("outputs", "inputs after", "grads", "grad_fn"), e, o, t):
                _assert_same(x, y, f"call {i} ours: {what}")
                _assert_same(x, z, f"call {i} torch: {what}")
            for m in mods[1:] if module is not None else ():
                for (n, p), q in zip(mods[0].named_parameters(), m.parameters()):
                    torch.testing.assert_close(q, p, msg=lambda msg: f"parameter {n}: {msg}")
    return _frames(log), counter.graphs


def _seeded(*shapes, grad=False, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=gen, requires_grad=grad) for s in shapes]


def test_lstm_with_a_strided_input(real_dynamo):
    """test_LSTM: a two-layer bidirectional LSTM on an input whose strides are permuted."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(8, 8, num_layers=2, bidirectional=True)

    def make(m):
        def f(x):
            out, (h, c) = m(x)
            return out, h, c
        return f

    # shape (5, 2, 8), strides (1, 40, 5), a leaf that requires grad
    three_way(make, lambda i: [_seeded((2, 8, 5), seed=i)[0].permute(2, 0, 1).detach().requires_grad_()], module=lstm)


class _ConvThroughMethod(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, kernel_size=(3, 3))

    def _conv_forward(self, x):
        return self.conv._conv_forward(x, self.conv.weight, self.conv.bias)

    def forward(self, x):
        return self._conv_forward(x)


def test_conv_called_through_a_method(real_dynamo):
    """test_call_fn_with_non_const_inputs_aot_safe: an unbatched conv through ``Conv2d._conv_forward``."""
    torch.manual_seed(0)
    three_way(lambda m: m, lambda i: _seeded((3, 6, 6), seed=i, grad=True), module=_ConvThroughMethod())


def _add_under_set_grad_enabled(param, y):
    prev = torch.is_grad_enabled()
    try:
        torch.set_grad_enabled(False)
        param.add_(y)
    finally:
        torch.set_grad_enabled(prev)
    return y


def test_parameter_mutated_with_grad_disabled_by_a_call(real_dynamo):
    """test_mutation / test_call_fn_with_non_const_inputs_aot_unsafe: the leaf is mutated, training continues."""
    def args(i):
        gen = torch.Generator().manual_seed(i)
        return [torch.nn.Parameter(torch.randn(4, generator=gen)), torch.randn(4, generator=gen)]

    three_way(_add_under_set_grad_enabled, args)


def _bad_fwd(param, y):
    if y[0][0] < 3:
        return y + param
    return param * y


def _control_flow(x, y):
    a = x * y
    a = _bad_fwd(a, a)
    b = x + y
    return a * b


def test_data_dependent_branch_in_a_callee(real_dynamo):
    """test_call_fn_with_non_const_inputs_aot_unsafe_control_flow: graph breaks around ``if y[0][0] < 3``."""
    def args(i):
        gen = torch.Generator().manual_seed(i)
        return [torch.randn(2, 2, generator=gen, requires_grad=True), torch.randn(2, 2, generator=gen)]

    three_way(_control_flow, args)


def _add_pair(x, y):
    return (x + y,)


def test_requires_grad_change_recompiles(real_dynamo):
    """test_requires_grad_fake_via_dynamo_recompiles: (x, y) both requiring grad, then (x, z) where z does not."""
    x, y = _seeded((3, 3), (3, 3), grad=True)
    z = _seeded((3, 3), seed=1)[0]
    ours, theirs = three_way(_add_pair, lambda i: [x, y] if i == 0 else [x, z])
    assert ours == theirs == 2


def _trunc_both(x, y):
    x = x.trunc_()
    y = y.trunc_()
    return (x + y,)


def _clones(seed, same: bool):
    a, b = _seeded((3, 3), (3, 3), grad=True, seed=seed)
    a1 = a.clone()
    return [a1, a1] if same else [a1, b.clone()]


@pytest.mark.parametrize("order", ["distinct_then_same", "same_then_distinct"])
def test_duplicated_mutated_arguments_recompile(order, real_dynamo):
    """test_arg_dupe_via_dynamo_recompiles: ``trunc_`` on both arguments, once distinct, once the same tensor."""
    same = [False, True] if order == "distinct_then_same" else [True, False]
    ours, theirs = three_way(_trunc_both, lambda i: _clones(i, same[i]))
    assert ours == theirs == 2


class _TruncWithParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mean = torch.nn.Parameter(torch.randn(3, 3))

    def forward(self, a, b, e, f):
        a.trunc_()
        b.trunc_()
        return (a + b + self.mean) * e * f


def test_duplicated_arguments_with_a_parameter_and_ints(real_dynamo):
    """test_arg_dupe_via_dynamo_recompiles_many_args_param_non_tensor_arg: a module, two ints, a dup pair."""
    torch.manual_seed(0)
    three_way(lambda m: m, lambda i: _clones(i, i == 0) + [2, 2], module=_TruncWithParam())


class _TruncWithParamLists(_TruncWithParam):
    def forward(self, e, f, a, b):  # noqa: D102 - the ints come in lists
        a.trunc_()
        b.trunc_()
        return (a + b + self.mean) * e[0] * f[0]


def test_duplicated_arguments_after_list_arguments(real_dynamo):
    """test_arg_dupe_via_dynamo_recompiles_many_args_param_non_tensor_arg_list."""
    torch.manual_seed(0)
    three_way(lambda m: m, lambda i: [[3, 2, 1], [4, 5, 6]] + _clones(i, i == 0), module=_TruncWithParamLists())


def _trunc_four(a, b, c, d):
    for t in (a, b, c, d):
        t.trunc_()
    return (a + b + c + d,)


def test_four_arguments_two_of_them_the_same(real_dynamo):
    """test_arg_dupe_via_dynamo_recompiles_many_args: ``c is d`` on the first call only."""
    def args(i):
        a, b, c, d = _seeded((3, 3), (3, 3), (3, 3), (3, 3), grad=True, seed=i)
        c1 = c.clone()
        return [a.clone(), b.clone(), c1, c1 if i == 0 else d.clone()]

    three_way(_trunc_four, args)


def _alias_inputs_with_branch():
    a = torch.tensor([1])
    a = a[0:1]
    b = a.squeeze()
    a[0] = 0
    if a[0] < 1e5:
        pass
    a[0] = 2
    return b


def test_alias_of_a_fresh_tensor_across_a_graph_break(real_dynamo):
    """test_alias_inputs: the view made before a data-dependent branch sees the write after it."""
    three_way(_alias_inputs_with_branch, lambda i: [])


def _grad_mode_off_inside(x):
    y = x * x
    torch.set_grad_enabled(False)
    return y.clone(), y


def test_grad_mode_turned_off_inside_stays_off(real_dynamo):
    """test_aot_grad_mode_mutation: the frame leaves grad mode off; the output made after has no grad_fn."""
    results = {}
    for name, fn in [("eager", _grad_mode_off_inside), ("md", md.compile(_grad_mode_off_inside, backend="aot_eager")),
                     ("torch", torch.compile(_grad_mode_off_inside, backend="aot_eager", fullgraph=True))]:
        torch.set_grad_enabled(True)
        x = torch.ones(3, requires_grad=True) * 3
        try:
            out = fn(x)
            mode_after = torch.is_grad_enabled()
        finally:
            torch.set_grad_enabled(True)
        (g,) = torch.autograd.grad(out[1], x, torch.tensor([-1.0, 2.0, 0.0]))
        results[name] = (mode_after, out[0].grad_fn is None, out[1].grad_fn is None, out[0], out[1].detach(), g)
    for name in ("md", "torch"):
        assert results[name][:3] == results["eager"][:3] == (False, True, False), name
        torch.testing.assert_close(results[name][3:], results["eager"][3:])


def _set_leaf(x):
    x.set_(torch.ones(2))


def test_set_on_a_leaf_that_requires_grad_raises_like_eager(real_dynamo):
    """test_aot_autograd_raises_invalid_leaf_set: eager's error reaches the user unchanged."""
    messages = []
    for fn in (_set_leaf, md.compile(_set_leaf), torch.compile(_set_leaf, backend="aot_eager")):
        with pytest.raises(RuntimeError, match="is being used in an in-place operation") as info:
            fn(torch.ones(2, requires_grad=True))
        messages.append(str(info.value).split(";")[0])
    assert messages[1] == messages[0]


def _add_one_each(*args):
    for a in args:
        a.add_(1)
    return args[0]


def _mul_a_sum(a, b, c, d):
    a.mul_(2)
    return a + b + c + d


@pytest.mark.parametrize("fn, first, second", [
    (_add_one_each, lambda x: (x[:5], x[7:13], x[9:]), lambda x: (x[:5], x[7:13], x[13:15])),
    (_mul_a_sum, lambda x: (x[:5], x[4:9], x[10:15], x[15:]), lambda x: (x[:5], x[4:9], x[8:13], x[15:])),
], ids=["overlap_then_none", "overlap_set_grows"])
def test_overlap_that_changes_between_calls(fn, first, second, real_dynamo):
    """test_inputs_overlapping_with_mutation_recompile / test_different_inputs_overlapping_set_with_mutation.

    torch's run as its test does, with ``dynamic=True``: static, torch 2.13 reuses the first
    graph for the second call of ``overlap_set_grows`` and returns the first call's sums.
    """
    def args(i):
        base = torch.arange(20.0)
        return list((first, second)[i](base))

    three_way(fn, args, torch_kwargs={"dynamic": True})  # the values matter, not how many graphs it took


class _ReluPlusParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.param = torch.nn.Parameter(torch.zeros(3, 3))

    def forward(self, x):
        return torch.nn.functional.relu(x) + self.param


@pytest.mark.parametrize("how", ["five_calls", "retain_graph", "create_graph_then_retain"])
def test_backward_called_again(how, real_dynamo):
    """test_donated_buffer_with_retain_or_create_graph1-3: gradients accumulate as eager's."""
    torch.manual_seed(0)
    base = _ReluPlusParam()
    inp = _seeded((3, 3), grad=True)[0]
    grads = []
    for make in (lambda m: m, lambda m: md.compile(m), lambda m: torch.compile(m, backend="aot_eager")):
        mod = copy.deepcopy(base)
        x = inp.detach().clone().requires_grad_()
        fn = make(mod)
        if how == "five_calls":
            for _ in range(5):
                fn(x).sum().backward()
        else:
            if how == "create_graph_then_retain":
                fn(x).sum().backward(create_graph=True)
            out = fn(x).sum()
            for _ in range(5):
                out.backward(retain_graph=True)
            out.backward()
        grads.append((x.grad.detach().clone(), mod.param.grad.detach().clone()))
    torch.testing.assert_close(grads[1], grads[0])
    torch.testing.assert_close(grads[2], grads[0])


def _sin_exp(x):
    return x.sin().exp()


@pytest.mark.parametrize("compile_", ["md", "aot_function"])
def test_double_backward_raises_like_torch(compile_, real_dynamo):
    """test_double_backward_with_compile (3): first-order gradients with create_graph=True, then a second order.

    Torch refuses the second order through its compiled graph; ours computed a wrong one.
    """
    def second_order(fn):
        x = torch.tensor(1.0, requires_grad=True)
        (gx,) = torch.autograd.grad(fn(x), x, create_graph=True)
        return gx, lambda: torch.autograd.grad(gx, x)[0]

    ours = md.compile(_sin_exp) if compile_ == "md" else aot_function(_sin_exp)
    for fn in (torch.compile(_sin_exp, backend="aot_eager"), ours):
        gx, again = second_order(fn)
        torch.testing.assert_close(gx, second_order(_sin_exp)[0])
        with pytest.raises(RuntimeError, match="does not currently support double backward"):
            again()


def _split_by_tensor(result, split_sizes):
    return torch.ops.aten.split_with_sizes(result, split_sizes.tolist())


def test_split_sizes_read_from_a_tensor(real_dynamo):
    """test_split_with_sizes_aot_autograd_cleans_up_traceback_meta: ``.tolist()`` sizes, then backward."""
    three_way(_split_by_tensor, lambda i: [_seeded((32,), grad=True, seed=i)[0], torch.tensor((7, 16, 9))])


def _unique_then_squeeze(sentinel, skip_squeeze=False):
    x = torch.unique(torch.ones(1))
    x = torch.reshape(x, [1])
    if not skip_squeeze:
        x = torch.squeeze(x)
    return x * sentinel


@pytest.mark.parametrize("skip_squeeze", [False, True])
def test_zero_dim_result_of_a_data_dependent_op(skip_squeeze, real_dynamo):
    """test_aot_autograd_stride_reconstruction_on_zero_dim_dynamic_shaped_tensor."""
    three_way(lambda s: _unique_then_squeeze(s, skip_squeeze),
              lambda i: [torch.tensor(1.0 + i, requires_grad=True)])


def _nonzero_program(arg_0, sentinel):
    a = torch.full((1, 2), -66, dtype=torch.int32) + torch.full((1, 2), 77, dtype=torch.int64)
    b = a * torch.full((1, 2), -64, dtype=torch.int32)
    c = b + torch.nonzero(torch.full((3, 4), False, dtype=torch.bool))
    result = torch.div(arg_0, c) * sentinel
    if result.is_complex():
        result = result.real
    return result


def test_empty_nonzero_in_the_program(real_dynamo):
    """test_unbacked_activation_specialized_in_inductor: ``nonzero`` of an all-False mask, broadcast."""
    three_way(_nonzero_program, lambda i: [torch.tensor([[1, 2]]), torch.tensor(1.0, requires_grad=True)])


def _abs_of_overlapping_unfold(x):
    return torch.add(x, x).unfold(1, 3, 2).abs_()


def _add_to_overlapping_unfold(x):
    y = torch.add(x, x)
    y.unfold(1, 3, 2).add_(1)  # element 2 is shown twice: eager adds 2 to it
    return y


@pytest.mark.parametrize("fn", [_abs_of_overlapping_unfold, _add_to_overlapping_unfold], ids=["abs_", "add_"])
def test_write_to_an_internally_overlapping_view(fn, real_dynamo):
    """test_functionalization.py::test_mutation_overlapping_mem: eager runs it, torch's functionalization refuses.

    Ours wrote element 2 once where eager adds to it twice; now it runs eagerly, saying why.
    """
    x = -torch.arange(5.0).view(1, 5)
    expected = fn(x.clone())
    with pytest.raises(Exception, match="internal overlap"):
        torch.compile(fn, backend="aot_eager")(x.clone())
    for compiled in (md.compile(fn), aot_function(fn)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.testing.assert_close(compiled(x.clone()), expected)
        assert any(issubclass(w.category, AOTFallbackWarning) and "same memory location" in str(w.message)
                   for w in caught), [str(w.message) for w in caught]

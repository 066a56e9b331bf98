"""AOTAutograd compiled under Dynamo's guards, saved tensors checked, failures run eagerly.

Each program runs three ways: eager, ``torch.compile(backend="aot_eager")`` where it
helps, and ``md.compile``; outputs, gradients and raised errors are compared with
eager's, each compiled program called twice (the cached path too).
"""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch

import minidynamo as md
from minidynamo.aot import aot_function
from minidynamo.aot.aot_autograd import AOTFallbackWarning

from _helpers import MulSavedInBackward  # tests/ is on sys.path (no package)


def _grads(fn, *args):
    out = fn(*args)
    out = out if isinstance(out, torch.Tensor) else sum(o.sum() for o in out)
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    return out.detach(), torch.autograd.grad(out.sum(), leaves, allow_unused=True)


def _fresh(seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(3, 4, generator=g), torch.randn(4, 2, generator=g).requires_grad_()


def _mm_relu(x, w):
    return (x @ w).relu().sum()


@pytest.mark.parametrize("first", ["no_grad", "inference_mode"])
def test_first_call_without_grad_does_not_freeze_an_inference_graph(first):
    md.reset()
    cf = md.compile(_mm_relu)
    x, w = _fresh()
    with (torch.no_grad() if first == "no_grad" else torch.inference_mode()):
        torch.testing.assert_close(cf(x, w), _mm_relu(x, w))
    for _ in range(2):
        out = cf(x, w)
        assert out.grad_fn is not None
        (g,) = torch.autograd.grad(out, w)
        (g_eager,) = torch.autograd.grad(_mm_relu(x, w), w)
        torch.testing.assert_close(g, g_eager)


def test_a_trace_under_inference_mode_compiles():
    """Under inference_mode a fresh tensor has no version counter; the fake converter made
    its meta tensors there and failed, so the frame ran eagerly with a warning."""
    md.reset()
    cf = md.compile(_mm_relu)
    x, w = _fresh()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: the frame really compiles
        with torch.inference_mode():
            out = cf(x, w)
            expected = _mm_relu(x, w)
            explained = md.explain(_mm_relu, x, w)
    torch.testing.assert_close(out, expected)
    assert out.is_inference() == expected.is_inference()
    assert explained.graph_count == 1


def test_alternating_grad_modes():
    md.reset()
    cf = md.compile(_mm_relu)
    x, w = _fresh()
    for i in range(4):
        if i % 2:
            with torch.no_grad():
                out = cf(x, w)
            assert out.grad_fn is None and not out.requires_grad
        else:
            out = cf(x, w)
            torch.testing.assert_close(torch.autograd.grad(out, w)[0], torch.autograd.grad(_mm_relu(x, w), w)[0])


def _mul_sum(x, w):
    return (x * w).sum()


def _outcome(fn):
    try:
        fn()
    except RuntimeError as e:
        return "raised", str(e).split(":")[0]
    return "ok", None


@pytest.mark.parametrize("compile_", ["md", "aot_function"])
def test_saved_tensor_modified_before_backward_raises_like_eager(compile_):
    md.reset()
    results = {}
    for name in ("eager", compile_):
        fn = {"eager": _mul_sum, "md": md.compile(_mul_sum), "aot_function": aot_function(_mul_sum)}[name]
        for call in range(2):
            x = torch.randn(3, requires_grad=True)
            w = torch.randn(3, requires_grad=True)
            out = fn(x, w)

            def bump_and_backward():
                with torch.no_grad():
                    w.add_(100)
                out.backward()

            results[name, call] = _outcome(bump_and_backward)
    assert results["eager", 0][0] == "raised"
    assert results[compile_, 0] == results[compile_, 1] == results["eager", 0]


def _saved_then_mutated(x):
    # ``resize_`` on an input was the case here; Dynamo now graph-breaks on it as torch's does, so AOT
    # never sees it. A forward that mutates an intermediate autograd saved is refused by torch's AOT too.
    y = x * 2
    z = y.sin()
    y.mul_(3)
    return z + y


def _set_input(x, y):
    with torch.no_grad():
        x.set_(y)
    return x + 1


@pytest.mark.parametrize("fn", [_saved_then_mutated], ids=["mutated saved intermediate"])
def test_aot_failure_runs_eagerly_with_a_warning(fn):
    md.reset()
    cf = md.compile(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            x = torch.randn(4, requires_grad=True)
            torch.testing.assert_close(cf(x), fn(x))
    aot = [w for w in caught if issubclass(w.category, AOTFallbackWarning)]
    assert aot, [str(w.message) for w in caught]
    msg = str(aot[0].message)
    assert fn.__name__ in msg and __file__ in msg and "runs eagerly" in msg


def test_aot_function_failure_runs_eagerly_too():
    """set_() on an input without keep_inference_input_mutations: torch refuses it, and says why; so do we."""
    c = aot_function(_set_input)
    with pytest.warns(AOTFallbackWarning, match="Encountered a set_ on a graph input"):
        x = torch.ones(3)
        out = c(x, torch.arange(3.0))
    torch.testing.assert_close(out, _set_input(torch.ones(3), torch.arange(3.0)))
    torch.testing.assert_close(x, torch.arange(3.0))
    x = torch.ones(3)
    torch.testing.assert_close(c(x, torch.arange(3.0)), torch.arange(3.0) + 1)
    torch.testing.assert_close(x, torch.arange(3.0))
    assert c.artifacts.fallback


def test_compiled_in_the_backend_call():
    """The AOT passes run when Dynamo calls the backend, before the graph's first call."""
    from minidynamo.backends import aot_eager

    seen = []

    def backend(gm, example_inputs):
        fn = aot_eager(gm, example_inputs)
        seen.append(fn.artifacts.fw_module is not None)
        return fn

    md.reset()
    x, w = _fresh()
    md.compile(_mm_relu, backend=backend)(x, w)
    assert seen == [True]


def test_aliasing_that_changes_between_calls_compiles_its_own_variant():
    """Compiled for separate inputs; called with two views of one tensor, one of them mutated."""

    def f(a, b):
        a.add_(1)
        return a * b

    c = aot_function(f)
    a, b = torch.zeros(4), torch.ones(4)
    c(a, b)
    base_e, base_c = torch.arange(6.0), torch.arange(6.0)
    out_e = f(base_e[:4], base_e[2:])
    out_c = c(base_c[:4], base_c[2:])
    torch.testing.assert_close(out_c, out_e)
    torch.testing.assert_close(base_c, base_e)
    out_c = c(base_c[:4], base_c[2:])
    out_e = f(base_e[:4], base_e[2:])
    torch.testing.assert_close(out_c, out_e)
    torch.testing.assert_close(base_c, base_e)


def _custom_bw_mutation(a, x):
    return MulSavedInBackward.apply(a) * x


@pytest.mark.parametrize("how", ["aot_function", "aot_eager", "aot_eager_default_partitioner"])
def test_backward_mutation_of_a_saved_input_is_copied_back(how):
    md.reset()
    fn = aot_function(_custom_bw_mutation) if how == "aot_function" else md.compile(_custom_bw_mutation, backend=how)
    for _ in range(2):
        a_e, a_c = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
        _custom_bw_mutation(a_e, torch.full((3,), 3.0)).sum().backward()
        fn(a_c, torch.full((3,), 3.0)).sum().backward()
        torch.testing.assert_close(a_c.detach(), a_e.detach())
        torch.testing.assert_close(a_c.grad, a_e.grad)


def _linear_then_mutate(x, w, b):
    y = torch.nn.functional.linear(x, w, b).relu()
    x.add_(1)
    return y.sum(-1), y.view(-1)


def test_input_mutated_after_autograd_saved_it():
    """Eager: the forward works, the backward raises the version-counter error. Ours: the same."""
    md.reset()
    cf = md.compile(_linear_then_mutate)
    for _ in range(2):
        got = {}
        for name, fn in (("eager", _linear_then_mutate), ("md", cf)):
            g = torch.Generator().manual_seed(0)
            x, w, b = torch.randn(2, 3, generator=g), torch.randn(4, 3, generator=g).requires_grad_(), torch.randn(4, generator=g)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AOTFallbackWarning)
                outs = fn(x, w, b)
            got[name] = ([o.detach() for o in outs], x.clone(), _outcome(lambda: outs[0].sum().backward()))
        torch.testing.assert_close(got["md"][0], got["eager"][0])
        torch.testing.assert_close(got["md"][1], got["eager"][1])
        assert got["md"][2] == got["eager"][2] and got["eager"][2][0] == "raised"


def _mutate_under(mode):
    def f(a, w):
        with mode():
            a.mul_(2)
        return (a * w).sum()
    return f


@pytest.mark.parametrize("mode", [torch.no_grad, torch.enable_grad], ids=["no_grad", "grad"])
def test_mutation_of_a_plain_input_then_training(mode):
    f = _mutate_under(mode)
    md.reset()
    cf = md.compile(f)
    for _ in range(2):
        a_e, a_c = torch.arange(3.0), torch.arange(3.0)
        w_e, w_c = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
        torch.testing.assert_close(cf(a_c, w_c), f(a_e, w_e))
        torch.testing.assert_close(a_c, a_e)
        (g_c,) = torch.autograd.grad(cf(a_c, w_c), w_c)
        (g_e,) = torch.autograd.grad(f(a_e, w_e), w_e)
        torch.testing.assert_close(g_c, g_e)


def _bn_on_inputs(x, rm, rv, w, b):
    out = torch.ops.aten._native_batch_norm_legit.default(x, w, b, rm, rv, True, 0.1, 1e-5)
    return out[0].sum()


def _set_nop(x, y):
    x.set_(x)
    return x + y


def _resize_smaller(x):
    x.resize_(2)
    return x * 2


@pytest.mark.parametrize("fn", [_bn_on_inputs, _set_nop, _resize_smaller], ids=lambda f: f.__name__)
def test_other_input_mutations_match_eager(fn):
    """Ops that mutate arguments other than the first, set_, resize_: never wrong, never an AOT error."""
    def make():
        g = torch.Generator().manual_seed(0)
        if fn is _bn_on_inputs:
            return [torch.randn(4, 3, generator=g), torch.zeros(3), torch.ones(3),
                    torch.ones(3, requires_grad=True), torch.zeros(3, requires_grad=True)]
        if fn is _set_nop:
            return [torch.randn(3, generator=g), torch.randn(3, generator=g)]
        return [torch.randn(4, generator=g)]

    md.reset()
    cf = md.compile(fn)
    for _ in range(2):
        args_e, args_c = make(), make()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", AOTFallbackWarning)
            out_c = cf(*args_c)
        out_e = fn(*args_e)
        torch.testing.assert_close(out_c, out_e)
        for a_c, a_e in zip(args_c, args_e):
            torch.testing.assert_close(a_c, a_e)


def test_native_batch_norm_legit_on_inputs_compiles():
    """An op whose schema marks arguments 3 and 4 as written: no fallback, running stats written back."""
    c = aot_function(_bn_on_inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AOTFallbackWarning)
        for _ in range(2):
            g = torch.Generator().manual_seed(0)
            x = torch.randn(4, 3, generator=g)
            stats_c, stats_e = [torch.zeros(3), torch.ones(3)], [torch.zeros(3), torch.ones(3)]
            w_c, w_e = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
            b = torch.zeros(3, requires_grad=True)
            out_c, out_e = c(x, *stats_c, w_c, b), _bn_on_inputs(x, *stats_e, w_e, b)
            torch.testing.assert_close(out_c, out_e)
            torch.testing.assert_close(stats_c, stats_e)
            torch.testing.assert_close(torch.autograd.grad(out_c, w_c), torch.autograd.grad(out_e, w_e))
    assert not c.artifacts.fallback


# -- a mutated input that autograd saved (graph_capture's Note [A mutated input that autograd saved])


def _linear_then_mutate(x, w, b):
    y = torch.nn.functional.linear(x, w, b).relu()
    x.add_(1)  # x was saved for w's gradient: eager's backward() raises
    return y.sum(-1), y.view(-1)


def _add_then_mutate(x, w, b):
    y = (x + w).relu() * b  # add saves nothing of x: eager's backward() works
    x.mul_(2)
    return y.sum(-1), y.view(-1)


def _backward_outcome(out):
    try:
        (out[0].sum() + out[1].sum()).backward()
    except RuntimeError as exc:
        return "raised", str(exc).split("Hint")[0]
    return "ok", None


@pytest.mark.parametrize("fn", [_linear_then_mutate, _add_then_mutate], ids=lambda f: f.__name__)
@pytest.mark.parametrize("entry", ["aot_function", "aot_function_keep", "md.compile"])
def test_mutated_input_saved_by_autograd_compiles_and_matches_eager(fn, entry):
    if entry == "md.compile":
        md.reset()
        cf = md.compile(fn)
    else:
        cf = aot_function(fn, keep_inference_input_mutations=entry.endswith("keep"))
    g = torch.Generator().manual_seed(0)
    shapes = [(4, 3), (5, 3), (5,)] if fn is _linear_then_mutate else [(4, 3), (4, 3), (4, 3)]
    base = [torch.randn(*s, generator=g) for s in shapes]
    for _ in range(2):
        results = []
        for f in (cf, fn):
            x, w, b = base[0].clone(), base[1].clone().requires_grad_(), base[2].clone().requires_grad_()
            with warnings.catch_warnings():
                warnings.simplefilter("error", AOTFallbackWarning)
                out = f(x, w, b)
            results.append((out, x, _backward_outcome(out), w.grad, b.grad))
        (out_c, x_c, bw_c, gw_c, gb_c), (out_e, x_e, bw_e, gw_e, gb_e) = results
        torch.testing.assert_close(out_c, out_e)
        torch.testing.assert_close(x_c, x_e)
        assert bw_c == bw_e
        torch.testing.assert_close((gw_c, gb_c), (gw_e, gb_e))
    if fn is _linear_then_mutate:
        assert bw_e[0] == "raised"
    if entry != "md.compile":
        assert cf.artifacts.fallback is None and cf.artifacts.compiled_function is not None


@pytest.mark.parametrize("alias", ["view", "detach", "set_", "same"])
@pytest.mark.parametrize("how", ["aot_function", "md.compile"])
def test_aliasing_without_a_common_base_is_seen_per_call(alias, how):
    """Compiled for two storages; called with two tensors of one storage, one of them mutated.

    ``x.detach()`` and ``y.set_(x.untyped_storage())`` share ``x``'s storage without
    ``x`` as their ``_base``: Note [The aliasing check per call] looks at storages.
    (torch's own aot_eager reuses the unaliased graph here and returns zeros.)
    """

    def f(a, b):
        a.add_(1)
        return b * 2

    def second(x):
        if alias == "view":
            return x[:]
        if alias == "detach":
            return x.detach()
        if alias == "same":
            return x
        return torch.empty(0).set_(x.untyped_storage())

    md.reset()
    c = aot_function(f) if how == "aot_function" else md.compile(f, backend="aot_eager")
    for _ in range(2):  # compile, then the hot path
        c(torch.zeros(3), torch.zeros(3))
    for _ in range(2):  # a variant for the new aliasing, then its own hot path
        x_e, x_c = torch.zeros(3), torch.zeros(3)
        torch.testing.assert_close(c(x_c, second(x_c)), f(x_e, second(x_e)))
        torch.testing.assert_close(x_c, x_e)
    x_e, x_c = torch.zeros(3), torch.zeros(3)  # and separate storages again
    torch.testing.assert_close(c(x_c, torch.zeros(3)), f(x_e, torch.zeros(3)))
    torch.testing.assert_close(x_c, x_e)


# -- a mutated intermediate that autograd saved (graph_capture's Note [A mutated intermediate that autograd saved];
# by default refused as torch refuses it, graph_compile's Note [A stale saved intermediate is refused])


def _sin_mul_then_add_(x, w):
    y = x.sin()
    z = y * w  # mul saves y for w's gradient (only when w requires grad)
    y.add_(1)
    return z, y


def _sin_mul_then_add_not_returned(x, w):
    y = x.sin()
    z = y * w
    y.add_(1)
    return z


def _sin_mul_then_add_views_returned(x, w):
    y = x.sin()
    z = y * w
    y.add_(1)
    return z.view(-1), y.t()  # aliases of intermediates: their gradients reach the graph through bases


def _exp_then_mul_(x, w):
    y = (x * w).exp()  # exp saves its own output
    y.mul_(2)
    return y


def _exp_used_then_add_(x, w):
    y = (x * w).exp()
    out = y + 1
    y.add_(1)  # y is not returned: only exp's saved output goes stale
    return out


def _sigmoid_then_copy_(x, w):
    y = torch.sigmoid(x * w)
    y.copy_(x.detach() * 2)
    return y


def _tanh_then_view_mul_(x, w):
    y = (x * w).tanh()
    y[0].mul_(3)  # through a view: the base's version moves
    return y


def _cos_mul_then_view_zero_(x, w):
    y = x.cos()
    z = y * w
    y.view(-1)[:2].zero_()
    return z, y


_STALE_FNS = [_sin_mul_then_add_, _sin_mul_then_add_not_returned, _sin_mul_then_add_views_returned, _exp_then_mul_,
              _exp_used_then_add_, _sigmoid_then_copy_, _tanh_then_view_mul_, _cos_mul_then_view_zero_]
# (x requires grad, w requires grad, which outputs the loss sums: "all" or one index)
_STALE_CASES = [(fn, rg, "all") for fn in _STALE_FNS for rg in [(True, True), (False, True), (True, False)]] + [
    (_sin_mul_then_add_, (True, True), 1), (_sin_mul_then_add_, (True, True), 0),
    (_cos_mul_then_view_zero_, (True, True), 1), (_cos_mul_then_view_zero_, (True, True), 0),
    (_sin_mul_then_add_views_returned, (True, True), 1), (_sin_mul_then_add_views_returned, (True, True), 0),
]


def _stale_outcome(fn, rg, loss, *, no_grad=False):
    """(outputs, inputs after, backward's outcome, grads) of one call, or ("compile", exception)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, generator=g).requires_grad_(rg[0])
    w = torch.randn(3, 4, generator=g).requires_grad_(rg[1])
    try:
        with torch.no_grad() if no_grad else contextlib.nullcontext():
            out = fn(x, w)
    except Exception as exc:  # noqa: BLE001 - torch's compile error (ours never raises here)
        return ("compile", type(exc).__name__, str(exc))
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)  # torch's aot_function: a list
    values = [o.detach().clone() for o in outs]
    picked = outs if loss == "all" else (outs[loss],)
    total = sum(o.sum() for o in picked)
    if not total.requires_grad:
        return values, (x.detach(), w.detach()), ("no grad", None), None
    try:
        total.backward()
        backward = ("ok", None)
    except RuntimeError as exc:
        backward = ("raised", str(exc).split(" Hint")[0])
    # A compiled function hands a zero gradient where eager leaves None (an input
    # reached only through an output the loss does not use): torch's does the same.
    grads = [None if a.grad is None else a.grad for a in (x, w)]
    return values, (x.detach(), w.detach()), backward, grads


def _assert_same(got, want):
    assert got[0] != "compile", got
    torch.testing.assert_close(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])
    assert got[2] == want[2]  # eager's error, word for word up to its hint
    for g_got, g_want in zip(got[3] or (), want[3] or ()):  # after an error too: none accumulated
        if g_want is None:  # reached only through an unused output: a compiled function gives zeros
            assert g_got is None or not g_got.any(), g_got
        else:
            torch.testing.assert_close(g_got, g_want)


@pytest.fixture
def compile_stale(monkeypatch):
    """aot/config.py's ``compile_mutated_saved_intermediates`` on: ours compiles what torch refuses."""
    import minidynamo.aot.config as aot_config

    monkeypatch.setattr(aot_config, "compile_mutated_saved_intermediates", True)


def _torch_aot_outcomes(fn, rg, loss):
    from functorch.compile import nop
    from torch._functorch.aot_autograd import aot_function as torch_aot_function

    torch_fn = torch_aot_function(fn, nop)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch traces its joint under anomaly mode, which warns
        return [_stale_outcome(torch_fn, rg, loss) for _ in range(2)]


def _eager_error(fn, rg):
    """Eager's whole backward error for a loss of every output (Hint included), or None."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, generator=g).requires_grad_(rg[0])
    w = torch.randn(3, 4, generator=g).requires_grad_(rg[1])
    out = fn(x, w)
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    try:
        sum(o.sum() for o in outs).backward()
    except RuntimeError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("fn,rg,loss", _STALE_CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_mutated_intermediate_saved_by_autograd_is_refused_as_torch_refuses(fn, rg, loss):
    """By default ours refuses where torch's ``aot_function`` refuses, with its reason, and runs eagerly.

    torch's joint trace meets the stale saved tensor and raises, at the first call,
    the error eager's ``backward()`` would raise (even where eager's backward runs:
    a loss on ``y`` alone). Ours then warns (AOTFallbackWarning) with eager's error
    word for word, and every outcome is eager's. Where torch compiles (no stale
    tensor saved: ``w`` not requiring grad), ours compiles without a warning.
    """
    eager = _stale_outcome(fn, rg, loss)
    theirs = _torch_aot_outcomes(fn, rg, loss)
    torch_refuses = theirs[0][0] == "compile"
    assert all((t[0] == "compile") == torch_refuses for t in theirs), theirs
    if torch_refuses:
        assert theirs[0][1] == "RuntimeError" and "modified by an inplace operation" in theirs[0][2], theirs
    md.reset()
    for name, ours in (("md.compile", md.compile(fn)), ("aot_function", aot_function(fn))):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                _assert_same(_stale_outcome(ours, rg, loss), eager)
        aot = [str(w.message) for w in caught if issubclass(w.category, AOTFallbackWarning)]
        if not torch_refuses:
            assert not aot, (name, aot)
            continue
        assert len(aot) == 1, (name, aot)  # once, at the compile; later calls run eagerly without one
        assert "runs eagerly" in aot[0] and "torch's AOTAutograd refuses this program at compile time" in aot[0]
        assert theirs[0][2].split(" Hint")[0] in aot[0]  # torch's reason
        whole = _eager_error(fn, rg)
        if whole is not None and loss == "all":
            assert whole in aot[0], (whole, aot[0])  # eager's error, word for word


def _torch_compile_refuses(fn):
    """Eager's outcome of ``fn``, after checking that torch.compile(backend="aot_eager") refuses it with eager's reason."""
    import torch._dynamo

    eager = _stale_outcome(fn, (True, True), "all")
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = _stale_outcome(torch.compile(fn, backend="aot_eager"), (True, True), "all")
    finally:
        torch._dynamo.reset()
    assert theirs[:2] == ("compile", "BackendCompilerFailed") and eager[2][1] in theirs[2]
    return eager


def test_mutated_intermediate_refused_under_torch_compile():
    """torch.compile(backend="aot_eager") fails with BackendCompilerFailed; ours warns with the same reason."""
    fn = _sin_mul_then_add_
    eager = _torch_compile_refuses(fn)
    md.reset()
    ours = md.compile(fn)
    with pytest.warns(AOTFallbackWarning, match="refuses this program at compile time") as caught:
        for _ in range(2):
            _assert_same(_stale_outcome(ours, (True, True), "all"), eager)
    assert any(eager[2][1] in str(w.message) and fn.__name__ in str(w.message) and __file__ in str(w.message)
               for w in caught if issubclass(w.category, AOTFallbackWarning))


@pytest.mark.parametrize("fn,rg,loss", _STALE_CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_mutated_intermediate_saved_by_autograd_compiles_with_the_flag(fn, rg, loss, compile_stale):
    """With the flag, ours compiles and behaves as eager: the forward's values, then backward's error or gradients.

    torch's ``aot_function`` refuses at compile time (its joint trace meets the stale
    saved tensor, with eager's error text) wherever a stale saved tensor is reachable
    from an output, and otherwise agrees with eager.
    """
    eager = _stale_outcome(fn, rg, loss)
    theirs = _torch_aot_outcomes(fn, rg, loss)
    md.reset()
    for ours in (md.compile(fn), aot_function(fn)):
        for _ in range(2):
            with warnings.catch_warnings():
                warnings.simplefilter("error", AOTFallbackWarning)  # compiled, not run eagerly
                _assert_same(_stale_outcome(ours, rg, loss), eager)
    if rg != (True, False) or fn in (_exp_then_mul_, _exp_used_then_add_, _sigmoid_then_copy_,
                                     _tanh_then_view_mul_):
        assert all(t[0] == "compile" and t[1] == "RuntimeError" for t in theirs), theirs
        assert "modified by an inplace operation" in theirs[0][2]
    for t in theirs:
        if t[0] != "compile":
            _assert_same(t, eager)
        elif eager[2][0] == "raised":
            assert eager[2][1] in t[2]  # torch's compile error is the error eager's backward raises


@pytest.mark.parametrize("flag", [False, True], ids=["default", "compile_stale"])
@pytest.mark.parametrize("fn", _STALE_FNS, ids=lambda f: f.__name__)
def test_mutated_intermediate_under_no_grad_saves_nothing(fn, flag, monkeypatch):
    """Nothing is saved under no_grad: torch compiles, and so does ours (no warning), whatever the flag."""
    import minidynamo.aot.config as aot_config

    monkeypatch.setattr(aot_config, "compile_mutated_saved_intermediates", flag)
    md.reset()
    ours = md.compile(fn)
    eager = _stale_outcome(fn, (True, True), "all", no_grad=True)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error", AOTFallbackWarning)
            _assert_same(_stale_outcome(ours, (True, True), "all", no_grad=True), eager)


def test_mutated_intermediate_saved_by_autograd_under_torch_compile(compile_stale):
    """torch.compile(backend="aot_eager") raises BackendCompilerFailed at the first call; ours, with the flag, compiles."""
    fn = _sin_mul_then_add_
    eager = _torch_compile_refuses(fn)
    md.reset()
    ours = md.compile(fn)
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error", AOTFallbackWarning)
            _assert_same(_stale_outcome(ours, (True, True), "all"), eager)

"""The cache as torch 2.13 has it (chapter 4): per call, which compiled entry served it, against torch.

Each sequence of calls runs through ``md.compile`` and ``torch.compile`` with the same
recording backend: every graph the backend is handed gets a number in compile order,
and the callable it returns records that number when it runs. So for each call we
know which entry ran (or that the call ran eagerly), and how many compiles there
were, in both systems, and compare them call by call; every result is compared
with eager. Torch's cache order is read from torch itself
(``_debug_get_cache_entry_list``, through ``minidynamo._torch_private``).
"""

from __future__ import annotations

import warnings

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_cache_order, dynamo_config_patch, dynamo_reset

pytestmark = pytest.mark.ch04


class Recorder:
    """A backend that numbers the graphs it compiles and records which one runs."""

    def __init__(self) -> None:
        self.compiled = 0
        self.ran: list[int] = []

    def __call__(self, gm, example_inputs):
        number = self.compiled
        self.compiled += 1

        def run(*args):
            self.ran.append(number)
            return gm(*args)

        return run


def _trace(make_compiled, calls, recorder: Recorder) -> list[tuple]:
    """Per call: (the graphs that ran, or () for an eager call, compiles so far); results checked against eager."""
    rows = []
    for fn, args in calls(make_compiled):
        before = len(recorder.ran)
        out = fn(*args)
        rows.append((tuple(recorder.ran[before:]), recorder.compiled))
        _check_eager(fn, args, out)
    return rows


def _check_eager(fn, args, out) -> None:
    eager = getattr(fn, "__wrapped__", None) or getattr(fn, "_orig_mod", None) or getattr(fn, "_eager", None)
    if eager is not None:
        torch.testing.assert_close(out, eager(*args))


def both(calls, *, limit: dict | None = None) -> tuple[list, list]:
    """Run ``calls(compile)`` with our compile and torch's; each gets a fresh cache and a fresh recorder."""
    results = []
    for system in ("ours", "torch"):
        md.reset()
        dynamo_reset()
        rec = Recorder()
        if system == "ours":
            def make(fn, rec=rec, **kw):
                return md.compile(fn, backend=rec, **kw)
            patch = md.config.patch(**(limit or {}))
        else:
            def make(fn, rec=rec, **kw):
                return torch.compile(fn, backend=rec, **kw)
            patch = dynamo_config_patch(**(limit or {}))
        with patch, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results.append(_trace(make, calls, rec))
    md.reset()
    dynamo_reset()
    return results[0], results[1]


def _with_eager(compiled, fn):
    compiled._eager = fn
    return compiled


# --- the sequences ------------------------------------------------------------------------------

def scale(x):
    return x * 2 + 1


def scale_n(x, n):
    return x * n


def calls_sizes(make):
    f = _with_eager(make(scale), scale)
    for n in (2, 3, 4, 2, 5, 3):
        yield f, (torch.ones(n),)


def calls_dtypes(make):
    f = _with_eager(make(scale), scale)
    for dt in (torch.float32, torch.float64, torch.float32, torch.float64, torch.float16, torch.float32):
        yield f, (torch.ones(3, dtype=dt),)


def calls_grad_mode(make):
    f = _with_eager(make(scale), scale)
    x = torch.ones(3, requires_grad=True)
    for grad in (True, False, True, False, False, True):
        with torch.set_grad_enabled(grad):
            yield f, (x,)


def calls_two_wrappers(make):
    f, g = _with_eager(make(scale), scale), _with_eager(make(scale), scale)
    for fn, n in ((f, 2), (g, 2), (g, 3), (f, 3), (f, 2)):
        yield fn, (torch.ones(n, 2),)


def calls_fresh_lambda(make):
    for n in (3, 3, 4, 3):
        fn = lambda x: x.sin() + 1  # noqa: E731 - a new function of the same code each call
        yield _with_eager(make(fn), fn), (torch.ones(n),)


def calls_int_argument(make):
    f = _with_eager(make(scale_n), scale_n)
    for n in (1, 2, 3, 1):
        yield f, (torch.ones(3), n)


def calls_limit_then_old_entries(make):
    f = _with_eager(make(scale, dynamic=False), scale)
    for n in (1, 2, 3, 1, 2, 3, 2, 1):
        yield f, (torch.ones(n),)


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.lin(x))


def calls_module_instances(make):
    torch.manual_seed(0)
    blocks = [Block() for _ in range(4)]
    compiled = [make(b) for b in blocks]
    for i in (0, 1, 2, 3, 1, 0):
        yield compiled[i], (torch.ones(2, 4),)


def apply_module(m, x):
    return m(x) + 1


def calls_module_argument(make):
    """Modules passed as an argument: instances of one class and layout share an entry; another shape recompiles."""
    torch.manual_seed(0)
    f = _with_eager(make(apply_module), apply_module)
    small, big = [Block() for _ in range(2)], torch.nn.Linear(4, 8)
    for m in (small[0], small[1], big, small[0], big):
        yield f, (m, torch.ones(2, 4))


# Note [Run-only reaches the frames it calls] (frame_cache.py): ``f`` hits the limit on its
# third string; from then on the frames it calls are run-only too, a hit or a miss of ``f``:
# ``other`` (never compiled before) runs eagerly, ``helper``'s resume function is not
# recompiled when ``SCALE`` changes, nor ``helper`` for a float64 input.
SCALE = 2


def other(x):
    return x.sin() + 1


def leaf(x):
    return x * SCALE


def helper(x):
    y = x + 1
    print("", end="")  # a graph break: helper is compiled on its own, and so is its resume function
    return leaf(y)


def reads_k_then_calls(x, k):
    x = x * len(k)
    if k == "ccc":
        x = other(x)
    return helper(x) - 1


def calls_run_only_callees(make):
    global SCALE
    f = _with_eager(make(reads_k_then_calls), reads_k_then_calls)
    seq = [("a", torch.float32, 2), ("bb", torch.float32, 2), ("ccc", torch.float32, 2), ("a", torch.float32, 2),
           ("a", torch.float32, 3), ("ccc", torch.float32, 3), ("a", torch.float64, 3), ("bb", torch.float32, 3)]
    try:
        for k, dtype, scale in seq:
            SCALE = scale
            yield f, (torch.ones(3, dtype=dtype), k)
    finally:
        SCALE = 2


def cos3(x):
    return x.cos() * 3


def calls_a_compiled_function_from_a_run_only_frame(make):
    """A compiled function called from a run-only frame sets its own callback: it compiles (torch's
    ``_TorchDynamoContext`` wrapper calls ``set_eval_frame``), until its own limit makes it run-only."""
    inner = make(cos3)

    def outer(x, k):
        x = x * len(k)
        print("", end="")
        return inner(x) + 1

    f = _with_eager(make(outer), outer)
    for k, dtype in (("a", torch.float32), ("bb", torch.float32), ("bb", torch.float64), ("a", torch.float16),
                     ("a", torch.float32)):
        yield f, (torch.ones(3, dtype=dtype), k)


def calls_module_instances_not_inlined(make):
    """torch 2.13 ignores ``inline_inbuilt_nn_modules=False`` (deprecated): the instances still share an entry."""
    yield from calls_module_instances(make)


SEQUENCES = {
    "sizes": (calls_sizes, None),
    "dtypes": (calls_dtypes, None),
    "grad_mode": (calls_grad_mode, None),
    "two_wrappers": (calls_two_wrappers, None),
    "fresh_lambda": (calls_fresh_lambda, None),
    "int_argument": (calls_int_argument, None),
    "limit_then_old_entries": (calls_limit_then_old_entries, {"recompile_limit": 2}),
    "accumulated_limit": (calls_dtypes, {"accumulated_recompile_limit": 2}),
    "module_instances": (calls_module_instances, None),
    "module_argument": (calls_module_argument, None),
    "run_only_callees": (calls_run_only_callees, {"recompile_limit": 2}),
    "compiled_function_from_run_only_frame": (calls_a_compiled_function_from_a_run_only_frame,
                                              {"recompile_limit": 1}),
    "module_instances_inline_false": (calls_module_instances_not_inlined, {"inline_inbuilt_nn_modules": False}),
    "module_argument_inline_false": (calls_module_argument, {"inline_inbuilt_nn_modules": False}),
}


@pytest.mark.parametrize("name", list(SEQUENCES))
def test_each_call_is_served_by_the_entry_torch_serves_it_with(name):
    calls, limit = SEQUENCES[name]
    ours, theirs = both(calls, limit=limit)
    assert ours == theirs, f"per call (graphs that ran, compiles so far): ours {ours}, torch {theirs}"


def test_the_limit_makes_the_frame_run_only_and_says_so_once():
    """After the limit, the entries are still served; a miss runs eagerly, with one warning."""
    md.reset()
    rec = Recorder()
    f = md.compile(scale, backend=rec, dynamic=False)
    with md.config.patch(recompile_limit=2):
        f(torch.ones(1)), f(torch.ones(2))
        with pytest.warns(UserWarning, match=r"hit config.recompile_limit \(2\)"):
            f(torch.ones(3))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            f(torch.ones(4))
            f(torch.ones(1))
    assert rec.compiled == 2 and rec.ran == [0, 1, 0]
    assert f.cache.run_only == "recompile_limit"


def test_cache_order_is_torchs_most_recently_used_first():
    def order(make, code):
        f = make(scale, dynamic=False)
        for n in (1, 2, 3, 1, 3, 2, 2):
            f(torch.ones(n))
        return code()

    md.reset()
    ours = order(lambda fn, **kw: md.compile(fn, backend="eager", **kw),
                 lambda: [int(e.compile_id.split("/")[1]) for e in md.compile(scale).cache.entries])
    dynamo_reset()
    theirs = order(lambda fn, **kw: torch.compile(fn, backend="eager", **kw), lambda: dynamo_cache_order(scale.__code__))
    dynamo_reset()
    md.reset()
    assert ours == theirs


REASON_CALLS = {
    "tensor_fields": [(torch.ones(2, 3), 2), (torch.ones(2, 3, dtype=torch.float64), 2),
                      (torch.ones(2, 3, requires_grad=True), 2), (torch.ones(3, 2).t(), 2),
                      (torch.ones(2, 3, 1), 2), (torch.ones(2, 3), 3)],
    "sizes": [(torch.ones(2), 2), (torch.ones(3), 2), (torch.ones(3, 4), 2)],
    "bool_and_int": [(torch.ones(2), True), (torch.ones(2), False), (torch.ones(2), 3), (torch.ones(2), True)],
}


@pytest.mark.parametrize("name", list(REASON_CALLS))
def test_recompile_reasons_are_torchs_word_for_word(name):
    """``0/1: tensor 'x' dtype mismatch. expected Double, actual Float``: per recompile, one reason per entry."""
    from minidynamo._torch_private import dynamo_guard_failures

    def strip(reason):  # the frame's number differs between the two systems; the entry's does not
        return reason.split("/", 1)[1].split("  ")[0].split("\n")[0].rstrip()

    md.reset()
    dynamo_reset()
    ours = md.compile(scale_n, backend="eager", dynamic=False)
    theirs = torch.compile(scale_n, backend="eager", dynamic=False)
    for args in REASON_CALLS[name]:
        ours(*args)
        theirs(*args)
    mine = [strip(r) for rec in ours.cache.recompiles for r in rec.reasons]
    torchs = [strip(r) for r in dynamo_guard_failures(scale_n.__code__)]
    dynamo_reset()
    assert mine == torchs
    lines = ours.cache.recompiles[-1].message.splitlines()
    assert lines[0].startswith("Recompiling function scale_n in ")
    assert lines[1] == "    triggered by the following guard failure(s):"
    assert all(line.startswith("    - ") for line in lines[2:])


def test_error_on_recompile_raises_with_the_reasons():
    md.reset()
    f = md.compile(scale, backend="eager", dynamic=False)
    f(torch.ones(2))
    from minidynamo.symbolic.frame_cache import RecompileError

    with md.config.patch(error_on_recompile=True), pytest.raises(RecompileError, match="size mismatch"):
        f(torch.ones(3))


def test_the_guard_tree_walk_agrees_with_the_generated_check():
    def g(x, xs, n):
        return x * n + xs[0]

    md.reset()
    f = md.compile(g, backend="eager", dynamic=False)
    args = (torch.ones(2), (torch.ones(2), torch.ones(2)), 2)
    f(*args)
    check = f.cache.entries[0].check
    tree = check.tree
    text = str(tree)
    assert text.startswith("TREE_GUARD_MANAGER:\n+- RootGuardManager\n| +- GLOBAL_STATE: ")
    assert ("| +- GuardManager: source=L['xs'], accessed_by=FrameLocalsGuardAccessor(key='xs', framelocals_idx=1), "
            "type=<class 'tuple'>, tag_safe=(False, False)") in text
    assert "| | +- GuardManager: source=L['xs'][0], accessed_by=TupleGetItemGuardAccessor(0), type=<class 'torch.Tensor'>" in text
    assert ("| | +- TENSOR_MATCH: check_tensor(L['x'], Tensor, DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, "
            "AutogradCPU), torch.float32, device=None, requires_grad=False, size=[2]") in text
    variants = [args, (torch.ones(3), args[1], 2), (torch.ones(2), (torch.ones(2),), 2), (torch.ones(2), args[1], 3),
                (torch.ones(2, dtype=torch.float64), args[1], 2), (torch.ones(2), [torch.ones(2)] * 2, 2),
                (args[0], (args[0], args[1][1]), 2), (torch.ones(2), (args[1][0],) * 2, 2)]
    for x, xs, n in variants:
        L = {"x": x, "xs": xs, "n": n}
        assert tree.check(L, g.__globals__, check.scope) == check(L, g.__globals__)


def _random_calls(seed, dynamic=False):
    """A seeded sequence of calls whose sizes, dtypes, requires_grad and grad mode change."""
    import random

    rng = random.Random(seed)
    steps = [(rng.choice((2, 3, 5)), rng.choice((torch.float32, torch.float64)), rng.random() < 0.3,
              rng.random() < 0.8) for _ in range(8)]

    def calls(make):
        f = _with_eager(make(scale, dynamic=dynamic), scale)
        for n, dtype, requires_grad, grad in steps:
            with torch.set_grad_enabled(grad):
                yield f, (torch.ones(n, dtype=dtype, requires_grad=requires_grad),)

    return calls


@pytest.mark.parametrize("dynamic", [False, None])
@pytest.mark.parametrize("seed", range(6))
def test_random_sequences_are_served_as_torch_serves_them(seed, dynamic):
    ours, theirs = both(_random_calls(seed, dynamic), limit={"recompile_limit": 4})
    assert ours == theirs, f"per call (graphs that ran, compiles so far): ours {ours}, torch {theirs}"


def add_three(a, b, c):
    return a + b * c


def test_an_aliasing_recompile_names_the_duplicate_tensors_as_torch():
    """``0/0: Duplicate tensors found: ["a", "b"]`` (``recompilation_reason_for_no_tensor_aliasing_guard``)."""
    from minidynamo._torch_private import dynamo_guard_failures

    def strip(reason):  # torch's comment (the user's line) after two spaces
        return reason.split("/", 1)[1].split("  ")[0].split("\n")[0].rstrip()

    x, y, z = torch.ones(3), torch.ones(3), torch.ones(3)
    md.reset()
    dynamo_reset()
    ours = md.compile(add_three, backend="eager")
    theirs = torch.compile(add_three, backend="eager")
    # (a fourth call (x, x, x) would name the guards of the entry traced with (y, z, y), whose kept
    # tensor of the pair differs: torch keeps the one its lazy trackers realize first, b * c before a)
    for args in ((x, y, z), (x, x, z), (y, z, y)):
        torch.testing.assert_close(ours(*args), add_three(*args))
        theirs(*args)
    mine = [strip(r) for rec in ours.cache.recompiles for r in rec.reasons]
    torchs = [strip(r) for r in dynamo_guard_failures(add_three.__code__)]
    dynamo_reset()
    md.reset()
    assert any("Duplicate tensors found" in r for r in torchs)
    assert mine == torchs

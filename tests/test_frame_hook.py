"""The PEP 523 frame hook (frame_hook.c): the raw C hook under stress, then md.compile through it.

Differential: every result is compared with eager CPython on the same inputs; graph
counts of the loop-break workload with the real ``torch._dynamo.explain``. A crash here
takes the interpreter down, so each case stays small and the stress is in the counts
(thousands of frames), recursion, exceptions, generators, threads and ``sys.settrace``.
"""

from __future__ import annotations

import gc
import sys
import threading

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_explain
from minidynamo.symbolic import frame_hook

HOOK = frame_hook.build()
pytestmark = [pytest.mark.ch05, pytest.mark.filterwarnings("error:minidynamo. tracing"),
              pytest.mark.skipif(HOOK is None, reason=f"no frame hook here: {frame_hook.reason()}")]


# --- the raw hook: a Python callback that answers for some frames ---------------------

def _callback(func, L):
    args = tuple(L.values())  # the arguments by name, in order (these functions have no free variables)
    name = func.__name__
    if not name.startswith("user_"):
        return HOOK.SKIP
    if name == "user_answered":  # a "compiled" frame: the callback answers, the frame never runs
        return HOOK.call_with(_callback, _replacement, *args)
    if name == "user_identity":
        return HOOK.call_with(_callback, lambda x: ("answered", x), *args)
    if name == "user_raise_in_callback":
        raise KeyError("raised by the callback")
    return HOOK.DEFAULT


def _replacement(x):
    return ("answered", user_leaf(x))


def user_leaf(x):
    return x + 1


def user_answered(x):
    return ("ran", x)


def user_fact(n):
    return 1 if n <= 1 else n * user_fact(n - 1)


def user_gen(n):
    for i in range(n):
        yield user_answered(i)


def user_raises(x):
    raise ValueError(x)


def user_raise_in_callback():
    return 1


def user_kwargs(a, b=2, *args, c, d=4, **kw):
    def inner():
        return a + b + c + d + len(args) + len(kw)
    return inner()


def user_identity(x):
    return ("ran", x)


def user_down(n, x):
    return user_identity(x) if n == 0 else user_down(n - 1, x)


def _hooked(fn, *args):
    previous = HOOK.set_callback(_callback)
    try:
        return fn(*args)
    finally:
        HOOK.set_callback(previous)


def test_thousands_of_frames_answered_and_run():
    def user_many():
        return [user_answered(i) for i in range(3000)] + [user_kwargs(1, c=3, e=5) for _ in range(3000)]

    before = HOOK.stats()["callbacks"]
    out = _hooked(user_many)
    assert out[:3000] == [("answered", i + 1) for i in range(3000)]
    assert out[3000:] == [user_kwargs(1, c=3, e=5)] * 3000
    assert HOOK.stats()["callbacks"] - before >= 6000
    assert HOOK.stats()["installed"] is False  # installed only while a callback is set


def test_recursion_deep_and_past_the_limit():
    assert _hooked(user_fact, 200) == user_fact(200)

    def user_forever(n):
        return user_forever(n + 1)

    with pytest.raises(RecursionError):
        _hooked(user_forever, 0)
    assert _hooked(user_fact, 50) == user_fact(50)  # still working after the RecursionError


def test_answered_frames_at_every_depth_leak_nothing():
    # an answered frame is cleared and popped by the hook on 3.12+, and may sit at the
    # start of a new data-stack chunk: walk it across many depths, count references
    marker = object()
    before = sys.getrefcount(marker)
    for depth in range(0, 400, 3):
        assert _hooked(user_down, depth, marker) == ("answered", marker)
    gc.collect()
    assert sys.getrefcount(marker) == before


def test_exceptions_through_run_and_answered_frames():
    def user_catches():
        caught = []
        for i in range(200):
            try:
                user_raises(i)
            except ValueError as e:
                caught.append(e.args[0])
        return caught

    assert _hooked(user_catches) == list(range(200))
    with pytest.raises(KeyError, match="raised by the callback"):
        _hooked(user_raise_in_callback)
    assert _hooked(user_answered, 1) == ("answered", 2)


def test_default_with_a_callback_runs_the_frame_its_callees_asking_that_callback():
    """``(DEFAULT, cb)``: CPython runs the frame, its callees ask ``cb`` (torch's recursive action,
    eval_frame_cpp.cpp; Note [Run-only reaches the frames it calls]); the caller's callback is back after."""
    seen = []

    def user_inner(x):
        return x + 1

    def user_outer(x):
        return user_inner(x) * 2

    def user_raising(x):
        raise ValueError(x)

    def second(func, L):
        seen.append(("second", func.__name__))
        return HOOK.DEFAULT

    def first(func, L):
        seen.append(("first", func.__name__))
        return (HOOK.DEFAULT, second) if func.__name__ in ("user_outer", "user_raising") else HOOK.DEFAULT

    def user_top(x):
        return user_outer(x) + user_inner(x)

    assert HOOK.call_with(first, user_top, 1) == 6
    assert seen == [("first", "user_top"), ("first", "user_outer"), ("second", "user_inner"), ("first", "user_inner")]
    with pytest.raises(ValueError):
        HOOK.call_with(first, user_raising, 1)
    assert HOOK.call_with(first, user_inner, 1) == 2 and seen[-1] == ("first", "user_inner")


def test_generators_run_in_cpython_their_callees_still_hooked():
    assert _hooked(lambda: list(user_gen(5))) == [("answered", i + 1) for i in range(5)]
    gen = user_gen(3)
    assert _hooked(next, gen) == ("answered", 1)
    assert next(gen) == ("ran", 1)  # resumed with no callback: runs the frame itself


def test_threads_each_their_own_callback():
    results, errors = [], []

    def worker(hooked):
        try:
            for _ in range(200):
                results.append((hooked, _hooked(user_answered, 1) if hooked else user_answered(1)))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i % 2 == 0,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert {r for h, r in results if h} == {("answered", 2)}
    assert {r for h, r in results if not h} == {("ran", 1)}
    assert HOOK.stats()["active_threads"] == 0


def test_settrace_active():
    events = []

    def tracer(frame, event, arg):
        events.append((event, frame.f_code.co_name))
        return tracer

    sys.settrace(tracer)
    try:
        out = _hooked(lambda: [user_answered(i) for i in range(50)] + [user_fact(10)])
    finally:
        sys.settrace(None)
    assert out == [("answered", i + 1) for i in range(50)] + [user_fact(10)]
    assert ("call", "user_fact") in events


# --- md.compile through the hook ------------------------------------------------------

def layer(x, w):
    return torch.tanh(x @ w) + x


def forward_break_in_loop(x, w):
    for i in range(4):
        x = layer(x, w)
        if i == 1:
            print("", end="")  # a graph break inside the loop: Dynamo skips this frame
    return x


def raises_in_callee(x):
    x = x + 1
    print("", end="")
    return bad_callee(x)


def bad_callee(x):
    raise ValueError(f"bad {x.shape[0]}")


def gen_user(x):
    def steps(x):
        for i in range(3):
            yield layer(x, x.T) * i

    return sum(steps(x))


@pytest.fixture
def hooked():
    with frame_hook.using(True) as module:
        yield module


@pytest.mark.usefixtures("real_dynamo")
def test_loop_break_skipped_frame_runs_in_cpython_callees_compiled(hooked, monkeypatch):
    from minidynamo.symbolic import eval_frame

    x, w = torch.randn(4, 4), torch.randn(4, 4)
    ours = md.explain(forward_break_in_loop, x, w)
    real = dynamo_explain(forward_break_in_loop, x, w)
    assert "PEP 523" in ours.frame_hook
    assert ours.graph_count == real.graph_count
    torch.testing.assert_close(ours.out, forward_break_in_loop(x, w))
    compiled = md.compile(forward_break_in_loop, backend="eager")
    compiled(x, w)
    # from now on the skipped frame must not touch our interpreter
    monkeypatch.setattr(eval_frame.OptimizedFunction, "run_eagerly", lambda *a: pytest.fail("ran on our VM"))
    for _ in range(3):
        torch.testing.assert_close(compiled(x, w), forward_break_in_loop(x, w))
    cache = compiled.config.frames
    assert cache[forward_break_in_loop.__code__].skipped
    assert cache[layer.__code__].entries  # the callee was compiled, and its cache hit


def test_without_the_hook_explain_says_so():
    with frame_hook.using(False):
        out = md.explain(forward_break_in_loop, torch.randn(2, 2), torch.randn(2, 2))
    assert "explicit calls" in out.frame_hook


def test_user_exception_through_compiled_and_skipped_frames(hooked):
    compiled = md.compile(raises_in_callee, backend="eager")
    for _ in range(3):
        with pytest.raises(ValueError, match="bad 3"):
            compiled(torch.randn(3))
    loop = md.compile(forward_break_in_loop, backend="eager")
    with pytest.raises(RuntimeError):  # torch's own shape error, raised in a compiled callee
        loop(torch.randn(3, 4), torch.randn(5, 4))
    torch.testing.assert_close(loop(torch.ones(2, 2), torch.ones(2, 2)),
                               forward_break_in_loop(torch.ones(2, 2), torch.ones(2, 2)))


@pytest.mark.filterwarnings("ignore:minidynamo. fact hit the cache size limit")
def test_generators_and_recursion_through_compiled_code(hooked):
    x = torch.randn(3, 3)
    torch.testing.assert_close(md.compile(gen_user, backend="eager")(x), gen_user(x))

    def fact(n, x):
        if n == 0:
            return x
        print("", end="")
        return fact(n - 1, x * 1.01)

    torch.testing.assert_close(md.compile(fact, backend="eager")(30, x), fact(30, x))


def test_threads_and_settrace_with_compiled_functions(hooked):
    compiled = md.compile(forward_break_in_loop, backend="eager")
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    expected = forward_break_in_loop(x, w)
    compiled(x, w)
    errors = []

    def worker():
        try:
            for _ in range(20):
                torch.testing.assert_close(compiled(x, w), expected)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    sys.settrace(lambda *a: None)
    try:
        torch.testing.assert_close(compiled(x, w), expected)
    finally:
        sys.settrace(None)
    assert HOOK.stats()["active_threads"] == 0


@pytest.mark.slow
def test_benchmark_reports_the_loop_break_and_the_hook_cost(tmp_path):
    import json
    import subprocess

    path = tmp_path / "hook.json"
    proc = subprocess.run([sys.executable, "-m", "minidynamo.bench", "--frame-hook", "--quick", "--json", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "hooked" in proc.stdout and "SKIP-marked" in proc.stdout
    report = json.loads(path.read_text())["frame_hook"]
    lb = report["loop_break"]["quick"]
    assert lb["hook"] and lb["callee_graphs"] >= 1  # the callee was compiled though its caller was skipped
    assert set(lb["per_call_s"]) == {"eager", "hooked", "explicit", "torch"}
    assert report["hook_cost"]["plain_call_s"] > 0


# --- what the hook exposed: frames the explicit design never traced -------------------

class Base:
    def step(self, x):
        print("", end="")  # a graph break inside the method super() finds
        return x + 1


class Child(Base):
    def step(self, x):
        return super().step(x) * 2  # at the break: Base.step bound to self, not self.step


@pytest.mark.parametrize("on", [True, False])
def test_a_method_found_through_super_is_called_at_a_break(on):
    # rebuilt as ``self.step`` the call would find Child.step again: recursion without end
    x = torch.randn(3)
    with frame_hook.using(on):
        compiled = md.compile(lambda c, x: c.step(x), backend="eager")
        for _ in range(2):
            torch.testing.assert_close(compiled(Child(), x), Child().step(x))



def test_a_frame_run_eagerly_for_good_is_marked_skip_until_a_new_config(hooked):
    # as torch marks a skipped frame's code: CPython runs it unasked, its callees still hooked
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    compiled = md.compile(forward_break_in_loop, backend="eager")
    compiled(x, w)
    assert HOOK.is_skipped(forward_break_in_loop.__code__) and not HOOK.is_skipped(layer.__code__)
    hits = compiled.config.frames[layer.__code__].entries
    torch.testing.assert_close(compiled(x, w), forward_break_in_loop(x, w))
    assert hits  # the callee still passed its cache
    out = md.explain(forward_break_in_loop, x, w)  # a new config asks again: the same counts
    assert out.graph_count == md.explain(forward_break_in_loop, x, w).graph_count >= 1
    md.reset()
    assert not HOOK.is_skipped(forward_break_in_loop.__code__)


def test_reset_forgets_a_skip_mark_on_an_inbuilt_forward():
    """Note [An inbuilt forward is compiled when its module has hooks]: a SKIP mark on ``nn.Linear.forward``
    (here by a raw callback; a run-only frame used to leave one) would keep every later hooked Linear
    from being compiled; ``md.reset()`` forgets it, and a run-only lookup never sets it."""
    lin = torch.nn.Linear(2, 2)
    code = torch.nn.Linear.forward.__code__
    HOOK.call_with(lambda func, L: HOOK.SKIP, lin, torch.randn(2))
    assert HOOK.is_skipped(code)
    md.reset()
    assert not HOOK.is_skipped(code)
    from minidynamo.symbolic.eval_frame import CompileConfig
    config = CompileConfig(backend=lambda gm, ex: gm.forward)
    HOOK.call_with(config.run_only_callback, lin, torch.randn(2))
    assert not HOOK.is_skipped(code)

"""A frame's cache: look its entries up, trace again on a miss, fall back to eager for good.

Place in the pipeline: between the front door (``eval_frame.py``: ``md.compile``'s
wrappers and the frame hook's callback) and the tracer (``convert_frame.compile_frame``).
``call_frame`` binds nothing itself: it gets the frame's ``L``, checks the guards of each
cache entry, runs the first that holds, and on a miss names the failing guard, traces
again and stores the new entry. Mirrors the per-code cache of
``torch/csrc/dynamo/extra_state.cpp`` (``ExtraState``: the entry list, ``move_to_front``,
the ``frame_state`` of automatic dynamic, the SKIP strategy) and ``cache_entry.cpp``,
and the miss path of ``torch/_dynamo/convert_frame.py`` (``ConvertFrame``: recompile
reasons, the fallback under ``config.suppress_errors``; ``cache_size.py``'s
``exceeds_recompile_limit``).

Note [The cache lives on the code object]
    Torch keeps a frame's compiled entries on its code object (``ExtraState`` in the
    code's extra field, ``extra_state.cpp``), not on the ``torch.compile`` wrapper:
    every wrapper of one function, every fresh ``lambda`` made from one code, and every
    frame the PEP 523 hook meets share them. An entry remembers the backend it was
    compiled for, and a lookup skips entries of another backend (``backend_match``:
    the same object, or equal, as two ``torch.compile(..., backend="eager")`` are).
    Ours: ``CODE_CACHES`` maps a code object to its ``FrameCache`` (a dict rather than
    ``co_extra``, which CPython gives only to C code); each entry carries
    ``backend_key`` = (backend, dynamic), what ``_TorchCompileWrapper.__eq__`` compares.
    ``md.reset()`` empties it, as ``torch._dynamo.reset`` frees the extra state.

Note [The entry that hit last is tried first]
    Torch's cache list is most-recently-used first: ``lookup`` runs each entry's
    guards in list order and moves the one that holds to the front
    (``ExtraState::move_to_front``); a new entry is put at the front
    (``create_cache_entry``: ``emplace_front``). So a frame whose sizes went dynamic
    checks its dynamic entry first once it has served a call. Ours keeps
    ``FrameCache.entries`` in the same order; an entry's ``compile_id`` (``0/1``:
    the frame's number, then the entry's) says in which order they were made.

Note [Recompiles and the cache size limit]
    When no entry's guards hold, torch evaluates every entry's guards again to name,
    per entry in cache order, the first that failed (``get_guard_fail_reason``:
    ``0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3``), logs them
    as ``Recompiling function f ... triggered by the following guard failure(s)``,
    and traces again. ``cache_size.py`` counts the entries whose ID_MATCHed module
    locals are the objects of this call (``compute_cache_size``); at
    ``config.recompile_limit`` of those, or ``config.accumulated_recompile_limit``
    entries in all, the frame becomes RUN_ONLY (``convert_frame.py``: ``_compile``,
    a warning once): the entries it has are still served, and only a miss runs
    eagerly, never traced again. Ours does the same with ``minidynamo.config``'s flags.

Note [Run-only reaches the frames it calls]
    The strategy ``_compile`` gives a frame at the limit is ``FrameExecStrategy(RUN_ONLY,
    RUN_ONLY)`` (``convert_frame.py``): the second half is the *recursive* action. From
    then on ``dynamo__custom_eval_frame`` (``torch/csrc/dynamo/eval_frame_cpp.cpp``)
    runs every call of that frame, a hit or a miss, with the callback ``False`` for the
    frames it calls (``_callback_from_action``): such a frame checks its cache (entries
    of any backend) and runs the entry that holds, or runs eagerly, and is never traced;
    one with no cache yet runs eagerly; and the frames *they* call are run-only too. So
    a helper the run-only frame calls eagerly is not compiled on its own, and a helper
    whose guards now fail (a global changed) is not recompiled. Ours: ``RUN_ONLY`` counts
    the run-only frames active now on this thread; while it is set, ``_call_frame`` only looks up, and
    with the frame hook the frame runs with ``CompileConfig.run_only_callback`` as its
    callees' callback (``frame_hook.c``'s ``(DEFAULT, callback)`` answer).
"""

from __future__ import annotations

import itertools
import textwrap
import threading
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

import torch

from minidynamo import config as mdconfig
from minidynamo import events

from . import counters
from .convert_frame import compile_frame
from .exc import (ConstraintViolationError, EagerFallback, FullGraphError, GraphBreak, InternalError, TorchRuntimeError, UncapturedHigherOrderOpError,
                  raised_by_us,
                  runtime_error_explanation, warn_internal)
from .fake_values import TracedUserError
from .guards import Guard
from .resume_execution import ResumeFunction, vm_can_run

if TYPE_CHECKING:
    from .eval_frame import CompileConfig


def __getattr__(name: str) -> Any:
    """``CACHE_SIZE_LIMIT`` and ``SUPPRESS_ERRORS``, the constants this module had: now ``minidynamo.config``'s."""
    if name == "CACHE_SIZE_LIMIT":
        return mdconfig.recompile_limit
    if name == "SUPPRESS_ERRORS":
        return mdconfig.suppress_errors
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class RecompileError(RuntimeError):
    """``config.error_on_recompile`` and a frame that would recompile (torch's ``exc.RecompileError``)."""


@dataclass
class RecompileRecord:
    """Why a frame was traced again: per entry, the guard that failed (torch's phrasing), and what changed."""

    function: str
    guard: Optional[Guard]
    change: str
    entries: int
    dynamic: list = field(default_factory=list)  # sizes the new trace makes dynamic (Note [Automatic dynamic])
    reasons: list = field(default_factory=list)  # "0/0: tensor 'x' size mismatch ...", one per entry, cache order
    where: str = ""  # "f in file.py:12", as torch names the function
    compile_id: str = ""  # the id the new entry gets

    @property
    def message(self) -> str:
        """torch's recompile log message (``guards.py``: ``get_and_maybe_log_recompilation_reasons``)."""
        failures = textwrap.indent("\n".join(self.reasons), "- ")
        details = f"triggered by the following guard failure(s):\n{failures}"
        return f"Recompiling function {self.where or self.function}\n{textwrap.indent(details, '    ')}"

    def __str__(self) -> str:
        expr = self.guard.expr if self.guard else "?"
        extra = f"; now dynamic: {', '.join(self.dynamic)}" if self.dynamic else ""
        return f"{self.message}\n  minidynamo: guard failed: {expr}  ({self.change}){extra}"


@dataclass
class FrameCache:
    """The cache of one code object (torch's ``ExtraState``): entries most-recently-used first."""

    entries: list = field(default_factory=list)
    recompiles: list = field(default_factory=list)
    fallback: Any = None  # why this frame runs eagerly for good
    skipped: bool = False  # Dynamo's SkipFrame: eager, but the frames it calls are still compiled
    frame_state: dict = field(default_factory=dict)  # input sizes traced so far (Note [Automatic dynamic])
    no_ops: bool = False  # Note [A frame that traced no ops is skipped for good]
    run_only: Optional[str] = None  # the limit hit ("recompile_limit"): entries served, a miss runs eagerly
    frame_id: Optional[int] = None  # the first number of its entries' compile ids
    compiles: int = 0  # entries made so far: the second number of the next compile id


# Note [The cache lives on the code object]: code object (or resume function) -> its FrameCache
CODE_CACHES: dict = {}
_frame_ids = itertools.count()


def reset_code_caches() -> None:
    """Forget every code object's entries (``md.reset``, as ``torch._dynamo.reset``)."""
    global _frame_ids
    CODE_CACHES.clear()
    _frame_ids = itertools.count()


class _RunOnly(threading.local):
    """Run-only frames running now on this thread (torch: this thread's callback is False)."""

    depth = 0


# Note [Run-only reaches the frames it calls]: per thread, as torch's eval-frame callback
RUN_ONLY = _RunOnly()


def run_only_mode(fn: Callable, *args: Any) -> Any:
    """``fn(*args)`` with the frames it calls in run-only mode (torch's recursive RUN_ONLY)."""
    RUN_ONLY.depth += 1
    try:
        return fn(*args)
    finally:
        RUN_ONLY.depth -= 1


def lookup(cache: FrameCache, L: dict, G: dict, backend_key: Any) -> Any:
    """The first entry whose guards hold, moved to the front; None on a miss (``extra_state.cpp``: ``lookup``).

    A frame called from a run-only frame tries every entry, whatever its backend (torch
    passes ``Py_False`` as the backend); the run-only frame itself still matches its backend.
    """
    entries = cache.entries
    any_backend = RUN_ONLY.depth > 0
    for i, entry in enumerate(entries):
        key = entry.backend_key
        if key is not backend_key and not any_backend and key != backend_key:
            continue
        try:
            ok = entry.check.fn(L, G)
        except Exception:  # noqa: BLE001 - a guard that cannot even be evaluated has failed
            ok = False
        if ok:
            if i:
                entries.insert(0, entries.pop(i))  # move_to_front (Note [The entry that hit last is tried first])
            return entry
        entry.check.record_failure(L, G)  # guard_tree.py: Note [A manager that fails is tried first]
    return None


def _has_same_id_matched_objs(entry, L: dict) -> bool:
    """``cache_size.py``: the ID_MATCHed module locals of ``entry`` are this call's objects (dead ones ignored)."""
    for name, ref in entry.id_matched_objs.items():
        obj = ref()
        if obj is not None and L.get(name) is not obj:
            return False
    return True


def exceeds_recompile_limit(cache: FrameCache, L: dict) -> Optional[str]:
    """``cache_size.py``'s ``exceeds_recompile_limit``: the name of the limit a new entry would pass, or None."""
    if len(cache.entries) >= mdconfig.accumulated_recompile_limit or cache.compiles >= mdconfig.accumulated_recompile_limit:
        return "accumulated_recompile_limit"
    if sum(_has_same_id_matched_objs(e, L) for e in cache.entries) >= mdconfig.recompile_limit:
        return "recompile_limit"
    return None


def _where(frame) -> str:
    code = frame.code
    return f"{code.co_name} in {code.co_filename}:{code.co_firstlineno}"


def _frame_key(frame) -> Any:
    """The key of a frame's cache: a function's code object (``OptimizedFunction``), a resume function itself."""
    return frame if isinstance(frame, ResumeFunction) else frame.code


def call_frame(frame, L: dict, config: CompileConfig, eager: Callable[[], Any],
               run_skipped: Optional[Callable] = None) -> Any:
    """Check guards, run a cached entry, or compile a new one (the cache, Note [Recompiles ...]).

    No user code runs inside an ``except`` block of ours, so nothing of ours is chained
    to the user's exception as its ``__context__`` (Note [The user's exception reaches
    the user unchanged]). With the frame hook, the lookup and the entry's code run with the hook off.
    """
    if config.hook is None:
        return _call_frame(frame, L, config, eager, run_skipped or frame.run_eagerly)
    return config.hook.call_with(None, _call_frame, frame, L, config, eager, run_skipped or frame.run_eagerly)


def _call_frame(frame, L: dict, config: CompileConfig, eager: Callable[[], Any], run_skipped: Callable,
                looked_up: bool = False) -> Any:
    from .guard_tree import fail_reason

    cache = config.frames.get(_frame_key(frame))
    G = frame.f_globals
    if RUN_ONLY.depth:  # called from a run-only frame: look up, never trace (Note [Run-only reaches ...])
        entry = None if cache is None or cache.fallback is not None else lookup(cache, L, G, config.backend_key)
        if entry is None:
            return _run_only_miss(frame, L, eager, run_skipped, looked_up)
        counters["cache_hits"] += 1
        return _run_entry(frame, cache, config, entry, L, G, eager, run_skipped)
    if cache is None:
        cache = config.frames[_frame_key(frame)] = FrameCache()
    if cache.fallback is not None:
        return run_skipped(L) if cache.skipped else eager()
    entry = None if looked_up else lookup(cache, L, G, config.backend_key)  # the hook's callback looked up
    if cache.run_only is not None:  # the limit was hit: a hit is served, a miss runs eagerly, untraced,
        if entry is None:  # and the frames either calls are run-only (Note [Run-only reaches ...])
            return run_only_mode(_run_only_miss, frame, L, eager, run_skipped, looked_up)
        counters["cache_hits"] += 1
        return run_only_mode(_run_entry, frame, cache, config, entry, L, G, eager, run_skipped)
    if entry is not None:
        counters["cache_hits"] += 1
        return _run_entry(frame, cache, config, entry, L, G, eager, run_skipped)
    if any(_has_same_id_matched_objs(e, L) for e in cache.entries):  # cache_size.py: is_recompilation
        reasons = [fail_reason(e, L, G, config.backend_key) for e in cache.entries]
        guard, change = cache.entries[0].check.first_failure(L, G)
        from .dynamic_shapes import automatic_dynamic_changes

        dynamic = automatic_dynamic_changes(cache.frame_state, L, G, config.dynamic)
        record = RecompileRecord(frame.__name__, guard, change, len(cache.entries), dynamic, reasons, _where(frame),
                                 f"{cache.frame_id}/{cache.compiles}")
        cache.recompiles.append(record)
        counters["recompiles"] += 1
        events.emit("recompile", function=frame.__name__, guard=guard.expr if guard else None, change=change,
                    record=record, dynamic=dynamic, reasons=reasons,
                    code=frame.code)
        if mdconfig.error_on_recompile:  # after the reasons are kept (torch fills guard_failures first)
            raise RecompileError(record.message)
        limit = exceeds_recompile_limit(cache, L)
        if limit is not None:
            cache.run_only = limit
            fallback = (
                f"minidynamo hit config.{limit} ({getattr(mdconfig, limit)})\n"
                f"   function: {frame.code.co_name!r} ({frame.code.co_filename}:{frame.code.co_firstlineno})\n"
                f"   last reason: {reasons[0] if reasons else 'Unable to find recompilation reasons'}\n"
                "The frame is run-only from now on (torch's FrameAction.RUN_ONLY): its "
                f"{len(cache.entries)} entries are still served, and a call none of them fits runs eagerly."
            )
            if config.fullgraph:  # torch: FailOnRecompileLimitHit("Hard failure due to fullgraph=True")
                raise FullGraphError(fallback)
            events.emit("cache_limit", function=frame.__name__, limit=limit, message=fallback)
            warnings.warn(fallback, stacklevel=3)
            return run_only_mode(_run_only_miss, frame, L, eager, run_skipped, looked_up)
    if not isinstance(frame, ResumeFunction) and not has_tensor_in_frame(frame, L, config):
        cache.fallback, cache.skipped, cache.no_ops = "no tensor-related objects found in frame", True, True
        return run_skipped(L)  # Note [A frame that traced no ops is skipped for good]
    from .dynamic_shapes import retry_static, warn_if_retried

    for _attempt in range(2):
        entry = fallback = None
        try:
            entry = compile_frame(frame, L, config, cache.frame_state)
        except EagerFallback as e:
            fallback = e.explanation
        except (FullGraphError, UncapturedHigherOrderOpError, TorchRuntimeError,
                ConstraintViolationError):  # torch raises these too
            raise
        except TracedUserError:
            # the user's own error (a shape mismatch): eager raises it, as without compile.
            # If eager does not raise, the error was ours: warn once and keep the frame eager.
            fallback = "user error?"
        except Exception as e:  # noqa: BLE001 - Note [No internal error reaches the user]
            if not mdconfig.suppress_errors:
                raise
            fallback = internal_error_explanation(frame, e)
        if entry is not None or not retry_static(frame, cache.frame_state, fallback):
            break
    warn_if_retried(frame, cache.frame_state, entry)
    if entry is not None and _traced_no_ops(frame, entry, L, config):
        cache.fallback, cache.skipped, cache.no_ops = "no ops traced", True, True
        return run_skipped(L)
    if entry is not None:
        _add_entry(frame, cache, config, entry)
        return _run_entry(frame, cache, config, entry, L, G, eager, run_skipped)
    if fallback == "user error?":
        out = eager()
        if config.hook is not None and out is config.hook.DEFAULT:
            return out  # CPython runs the frame (and raises the user's error) after we return
        fallback = internal_error_explanation(frame, RuntimeError("a fake-tensor op raised where eager did not"))
        _eager_for_good(frame, cache, config, fallback)
        return out
    _eager_for_good(frame, cache, config, fallback)
    return run_skipped(L) if cache.skipped else eager()


def _run_only_miss(frame, L: dict, eager: Callable, run_skipped: Callable, looked_up: bool) -> Any:
    """A run-only miss: the frame runs eagerly, and the user frames it calls still reach their caches.

    The hook's callback (``looked_up``) answers DEFAULT and runs the frame with its
    callees' callback set to run-only (``CompileConfig.frame_callback``); without the hook
    the frame runs on our interpreter, whose calls go through the cache (Note [No PEP 523 ...]).
    """
    if looked_up or not vm_can_run(frame.code, frame.offset):
        return eager()
    return run_skipped(L)


def _add_entry(frame, cache: FrameCache, config: CompileConfig, entry) -> None:
    """Put a new entry at the front (``create_cache_entry``), with its compile id, backend and ID-matched objects."""
    if cache.frame_id is None:
        cache.frame_id = next(_frame_ids)
    entry.compile_id = f"{cache.frame_id}/{cache.compiles}"
    cache.compiles += 1
    entry.backend_key = config.backend_key
    cache.entries.insert(0, entry)
    events.emit("cache_entry", function=frame.__name__, entry=entry)


def _run_entry(frame, cache: FrameCache, config: CompileConfig, entry, L: dict, G: dict,
               eager: Callable, run_skipped: Callable) -> Any:
    """Run a cache entry: the user's exceptions pass unchanged, ours fall back (Note [An internal error
    while the compiled code runs]). Every path that runs an entry comes here, the frame hook's hit too."""
    try:
        return entry.fn(L, G)
    except Exception as exc:
        ours = raised_by_us(exc)
        if ours is None:
            raise
        failed = (exc, ours)
    return _failed_at_run_time(frame, cache, config, entry, *failed, eager, run_skipped, L)


def _failed_at_run_time(frame, cache: FrameCache, config: CompileConfig, entry, exc: BaseException, where: str,
                        eager: Callable, run_skipped: Callable, L: dict) -> Any:
    """Our exception escaped a compiled entry: eager for good if rerunning is safe, else InternalError."""
    explanation = runtime_error_explanation(frame.code, exc, where)
    if not entry.rerunnable:
        raise InternalError(f"{explanation.reason} (while the compiled {explanation.function} ran, "
                            f"{_short_file(explanation.filename)}:{explanation.lineno}); it had already run part "
                            "of the function (a graph break, a mutated input or a side effect), so it cannot be "
                            "rerun eagerly. Please report this bug of minidynamo.") from exc
    if entry in cache.entries:
        cache.entries.remove(entry)
    _eager_for_good(frame, cache, config, explanation)
    return run_skipped(L) if cache.skipped else eager()


def _short_file(filename: str) -> str:
    return filename.rsplit("/", 1)[-1]


def _traced_no_ops(frame, entry, L: dict, config: CompileConfig) -> bool:
    """Note [A frame that traced no ops is skipped for good]

    torch's ``InstructionTranslator._return`` (symbolic_convert.py) raises
    ``SkipFrame("No ops traced for the FX graph")`` when a frame returned without a
    call in its graph (and without a break, outside fullgraph, not a resume prologue,
    no nn.Module class among its locals); ``convert_frame.py``'s ``_compile`` answers it
    with the default ``ConvertFrameReturn`` (types.py): ``FrameAction.SKIP`` with
    ``apply_to_code=True``. So the code runs eagerly from then on, its callees still
    hooked, whatever later calls pass: ``f(x, n)`` returning ``x * 2`` only when ``n > 0``
    compiles nothing, ever, if its first call has ``n == 0``. ``ConvertFrame`` does the
    same before tracing to a frame ``has_tensor_in_frame`` finds no tensor in. This
    holds for a function given to ``md.compile`` as for the frames the hook meets (a
    config's ``__getattribute__``, a helper that only reads attributes), which so
    neither fill the cache nor cost a guard check per call. Our resume functions are
    not skipped (torch skips an empty one too; ours have no frame of their own to skip).
    tests/test_empty_frames_like_torch.py compares the calls with torch's.
    """
    if config.fullgraph or entry.graphs or entry.break_reason is not None:
        return False
    if isinstance(frame, ResumeFunction):  # torch: is_tracing_resume_prologue
        return False
    return not any(isinstance(v, type) and issubclass(v, torch.nn.Module) for v in L.values())


def has_tensor_in_frame(frame, L: dict, config: CompileConfig) -> bool:
    """torch's ``convert_frame.has_tensor_in_frame``: code given to compile (torch's
    ``always_optimize_code_objects``), a global torch module the code names, or a tensor,
    module or module class among the locals (inside lists, tuples, dicts, namedtuples)."""
    import types

    if frame.code in config.targets:
        return True
    G = frame.f_globals
    for name in frame.code.co_names:
        obj = G.get(name)
        if isinstance(obj, types.ModuleType) and (obj is torch or obj.__name__.startswith("torch.")):
            return True
    seen: set = set()

    def has_tensor(obj) -> bool:
        if id(obj) in seen:
            return False
        seen.add(id(obj))
        if isinstance(obj, (torch.Tensor, torch.nn.Module)) or (type(obj) is type and issubclass(obj, torch.nn.Module)):
            return True
        if type(obj) in (list, tuple):
            return any(has_tensor(v) for v in obj)
        if type(obj) is dict:
            return any(has_tensor(v) for v in list(obj.values()))
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):
            return any(has_tensor(getattr(obj, f)) for f in obj._fields)
        return False

    return any(has_tensor(v) for v in L.values())


def _eager_for_good(frame, cache: FrameCache, config: CompileConfig, explanation: GraphBreak) -> None:
    """Cache the outcome "no graph for this frame": it is never traced again (Note [No internal error ...])."""
    cache.fallback = explanation
    counters["eager_fallbacks"] += 1
    warn_internal(explanation)
    events.emit("graph_break", reason=explanation.reason, instruction=explanation.instruction,
                lineno=explanation.lineno, function=explanation.function, explanation=explanation,
                whole_frame=True)  # no graph, so no break reason for md.explain (Note [A break reason comes with a graph])
    cache.skipped = vm_can_run(frame.code, frame.offset)


def internal_error_explanation(frame, e: BaseException) -> GraphBreak:
    """An internal error outside the instruction loop (codegen, the backend): named after the user's frame."""
    import linecache

    from .exc import BackendCompilerFailed

    code = frame.code
    lineno = code.co_firstlineno
    reason = str(e).replace("\n", " ") if isinstance(e, BackendCompilerFailed) else \
        f"internal error in minidynamo: {type(e).__name__}: {e}"
    return GraphBreak(reason=reason, instruction="(whole frame)",
                      lineno=lineno, filename=code.co_filename, function=code.co_qualname,
                      source=linecache.getline(code.co_filename, lineno), internal=True)


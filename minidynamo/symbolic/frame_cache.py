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

Note [The entry that hit last is tried first]
    A frame whose sizes went dynamic keeps its first, static entry: every call of
    another size would check that entry's guards, fail on the size, and only then
    reach the dynamic entry. Torch's cache (``cache_entry.cpp``) moves the entry that
    hit to the front of the frame's list. Ours keeps the list in the order the
    entries were made (``.cache.entries``, what the chapters show) and remembers
    the index of the last hit, ``FrameCache.hot``, which the hook path tries first;
    when several entries' guards hold, any of them computes the same result.

Note [Recompiles and the cache size limit]
    When no entry's guards hold, we name the first failing guard of the newest entry
    (and what changed), emit a "recompile" event, and trace again. After 8 entries
    for one frame (``torch._dynamo.config.recompile_limit``) the frame runs eagerly
    from then on, with a warning naming the guard that kept failing.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional

import torch

from minidynamo import events

from . import counters
from .convert_frame import compile_frame
from .exc import (EagerFallback, FullGraphError, GraphBreak, InternalError, raised_by_us, runtime_error_explanation,
                  warn_internal)
from .fake_values import TracedUserError
from .guards import Guard
from .resume_execution import ResumeFunction, vm_can_run

if TYPE_CHECKING:
    from .eval_frame import CompileConfig

CACHE_SIZE_LIMIT = 8
SUPPRESS_ERRORS = True  # an internal error while tracing: warn and run eagerly (False: raise)


@dataclass
class RecompileRecord:
    """Why a frame was traced again: the guard that failed and what changed."""

    function: str
    guard: Optional[Guard]
    change: str
    entries: int
    dynamic: list = field(default_factory=list)  # sizes the new trace makes dynamic (Note [Automatic dynamic])

    def __str__(self) -> str:
        expr = self.guard.expr if self.guard else "?"
        extra = f"; now dynamic: {', '.join(self.dynamic)}" if self.dynamic else ""
        return f"recompiling {self.function} (entry {self.entries + 1}): guard failed: {expr}  ({self.change}){extra}"


@dataclass
class FrameCache:
    entries: list = field(default_factory=list)
    recompiles: list = field(default_factory=list)
    fallback: Any = None  # why this frame runs eagerly for good
    skipped: bool = False  # Dynamo's SkipFrame: eager, but the frames it calls are still compiled
    frame_state: dict = field(default_factory=dict)  # input sizes traced so far (Note [Automatic dynamic])
    no_ops: bool = False  # Note [A frame the hook met that traced no ops is skipped]
    hot: int = 0  # the index of the entry that hit last (Note [The entry that hit last is tried first])


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


def _call_frame(frame, L: dict, config: CompileConfig, eager: Callable[[], Any], run_skipped: Callable) -> Any:
    cache = config.frames.get(_frame_key(frame))
    if cache is None:
        cache = config.frames[_frame_key(frame)] = FrameCache()
    G = frame.f_globals
    if cache.fallback is not None:
        return run_skipped(L) if cache.skipped else eager()
    for entry in cache.entries:
        if entry.check(L, G):
            counters["cache_hits"] += 1
            return _run_entry(frame, cache, config, entry, L, G, eager, run_skipped)
    if cache.entries:
        guard, change = cache.entries[-1].check.first_failure(L, G)
        from .dynamic_shapes import automatic_dynamic_changes

        dynamic = automatic_dynamic_changes(cache.frame_state, L, G, config.dynamic)
        record = RecompileRecord(frame.__name__, guard, change, len(cache.entries), dynamic)
        cache.recompiles.append(record)
        counters["recompiles"] += 1
        events.emit("recompile", function=frame.__name__, guard=guard.expr if guard else None, change=change,
                    record=record, dynamic=dynamic, code=frame.code)
        if len(cache.entries) >= CACHE_SIZE_LIMIT:
            cache.fallback = (
                f"minidynamo: {frame.__name__} hit the cache size limit ({CACHE_SIZE_LIMIT} entries); it runs "
                f"eagerly from now on. The guard that kept failing: {guard.expr if guard else '?'} ({change})"
            )
            warnings.warn(cache.fallback, stacklevel=3)
            return eager()
    from .dynamic_shapes import retry_static, warn_if_retried

    for _attempt in range(2):
        entry = fallback = None
        try:
            entry = compile_frame(frame, L, config, cache.frame_state)
        except EagerFallback as e:
            fallback = e.explanation
        except FullGraphError:
            raise
        except TracedUserError:
            # the user's own error (a shape mismatch): eager raises it, as without compile.
            # If eager does not raise, the error was ours: warn once and keep the frame eager.
            fallback = "user error?"
        except Exception as e:  # noqa: BLE001 - Note [No internal error reaches the user]
            if not SUPPRESS_ERRORS:
                raise
            fallback = internal_error_explanation(frame, e)
        if entry is not None or not retry_static(frame, cache.frame_state, fallback):
            break
    warn_if_retried(frame, cache.frame_state, entry)
    if entry is not None and _traced_no_ops(frame, entry, L, config):
        cache.fallback, cache.skipped, cache.no_ops = "no ops traced", True, True
        return run_skipped(L)
    if entry is not None:
        cache.entries.append(entry)
        events.emit("cache_entry", function=frame.__name__, entry=entry)
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
    """Note [A frame the hook met that traced no ops is skipped]

    torch's ``InstructionTranslator.RETURN_VALUE`` raises ``SkipFrame("No ops traced
    for the FX graph")`` when a frame returned without a graph (and without a break,
    outside fullgraph, no nn.Module class among its locals): the frame runs eagerly and
    its code is marked SKIP, its callees still hooked. We do the same for the frames the
    hook meets (a config's ``__getattribute__``, a helper that only reads attributes),
    so they neither fill the cache (one entry per constant argument, up to the cache
    size limit) nor cost a guard check per call. A function given to ``md.compile``
    itself keeps its entry, so that ``.cache`` and ``md.explain`` show what was traced.
    """
    if config.hook is None or config.fullgraph or entry.graphs or entry.break_reason is not None:
        return False
    if isinstance(frame, ResumeFunction) or frame.code in config.targets:  # a resume function, or given to md.compile
        return False
    return not any(isinstance(v, type) and issubclass(v, torch.nn.Module) for v in L.values())


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

    code = frame.code
    lineno = code.co_firstlineno
    return GraphBreak(reason=f"internal error in minidynamo: {type(e).__name__}: {e}", instruction="(whole frame)",
                      lineno=lineno, filename=code.co_filename, function=code.co_qualname,
                      source=linecache.getline(code.co_filename, lineno), internal=True)


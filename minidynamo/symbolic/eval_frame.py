"""The entry points: ``optimize`` (md.compile), ``explain``, ``reset``, and the cache.

Place in the pipeline: the front door. A compiled function's call binds its arguments
into ``L``, checks the guards of each cache entry, and runs the first entry whose guards
hold; on a miss it traces the frame (``convert_frame``) and stores a new entry.
Mirrors ``torch/_dynamo/eval_frame.py`` (``optimize``, ``explain``, ``reset``,
``OptimizedModule``) and the C cache in ``torch/csrc/dynamo/cache_entry.cpp`` /
``eval_frame.c``.

Note [The frame hook]
    Real Dynamo hooks CPython's frame evaluation (PEP 523), so *every* Python frame,
    including user functions called eagerly at a graph break, passes its cache. So do
    we, where ``frame_hook.c`` builds (``frame_hook.py``): calling a compiled function
    sets this thread's callback to its config's ``frame_callback`` and calls the
    original function. CPython hands each fresh frame to the C hook, which calls
    ``frame_callback(function, L)`` with the hook off: our own code, torch's and the
    stdlib's answer SKIP (the code object is marked, never asked again); a user frame
    goes through ``call_frame``, which runs a cache entry, or answers DEFAULT: CPython
    runs the frame itself, its callees still hooked. A frame Dynamo skips (a graph
    break in a loop) thus runs at CPython's speed while the functions it calls are
    compiled. A cache entry's code runs with the hook off, as in the explicit design:
    only the user call it makes eagerly at a graph break turns it on
    (``___compiled(fn)``, ``compiled_callee``), so what the code rebuilds after the graph
    (a ``ModelOutput(...)``, a setattr) is not traced as frames of its own, which torch
    does not trace either. Resume functions are not code objects here (Note [A resume
    function is a frame that starts in the middle]): compiled code still calls them,
    and they still pass ``call_frame`` explicitly.

Note [A cache hit is one Python frame of ours]
    Torch's per-call path is C: ``eval_frame.c`` finds the code object's cache entries
    in its ``co_extra`` and runs each entry's C++ guard manager, then the compiled
    bytecode. Ours is Python, so every frame counts: a hit costs ``md.compile``'s
    ``__call__`` (one C ``call_with`` sets the hook and calls the function),
    ``frame_callback`` (binds ``L``, then loops over the entries, calling each one's
    generated check function directly, and runs the first that holds), the
    generated check function and the transformed function. A miss, a frame eager for
    good, or a recompile takes the slow path, ``_call_frame``, which checks again.

Note [No PEP 523: calls go through the cache explicitly]
    Without the hook (no C compiler, another Python, ``MINIDYNAMO_NO_FRAME_HOOK=1``;
    ``md.explain(...).frame_hook`` says which design ran), the transformed function
    calls user callees through ``call_frame`` itself (``___compiled(fn)``), and a
    frame Dynamo skips runs on our concrete interpreter so that its callees can be
    sent to the cache: the same frames get compiled, counted and cached, much slower.

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

import functools
import inspect
import itertools
import types
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from minidynamo import events
from minidynamo.backends import lookup_backend
from minidynamo.trace_rules import THIRDPARTY_SKIPLIST, is_library_file

from . import counters, frame_hook
from .convert_frame import CacheEntry, compile_frame
from .exc import (EagerFallback, FullGraphError, GraphBreak, InternalError, raised_by_us, runtime_error_explanation,
                  tidy_user_exception, warn_internal, warned_internal)
from .fake_values import TracedUserError
from .guards import Guard
from .resume_execution import unhooked, vm_can_run
from .variables.functions import is_user_function
from .variables.nn_module import is_plain_call

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


@dataclass(eq=False)
class CompileConfig:
    """What one ``optimize`` call asked for, and the caches of every frame compiled for it."""

    backend: Callable
    fullgraph: bool = False
    dynamic: Optional[bool] = None  # torch's dynamic=: None automatic, True all sizes symbolic, False none
    frames: dict = field(default_factory=dict)
    resumes: dict = field(default_factory=dict)
    wrappers: dict = field(default_factory=dict)
    on_graph: Optional[Callable] = None
    on_break: Optional[Callable] = None
    on_entry: Optional[Callable] = None
    hook: Any = field(default_factory=frame_hook.get)  # the C frame hook, or None (Note [The frame hook])
    by_id: dict = field(default_factory=dict)  # id(code) -> OptimizedFunction, for the hook's callback
    targets: set = field(default_factory=set)  # the code objects md.compile / md.explain was given

    def frame_callback(self, func: types.FunctionType, L: dict) -> Any:
        """Called by ``frame_hook.c`` for a fresh frame: a cache entry's result, or DEFAULT / SKIP.

        ``L``: the frame's arguments and free variables by name (the C hook binds them).
        """
        code = func.__code__
        frame = self.by_id.get(id(code))  # hashing a code object hashes its bytecode and constants: slow
        if frame is None or frame.code is not code:
            if _not_user_code(func):
                return self.hook.SKIP
            frame = self.by_id[id(code)] = self.optimized(func)
        if frame.fn is not func and frame.f_globals is not func.__globals__:
            frame = OptimizedFunction(func, self)
        cache = self.frames.get(code)
        if cache is not None and cache.fallback is None:  # Note [A cache hit is one Python frame of ours]
            G = frame.f_globals
            entries, hot = cache.entries, cache.hot
            for i in (hot, *range(hot), *range(hot + 1, len(entries))) if 0 < hot < len(entries) else range(len(entries)):
                entry = entries[i]
                try:
                    ok = entry.check.fn(L, G)
                except Exception:  # noqa: BLE001 - a guard that cannot even be evaluated has failed
                    ok = False
                if ok:
                    cache.hot = i  # Note [The entry that hit last is tried first]
                    counters["cache_hits"] += 1
                    return _run_entry(frame, cache, self, entry, L, G, self._in_cpython, self._in_cpython)
        out = _call_frame(frame, L, self, self._in_cpython, self._in_cpython)  # the hook is off here
        if out is self.hook.DEFAULT and self.frames[code].fallback is not None:
            # eager for good (a break in a loop, no ops, the cache size limit): never asked
            # again, as torch marks the code SKIP; a new config or md.reset() asks again
            _decided_skips.add(code)
            return self.hook.SKIP
        return out

    def __post_init__(self) -> None:
        forget_decided_skips()

    def _in_cpython(self, *_: Any) -> Any:
        return self.hook.DEFAULT

    def optimized(self, fn: Callable) -> "OptimizedFunction":
        key = fn.__code__
        if key not in self.wrappers:
            self.wrappers[key] = OptimizedFunction(fn, self)
        wrapper = self.wrappers[key]
        return wrapper if wrapper.fn is fn else OptimizedFunction(fn, self)

    def compiled_callee(self, fn: Any) -> Callable:
        """Route a call made eagerly at a graph break through the cache (Note [No PEP 523 ...]).

        With the frame hook, the call runs with the hook on: the frames it makes pass the cache.
        """
        if self.hook is not None:
            if isinstance(fn, torch.nn.Module) or is_user_function(fn) or (
                    isinstance(fn, types.MethodType) and is_user_function(fn.__func__)):
                return functools.partial(self.hook.call_with, self.frame_callback, fn)
            return fn
        if isinstance(fn, torch.nn.Module):
            forward = getattr(type(fn), "forward", None)
            if not is_plain_call(fn) or not is_user_function(forward):  # hooks run eagerly, with forward
                return fn
            return functools.partial(self.optimized(forward), fn)
        if isinstance(fn, types.MethodType) and is_user_function(fn.__func__):
            return functools.partial(self.optimized(fn.__func__), fn.__self__)
        if is_user_function(fn):
            return self.optimized(fn)
        return fn


_all_configs: "weakref.WeakSet[CompileConfig]" = weakref.WeakSet()
_decided_skips: set = set()  # code objects the hook passes by because a config runs them eagerly for good


def forget_decided_skips() -> None:
    """Ask the callback again for frames some config decided to run eagerly (a new config, md.reset)."""
    module = frame_hook.get() if _decided_skips else None
    if module is not None:
        for code in _decided_skips:
            module.unskip(code)
    _decided_skips.clear()
_PACKAGE = __file__.rsplit("/symbolic/", 1)[0] + "/"
_WORKLOADS = tuple(_PACKAGE + name for name in ("bench", "exercises/", "corpus/", "__main__.py"))  # our workloads


# tools around the user's code, never compiled: the one list of minidynamo/trace_rules.py
_SKIPPED_PACKAGES = frozenset(THIRDPARTY_SKIPLIST)


def _not_user_code(func: types.FunctionType) -> bool:
    """Frames the hook lets CPython run unasked: torch, the stdlib, tools, minidynamo itself, generated code."""
    code, module = func.__code__, str(getattr(func, "__module__", None))
    filename = code.co_filename
    if code.co_name.startswith("___") or filename.startswith(("<minidynamo", "<eval_with_key>", "<frozen ")) \
            or is_library_file(filename) or module.split(".")[0] in _SKIPPED_PACKAGES or module.startswith("torch."):
        return True
    if module.startswith("minidynamo.") and not module.startswith(("minidynamo.bench", "minidynamo.exercises", "minidynamo.corpus")):
        return True  # code minidynamo made at run time (a dataclass's __init__ is exec'd)
    return filename.startswith(_PACKAGE) and not filename.startswith(_WORKLOADS)


def _make_binder(fn: Callable) -> Callable:
    """A function with ``fn``'s signature that returns its arguments as a dict (CPython binds)."""
    params, defaults = [], {}
    seen_kwonly = False
    # Note: not ``inspect.signature(fn)``, which follows ``__wrapped__`` (functools.wraps) to the
    # wrapped function's parameters; the frame that runs is ``fn.__code__``'s, so bind to its own.
    sig = list(inspect.signature(fn, follow_wrapped=False).parameters.values())
    for p in sig:
        text = p.name
        if p.kind is p.VAR_POSITIONAL:
            text, seen_kwonly = "*" + p.name, True
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + p.name
        elif p.kind is p.KEYWORD_ONLY and not seen_kwonly:
            params.append("*")
            seen_kwonly = True
        if p.default is not p.empty:
            defaults[f"___d_{p.name}"] = p.default
            text += f"=___d_{p.name}"
        params.append(text)
        if p.kind is p.POSITIONAL_ONLY and all(
            q.kind is not q.POSITIONAL_ONLY for q in sig[sig.index(p) + 1:]
        ):
            params.append("/")
    # a comprehension's hidden argument ".0" shows in its signature as "implicit0"
    renames = "".join(f"    L[{'.' + p.name[8:]!r}] = L.pop({p.name!r})\n" for p in sig
                      if p.name.startswith("implicit") and "." + p.name[8:] in fn.__code__.co_varnames)
    src = f"def ___bind({', '.join(params)}):\n    L = locals()\n{renames}    return L\n"
    scope = dict(defaults)
    exec(src, scope)  # noqa: S102
    binder = scope["___bind"]
    _share_defaults(binder, fn)
    return binder


def _share_defaults(binder: Callable, fn: Callable) -> None:
    """The binder fills in ``fn``'s own defaults, as they are now (``fn.__defaults__ = ...`` after compile).

    The parameters are ``fn``'s, so ``fn.__defaults__`` and ``__kwdefaults__`` fit the
    binder as they are; ``__kwdefaults__`` is the same dict, so a change made in place
    shows too, and a reassigned tuple is picked up on the next call (``__call__``).
    """
    if isinstance(fn, types.FunctionType):
        binder.__defaults__, binder.__kwdefaults__ = fn.__defaults__, fn.__kwdefaults__


class OptimizedFunction:
    """What ``md.compile(fn)`` returns: calls go through the cache of guarded entries."""

    offset = 0
    stack_depth = 0

    def __init__(self, fn: Callable, config: CompileConfig):
        self.fn = fn
        self.config = config
        self.code = fn.__code__
        self.f_globals = fn.__globals__
        self.__name__ = fn.__name__
        self._binder = _make_binder(fn)
        self._freevars = fn.__code__.co_freevars
        # a generator / coroutine function: its frame runs when the caller iterates, not
        # at the call; as in Dynamo, calling it runs eagerly and returns the generator
        self._generator = bool(fn.__code__.co_flags & (0x20 | 0x80 | 0x100 | 0x200))
        functools.update_wrapper(self, fn)
        if config.hook is not None:
            config.hook.unskip(self.code)  # asked to compile it: the hook must not pass it by
            config.by_id.setdefault(id(self.code), self)

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        if self._generator:
            return self.fn(*args, **kwargs)
        config = self.config
        if config.hook is not None:  # the frame of self.fn passes the hook like any other (Note [The frame hook])
            try:
                return config.hook.call_with(config.frame_callback, self.fn, *args, **kwargs)
            except Exception as exc:
                raise tidy_user_exception(exc)  # noqa: B904 - the same object, without our frames
        binder, fn = self._binder, self.fn
        if binder.__defaults__ is not fn.__defaults__ or binder.__kwdefaults__ is not fn.__kwdefaults__:
            _share_defaults(binder, fn)  # reassigned after compile: a default is read as eager reads it
        L = binder(*args, **kwargs)
        if self._freevars:
            for name, cell in zip(self._freevars, self.fn.__closure__):
                try:
                    L[name] = cell.cell_contents
                except ValueError:
                    pass
        try:
            return call_frame(self, L, self.config, eager=lambda: self.fn(*args, **kwargs))
        except Exception as exc:
            raise tidy_user_exception(exc)  # noqa: B904 - the same object, without our frames

    @unhooked
    def run_eagerly(self, L: dict) -> Any:
        """Run the whole frame on the concrete interpreter, nested user calls compiled."""
        from minidynamo import interpreter

        from .resume_execution import InterceptingVM

        local_values = {k: v for k, v in L.items() if k not in self._freevars}
        frame = interpreter.Frame(self.code, self.f_globals, local_values, self.fn.__closure__ or ())
        return InterceptingVM(self.config).run_frame(frame)

    def __get__(self, obj, objtype=None):
        return self if obj is None else types.MethodType(self, obj)

    @property
    def cache(self) -> FrameCache:
        """This function's cache: ``.entries`` (each with ``.guards``, ``.transformed_source``)."""
        return self.config.frames.setdefault(self.code, FrameCache())

    def __repr__(self) -> str:
        return f"<minidynamo compiled {self.fn.__qualname__}>"


class OptimizedModule:
    """``md.compile(module)``: calls ``module.forward`` through the cache (``OptimizedModule``)."""

    def __init__(self, module: torch.nn.Module, config: CompileConfig):
        self._orig_mod = module
        self._forward = config.optimized(type(module).forward)
        config.targets.add(type(module).forward.__code__)
        self._call_impl = config.optimized(_call_module)

    def __call__(self, /, *args: Any, **kwargs: Any) -> Any:
        m = self._orig_mod
        try:
            # Note [A module call is guarded like torch's _call_impl]; ``M.forward = g`` later: trace the call
            if is_plain_call(m) and type(m).forward is self._forward.fn:
                return self._forward(m, *args, **kwargs)
            return self._call_impl(m, *args, **kwargs)  # hooks or an instance forward: trace nn.Module.__call__
        except Exception as exc:
            raise tidy_user_exception(exc)  # noqa: B904

    @property
    def cache(self) -> FrameCache:
        """The cache of the module's ``forward`` (entries, recompiles)."""
        return self._forward.cache

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_orig_mod"], name)


def _call_module(self, /, *args, **kwargs):
    """``self(*args, **kwargs)``: the frame ``md.compile(m)`` traces when ``m`` has hooks or its own forward."""
    return self(*args, **kwargs)


def _frame_key(frame) -> Any:
    return frame.code if isinstance(frame, OptimizedFunction) else frame


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
                    record=record, dynamic=dynamic)
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
    if not isinstance(frame, OptimizedFunction) or frame.code in config.targets:
        return False
    return not any(isinstance(v, type) and issubclass(v, torch.nn.Module) for v in L.values())


def _eager_for_good(frame, cache: FrameCache, config: CompileConfig, explanation: GraphBreak) -> None:
    """Cache the outcome "no graph for this frame": it is never traced again (Note [No internal error ...])."""
    cache.fallback = explanation
    counters["eager_fallbacks"] += 1
    warn_internal(explanation)
    events.emit("graph_break", reason=explanation.reason, instruction=explanation.instruction,
                lineno=explanation.lineno, function=explanation.function, explanation=explanation,
                whole_frame=True)
    if config.on_break is not None:
        config.on_break(explanation)
    cache.skipped = vm_can_run(frame.code, frame.offset)


def internal_error_explanation(frame, e: BaseException) -> GraphBreak:
    """An internal error outside the instruction loop (codegen, the backend): named after the user's frame."""
    import linecache

    code = frame.code
    lineno = code.co_firstlineno
    return GraphBreak(reason=f"internal error in minidynamo: {type(e).__name__}: {e}", instruction="(whole frame)",
                      lineno=lineno, filename=code.co_filename, function=code.co_qualname,
                      source=linecache.getline(code.co_filename, lineno), internal=True)


def optimize(fn: Callable, *, backend: Any = "aot_eager", fullgraph: bool = False, dynamic: Optional[bool] = None):
    """``md.compile``: a function (or module) whose calls run through the compiled cache."""
    if dynamic not in (None, True, False):
        raise TypeError(f"dynamic must be None, True or False, not {dynamic!r}")
    config = CompileConfig(backend=lookup_backend(backend), fullgraph=fullgraph, dynamic=dynamic)
    _all_configs.add(config)
    if not isinstance(fn, (torch.nn.Module, types.MethodType, types.FunctionType, OptimizedFunction, OptimizedModule)):
        raise TypeError(f"md.compile expects a Python function or an nn.Module, not {type(fn).__name__}")
    return _optimize_with(fn, config)


@dataclass
class ExplainOutput:
    """What ``md.explain`` found (torch/_dynamo/backends/debugging.py ``ExplainOutput``)."""

    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list[GraphBreak]
    guards: list[Guard]
    entries: list[CacheEntry]
    out: Any = None
    frame_hook: str = ""  # which entry point ran: the PEP 523 hook, or explicit calls (and why)

    @property
    def ops_per_graph(self) -> list[list]:
        """The call targets of each graph (torch's ``ExplainOutput.ops_per_graph``)."""
        return [[n.target for n in g.graph.nodes if n.op.startswith("call")] for g in self.graphs]

    @property
    def op_count(self) -> int:
        return sum(len(ops) for ops in self.ops_per_graph)

    @property
    def out_guards(self) -> list[Guard]:
        """torch's name for ``guards``."""
        return self.guards

    def __str__(self) -> str:
        lines = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
                 f"Op Count: {self.op_count}"]
        if self.graph_count == 0:
            lines.append("No graph was compiled: every frame ran eagerly (Graph Break Count is graph_count - 1 = "
                         "-1, as torch computes it). Why, frame by frame, is in the break reasons below.")
        lines.append("Break Reasons:")
        for i, reason in enumerate(self.break_reasons, 1):
            lines.append(f"  Break Reason {i}:")
            lines += ["    " + ln for ln in str(reason).splitlines()]
        lines.append("Guards:")
        lines += [f"  {g}" for g in self.guards]
        return "\n".join(lines)


def explain(fn: Callable, *args: Any, **kwargs: Any) -> ExplainOutput:
    """Run ``fn(*args, **kwargs)`` once under a fresh cache and report what was compiled.

    Like ``torch._dynamo.explain(fn)(*args)``: ``graph_break_count`` is
    ``graph_count - 1``, exactly as torch computes it.
    """
    graphs, reasons, entries = [], [], []

    def backend(gm, example_inputs):
        return gm.forward

    config = CompileConfig(backend=backend, on_graph=graphs.append, on_break=reasons.append,
                           on_entry=entries.append)
    compiled = _optimize_with(fn, config)
    out = compiled(*args, **kwargs)
    guards = [g for e in entries for g in e.guards]
    return ExplainOutput(graphs, len(graphs), len(graphs) - 1, reasons, guards, entries, out,
                         frame_hook.describe() if config.hook is not None else
                         "explicit calls through the cache, no frame hook: " + (frame_hook.reason() or "off"))


def _optimize_with(fn: Callable, config: CompileConfig):
    if isinstance(fn, OptimizedFunction):
        fn = fn.fn  # explain/compile of an already compiled function: start from the original
    if isinstance(fn, OptimizedModule):
        fn = fn._orig_mod  # noqa: SLF001
    if isinstance(fn, torch.nn.Module):
        return OptimizedModule(fn, config)
    if isinstance(fn, types.MethodType):
        config.targets.add(fn.__func__.__code__)
        return types.MethodType(config.optimized(fn.__func__), fn.__self__)
    config.targets.add(fn.__code__)
    return config.optimized(fn)


def reset() -> None:
    """Forget every compiled entry and counter (``torch._dynamo.reset``)."""
    from . import convert_frame, resume_execution

    for config in _all_configs:
        config.frames.clear()
        config.resumes.clear()
    counters.clear()
    warned_internal.clear()
    forget_decided_skips()
    # fresh numbering, so that names in a chapter's output do not depend on what ran before
    convert_frame._graph_ids = itertools.count()  # noqa: SLF001
    resume_execution._ids = itertools.count(1)  # noqa: SLF001

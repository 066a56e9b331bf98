"""The entry points: ``optimize`` (md.compile), ``reset``, and the frame hook's callback.

Place in the pipeline: the front door. A compiled function's call binds its arguments
into ``L`` and hands them to its frame's cache (``frame_cache.call_frame``: the guards of
each entry, a new trace on a miss); with the frame hook, every fresh frame reaches
``CompileConfig.frame_callback`` the same way. Mirrors ``torch/_dynamo/eval_frame.py``
(``optimize``, ``reset``, ``OptimizedModule``, the callback that
``_TorchDynamoContext`` installs) and the callback side of ``torch/csrc/dynamo/eval_frame.c``.
Split off it, and importable from here too: the cache (``frame_cache.py``: ``FrameCache``,
``call_frame``, ``CACHE_SIZE_LIMIT``...) and ``wrap_inline`` (``external_utils.py``).
``md.explain`` (``explain.py``: ``explain``, ``ExplainOutput``) sits above this module
and calls it.

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
    only the call it makes eagerly at a graph break turns it on
    (``___compiled(fn)``, ``compiled_callee``), so what the code rebuilds after the graph
    (a ``ModelOutput(...)``, a setattr) is not traced as frames of its own, which torch
    does not trace either. Resume functions are not code objects here (Note [A resume
    function is a frame that starts in the middle]): compiled code still calls them,
    and they still pass ``call_frame`` explicitly.

Note [An eager call at a break runs with the hook on]
    In torch the compiled code runs with the callback set, so the call a graph break runs
    eagerly reaches the hook with every frame it makes, whatever it calls: ``sorted(...,
    key=f)``, ``map(f, ...)``, a library function, ``nn.Module.__call__`` running a hook.
    Each frame is then judged by ``trace_rules.check`` (``convert_frame.py``
    ``CatchErrorsWrapper.__call__``): user code is compiled, torch's own files and
    skipped modules run as they are. Ours turns the hook on around every such call
    (``compiled_callee``), and ``frame_callback`` judges each frame (``_not_user_code``,
    Note [An inbuilt forward is compiled when its module has hooks]). One difference on
    purpose: ``print(...)`` at a break is called plainly (``_routes_through_compiler``), so
    a user ``__str__`` it calls is not compiled, where torch would compile it.

Note [A cache hit is one Python frame of ours]
    Torch's per-call path is C: ``eval_frame.c`` finds the code object's cache entries
    in its ``co_extra`` and runs each entry's C++ guard manager, then the compiled
    bytecode. Ours is Python, so every frame counts: a hit costs ``md.compile``'s
    ``__call__`` (one C ``call_with`` sets the hook and calls the function),
    ``frame_callback`` (binds ``L``, then loops over the entries, calling each one's
    generated check function directly, and runs the first that holds), the
    generated check function and the transformed function. A miss, a frame eager for
    good, or a recompile takes the slow path, ``_call_frame`` (``frame_cache.py``), which
    checks again.

Note [No PEP 523: calls go through the cache explicitly]
    Without the hook (no C compiler, another Python, ``MINIDYNAMO_NO_FRAME_HOOK=1``;
    ``md.explain(...).frame_hook`` says which design ran), the transformed function
    calls user callees through ``call_frame`` itself (``___compiled(fn)``), and a
    frame Dynamo skips runs on our concrete interpreter so that its callees can be
    sent to the cache: the same frames get compiled, counted and cached, much slower.

Note [The entry that hit last is tried first], Note [Recompiles and the cache size limit]:
    in ``frame_cache.py``, with the cache they concern.
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

from minidynamo._torch_private import disable_dynamo_wrapper_code
from minidynamo.backends import lookup_backend, with_backend_kwargs
from minidynamo.bytecode.continue_at import MARK as REST_MARK
from minidynamo.trace_rules import THIRDPARTY_SKIPLIST, is_library_file

from minidynamo import events

from . import counters, frame_hook
from .exc import tidy_user_exception, warned_internal
from .external_utils import wrap_inline
# The cache, split off this module: its names stay importable from here.
from .frame_cache import (  # noqa: F401
    CODE_CACHES,
    RUN_ONLY,
    FrameCache,
    RecompileRecord,
    _call_frame,
    _eager_for_good,
    _failed_at_run_time,
    _frame_key,
    _run_entry,
    reset_code_caches,
    _short_file,
    _traced_no_ops,
    call_frame,
    internal_error_explanation,
    lookup,
    run_only_mode,
)
from .resume_execution import CLOSURE, unhooked
from .variables import builder as _builder
from .variables.functions import is_user_function
from .variables.nn_module import is_plain_call


@dataclass(eq=False)
class CompileConfig:
    """What one ``optimize`` call asked for, and the caches of every frame compiled for it."""

    backend: Callable
    fullgraph: bool = False
    dynamic: Optional[bool] = None  # torch's dynamic=: None automatic, True all sizes symbolic, False none
    frames: dict = field(default_factory=lambda: CODE_CACHES)  # Note [The cache lives on the code object]
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
            if func.__dict__.get("_torchdynamo_disable") or code is _disable_dynamo_code():
                return self.hook.DEFAULT, None  # Note [A disabled function runs its callees unhooked]
            if _not_user_code(func):  # compiled only if an inbuilt forward of a hooked module (Note [An inbuilt ...])
                if not (code.co_name == "forward" and _is_inbuilt_forward(func)
                        and _module_has_forward_hooks(L.get("self"))):
                    return self.hook.DEFAULT if _asked_again(func) else self.hook.SKIP
            frame = self.by_id[id(code)] = self.optimized(func)
        if frame.fn is not func and frame.f_globals is not func.__globals__:
            frame = OptimizedFunction(func, self)
        if frame.cell_names:  # the free variables' cells themselves (Note [A resume function receives the frame's cells])
            L[CLOSURE] = func.__closure__
        cache = self.frames.get(code)
        if cache is not None and cache.fallback is None:  # Note [A cache hit is one Python frame of ours]
            G = frame.f_globals
            entries, key = cache.entries, self.backend_key
            for i, entry in enumerate(entries):
                if entry.backend_key is not key and entry.backend_key != key:
                    continue  # another backend's entry (Note [The cache lives on the code object])
                try:
                    ok = entry.check.fn(L, G)
                except Exception:  # noqa: BLE001 - a guard that cannot even be evaluated has failed
                    ok = False
                if ok:
                    if i:  # move_to_front (Note [The entry that hit last is tried first])
                        entries.insert(0, entries.pop(i))
                    counters["cache_hits"] += 1
                    if cache.run_only is not None:  # its callees run-only (Note [Run-only reaches ...])
                        return run_only_mode(_run_entry, frame, cache, self, entry, L, G, self._in_cpython,
                                             self._in_cpython)
                    return _run_entry(frame, cache, self, entry, L, G, self._in_cpython, self._in_cpython)
                entry.check.record_failure(L, G)  # Note [A manager that fails is tried first]
            if cache.run_only is not None:  # run-only after the limit: a miss runs in CPython, untraced,
                return (self.hook.DEFAULT, self.run_only_callback)  # and so do its callees
        looked_up = cache is not None and cache.fallback is None  # its guards ran above: not twice per call
        out = _call_frame(frame, L, self, self._in_cpython, self._in_cpython, looked_up)  # the hook is off here
        if out is self.hook.DEFAULT:
            cache = self.frames[code]
            if cache.run_only is not None:  # it hit the limit just now (Note [Run-only reaches ...])
                return (self.hook.DEFAULT, self.run_only_callback)
            if cache.fallback is not None:
                # eager for good (a break in a loop, no ops): never asked
                # again, as torch marks the code SKIP; a new config or md.reset() asks again
                _decided_skips.add(code)
                return self.hook.SKIP
        return out

    def run_only_callback(self, func: types.FunctionType, L: dict) -> Any:
        """The callback of the frames a run-only frame calls (torch's ``Py_False``): look up, never trace.

        ``eval_frame_cpp.cpp``: no cache yet, run in CPython; else the entry whose guards
        hold (of any backend) runs, or CPython runs the frame; the frames either calls are
        run-only too (this callback stays the thread's). Note [Run-only reaches the frames it calls].
        """
        code = func.__code__
        cache = self.frames.get(code)
        if cache is None or cache.fallback is not None or not cache.entries:
            if _not_user_code(func) and not _asked_again(func):
                return self.hook.SKIP
            return self.hook.DEFAULT
        frame = self.by_id.get(id(code))
        if frame is None or frame.code is not code or (frame.fn is not func and frame.f_globals is not func.__globals__):
            frame = OptimizedFunction(func, self)
        if frame.cell_names:
            L[CLOSURE] = func.__closure__
        entry = lookup(cache, L, frame.f_globals, self.backend_key)
        if entry is None:
            return self.hook.DEFAULT
        counters["cache_hits"] += 1
        return run_only_mode(_run_entry, frame, cache, self, entry, L, frame.f_globals, self._in_cpython,
                             self._in_cpython)

    def __post_init__(self) -> None:
        self.backend_key = (self.backend, self.dynamic)  # what an entry's backend must match (backend_match)
        forget_decided_skips()

    def call_hooked(self, fn: Callable, args: tuple) -> Any:
        """Run ``fn(*args)`` in CPython with the frame hook on: the frames it calls pass the cache
        (run-only inside a run-only frame), as a call made at a graph break does."""
        callback = self.run_only_callback if RUN_ONLY.depth else self.frame_callback  # Note [Run-only reaches ...]
        return self.hook.call_with(callback, fn, *args)

    def _in_cpython(self, *_: Any) -> Any:
        return self.hook.DEFAULT

    def call_frame(self, frame: Any, L: dict, eager: Callable[[], Any]) -> Any:
        """A resume function's call, through its frame's cache (``frame_cache.call_frame``).

        ``ResumeFunction`` (resume_execution.py) is made while tracing, below the cache that
        compiles it: it calls back through the config it was given, as the OptimizedFunction
        wrappers do, so nothing under the cache imports the cache.
        """
        return call_frame(frame, L, self, eager=eager)

    def optimized(self, fn: Callable) -> "OptimizedFunction":
        key = fn.__code__
        if key not in self.wrappers:
            self.wrappers[key] = OptimizedFunction(fn, self)
        wrapper = self.wrappers[key]
        return wrapper if wrapper.fn is fn else OptimizedFunction(fn, self)

    def compiled_callee(self, fn: Any) -> Callable:
        """Route a call made eagerly at a graph break through the cache (Note [No PEP 523 ...]).

        With the frame hook, any call runs with the hook on: the frames it makes pass the cache
        (Note [An eager call at a break runs with the hook on]).
        """
        if self.hook is not None:  # Note [An eager call at a break runs with the hook on]
            callback = self.run_only_callback if RUN_ONLY.depth else self.frame_callback  # Note [Run-only reaches ...]
            return functools.partial(self.hook.call_with, callback, fn)
        if isinstance(fn, torch.nn.Module):
            forward = getattr(type(fn), "forward", None)
            if not is_plain_call(fn) or not is_user_function(forward):  # hooks run eagerly, with forward
                return fn
            return functools.partial(self.optimized(forward), fn)
        if isinstance(fn, types.MethodType) and is_user_function(fn.__func__):
            return functools.partial(self.optimized(fn.__func__), fn.__self__)
        if is_user_function(fn):
            return self.optimized(fn)
        if isinstance(fn, functools.partial):
            func = self.compiled_callee(fn.func)
            return fn if func is fn.func else functools.partial(func, *fn.args, **fn.keywords)
        call = _user_call_method(fn)
        if call is not None:  # an object with a Python __call__: its frame, as torch's hook catches it
            return functools.partial(self.optimized(call), fn)
        return fn


@functools.lru_cache(None)
def _disable_dynamo_code() -> types.CodeType:
    """Note [A disabled function runs its callees unhooked]

    ``torch._dynamo.disable(f)`` / ``torch.compiler.disable`` and torch's own
    ``torch._disable_dynamo`` (``torch.utils.checkpoint.checkpoint`` wears it) run ``f``
    inside a ``DisableContext`` (torch/_dynamo/eval_frame.py): the callback is off for
    every frame below, so none is compiled. Their wrapper's frame answers ``(DEFAULT,
    None)``: CPython runs it, and the frames it makes, with our hook off too. It is asked
    each time (never SKIP), as the same wrapper code serves every disabled function.
    """
    return disable_dynamo_wrapper_code()


def _asked_again(func: types.FunctionType) -> bool:
    """Code the hook must not mark SKIP although it is not user code: an inbuilt ``forward`` (the
    next module of its class may have hooks) and torch's context wrappers (the next may be a
    disabled one). A SKIP mark lasts for the process: a run-only frame that marked ``nn.Linear.forward``
    kept every later ``md.compile`` from compiling a hooked ``Linear`` (Note [An inbuilt forward ...])."""
    code = func.__code__
    return (code.co_name == "forward" and _is_inbuilt_forward(func)) or code.co_filename.endswith("_dynamo/eval_frame.py")


def _unskip_inbuilt_forwards() -> None:
    """``md.reset()``: no inbuilt ``forward`` stays marked SKIP, whatever marked it (a test's own callback,
    a hook answered SKIP by older code): Note [An inbuilt forward is compiled when its module has hooks]."""
    module = frame_hook.get()
    if module is None:
        return
    todo, seen = [torch.nn.Module], set()
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
        forward = vars(cls).get("forward")
        if isinstance(forward, types.FunctionType) and _is_inbuilt_forward(forward) and module.is_skipped(forward.__code__):
            module.unskip(forward.__code__)


def _is_inbuilt_forward(func: types.FunctionType) -> bool:
    """``forward`` of a module class of torch.nn / torch.ao (``trace_rules.check_verbose``'s test)."""
    return str(getattr(func, "__module__", "")).startswith(("torch.nn.", "torch.ao."))


def _module_has_forward_hooks(module: Any) -> bool:
    """Note [An inbuilt forward is compiled when its module has hooks]

    ``torch/_dynamo/trace_rules.py`` ``check_verbose`` skips torch's own files at the frame
    hook, except ``forward`` of an inbuilt module (``torch.nn.*``, ``torch.ao.*``) whose
    module has forward or forward-pre hooks (``utils.nnmodule_has_hooks(...,
    check_forward_hooks=True)``): a hook that breaks makes ``_call_impl`` run eagerly, and
    the forward it reaches is then compiled as a frame of its own. Ours asks the same: the
    callback answers DEFAULT (not SKIP) for such a ``forward`` without hooks, so that the
    next module of the class is asked again.
    """
    if not isinstance(module, torch.nn.Module):
        return False
    return any(getattr(module, name, None) for name in ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs",
                                                        "_forward_hooks_with_kwargs", "_forward_hooks"))


def _user_call_method(obj: Any) -> Optional[types.FunctionType]:
    """The user-written ``__call__`` of an instance of a plain class, else None."""
    if isinstance(obj, (type, types.FunctionType, types.MethodType, torch.nn.Module, OptimizedFunction, OptimizedModule)):
        return None
    call = getattr(type(obj), "__call__", None)
    return call if is_user_function(call) else None


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
    if code.co_name.startswith("___") or code.co_qualname.endswith(REST_MARK) \
            or filename.startswith(("<minidynamo", "<eval_with_key>", "<frozen ")) \
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


def _copy_attributes(wrapper: "OptimizedFunction", fn: Callable) -> None:
    """``functools.update_wrapper``, except that ``fn``'s own attributes never replace the wrapper's.

    Note [What md.compile returns looks like what it wraps]
        torch's ``compile_wrapper`` is ``functools.wraps(fn)`` of a plain function: it has
        ``fn``'s ``__name__``, ``__qualname__``, ``__doc__``, ``__module__``,
        ``__wrapped__``, and a copy of ``fn.__dict__`` (a function's ``f.tag = ...``; for an
        object with ``__call__``, its instance attributes, through ``wrap_inline``), taken
        when it is compiled. Ours copies the same, but an attribute named like one of
        ``OptimizedFunction``'s own (``fn``, ``code``, ``config``, ...) is not copied: it
        would replace what the wrapper runs. ``md.compile(f).fn`` is then the compiled
        function, where torch's wrapper would show ``f.fn``.
    """
    own = set(vars(wrapper)) | set(dir(type(wrapper)))
    for name, value in getattr(fn, "__dict__", {}).items():
        if name not in own:
            setattr(wrapper, name, value)
    functools.update_wrapper(wrapper, fn, updated=())


class OptimizedFunction:
    """What ``md.compile(fn)`` returns: calls go through the cache of guarded entries."""

    offset = 0
    stack_depth = 0
    null_idxes = ()

    def __init__(self, fn: Callable, config: CompileConfig):
        self.fn = fn
        self.config = config
        self.code = fn.__code__
        self.f_globals = fn.__globals__
        self.__name__ = fn.__name__
        self._binder = _make_binder(fn)
        self._freevars = fn.__code__.co_freevars
        self.cell_names = self._freevars  # L['___closure'] holds their cells (Note [A resume function receives ...])
        # a generator / coroutine function: its frame runs when the caller iterates, not
        # at the call; as in Dynamo, calling it runs eagerly and returns the generator
        self._generator = bool(fn.__code__.co_flags & (0x20 | 0x80 | 0x100 | 0x200))
        _copy_attributes(self, fn)
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
            L[CLOSURE] = self.fn.__closure__
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

        local_values = {k: v for k, v in L.items() if k not in self._freevars and k != CLOSURE}
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


_builder.COMPILED_FUNCTION_TYPES = (OptimizedFunction,)  # the trace inlines a compiled function's body


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



def optimize(fn: Callable, *, backend: Any = "aot_eager", fullgraph: bool = False, dynamic: Optional[bool] = None,
             mode: Optional[str] = None, options: Optional[dict] = None):
    """``md.compile``: a callable whose calls run through the compiled cache (Note [md.compile of any callable])."""
    if dynamic not in (None, True, False):
        raise TypeError(f"dynamic must be None, True or False, not {dynamic!r}")
    config = CompileConfig(backend=with_backend_kwargs(lookup_backend(backend), mode, options), fullgraph=fullgraph,
                           dynamic=dynamic)
    _all_configs.add(config)
    events.emit("optimize")  # a new compiled callable: the graph_breaks log forgets its duplicates, as torch's
    if not callable(fn):
        raise TypeError(f"md.compile expects a callable (a function, an nn.Module, an object with __call__), "
                        f"not {type(fn).__name__} {_short_repr(fn)}")
    return _optimize_with(fn, config)


def _short_repr(obj: Any) -> str:
    try:
        text = repr(obj)
    except Exception:  # noqa: BLE001 - the user's __repr__ failing must not hide the TypeError
        return ""
    return f"({text[:60]}...)" if len(text) > 60 else f"({text})"


def _optimize_with(fn: Callable, config: CompileConfig):
    if isinstance(fn, OptimizedFunction):
        fn = fn.fn  # explain/compile of an already compiled function: start from the original
    if isinstance(fn, OptimizedModule):
        fn = fn._orig_mod  # noqa: SLF001
    if isinstance(fn, torch.nn.Module):
        return OptimizedModule(fn, config)
    if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
        config.targets.add(fn.__func__.__code__)
        return types.MethodType(config.optimized(fn.__func__), fn.__self__)
    if isinstance(fn, type):
        return _optimize_class(fn, config)
    if not isinstance(fn, types.FunctionType):
        fn = wrap_inline(fn)  # Note [md.compile of any callable]
    config.targets.add(fn.__code__)
    return config.optimized(fn)


def _optimize_class(cls: type, config: CompileConfig) -> type:
    """``md.compile(cls)``: as torch, the class itself, its instances' calls compiled (``cls.__call__``).

    An ``nn.Module`` subclass gets its ``forward`` compiled instead: ``nn.Module.__call__``
    still runs its hooks, then the compiled ``forward``. A class without ``__call__`` has
    nothing to compile (torch would replace ``__call__`` by ``type.__call__``, making its
    instances call the constructor): it is returned as it is, with a warning.
    """
    if issubclass(cls, torch.nn.Module):
        name, target = "forward", getattr(cls, "forward", None)
    else:
        name, target = "__call__", next((c.__dict__["__call__"] for c in cls.__mro__ if "__call__" in c.__dict__), None)
    if isinstance(target, (OptimizedFunction, staticmethod, classmethod)) or not is_user_function(target):
        if not isinstance(target, OptimizedFunction):
            warnings.warn(f"md.compile({cls.__qualname__}): the class has no Python {name} method to compile; "
                          f"it is returned unchanged and runs eagerly", stacklevel=4)
        return cls
    config.targets.add(target.__code__)
    setattr(cls, name, config.optimized(target))
    return cls


def reset() -> None:
    """Forget every compiled entry and counter (``torch._dynamo.reset``)."""
    from . import convert_frame, resume_execution

    reset_code_caches()
    for config in _all_configs:
        config.frames.clear()
        config.resumes.clear()
    counters.clear()
    warned_internal.clear()
    forget_decided_skips()
    _unskip_inbuilt_forwards()
    # fresh numbering, so that names in a chapter's output do not depend on what ran before
    convert_frame._graph_ids = itertools.count()  # noqa: SLF001
    resume_execution._ids = itertools.count(1)  # noqa: SLF001

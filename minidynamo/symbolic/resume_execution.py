"""Resume functions: "continue this frame at offset N", compiled lazily like any frame.

Place in the pipeline: after a graph break, the transformed function runs the
unsupported instruction eagerly and then calls a resume function with the stack and
the live locals. Mirrors ``torch/_dynamo/resume_execution.py``
(``ContinueExecutionCache.lookup`` generates ``__resume_at_<offset>_<n>`` code objects).

Note [A resume function is a frame that starts in the middle]
    Real Dynamo builds a new code object: a prologue that restores the stack and
    locals, then a jump to offset N of a copy of the original bytecode. We need no new
    bytecode: our interpreter can simply *start* at offset N with the stack and locals
    given as arguments (``L['___stack0']``, ``L['x']``). A ResumeFunction is called like
    a function; its first call traces it (it may break again), later calls check guards
    and run the cached entry, exactly as Dynamo treats a resume code object when it is
    first called. If it cannot be traced, the concrete interpreter
    (``minidynamo.interpreter``) runs the rest of the frame eagerly from offset N.
"""

from __future__ import annotations

import dis
import functools
import itertools
import types
from typing import Any

from minidynamo.bytecode import exception_table, find_exception_handler, get_instructions, offset_to_index
from minidynamo.bytecode.continue_at import continue_at, rest_function

_ids = itertools.count(1)
_READS = {"LOAD_FAST", "LOAD_DEREF", "LOAD_CLOSURE", "DELETE_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_AND_CLEAR"}
_JUMPS = set(dis.hasjrel) | set(dis.hasjabs)
_STOPS = {"RETURN_VALUE", "RAISE_VARARGS", "RERAISE", "JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_ABSOLUTE",
          "JUMP_BACKWARD_NO_INTERRUPT", "RETURN_CONST"}


@functools.lru_cache(maxsize=1024)
def reachable(code: types.CodeType, offset: int) -> list:
    """The instructions that may run after ``offset``: jumps followed, and the handler of an
    instruction that may raise (an ``except`` block reads locals the ``try`` block set)."""
    insts = get_instructions(code)
    index = offset_to_index(insts)
    table = exception_table(code)
    seen, todo = set(), [index[offset]]
    while todo:
        i = todo.pop()
        if i in seen or i >= len(insts):
            continue
        seen.add(i)
        inst = insts[i]
        if inst.opcode in _JUMPS:
            todo.append(index[inst.argval])
        if inst.opname not in _STOPS:
            todo.append(i + 1)
        entry = find_exception_handler(table, inst.offset)
        if entry is not None:
            todo.append(index[entry.target])
    return [insts[i] for i in sorted(seen)]


def vm_can_run(code: types.CodeType, offset: int) -> bool:
    """Can the concrete interpreter run the rest of the frame from ``offset``?"""
    from minidynamo.interpreter import VirtualMachine

    return all(hasattr(VirtualMachine, f"byte_{inst.opname}") for inst in reachable(code, offset))


def live_locals(code: types.CodeType, offset: int) -> set[str]:
    """Names that code reachable from ``offset`` may read (a simple, safe liveness)."""
    names = set()
    for inst in reachable(code, offset):
        if inst.opname in _READS:
            names.add(inst.argval)
        elif inst.opname == "LOAD_FAST_LOAD_FAST":  # 3.13 superinstructions: argval holds two names
            names.update(inst.argval)
        elif inst.opname == "STORE_FAST_LOAD_FAST":
            names.add(inst.argval[1])
    if "__class__" in code.co_freevars and code.co_argcount:
        # zero-argument super() reads the __class__ cell and the first argument implicitly
        names |= {"__class__", code.co_varnames[0]}
    return names


class _Null:
    """The NULL slot of a 3.11 call, passed to a resume function as a stack value."""

    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()


class ResumeIterator:
    """A for-loop's iterator handed to a resume function: the items, and how far we got.

    Real Dynamo rebuilds a list iterator the same way (``ListIteratorVariable.reconstruct``).
    Ours is a tiny class so that the resume function can look inside without consuming it.
    """

    def __init__(self, items: list, index: int = 0):
        # Note [ResumeIterator's attribute names]: not ``items`` / ``keys``: a mapping
        # constructor (``OrderedDict(it)``, ``dict.update``) calls ``.items()`` or
        # ``.keys()`` on anything that has them, so an iterator must not look like a mapping.
        self.resume_items = items
        self.resume_index = index

    def __iter__(self):
        return self

    def __next__(self):
        if self.resume_index >= len(self.resume_items):
            raise StopIteration
        self.resume_index += 1
        return self.resume_items[self.resume_index - 1]


# Note [A builtin that reads its caller's frame]
#     ``super()``, ``globals()``, ``locals()``, ``vars()`` and ``dir()`` with no arguments read the
#     frame that calls them. In our interpreter that frame is a ``Frame`` object, not a CPython
#     frame, so ``VirtualMachine.call_function`` answers them from it. Sent through the
#     frame hook (``compiled_callee``, Note [An eager call at a break runs with the hook on]),
#     they would read the innermost CPython frame, which is ours: ``super()`` became
#     ``super(InterceptingVM, vm)`` and a ``super().__setitem__`` in an OrderedDict
#     subclass raised AttributeError.
_FRAME_READERS = (super, globals, locals, vars, dir)


def _vm_class():
    from minidynamo import interpreter

    class InterceptingVM(interpreter.VirtualMachine):
        """The concrete interpreter, with calls to user functions sent through the cache.

        Real Dynamo skips a frame it cannot split (a graph break in a loop) but still
        compiles the frames that frame calls, because every frame passes PEP 523's hook.
        Running the skipped frame on our own interpreter gives us the same hook.
        """

        def __init__(self, config):
            super().__init__()
            self.config = config

        def unwind(self, frame, inst, exc):
            # The first time an exception meets a user frame, CPython adds that frame's
            # traceback entry at the line it was raised at (a re-raise keeps it).
            met = self.__dict__.setdefault("_met", {})
            if met.get(id(exc), (None,))[0] is not frame and inst.lineno:
                met[id(exc)] = (frame, exc)  # exc kept alive so its id is not reused
                exc.__traceback__ = user_frame_traceback(frame.code, inst.lineno, exc.__traceback__)
            return super().unwind(frame, inst, exc)

        def call_function(self, fn, args, kwargs):
            if fn in _FRAME_READERS and not args and not kwargs:
                # Note [A builtin that reads its caller's frame]: not through the hook's C call
                return super().call_function(fn, args, kwargs)
            target = self.config.compiled_callee(fn)
            if target is not fn:
                return target(*args, **kwargs)
            return super().call_function(fn, args, kwargs)

    return InterceptingVM


@functools.lru_cache(maxsize=256)
def _raiser(filename: str, name: str, lineno: int, width: int, indent: int):
    """Code that raises at ``filename:lineno`` in a function named ``name``, spanning the line.

    Its raise covers the same columns as the user's statement, so Python's traceback
    prints the user's line without carets under a part of it.
    """
    pad = max(width - len("raise "), 1)
    var = "_" * pad
    src = "\n" * (lineno - 1) + " " * indent + f"raise {var}\n"
    if indent:
        src = "\n" * (lineno - 2) + "if 1:\n" + " " * indent + f"raise {var}\n" if lineno > 1 else src.lstrip()
    code = compile(src, filename, "exec")
    return code.replace(co_name=name), var


def user_frame_traceback(code: types.CodeType, lineno: int, tb):
    """A traceback entry for ``code`` at ``lineno`` (a frame our interpreter ran), before ``tb``."""
    import linecache
    import sys

    line = linecache.getline(code.co_filename, lineno)
    stripped = line.strip()
    try:
        raiser, var = _raiser(code.co_filename, code.co_name, lineno, len(stripped), len(line) - len(line.lstrip()))
    except SyntaxError:
        return tb

    class _Marker(Exception):
        pass

    try:
        exec(raiser, {var: _Marker})  # noqa: S102
    except _Marker:
        made = sys.exc_info()[2].tb_next  # the entry of the raiser's own frame
    if made is None:
        return tb
    return types.TracebackType(tb, made.tb_frame, made.tb_lasti, lineno)


def InterceptingVM(config):  # noqa: N802 - reads like the class it builds
    global _VM
    if _VM is None:
        _VM = _vm_class()
    return _VM(config)


_VM = None


def unhooked(run_eagerly):
    """Our interpreter runs with the frame hook off; the user calls it sends to the cache turn it on again."""

    @functools.wraps(run_eagerly)
    def run(self, L: dict) -> Any:
        hook = self.config.hook
        return run_eagerly(self, L) if hook is None else hook.call_with(None, run_eagerly, self, L)

    return run


class ResumeFunction:
    """``___resume_at_<offset>_<n>(___stack0=..., x=...)``: the rest of a frame after a break."""

    def __init__(self, code: types.CodeType, f_globals: dict, offset: int, stack_depth: int, names: tuple,
                 config: Any, eager_only: bool = False):
        self.code = code
        self.f_globals = f_globals
        self.offset = offset
        self.stack_depth = stack_depth
        self.names = names
        self.config = config
        self.eager_only = eager_only
        self._rest_code = None  # Note [The rest of a frame as real bytecode]: made at the first eager run
        kind = "eager_rest_at" if eager_only else "resume_at"
        self.__name__ = f"___{kind}_{offset}_{next(_ids)}"
        self.__qualname__ = f"{code.co_qualname}.{self.__name__}"

    def __call__(self, /, **L: Any) -> Any:  # positional-only: a live local may be named `self`
        if self.eager_only:
            return self.run_rest(L)
        return self.config.call_frame(self, L, eager=lambda: self.run_rest(L))  # CompileConfig.call_frame

    def run_rest(self, L: dict) -> Any:
        """The rest of the frame, eagerly: CPython runs a copy of its bytecode from here where it can
        (Note [The rest of a frame as real bytecode]), every frame it calls passing the frame hook;
        else our concrete interpreter does (``run_eagerly``)."""
        rest = self._rest_code
        if rest is None:
            rest = self._rest_code = (self.stack_depth == 0 and self.config.hook is not None
                                      and continue_at(self.code, self.offset, frozenset(self.names))) or False
        if rest is False:
            return self.run_eagerly(L)
        fn, args = rest_function(rest, self.f_globals, L)
        return self.config.call_hooked(fn, args)

    @unhooked
    def run_eagerly(self, L: dict) -> Any:
        """Run the rest of the frame with the concrete interpreter (no graph)."""
        from minidynamo import interpreter

        frame = interpreter.Frame(self.code, self.f_globals, {}, ())
        for name, value in L.items():
            if name.startswith("___stack"):
                continue
            if name in self.code.co_cellvars or name in self.code.co_freevars:
                frame.cells[name] = types.CellType(value)
            else:
                frame.locals[name] = value
        stack = [L[f"___stack{i}"] for i in range(self.stack_depth)]
        # the prologue: an autocast / inference_mode block the rest starts inside is entered here (a
        # ResumedContext, variables/ctx_manager.py: Note [A resume function re-enters autocast and inference_mode])
        stack = [v.enter_for_resume() if type(v).__name__ == "ResumedContext" else v for v in stack]
        frame.stack = [interpreter.NULL if v is NULL else v for v in stack]
        frame.ip = frame.index_of[self.offset]
        return InterceptingVM(self.config).run_frame(frame)

    def __repr__(self) -> str:
        return f"<resume function {self.__name__} of {self.code.co_name}>"

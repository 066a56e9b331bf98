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

Note [A resume function receives the frame's cells]
    A frame's cells (its ``co_cellvars``, the variables a nested function or class body reads,
    and its ``co_freevars``) are shared objects: a function made before the break holds the
    very cell the rest of the frame writes (``class V`` whose method reads ``V``, assigned only
    after ``__build_class__`` returns). torch's ``ContinueExecutionCache.generate`` makes them
    the resume function's free variables (``co_freevars = sorted(cellvars + freevars)``), and
    ``create_call_resume_at`` (symbolic_convert.py) passes the frame's own cells as its closure.
    Ours receives them the same way, as one keyword argument: ``___closure``, a tuple of the
    cells in :attr:`ResumeFunction.cell_names` order (torch's sorted order). The call puts each
    cell's contents in ``L`` under its name, so guards read them as ``L['V']`` as torch's do
    (``LocalSource(..., is_derefed_cell_contents=True)``), and the trace tracks the cell itself
    (``CellVariable.real_expr``, ``SideEffects.track_cell_existing``): a write is replayed on the
    real cell after the graph, and a function whose ``__closure__`` holds the cell reads the
    value the trace gave it. The eager rest of the frame (our interpreter, or CPython running
    Note [The rest of a frame as real bytecode]) runs with the same cells. A compiled function's
    own frame receives its free variables' cells the same way (``L['___closure']`` is its
    ``__closure__``, ``OptimizedFunction.cell_names`` its ``co_freevars``), so a ``nonlocal``
    write, before or after a break, reaches the user's cell, as torch's root frame tracks them
    (``track_cell_existing`` with a ``LocalCellSource``, ``InstructionTranslator.__init__``).

Note [A NULL on the stack is no argument]
    A break inside ``sum(x.tolist())`` leaves ``[NULL, sum, <the list>]`` on the stack
    (3.11+: the NULL slot below a call's callable, ``PUSH_NULL`` / ``LOAD_GLOBAL``'s low
    bit; 3.13 puts it above). Torch does not pass the NULL: its resume function's
    prologue pushes it again (``PUSH_NULL`` at ``null_idxes``,
    ``ContinueExecutionCache.generate``; ``create_call_resume_at`` in symbolic_convert.py),
    and only the other slots are arguments, numbered without it: ``___stack0`` is
    ``sum``, ``___stack1`` the list, and a guard on the list reads ``___stack1[1]``. Ours
    is called the same way: ``null_idxes`` are the stack positions the resume function
    fills with NULL itself (``stack_names``), so its arguments and guards are numbered as torch's.
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


CLOSURE = "___closure"  # the keyword a resume function receives the frame's cells under


def cell_names(code: types.CodeType) -> tuple[str, ...]:
    """The names of the cells a resume function of ``code`` receives, in torch's order (sorted)."""
    return tuple(sorted(code.co_cellvars + code.co_freevars))


def stack_names(frame) -> list:
    """Each stack slot's argument, ``___stack0``...; None for a NULL (Note [A NULL on the stack is no argument])."""
    names, n = [], 0
    for i in range(frame.stack_depth):
        names.append(None if i in frame.null_idxes else f"___stack{n}")
        n += i not in frame.null_idxes
    return names


class ResumeFunction:
    """``___resume_at_<offset>_<n>(___stack0=..., x=...)``: the rest of a frame after a break."""

    def __init__(self, code: types.CodeType, f_globals: dict, offset: int, stack_depth: int, names: tuple,
                 config: Any, eager_only: bool = False, null_idxes: tuple = ()):
        self.code = code
        self.f_globals = f_globals
        self.offset = offset
        self.stack_depth = stack_depth  # the stack's slots, the NULLs at null_idxes among them
        self.null_idxes = null_idxes  # Note [A NULL on the stack is no argument]
        self.names = names
        self.config = config
        self.eager_only = eager_only
        self._rest_code = None  # Note [The rest of a frame as real bytecode]: made at the first eager run
        # Note [A resume function receives the frame's cells]: L['___closure'] holds them, in this order
        self.cell_names = cell_names(code)
        kind = "eager_rest_at" if eager_only else "resume_at"
        self.__name__ = f"___{kind}_{offset}_{next(_ids)}"
        self.__qualname__ = f"{code.co_qualname}.{self.__name__}"

    def __call__(self, /, **L: Any) -> Any:  # positional-only: a live local may be named `self`
        closure = L.get(CLOSURE)
        if closure is not None:  # each cell's contents under its name, as the frame's f_locals show them
            for name, cell in zip(self.cell_names, closure):
                try:
                    L[name] = cell.cell_contents
                except ValueError:  # a name not bound yet
                    pass
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
        fn, args = rest_function(rest, self.f_globals, L, dict(zip(self.cell_names, L.get(CLOSURE, ()))))
        return self.config.call_hooked(fn, args)

    @unhooked
    def run_eagerly(self, L: dict) -> Any:
        """Run the rest of the frame with the concrete interpreter (no graph)."""
        from minidynamo import interpreter

        frame = interpreter.Frame(self.code, self.f_globals, {}, ())
        cells = dict(zip(self.cell_names, L.get(CLOSURE, ())))  # Note [A resume function receives the frame's cells]
        for name, value in L.items():
            if name.startswith("___stack") or name == CLOSURE:
                continue
            if name in self.code.co_cellvars or name in self.code.co_freevars:
                frame.cells[name] = cells.get(name) or types.CellType(value)
            else:
                frame.locals[name] = value
        for name, cell in cells.items():
            frame.cells.setdefault(name, cell)  # an empty cell (a name not bound yet) is not in L
        stack = [NULL if name is None else L[name] for name in stack_names(self)]
        # the prologue: an autocast / inference_mode block the rest starts inside is entered here (a
        # ResumedContext, variables/ctx_manager.py: Note [A resume function re-enters autocast and inference_mode])
        stack = [v.enter_for_resume() if type(v).__name__ == "ResumedContext" else v for v in stack]
        frame.stack = [interpreter.NULL if v is NULL else v for v in stack]
        frame.ip = frame.index_of[self.offset]
        return InterceptingVM(self.config).run_frame(frame)

    def __repr__(self) -> str:
        return f"<resume function {self.__name__} of {self.code.co_name}>"

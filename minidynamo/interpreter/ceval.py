"""A concrete Python bytecode interpreter, written in Python (byterun style).

Place in the pipeline: stage two. ``minidynamo.bytecode`` decodes a function into
``Instruction``s; this module executes them on real values, one ``Frame`` per
call, with a value stack, exactly as CPython's ``ceval.c`` does
(3.11, 3.12 and 3.13; ``Python/bytecodes.c`` since 3.12). The
symbolic interpreter (``minidynamo.symbolic``) is the same loop with the same
handler names, run over ``VariableTracker``s instead of real values.

It mirrors the shape of ``torch/_dynamo/symbolic_convert.py``
(``InstructionTranslatorBase.step`` / ``run``, one method per opname) and of
byterun's ``pyvm2.py``; CPython's own loop is ``Python/ceval.c``. This file is the
loop (fetch, dispatch, unwind), the call decision and the stack helpers; the handlers
live beside it by family, one mixin each, as ``symbolic/opcodes_data.py`` does for the
symbolic interpreter: ``ceval_names.py`` (stack, names, attributes), ``ceval_data.py``
(operators, containers, unpacking, strings), ``ceval_control.py`` (jumps, iteration,
exceptions, ``with``), ``ceval_calls.py`` (calls, functions, argument binding),
``genobject.py`` (generators) and ``ceval_312_313.py`` (New in 3.12 and 3.13); the
``Frame`` is in ``frameobject.py``.

Note [Calls into user code stay in the VM]
    When the interpreted code calls a plain Python function (or a bound method
    whose function is plain Python) we do not call it: we bind its arguments and
    run its bytecode in a NEW ``Frame`` of the same VM, so the whole call tree is
    interpreted (Dynamo "inlines" user functions the same way); calling a plain
    class runs its Python ``__init__`` in the VM too. Builtins and C functions are
    called directly, and so is library code (Note [Which calls run in the VM]).

Note [Which calls run in the VM]
    Only user code is interpreted: a function of library code (the standard
    library, torch, numpy, ...: ``minidynamo.trace_rules.is_library_file``, the
    one definition the compiler uses too) is called natively. Real Dynamo
    decides the same question with its trace rules
    (``torch/_dynamo/trace_rules.py``: skipfiles, ``is_callable_allowed``), with
    a much finer list. ``VirtualMachine.should_interpret`` is the one place to
    change the rule; a test or a chapter can pass ``interpret_all=True``. Coroutines and async generators, and
    Python code called back by C (``sorted(key=...)``, ``__init__`` run by a
    class call) run natively in CPython.

Note [Generators suspend the frame loop]
    Calling a generator function returns a real Python generator that drives
    our frame: ``YIELD_VALUE`` raises ``_Yield`` out of ``run_frame``, leaving
    the frame's stack and instruction pointer as they are; ``next``/``send``
    push the sent value and re-enter ``run_frame``; ``throw``/``close`` re-enter
    it by unwinding the thrown exception through the exception table at the
    suspended ``YIELD_VALUE``. Real Dynamo inlines generators differently (it
    traces them to exhaustion or graph-breaks), since a graph cannot suspend.

Note [NULL on the stack]
    Since 3.11, a call leaves either ``NULL, callable`` or ``method, self`` below
    its arguments (LOAD_GLOBAL with the low bit set, PUSH_NULL, LOAD_METHOD).
    ``CALL n`` looks at the slot n+2 deep: NULL means "plain call", anything
    else means "method call, self is the next slot". We push a ``NULL`` sentinel.
    3.13 swapped the plain case to ``callable, NULL`` (Note [What changes between
    3.11, 3.12 and 3.13] in bytecode.py); ``callable_slots``/``call_target`` know.

Note [Errors inside the VM versus errors in the user's code]
    An exception raised by the user's code (1/0, a missing key) is routed
    through the code's exception table to the user's ``except`` blocks.
    An instruction we do not support raises ``UnsupportedInstructionError``,
    which is never routed there: a user's ``except Exception`` must not hide a
    missing feature of the interpreter.
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Callable, Optional

from minidynamo import events
from minidynamo.trace_rules import is_library_file
from minidynamo.bytecode import PYTHON_VERSION, Instruction, find_exception_handler
from minidynamo.interpreter.ceval_312_313 import INTRINSICS_1, NewOpcodes  # noqa: F401 - INTRINSICS_1 re-exported
from minidynamo.interpreter.ceval_calls import _GENERATOR_FLAGS, CallOpcodes, bind_arguments, _plain_class_with_python_init
from minidynamo.interpreter.ceval_control import ControlOpcodes
from minidynamo.interpreter.ceval_data import BINARY_OPERATORS, COMPARE_OPERATORS, UNARY_OPERATORS, DataOpcodes  # noqa: F401
from minidynamo.interpreter.ceval_names import NameOpcodes
from minidynamo.interpreter.frameobject import NULL, Frame, UnsupportedInstructionError, _Return, _Yield  # noqa: F401 - NULL re-exported
from minidynamo.interpreter.genobject import GeneratorOpcodes

__all__ = ["Frame", "VirtualMachine", "UnsupportedInstructionError", "NULL", "run", "TraceStep", "trace_run"]

_CO_GENERATOR = 0x20
_NATIVE_FLAGS = _GENERATOR_FLAGS & ~_CO_GENERATOR  # coroutines and async generators run natively


class VirtualMachine(NameOpcodes, DataOpcodes, ControlOpcodes, CallOpcodes, GeneratorOpcodes, NewOpcodes):
    """Runs Python functions by interpreting their bytecode.

    ``VirtualMachine(trace=fn)`` calls ``fn(frame, inst)`` before every instruction.
    ``instructions_executed`` counts instructions over the VM's lifetime.
    """

    def __init__(self, trace: Optional[Callable[[Frame, Instruction], None]] = None, interpret_all: bool = False) -> None:
        self.trace = trace
        self.interpret_all = interpret_all
        self.entry: Any = None  # the function `run` was asked to run
        self.frame: Optional[Frame] = None
        self.instructions_executed = 0
        self.exc_info: list[BaseException] = []  # exceptions being handled (sys.exc_info's stack)

    # -- entry points ---------------------------------------------------------------------------

    def run(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn(*args, **kwargs)``, interpreting its bytecode (and that of user code it calls)."""
        self.entry = getattr(fn, "__func__", fn)  # interpreted even if it is library code
        return self.call_function(fn, list(args), kwargs)

    def call_function(self, fn: Any, args: list, kwargs: dict) -> Any:
        """Call ``fn``: in a new Frame if it is plain Python (Note [Calls into user code ...])."""
        self_arg: tuple = ()
        if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
            if not self.should_interpret(fn.__func__):
                return fn(*args, **kwargs)
            fn, self_arg = fn.__func__, (fn.__self__,)
        if _plain_class_with_python_init(fn) and self.should_interpret(fn.__init__):
            # type.__call__ for a plain class: object.__new__, then __init__ in our VM.
            obj = object.__new__(fn)
            result = self.call_function(fn.__init__, [obj, *args], kwargs)
            if result is not None:
                raise TypeError(f"__init__() should return None, not '{type(result).__name__}'")
            return obj
        if not isinstance(fn, types.FunctionType) or not self.should_interpret(fn):
            if fn is super and not args and not kwargs:  # zero-argument super() reads the caller's frame
                return super(self.frame.cells["__class__"].cell_contents, self.frame.locals[self.frame.code.co_varnames[0]])
            if fn is globals and not args:
                return self.frame.globals
            if fn in (locals, vars) and not args and not kwargs:  # the interpreted frame's, as CPython's
                return dict(self.frame.locals)
            if fn is dir and not args and not kwargs:
                return sorted(self.frame.locals)
            return fn(*self_arg, *args, **kwargs)
        locals_ = bind_arguments(fn, [*self_arg, *args], kwargs)
        frame = Frame(fn.__code__, fn.__globals__, locals_, fn.__closure__ or (), back=self.frame)
        if fn.__code__.co_flags & _CO_GENERATOR:
            return self.make_generator(frame, fn)
        return self.run_frame(frame)

    def should_interpret(self, fn: types.FunctionType) -> bool:
        """Run ``fn`` in a new Frame of this VM? (Note [Which calls run in the VM])"""
        if fn.__code__.co_flags & _NATIVE_FLAGS:
            return False
        return fn is self.entry or self.interpret_all or not is_library_file(fn.__code__.co_filename)

    def run_frame(self, frame: Frame, throw: Optional[BaseException] = None) -> Any:
        """The frame loop: fetch, dispatch to ``byte_<OPNAME>``, route exceptions by the exception table.

        ``throw``: resume a suspended generator frame by raising this at its current instruction.
        """
        if events.is_recording():
            events.emit("interpret_frame", code=frame.code.co_qualname, depth=self._depth(frame))
        caller, self.frame = self.frame, frame
        handled = len(self.exc_info)
        try:
            if throw is not None:
                frame.stack.append(None)  # CPython pushes the "sent" None, then raises at the YIELD_VALUE
                self.unwind(frame, frame.current, throw)
            while True:
                inst = frame.instructions[frame.ip]
                frame.ip += 1
                frame.current = inst
                self.instructions_executed += 1
                if self.trace is not None:
                    self.trace(frame, inst)
                try:
                    self.dispatch(inst)
                except (_Return, _Yield, UnsupportedInstructionError):
                    raise
                except BaseException as exc:
                    self.unwind(frame, inst, exc)
        except _Return as ret:
            return ret.value
        finally:
            self.frame = caller
            del self.exc_info[handled:]

    def dispatch(self, inst: Instruction) -> None:
        handler = getattr(self, f"byte_{inst.opname}", None)
        if handler is None:
            self.dispatch_unsupported(inst, UNSUPPORTED.get(inst.opname, "no handler written yet"))
        handler(inst)

    def unwind(self, frame: Frame, inst: Instruction, exc: BaseException) -> None:
        """Jump to the handler that covers ``inst`` (Note [Exception table] in bytecode.py), or re-raise."""
        if self.exc_info and exc.__context__ is None and exc is not self.exc_info[-1]:
            exc.__context__ = self.exc_info[-1]  # CPython chains exceptions raised while handling one
        entry = find_exception_handler(frame.exception_table, inst.offset)
        if entry is None:
            raise exc
        del frame.stack[entry.depth :]
        if entry.lasti:
            frame.stack.append(inst.offset)
        frame.stack.append(exc)
        self.jump(entry.target)

    def _depth(self, frame: Frame) -> int:
        depth = 0
        while frame.back is not None:
            frame, depth = frame.back, depth + 1
        return depth

    # -- stack helpers ----------------------------------------------------------------------------

    def push(self, *values: Any) -> None:
        self.frame.stack.extend(values)

    def pop(self) -> Any:
        return self.frame.stack.pop()

    def popn(self, n: int) -> list:
        """Pop the top n values, as a list in stack order (first pushed first)."""
        if n == 0:
            return []
        values = self.frame.stack[-n:]
        del self.frame.stack[-n:]
        return values

    def top(self) -> Any:
        return self.frame.stack[-1]

    def peek(self, n: int) -> Any:
        return self.frame.stack[-n]

    def jump(self, offset: int) -> None:
        self.frame.ip = self.frame.index_of[offset]

    def dispatch_unsupported(self, inst: Instruction, reason: str) -> None:
        raise UnsupportedInstructionError(
            f"opcode {inst.opname} at offset {inst.offset} (line {inst.lineno}) is not supported by "
            f"minidynamo's interpreter for Python {PYTHON_VERSION[0]}.{PYTHON_VERSION[1]}: {reason}"
        )


# Unsupported opcodes, grouped with the reason (depyf's habit). Anything else
# missing a byte_ method reports "no handler written yet".
UNSUPPORTED: dict[str, str] = {
    **dict.fromkeys(
        ["GET_AWAITABLE", "ASYNC_GEN_WRAP"],
        "coroutines and async generators run natively, never in our frame loop",
    ),
    **dict.fromkeys(
        ["BEFORE_ASYNC_WITH", "GET_AITER", "GET_ANEXT", "END_ASYNC_FOR"], "async code is not in the interpreted subset"
    ),
    **dict.fromkeys(["MATCH_CLASS", "MATCH_MAPPING", "MATCH_SEQUENCE", "MATCH_KEYS"], "match statements are not in the subset"),
    **dict.fromkeys(
        ["CHECK_EG_MATCH", "PREP_RERAISE_STAR", "CALL_INTRINSIC_2"], "except* (exception groups) is not in the subset"
    ),
    **dict.fromkeys(
        ["IMPORT_STAR", "LOAD_BUILD_CLASS", "SETUP_ANNOTATIONS", "PRINT_EXPR", "LOAD_CLASSDEREF", "LOAD_LOCALS",
         "LOAD_FROM_DICT_OR_GLOBALS", "LOAD_FROM_DICT_OR_DEREF"],
        "module-level code and class bodies; the subset interprets functions",
    ),
    **dict.fromkeys(["ENTER_EXECUTOR", "EXIT_INIT_CHECK", "RESERVED", "INTERPRETER_EXIT"],
                    "CPython's internal instructions; the compiler never emits them"),
}




def run(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``VirtualMachine().run(fn, *args, **kwargs)``."""
    return VirtualMachine().run(fn, *args, **kwargs)


@dataclass(frozen=True)
class TraceStep:
    """One executed instruction, as the chapter shows it: where, what, and the stack before it."""

    depth: int  # 0 for the function run, 1 for a function it calls, ...
    function: str  # co_qualname
    offset: int
    lineno: Optional[int]
    opname: str
    argrepr: str
    stack: tuple[str, ...]  # short reprs, bottom first

    def __str__(self) -> str:
        return (
            f"{'  ' * self.depth}{self.offset:>3} L{self.lineno} {self.opname:<26} {self.argrepr:<14} "
            f"[{', '.join(self.stack)}]"
        )


def short_repr(value: Any) -> str:
    """A repr without memory addresses: functions by name, other address-bearing objects by type."""
    if callable(value) and isinstance(getattr(value, "__qualname__", None), str) and not isinstance(value, type):
        return value.__qualname__
    text = repr(value)
    return f"<{type(value).__name__}>" if " at 0x" in text else text


def trace_run(fn: Callable, *args: Any, **kwargs: Any) -> tuple[Any, list[TraceStep]]:
    """Run ``fn`` in a fresh VM and record every instruction it executes (nested frames too)."""
    steps: list[TraceStep] = []

    def hook(frame: Frame, inst: Instruction) -> None:
        depth, f = 0, frame
        while f.back is not None:
            f, depth = f.back, depth + 1
        stack = tuple(short_repr(v) for v in frame.stack)
        steps.append(TraceStep(depth, frame.code.co_qualname, inst.offset, inst.lineno, inst.opname, inst.argtext, stack))

    result = VirtualMachine(trace=hook).run(fn, *args, **kwargs)
    return result, steps

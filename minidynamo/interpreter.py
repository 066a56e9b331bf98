"""A concrete Python bytecode interpreter, written in Python (byterun style).

Place in the pipeline: stage two. ``minidynamo.bytecode`` decodes a function into
``Instruction``s; this module executes them on real values, one ``Frame`` per
call, with a value stack, exactly as CPython's ``ceval.c`` does
(3.11, 3.12 and 3.13; ``Python/bytecodes.c`` since 3.12). The
symbolic interpreter (``minidynamo.symbolic``) is the same loop with the same
handler names, run over ``VariableTracker``s instead of real values.

It mirrors the shape of ``torch/_dynamo/symbolic_convert.py``
(``InstructionTranslatorBase.step`` / ``run``, one method per opname) and of
byterun's ``pyvm2.py``; CPython's own loop is ``Python/ceval.c``.

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

import dis
import functools
import operator
import types
from dataclasses import dataclass
from typing import Any, Callable, Optional

from minidynamo import events
from minidynamo.trace_rules import is_library_file
from minidynamo.bytecode import (
    COMPARE_BOOL_BIT,
    FOR_ITER_EXIT_SKIP,
    LOAD_ATTR_METHOD_BIT,
    NULL_AFTER_CALLABLE,
    PYTHON_VERSION,
    SEND_KEEPS_RECEIVER,
    call_target,
    callable_slots,
    ExceptionTableEntry,
    Instruction,
    exception_table,
    find_exception_handler,
    get_instructions,
    offset_to_index,
)

__all__ = ["Frame", "VirtualMachine", "UnsupportedInstructionError", "NULL", "run", "TraceStep", "trace_run"]


class _Null:
    def __repr__(self) -> str:
        return "NULL"


NULL = _Null()  # Note [NULL on the stack]


class UnsupportedInstructionError(NotImplementedError):
    """An instruction this interpreter does not execute (Note [Errors inside the VM ...])."""


class _Return(Exception):
    """Internal: RETURN_VALUE unwinds the frame loop with the frame's result."""

    def __init__(self, value: Any) -> None:
        self.value = value


class _Yield(Exception):
    """Internal: YIELD_VALUE suspends the frame loop (Note [Generators suspend the frame loop])."""

    def __init__(self, value: Any) -> None:
        self.value = value


class Frame:
    """One activation of a code object: its locals, cells, value stack and instruction pointer."""

    def __init__(self, code: types.CodeType, globals_: dict, locals_: dict, closure: tuple = (), back: Optional[Frame] = None):
        self.code = code
        self.instructions, self.index_of, self.exception_table = _decode(code)
        self.globals = globals_
        builtins = globals_.get("__builtins__", __builtins__)
        self.builtins: dict = builtins if isinstance(builtins, dict) else builtins.__dict__
        self.locals = locals_  # fast locals, by name
        self.cells: dict[str, types.CellType] = {}
        self.closure = closure  # the function's __closure__, for COPY_FREE_VARS
        self.stack: list[Any] = []
        self.ip = 0  # index into self.instructions of the next instruction
        self.kw_names: tuple = ()  # set by KW_NAMES for the next CALL
        self.back = back
        self.current: Optional[Instruction] = None

    @property
    def lineno(self) -> Optional[int]:
        return self.current.lineno if self.current else self.code.co_firstlineno

    def __repr__(self) -> str:
        return f"<Frame {self.code.co_qualname} line {self.lineno} stack={self.stack!r}>"


@functools.lru_cache(maxsize=512)
def _decode(code: types.CodeType) -> tuple[list[Instruction], dict[int, int], list[ExceptionTableEntry]]:
    """Decode a code object once (instructions, offset -> index, exception table); frames share it."""
    instructions = get_instructions(code)
    return instructions, offset_to_index(instructions), exception_table(code)


# Operators by the symbol ``dis`` shows in argrepr (BINARY_OP, COMPARE_OP).
BINARY_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "<<": operator.lshift, ">>": operator.rshift, "&": operator.and_, "|": operator.or_, "^": operator.xor,
    "+=": operator.iadd, "-=": operator.isub, "*=": operator.imul, "/=": operator.itruediv,
    "//=": operator.ifloordiv, "%=": operator.imod, "**=": operator.ipow, "@=": operator.imatmul,
    "<<=": operator.ilshift, ">>=": operator.irshift, "&=": operator.iand, "|=": operator.ior, "^=": operator.ixor,
}  # fmt: skip
COMPARE_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
}  # fmt: skip
UNARY_OPERATORS: dict[str, Callable[[Any], Any]] = {
    "UNARY_POSITIVE": operator.pos, "UNARY_NEGATIVE": operator.neg,
    "UNARY_NOT": operator.not_, "UNARY_INVERT": operator.invert,
}  # fmt: skip

_CO_GENERATOR = 0x20
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x100 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR
_NATIVE_FLAGS = _GENERATOR_FLAGS & ~_CO_GENERATOR  # coroutines and async generators run natively
_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08


class VirtualMachine:
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

    def make_generator(self, frame: Frame, fn: types.FunctionType) -> types.GeneratorType:
        """A real generator that drives ``frame`` (Note [Generators suspend the frame loop])."""

        def drive():
            thrown = None
            while True:
                try:
                    return self.run_frame(frame, throw=thrown)
                except _Yield as suspended:
                    value = suspended.value
                while True:
                    try:
                        sent, thrown = (yield value), None
                        frame.stack.append(sent)
                    except BaseException as exc:  # gen.throw(...) and gen.close()
                        kind, thrown = self.throw_to_delegate(frame, exc)
                        if kind == "yield":  # the sub-iterator of `yield from` handled it and yielded again
                            value, thrown = thrown, None
                            continue
                    break

        gen = drive()
        gen.__name__, gen.__qualname__ = fn.__name__, fn.__qualname__
        return gen

    def throw_to_delegate(self, frame: Frame, exc: BaseException) -> tuple[str, Any]:
        """gen.throw(exc) while suspended in ``yield from``: CPython throws into the sub-iterator first.

        Returns ("throw", exc) to raise in our frame, ("yield", value) when the sub-iterator
        yields again, ("resume", None) when it returned (3.11: SEND's exit, done here).
        """
        resume = frame.instructions[frame.ip] if frame.ip < len(frame.instructions) else None
        if resume is None or resume.opname != "RESUME" or resume.arg != 2 or not frame.stack:
            return "throw", exc  # a plain `yield`
        receiver = frame.stack[-1]
        if isinstance(exc, GeneratorExit) or not hasattr(receiver, "throw"):
            if isinstance(exc, GeneratorExit) and hasattr(receiver, "close"):
                receiver.close()
            return "throw", exc
        try:
            return "yield", receiver.throw(exc)
        except StopIteration as stop:
            if SEND_KEEPS_RECEIVER:
                return "throw", stop  # 3.12+: CLEANUP_THROW turns it into the value of `yield from`
            back = frame.instructions[frame.ip + 1]  # 3.11: JUMP_BACKWARD_NO_INTERRUPT to the SEND
            frame.stack[-1] = stop.value
            frame.ip = frame.index_of[frame.instructions[frame.index_of[back.argval]].argval]
            return "resume", None
        except BaseException as raised:  # noqa: BLE001 - the sub-iterator's exception goes on up
            return "throw", raised

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

    ## Stack manipulation

    def generic_nop(self, inst: Instruction) -> None:
        pass

    byte_NOP = byte_RESUME = byte_CACHE = byte_EXTENDED_ARG = byte_PRECALL = generic_nop

    def byte_POP_TOP(self, inst: Instruction) -> None:
        self.pop()

    def byte_PUSH_NULL(self, inst: Instruction) -> None:
        self.push(NULL)

    def byte_COPY(self, inst: Instruction) -> None:
        self.push(self.peek(inst.arg))

    def byte_SWAP(self, inst: Instruction) -> None:
        s = self.frame.stack
        s[-1], s[-inst.arg] = s[-inst.arg], s[-1]

    ## Names

    def byte_LOAD_CONST(self, inst: Instruction) -> None:
        self.push(inst.argval)

    def load_fast(self, name: str) -> Any:
        if name in self.frame.cells:  # 3.13: LOAD_FAST of a cell variable pushes the cell (a closure is built)
            return self.frame.cells[name]
        try:
            return self.frame.locals[name]
        except KeyError:
            raise UnboundLocalError(f"cannot access local variable '{name}' where it is not associated with a value") from None

    def store_fast(self, name: str, value: Any) -> None:
        if value is NULL:  # 3.12: restoring a comprehension's variable that was unbound (LOAD_FAST_AND_CLEAR)
            self.frame.locals.pop(name, None)
        else:
            self.frame.locals[name] = value

    def byte_LOAD_FAST(self, inst: Instruction) -> None:
        self.push(self.load_fast(inst.argval))

    def byte_STORE_FAST(self, inst: Instruction) -> None:
        self.store_fast(inst.argval, self.pop())

    def byte_DELETE_FAST(self, inst: Instruction) -> None:
        if inst.argval not in self.frame.locals:
            self.byte_LOAD_FAST(inst)  # raises the UnboundLocalError
        del self.frame.locals[inst.argval]

    def load_global(self, name: str) -> Any:
        if name in self.frame.globals:
            return self.frame.globals[name]
        if name in self.frame.builtins:
            return self.frame.builtins[name]
        raise NameError(f"name '{name}' is not defined")

    def byte_LOAD_GLOBAL(self, inst: Instruction) -> None:
        value = self.load_global(inst.argval)
        if inst.arg & 1:  # the low bit asks for a NULL beside the global (a call follows)
            self.push(*callable_slots(value, NULL))
        else:
            self.push(value)

    def byte_STORE_GLOBAL(self, inst: Instruction) -> None:
        self.frame.globals[inst.argval] = self.pop()

    def byte_DELETE_GLOBAL(self, inst: Instruction) -> None:
        if inst.argval not in self.frame.globals:
            raise NameError(f"name '{inst.argval}' is not defined")
        del self.frame.globals[inst.argval]

    def byte_LOAD_NAME(self, inst: Instruction) -> None:
        if inst.argval in self.frame.locals:
            self.push(self.frame.locals[inst.argval])
        else:
            self.push(self.load_global(inst.argval))

    def byte_STORE_NAME(self, inst: Instruction) -> None:
        self.frame.locals[inst.argval] = self.pop()

    def byte_DELETE_NAME(self, inst: Instruction) -> None:
        if inst.argval not in self.frame.locals:
            raise NameError(f"name '{inst.argval}' is not defined")
        del self.frame.locals[inst.argval]

    def byte_MAKE_CELL(self, inst: Instruction) -> None:
        # A local captured by an inner function lives in a cell; an argument keeps its value.
        if inst.argval in self.frame.locals:
            self.frame.cells[inst.argval] = types.CellType(self.frame.locals.pop(inst.argval))
        else:
            self.frame.cells[inst.argval] = types.CellType()

    def byte_COPY_FREE_VARS(self, inst: Instruction) -> None:
        for name, cell in zip(self.frame.code.co_freevars, self.frame.closure):
            self.frame.cells[name] = cell

    def byte_LOAD_CLOSURE(self, inst: Instruction) -> None:
        self.push(self.frame.cells[inst.argval])

    def byte_LOAD_DEREF(self, inst: Instruction) -> None:
        try:
            self.push(self.frame.cells[inst.argval].cell_contents)
        except ValueError:  # an empty cell
            if inst.argval in self.frame.code.co_freevars:
                raise NameError(
                    f"cannot access free variable '{inst.argval}' where it is not associated with a value"
                    " in enclosing scope"
                ) from None
            raise UnboundLocalError(
                f"cannot access local variable '{inst.argval}' where it is not associated with a value"
            ) from None

    def byte_STORE_DEREF(self, inst: Instruction) -> None:
        self.frame.cells[inst.argval].cell_contents = self.pop()

    def byte_DELETE_DEREF(self, inst: Instruction) -> None:
        self.byte_LOAD_DEREF(inst)  # raises if empty
        self.pop()
        del self.frame.cells[inst.argval].cell_contents

    def byte_LOAD_ASSERTION_ERROR(self, inst: Instruction) -> None:
        self.push(AssertionError)

    def byte_IMPORT_NAME(self, inst: Instruction) -> None:
        level, fromlist = self.popn(2)
        self.push(__import__(inst.argval, self.frame.globals, self.frame.locals, fromlist, level))

    def byte_IMPORT_FROM(self, inst: Instruction) -> None:
        module = self.top()
        try:
            self.push(getattr(module, inst.argval))
        except AttributeError:
            import sys

            name = getattr(module, "__name__", "<unknown module name>")
            if f"{name}.{inst.argval}" not in sys.modules:
                where = getattr(module, "__file__", None) or "unknown location"
                raise ImportError(f"cannot import name '{inst.argval}' from '{name}' ({where})") from None
            self.push(sys.modules[f"{name}.{inst.argval}"])

    ## Attributes

    def byte_LOAD_ATTR(self, inst: Instruction) -> None:
        if LOAD_ATTR_METHOD_BIT and inst.arg & 1:  # 3.12+: LOAD_METHOD folded into LOAD_ATTR
            self.push(*callable_slots(getattr(self.pop(), inst.argval), NULL))
        else:
            self.push(getattr(self.pop(), inst.argval))

    def byte_LOAD_METHOD(self, inst: Instruction) -> None:
        # CPython pushes (function, self) when the attribute is a plain method, to skip
        # creating a bound method; a bound method behind a NULL behaves the same.
        self.push(NULL, getattr(self.pop(), inst.argval))

    def byte_STORE_ATTR(self, inst: Instruction) -> None:
        obj, value = self.pop(), self.pop()
        setattr(obj, inst.argval, value)

    def byte_DELETE_ATTR(self, inst: Instruction) -> None:
        delattr(self.pop(), inst.argval)

    ## Operators

    def unary_operator(self, inst: Instruction) -> None:
        self.push(UNARY_OPERATORS[inst.opname](self.pop()))

    byte_UNARY_POSITIVE = byte_UNARY_NEGATIVE = byte_UNARY_NOT = byte_UNARY_INVERT = unary_operator

    def byte_BINARY_OP(self, inst: Instruction) -> None:
        lhs, rhs = self.popn(2)
        self.push(BINARY_OPERATORS[inst.argrepr](lhs, rhs))

    def byte_COMPARE_OP(self, inst: Instruction) -> None:
        lhs, rhs = self.popn(2)
        result = COMPARE_OPERATORS[inst.argval](lhs, rhs)
        self.push(bool(result) if inst.arg & COMPARE_BOOL_BIT else result)

    def byte_IS_OP(self, inst: Instruction) -> None:
        lhs, rhs = self.popn(2)
        self.push((lhs is rhs) != bool(inst.arg))

    def byte_CONTAINS_OP(self, inst: Instruction) -> None:
        item, container = self.popn(2)
        self.push((item in container) != bool(inst.arg))

    ## Subscripts and slices

    def byte_BINARY_SUBSCR(self, inst: Instruction) -> None:
        container, key = self.popn(2)
        self.push(container[key])

    def byte_STORE_SUBSCR(self, inst: Instruction) -> None:
        value, container, key = self.popn(3)
        container[key] = value

    def byte_DELETE_SUBSCR(self, inst: Instruction) -> None:
        container, key = self.popn(2)
        del container[key]

    def byte_BUILD_SLICE(self, inst: Instruction) -> None:
        self.push(slice(*self.popn(inst.arg)))

    ## Building containers

    def byte_BUILD_TUPLE(self, inst: Instruction) -> None:
        self.push(tuple(self.popn(inst.arg)))

    def byte_BUILD_LIST(self, inst: Instruction) -> None:
        self.push(self.popn(inst.arg))

    def byte_BUILD_SET(self, inst: Instruction) -> None:
        self.push(set(self.popn(inst.arg)))

    def byte_BUILD_MAP(self, inst: Instruction) -> None:
        items = self.popn(2 * inst.arg)
        self.push({items[i]: items[i + 1] for i in range(0, len(items), 2)})

    def byte_BUILD_CONST_KEY_MAP(self, inst: Instruction) -> None:
        keys = self.pop()
        self.push(dict(zip(keys, self.popn(inst.arg))))

    def byte_BUILD_STRING(self, inst: Instruction) -> None:
        self.push("".join(self.popn(inst.arg)))

    def byte_LIST_APPEND(self, inst: Instruction) -> None:
        value = self.pop()
        self.peek(inst.arg).append(value)

    def byte_SET_ADD(self, inst: Instruction) -> None:
        value = self.pop()
        self.peek(inst.arg).add(value)

    def byte_MAP_ADD(self, inst: Instruction) -> None:
        key, value = self.popn(2)
        self.peek(inst.arg)[key] = value

    def byte_LIST_EXTEND(self, inst: Instruction) -> None:
        iterable = self.pop()
        try:
            self.peek(inst.arg).extend(iterable)
        except TypeError:
            if hasattr(iterable, "__iter__") or hasattr(iterable, "__getitem__"):
                raise
            raise TypeError(f"Value after * must be an iterable, not {type(iterable).__name__}") from None

    def byte_SET_UPDATE(self, inst: Instruction) -> None:
        iterable = self.pop()
        self.peek(inst.arg).update(iterable)

    def byte_DICT_UPDATE(self, inst: Instruction) -> None:
        mapping = self.pop()
        if not hasattr(mapping, "keys"):
            raise TypeError(f"'{type(mapping).__name__}' object is not a mapping")
        self.peek(inst.arg).update(mapping)

    def byte_DICT_MERGE(self, inst: Instruction) -> None:
        # Like DICT_UPDATE, for f(**a, **b): a repeated keyword is an error.
        mapping, target = self.pop(), self.peek(inst.arg)
        func = self.peek(inst.arg + 2 + NULL_AFTER_CALLABLE)  # the callable is below NULL since 3.13
        if not hasattr(mapping, "keys"):
            raise TypeError(f"{_func_desc(func)} argument after ** must be a mapping, not {type(mapping).__name__}")
        for key in mapping.keys():
            if key in target:
                raise TypeError(f"{_func_desc(func)} got multiple values for keyword argument '{key}'")
            target[key] = mapping[key]

    def byte_LIST_TO_TUPLE(self, inst: Instruction) -> None:
        self.push(tuple(self.pop()))

    ## Unpacking

    def byte_UNPACK_SEQUENCE(self, inst: Instruction) -> None:
        self.push(*reversed(_unpack(self.pop(), inst.arg, None)))

    def byte_UNPACK_EX(self, inst: Instruction) -> None:
        before, after = inst.arg & 0xFF, inst.arg >> 8
        self.push(*reversed(_unpack(self.pop(), before, after)))

    ## Jumps

    def byte_JUMP_FORWARD(self, inst: Instruction) -> None:
        self.jump(inst.argval)

    byte_JUMP_BACKWARD = byte_JUMP_BACKWARD_NO_INTERRUPT = byte_JUMP_FORWARD

    def pop_jump_if(self, inst: Instruction) -> None:
        value = self.pop()
        if "NONE" in inst.opname:
            taken = (value is None) != ("NOT_NONE" in inst.opname)
        else:
            taken = bool(value) == inst.opname.endswith("TRUE")
        if taken:
            self.jump(inst.argval)

    byte_POP_JUMP_FORWARD_IF_TRUE = byte_POP_JUMP_FORWARD_IF_FALSE = pop_jump_if
    byte_POP_JUMP_FORWARD_IF_NONE = byte_POP_JUMP_FORWARD_IF_NOT_NONE = pop_jump_if
    byte_POP_JUMP_BACKWARD_IF_TRUE = byte_POP_JUMP_BACKWARD_IF_FALSE = pop_jump_if
    byte_POP_JUMP_BACKWARD_IF_NONE = byte_POP_JUMP_BACKWARD_IF_NOT_NONE = pop_jump_if
    byte_POP_JUMP_IF_TRUE = byte_POP_JUMP_IF_FALSE = byte_POP_JUMP_IF_NONE = byte_POP_JUMP_IF_NOT_NONE = pop_jump_if

    def jump_if_or_pop(self, inst: Instruction) -> None:
        # `a or b`: keep `a` and jump if it decides the result, else drop it and evaluate `b`.
        if bool(self.top()) == (inst.opname == "JUMP_IF_TRUE_OR_POP"):
            self.jump(inst.argval)
        else:
            self.pop()

    byte_JUMP_IF_TRUE_OR_POP = byte_JUMP_IF_FALSE_OR_POP = jump_if_or_pop

    ## Iteration

    def byte_GET_ITER(self, inst: Instruction) -> None:
        self.push(iter(self.pop()))

    def byte_FOR_ITER(self, inst: Instruction) -> None:
        try:
            self.push(next(self.top()))
        except StopIteration:
            self.pop()
            self.jump(inst.argval)
            self.frame.ip += FOR_ITER_EXIT_SKIP  # 3.12+: step over END_FOR (3.13: END_FOR, POP_TOP)

    def byte_GET_LEN(self, inst: Instruction) -> None:
        self.push(len(self.top()))

    ## Functions

    def byte_KW_NAMES(self, inst: Instruction) -> None:
        self.frame.kw_names = self.frame.code.co_consts[inst.arg]  # dis 3.11 shows no argval for it

    def byte_CALL(self, inst: Instruction) -> None:
        # Stack: [NULL, callable, *args] or [method, self, *args] (Note [NULL on the stack]).
        args = self.popn(inst.arg)
        second, first = self.pop(), self.pop()
        fn, args = call_target(first, second, args, lambda v: v is NULL)
        kw_names, self.frame.kw_names = self.frame.kw_names, ()
        if kw_names:
            kwargs = dict(zip(kw_names, args[-len(kw_names) :]))
            args = args[: -len(kw_names)]
        else:
            kwargs = {}
        self.push(self.call_function(fn, args, kwargs))

    def byte_CALL_FUNCTION_EX(self, inst: Instruction) -> None:
        kwargs = self.pop() if inst.arg & 1 else {}
        args = self.pop()
        second, first = self.pop(), self.pop()
        fn, null = (first, second) if NULL_AFTER_CALLABLE else (second, first)
        if null is not NULL:  # f(*a) is compiled as PUSH_NULL/LOAD_GLOBAL(NULL+f) ...
            raise UnsupportedInstructionError(f"CALL_FUNCTION_EX at offset {inst.offset}: expected NULL beside the callable")
        if not isinstance(args, tuple):
            if not hasattr(args, "__iter__") and not hasattr(args, "__getitem__"):
                raise TypeError(f"{_func_desc(fn)} argument after * must be an iterable, not {type(args).__name__}")
            args = tuple(args)
        self.push(self.call_function(fn, list(args), dict(kwargs)))

    def byte_MAKE_FUNCTION(self, inst: Instruction) -> None:
        code, flags = self.pop(), inst.arg or 0  # 3.13: no flags, SET_FUNCTION_ATTRIBUTE follows
        closure = self.pop() if flags & 0x08 else None
        if closure is None and code.co_freevars:  # 3.13: SET_FUNCTION_ATTRIBUTE(closure) replaces these
            closure = tuple(types.CellType() for _ in code.co_freevars)
        annotations = self.pop() if flags & 0x04 else None
        kwdefaults = self.pop() if flags & 0x02 else None
        defaults = self.pop() if flags & 0x01 else None
        fn = types.FunctionType(code, self.frame.globals, code.co_name, defaults, closure)
        fn.__qualname__ = code.co_qualname
        if kwdefaults:
            fn.__kwdefaults__ = kwdefaults
        if annotations:
            _set_annotations(fn, annotations)
        self.push(fn)

    def byte_RETURN_VALUE(self, inst: Instruction) -> None:
        raise _Return(self.pop())

    def byte_RETURN_CONST(self, inst: Instruction) -> None:  # 3.12
        raise _Return(inst.argval)

    ## Generators

    def byte_RETURN_GENERATOR(self, inst: Instruction) -> None:
        # CPython creates the generator here and returns it; ours exists already
        # (make_generator). On first resume CPython pushes the sent None, which POP_TOP drops.
        self.push(None)

    def byte_YIELD_VALUE(self, inst: Instruction) -> None:
        raise _Yield(self.pop())

    def byte_GET_YIELD_FROM_ITER(self, inst: Instruction) -> None:
        if not isinstance(self.top(), types.GeneratorType):
            self.push(iter(self.pop()))

    def byte_SEND(self, inst: Instruction) -> None:
        # `yield from`: pass the sent value on to the sub-iterator; when it returns, jump past the loop.
        value, receiver = self.pop(), self.top()
        try:
            result = next(receiver) if value is None else receiver.send(value)
        except StopIteration as stop:
            if not SEND_KEEPS_RECEIVER:  # 3.12+: END_SEND at the target drops the receiver
                self.pop()
            self.push(stop.value)
            self.jump(inst.argval)
        else:
            self.push(result)

    ## Strings

    def byte_FORMAT_VALUE(self, inst: Instruction) -> None:
        spec = self.pop() if inst.arg & 0x04 else ""
        value = self.pop()
        convert = {0: None, 1: str, 2: repr, 3: ascii}[inst.arg & 0x03]
        if convert is not None:
            value = convert(value)
        self.push(format(value, spec))

    ## Exceptions

    def byte_RAISE_VARARGS(self, inst: Instruction) -> None:
        if inst.arg == 0:  # bare `raise`
            if not self.exc_info:
                raise RuntimeError("No active exception to reraise")
            raise self.exc_info[-1]
        cause = self.pop() if inst.arg == 2 else None
        exc = _make_exception(self.pop())
        if inst.arg == 2:
            exc.__cause__ = None if cause is None else _make_exception(cause, "exception causes")
        raise exc

    def byte_PUSH_EXC_INFO(self, inst: Instruction) -> None:
        # Entering an except/finally handler: remember what was being handled before.
        exc = self.pop()
        self.push(self.exc_info[-1] if self.exc_info else None, exc)
        self.exc_info.append(exc)

    def byte_POP_EXCEPT(self, inst: Instruction) -> None:
        self.pop()  # the previous exception, restored by popping ours
        if self.exc_info:
            self.exc_info.pop()

    def byte_CHECK_EXC_MATCH(self, inst: Instruction) -> None:
        kind = self.pop()
        for k in kind if isinstance(kind, tuple) else (kind,):
            if not (isinstance(k, type) and issubclass(k, BaseException)):
                raise TypeError("catching classes that do not inherit from BaseException is not allowed")
        self.push(isinstance(self.top(), kind))

    def byte_RERAISE(self, inst: Instruction) -> None:
        raise self.pop()

    ## Context managers

    def byte_BEFORE_WITH(self, inst: Instruction) -> None:
        mgr = self.pop()
        kind = type(mgr)
        if not hasattr(kind, "__enter__"):
            raise TypeError(f"'{kind.__name__}' object does not support the context manager protocol")
        if not hasattr(kind, "__exit__"):
            raise TypeError(
                f"'{kind.__name__}' object does not support the context manager protocol (missed __exit__ method)"
            )
        exit_ = types.MethodType(kind.__exit__, mgr)
        self.push(exit_, self.call_function(kind.__enter__, [mgr], {}))

    def byte_WITH_EXCEPT_START(self, inst: Instruction) -> None:
        exit_, exc = self.peek(4), self.top()  # stack: exit, lasti, previous exception, exception
        self.push(self.call_function(exit_, [type(exc), exc, exc.__traceback__], {}))

    ## New in 3.12 and 3.13 (Note [What changes between 3.11, 3.12 and 3.13] in bytecode.py)

    def byte_LOAD_FAST_CHECK(self, inst: Instruction) -> None:  # 3.12: LOAD_FAST that may be unbound
        self.push(self.load_fast(inst.argval))

    def byte_LOAD_FAST_AND_CLEAR(self, inst: Instruction) -> None:  # 3.12: an inlined comprehension saves x
        self.push(self.frame.locals.pop(inst.argval, NULL))

    def byte_LOAD_FAST_LOAD_FAST(self, inst: Instruction) -> None:  # 3.13 superinstructions: argval is 2 names
        first, second = inst.argval
        self.push(self.load_fast(first), self.load_fast(second))

    def byte_STORE_FAST_STORE_FAST(self, inst: Instruction) -> None:
        first, second = inst.argval
        self.store_fast(first, self.pop())
        self.store_fast(second, self.pop())

    def byte_STORE_FAST_LOAD_FAST(self, inst: Instruction) -> None:
        store, load = inst.argval
        self.store_fast(store, self.pop())
        self.push(self.load_fast(load))

    def byte_END_FOR(self, inst: Instruction) -> None:  # 3.12: pops iterator and value; 3.13: one value
        self.popn(2 if PYTHON_VERSION == (3, 12) else 1)

    def byte_END_SEND(self, inst: Instruction) -> None:  # 3.12: [receiver, value] -> [value]
        value = self.pop()
        self.pop()
        self.push(value)

    def byte_CLEANUP_THROW(self, inst: Instruction) -> None:
        # 3.12: gen.throw() into `yield from` ended the sub-iterator: [sub, last_sent, exc] -> [None, value].
        sub, last_sent, exc = self.popn(3)
        if not isinstance(exc, StopIteration):
            raise exc
        self.push(None, exc.value)

    def byte_BINARY_SLICE(self, inst: Instruction) -> None:  # 3.12: container[start:stop]
        container, start, stop = self.popn(3)
        self.push(container[start:stop])

    def byte_STORE_SLICE(self, inst: Instruction) -> None:  # 3.12: container[start:stop] = value
        value, container, start, stop = self.popn(4)
        container[start:stop] = value

    def byte_CALL_INTRINSIC_1(self, inst: Instruction) -> None:  # 3.12: small operations by number
        intrinsic = INTRINSICS_1.get(inst.argrepr)
        if intrinsic is None:
            self.dispatch_unsupported(inst, f"{inst.argrepr} is outside the subset")
        self.push(intrinsic(self.pop()))

    def byte_LOAD_SUPER_ATTR(self, inst: Instruction) -> None:
        # 3.12: super().name / super(C, self).name without building the call; arg bit 1: method, bit 2: 2-arg form.
        global_super, cls, obj = self.popn(3)
        if global_super is super:
            proxy = super(cls, obj)
        else:
            proxy = self.call_function(global_super, [cls, obj] if inst.arg & 2 else [], {})
        value = getattr(proxy, inst.argval)
        self.push(*callable_slots(value, NULL)) if inst.arg & 1 else self.push(value)

    def byte_TO_BOOL(self, inst: Instruction) -> None:  # 3.13: before every conditional jump and `not`
        self.push(bool(self.pop()))

    def byte_CALL_KW(self, inst: Instruction) -> None:  # 3.13: KW_NAMES became a stack operand of the call
        self.frame.kw_names = self.pop()
        self.byte_CALL(inst)

    def byte_SET_FUNCTION_ATTRIBUTE(self, inst: Instruction) -> None:  # 3.13: MAKE_FUNCTION's flags, one at a time
        fn, value = self.pop(), self.pop()
        if inst.arg == 0x08:  # __closure__ is read-only: a new function with everything else kept
            old, fn = fn, types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, value)
            fn.__qualname__, fn.__kwdefaults__, fn.__annotations__ = old.__qualname__, old.__kwdefaults__, old.__annotations__
        elif inst.arg == 0x04:
            _set_annotations(fn, value)
        elif inst.arg == 0x02:
            fn.__kwdefaults__ = value
        else:
            fn.__defaults__ = value
        self.push(fn)

    def byte_CONVERT_VALUE(self, inst: Instruction) -> None:  # 3.13: f"{x!r}": the !r, !s, !a of FORMAT_VALUE
        self.push({1: str, 2: repr, 3: ascii}[inst.arg](self.pop()))

    def byte_FORMAT_SIMPLE(self, inst: Instruction) -> None:  # 3.13: f"{x}"
        value = self.pop()
        self.push(value if type(value) is str else format(value))

    def byte_FORMAT_WITH_SPEC(self, inst: Instruction) -> None:  # 3.13: f"{x:>3}"
        value, spec = self.popn(2)
        self.push(format(value, spec))

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




def _stopiteration_error(exc: BaseException) -> BaseException:
    """3.12's INTRINSIC_STOPITERATION_ERROR: a StopIteration leaving a generator becomes RuntimeError (PEP 479)."""
    if not isinstance(exc, StopIteration):
        return exc
    error = RuntimeError("generator raised StopIteration")
    error.__cause__ = error.__context__ = exc
    return error


# CALL_INTRINSIC_1 by the name ``dis`` shows (3.12+); the others (typing, import *, print) are outside the subset.
INTRINSICS_1: dict[str, Callable[[Any], Any]] = {
    "INTRINSIC_UNARY_POSITIVE": operator.pos,
    "INTRINSIC_LIST_TO_TUPLE": tuple,
    "INTRINSIC_STOPITERATION_ERROR": _stopiteration_error,
}


# -- helpers shared by the handlers ---------------------------------------------------------------


def _set_annotations(fn: types.FunctionType, annotations: Any) -> None:
    """3.11-3.13 pass annotations as a flat tuple of name, value pairs (or a dict)."""
    if isinstance(annotations, tuple):
        annotations = dict(zip(annotations[::2], annotations[1::2]))
    fn.__annotations__ = annotations


def _plain_class_with_python_init(fn: Any) -> bool:
    """A class whose instances come from object.__new__ and a Python __init__ (no metaclass magic)."""
    return (
        type(fn) is type
        and fn.__new__ is object.__new__
        and isinstance(fn.__dict__.get("__init__", getattr(fn, "__init__", None)), types.FunctionType)
    )


def _func_desc(fn: Any) -> str:
    """How CPython names a callable in call errors (``_PyObject_FunctionStr``): 'mod.f()', 'len()'."""
    qualname = getattr(fn, "__qualname__", None)
    if not isinstance(qualname, str):
        return f"{type(fn).__name__} object"
    module = getattr(fn, "__module__", None)
    return f"{module}.{qualname}()" if isinstance(module, str) and module != "builtins" else f"{qualname}()"


def _unpack(seq: Any, before: int, after: Optional[int]) -> list:
    """UNPACK_SEQUENCE (after is None) and UNPACK_EX (a, *b, c): the items in order, with CPython's errors."""
    try:
        it = iter(seq)
    except TypeError:
        raise TypeError(f"cannot unpack non-iterable {type(seq).__name__} object") from None
    items = list(it)  # simpler than CPython, which stops early; same results for finite iterables
    if after is None:
        if len(items) < before:
            raise ValueError(f"not enough values to unpack (expected {before}, got {len(items)})")
        if len(items) > before:
            raise ValueError(f"too many values to unpack (expected {before})")
        return items
    if len(items) < before + after:
        raise ValueError(f"not enough values to unpack (expected at least {before + after}, got {len(items)})")
    return [*items[:before], items[before : len(items) - after], *items[len(items) - after :]]


def _make_exception(value: Any, what: str = "exceptions") -> BaseException:
    if isinstance(value, type) and issubclass(value, BaseException):
        return value()
    if isinstance(value, BaseException):
        return value
    raise TypeError(f"{what} must derive from BaseException")


def bind_arguments(fn: types.FunctionType, args: list, kwargs: dict) -> dict:
    """Bind a call's arguments to ``fn``'s parameters, as CPython does before the first instruction.

    Returns the initial fast locals by name. On a bad call, raise CPython's own TypeError by
    calling a body-less copy of ``fn`` (so the message matches exactly).
    """
    code = fn.__code__
    nargs, nkwonly = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    positional, kwonly = names[:nargs], names[nargs : nargs + nkwonly]
    rest = nargs + nkwonly
    locals_: dict[str, Any] = dict(zip(positional, args))
    if code.co_flags & _CO_VARARGS:
        locals_[names[rest]] = tuple(args[nargs:])
        rest += 1
    elif len(args) > nargs:
        _raise_binding_error(fn, args, kwargs)
    extra: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in names[code.co_posonlyargcount : nargs] or key in kwonly:
            if key in locals_:
                _raise_binding_error(fn, args, kwargs)
            locals_[key] = value
        elif code.co_flags & _CO_VARKEYWORDS:
            extra[key] = value
        else:
            _raise_binding_error(fn, args, kwargs)
    if code.co_flags & _CO_VARKEYWORDS:
        locals_[names[rest]] = extra
    defaults = fn.__defaults__ or ()
    for i, name in enumerate(positional[nargs - len(defaults) :]):
        locals_.setdefault(name, defaults[i])
    for name in kwonly:
        if name not in locals_ and fn.__kwdefaults__ and name in fn.__kwdefaults__:
            locals_[name] = fn.__kwdefaults__[name]
    if any(name not in locals_ for name in (*positional, *kwonly)):
        _raise_binding_error(fn, args, kwargs)
    return locals_


def _raise_binding_error(fn: types.FunctionType, args: list, kwargs: dict) -> None:
    """Call a copy of ``fn`` whose body is just ``return None``: CPython raises its own binding error."""
    stub_code = fn.__code__.replace(
        co_code=bytes([dis.opmap["RESUME"], 0, dis.opmap["LOAD_CONST"], 0, dis.opmap["RETURN_VALUE"], 0]),
        co_consts=(None,), co_linetable=b"", co_exceptiontable=b"", co_flags=fn.__code__.co_flags & ~_GENERATOR_FLAGS,
    )  # fmt: skip
    stub = types.FunctionType(stub_code, {}, fn.__name__, fn.__defaults__, fn.__closure__)
    stub.__kwdefaults__, stub.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    stub(*args, **kwargs)  # raises CPython's message
    raise TypeError(f"minidynamo could not bind the arguments of {fn.__qualname__}()")  # pragma: no cover


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

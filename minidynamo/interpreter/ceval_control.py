"""The concrete interpreter's control flow: jumps, iteration, exceptions, context managers.

Place in the pipeline: part of ``VirtualMachine`` (``minidynamo/interpreter/ceval.py``), split out
so each file reads in one sitting. A jump moves the ``Frame``'s instruction pointer; a
raised exception leaves the handler and the frame loop's ``unwind`` routes it through the
exception table (Note [Exception table] in ``bytecode.py``); ``exc_info`` is the stack of
exceptions being handled (``sys.exc_info``). Mirrors these instructions in
``Python/bytecodes.c`` (``Python/ceval.c`` in 3.11) and the same handlers of
``torch/_dynamo/symbolic_convert.py``.
"""

from __future__ import annotations

import types
from typing import Any

from minidynamo.bytecode import FOR_ITER_EXIT_SKIP, Instruction


class ControlOpcodes:
    """Handlers for ``VirtualMachine``: jumps, iteration, exceptions, context managers."""

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


def _make_exception(value: Any, what: str = "exceptions") -> BaseException:
    if isinstance(value, type) and issubclass(value, BaseException):
        return value()
    if isinstance(value, BaseException):
        return value
    raise TypeError(f"{what} must derive from BaseException")

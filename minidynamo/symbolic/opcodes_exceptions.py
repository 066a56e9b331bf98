"""Exceptions inside a traced frame: raise, the exception table's handlers, except, finally.

Place in the pipeline: a mixin of ``InstructionTranslatorBase`` (``translator_base.py``).
When traced code raises (``RAISE_VARARGS``, or a tracker raising an observed exception
for ``d["a"]`` or ``next(it)``), the loop catches ``ObservedException`` (exc.py) and calls
``exception_handler``: the handler that the code's exception table names for the
instruction is jumped to, and the graph goes on. Mirrors ``torch/_dynamo/symbolic_convert.py``
(``ExceptionStack``, ``exception_handler``, ``RAISE_VARARGS``, ``RERAISE``,
``PUSH_EXC_INFO``, ``POP_EXCEPT``, ``CHECK_EXC_MATCH``, ``WITH_EXCEPT_START``,
``LOAD_ASSERTION_ERROR``).

Note [Exceptions are traced through the exception table]
    Since 3.11 a code object has no SETUP_* blocks: a table maps ranges of offsets to a
    handler (target, stack depth, push lasti?). CPython's rule on a raise
    (Objects/exception_handling_notes.txt), which ``exception_handler`` follows: pop
    the stack down to the entry's depth, push the offset of the raise if ``lasti``,
    push the exception, jump to the target. The handler's bytecode then runs like any
    other: ``PUSH_EXC_INFO`` saves the exception being handled, ``CHECK_EXC_MATCH``
    compares it with the ``except`` clause's classes (known while tracing, so the
    jump is decided now), ``POP_EXCEPT`` restores the one handled before, ``RERAISE``
    (the end of a ``finally``, an unmatched ``except``) raises it again. An inlined
    callee with no handler passes the exception to its caller, whose CALL then raises
    it: the caller's handler catches it. An exception that leaves the compiled frame
    is torch's "Observed exception" break: the whole frame runs eagerly from then on,
    and eager raises the user's exception, unchanged (torch skips the frame the same way).

    What we simplify: the exception stack keeps trackers, not tracebacks (``__traceback__``
    is None in the trace); ``__context__`` is set to the exception being handled when one
    is raised, without torch's cycle breaking (``_break_context_reference_cycle``).
"""

from __future__ import annotations

import functools
import types
from typing import Optional

from minidynamo.bytecode import exception_table, find_exception_handler

from . import graph_break_registry as gb
from .exc import EagerFallback, ObservedException, Unsupported, explain_unsupported, unimplemented
from .variables.base import VariableTracker
from .variables.constant import ConstantVariable
from .variables.exceptions import ExceptionVariable, is_exception_class, raise_observed_exception
from .variables.lists import TupleVariable

_NO_HANDLER = ("Dynamo found no exception handler at the top-level compiled function when encountering an "
               "exception. Exception will propagate outside the compiled region.")


@functools.lru_cache(maxsize=1024)
def _table(code: types.CodeType) -> list:
    return exception_table(code)


class ExceptionStack:
    """The exceptions being handled, shared by a frame and every call it inlines (torch's ``ExceptionStack``).

    ``current``: the exception raised and not yet handled (CPython's "current exception");
    ``stack``: those whose ``except`` block is running, innermost last (``sys.exc_info()``).
    ``PUSH_EXC_INFO`` moves ``current`` onto ``stack``; ``POP_EXCEPT`` pops it.
    """

    def __init__(self):
        self.stack: list[ExceptionVariable] = []
        self.current: Optional[ExceptionVariable] = None

    def set_current_exception(self, value: ExceptionVariable, set_context: bool = True) -> None:
        if set_context and self.stack and self.stack[-1] is not value and self._no_context(value):
            value.context = self.stack[-1]  # raised while handling another: its __context__
        self.current = value

    @staticmethod
    def _no_context(value: ExceptionVariable) -> bool:
        return isinstance(value.context, ConstantVariable) and value.context.value is None

    def move_current_exception_to_stack(self) -> None:
        assert self.current is not None
        self.stack.append(self.current)
        self.current = None

    def __len__(self) -> int:
        return len(self.stack)


class ExceptionOpcodes:
    """Mixed into InstructionTranslatorBase (which provides push/pop/jump/current_inst/parent)."""

    @property
    def exn_vt_stack(self) -> ExceptionStack:
        """One per traced frame, shared with the calls it inlines (kept on the root translator)."""
        root = self
        while getattr(root, "parent", None) is not None:
            root = root.parent
        stack = root.__dict__.get("_exn_vt_stack")
        if stack is None:
            stack = root._exn_vt_stack = ExceptionStack()
        return stack

    def raise_observed_exception(self, exc_type: type, args: Optional[list] = None) -> "NoReturn":  # noqa: F821
        """For the trackers below ``variables/exceptions.py`` (a list's IndexError, a constant's
        ValueError): they reach it through ``tx``, as the builder (Note [The trackers reach the
        builder through the translator], translator_base.py)."""
        raise_observed_exception(exc_type, self, args)

    def raise_error_of(self, error: Exception) -> "NoReturn":  # noqa: F821
        """The error a constant-folded call raised (``1 / 0``, ``int("x")``), raised in the trace."""
        args = list(error.args)
        if not all(isinstance(a, (str, int, float, bool, type(None))) for a in args):
            args = [str(error)]
        raise_observed_exception(type(error), self, args)

    def exc_info(self) -> TupleVariable:
        """``sys.exc_info()``: (type, value, None) of the exception being handled, or three Nones."""
        stack = self.exn_vt_stack
        if not len(stack):
            return TupleVariable([ConstantVariable(None)] * 3)
        value = stack.stack[-1]
        return TupleVariable([self.wrap_sourceless(value.exc_type), value, ConstantVariable(None)])

    def exception_handler(self, raised: ObservedException) -> None:
        """Jump to the handler of the current instruction, or pass the exception to the caller."""
        value = raised.value
        entry = find_exception_handler(_table(self.code), self.current_inst.offset)
        if entry is not None:  # Note [Exceptions are traced through the exception table]
            while len(self.stack) > entry.depth:
                self.stack.pop()
            if entry.lasti:
                self.push(ConstantVariable(self.current_inst.offset))
            self.push(value)
            self.ip = self.indexof[entry.target]
            return
        self.stack.clear()
        if getattr(self, "parent", None) is not None:
            raise raised  # the caller's CALL raises it, where its own handlers are looked up
        u = Unsupported(_NO_HANDLER, gb_id=gb.OBSERVED_EXCEPTION, context=f"raised exception {value.debug_repr()}")
        explanation = explain_unsupported(self, u)
        if self.output.fullgraph:
            raise u from None
        raise EagerFallback(explanation) from None  # torch: the frame is skipped, eager raises for real

    def raise_exception_variable(self, value: VariableTracker, set_context: bool) -> None:
        """``raise value``: a class is called first; anything not an exception is a TypeError (torch's
        ``_raise_exception_variable``)."""
        if not isinstance(value, ExceptionVariable) and value.is_python_constant() and is_exception_class(
                value.as_python_constant()):
            value = value.call_function(self, [], {})
        if self.code.co_flags & 0x20:  # 3.11: PEP 479 here (3.12+ compiles a handler doing it)
            value = self.stop_iteration_error(value)
        if not isinstance(value, ExceptionVariable):
            raise_observed_exception(TypeError, self, ["exceptions must derive from BaseException"])
        self.exn_vt_stack.set_current_exception(value, set_context=set_context)
        raise ObservedException(value, f"raised exception {value.debug_repr()}")

    @staticmethod
    def stop_iteration_error(value: VariableTracker) -> VariableTracker:
        """PEP 479: a StopIteration leaving a generator's body becomes a RuntimeError (3.12's
        CALL_INTRINSIC_1 INTRINSIC_STOPITERATION_ERROR)."""
        if isinstance(value, ExceptionVariable) and issubclass(value.exc_type, StopIteration):
            made = ExceptionVariable(RuntimeError, [ConstantVariable("generator raised StopIteration")])
            made.cause, made.context = value, value
            return made
        return value

    def RAISE_VARARGS(self, inst) -> None:
        if inst.arg == 0:  # bare `raise`: the exception being handled
            if not len(self.exn_vt_stack):
                raise_observed_exception(RuntimeError, self, ["No active exception to reraise"])
            self.raise_exception_variable(self.exn_vt_stack.stack[-1], set_context=False)
        elif inst.arg == 1:
            self.raise_exception_variable(self.pop(), set_context=True)
        else:  # raise value from cause
            cause, value = self.pop(), self.pop()
            if not isinstance(value, ExceptionVariable) and value.is_python_constant() and is_exception_class(
                    value.as_python_constant()):
                value = value.call_function(self, [], {})
            if cause.is_python_constant() and is_exception_class(cause.as_python_constant()):
                cause = cause.call_function(self, [], {})
            if isinstance(value, ExceptionVariable):
                value.store_attr(self, "__cause__", cause)  # sets __suppress_context__ too, as CPython
            self.raise_exception_variable(value, set_context=True)

    def RERAISE(self, inst) -> None:
        # 3.11+: the exception is on top; a nonzero oparg means lasti sits below it (the
        # handler this raise reaches pops the stack to its depth anyway)
        self.raise_exception_variable(self.pop(), set_context=False)

    def PUSH_EXC_INFO(self, inst) -> None:
        value = self.pop()
        stack = self.exn_vt_stack
        self.push(stack.stack[-1] if len(stack) else ConstantVariable(None))
        self.push(value)
        stack.move_current_exception_to_stack()

    def POP_EXCEPT(self, inst) -> None:
        self.pop()  # the exception handled before this one (restored as sys.exc_info())
        self.exn_vt_stack.stack.pop()

    def CHECK_EXC_MATCH(self, inst) -> None:
        expected = self.pop()
        value = self.peek()
        if not isinstance(value, ExceptionVariable):
            unimplemented(f"except expects an exception object, not {value}", gb_id="GB0028", context=str(value))
        classes = expected.items if isinstance(expected, TupleVariable) else [expected]
        matched = False
        for cls in classes:
            if not (cls.is_python_constant() and is_exception_class(cls.as_python_constant())):
                unimplemented(f"`except ...` expects an exception class, not {cls}", gb_id="GB0051", context=str(cls))
            matched = matched or issubclass(value.exc_type, cls.as_python_constant())
        self.push(ConstantVariable(matched))

    def WITH_EXCEPT_START(self, inst) -> None:
        # 3.11-3.13: [..., __exit__, lasti, previous exception, exception]: push __exit__(type, value, tb)
        exit_fn, value = self.stack[-4], self.stack[-1]
        args = [self.wrap_sourceless(value.exc_type), value, ConstantVariable(None)]
        self.push(exit_fn.call_function(self, args, {}))

    def LOAD_ASSERTION_ERROR(self, inst) -> None:
        self.push(self.wrap_sourceless(AssertionError))

"""An inlined call: a callee's bytecode traced on its caller's graph (generators too).

Place in the pipeline: ``CallOpcodes.inline_user_function_return`` (``opcodes_calls.py``)
makes one per call of a Python function while tracing; it shares the caller's
``OutputGraph`` and hands its return value back to the caller's stack. Mirrors
``torch/_dynamo/symbolic_convert.py`` (``InliningInstructionTranslator`` and
``InliningGeneratorInstructionTranslator``).
"""

from __future__ import annotations

from typing import Optional

from minidynamo.bytecode import PYTHON_VERSION

from .exc import unimplemented
from . import graph_break_registry as gb
from .translator_base import InstructionTranslatorBase
from .variables.base import VariableTracker
from .variables.constant import ConstantVariable
from .variables.iter import ListIteratorVariable


class InliningInstructionTranslator(InstructionTranslatorBase):
    """A callee traced on its caller's graph; returns its value to the caller's stack.

    Note [Generators are inlined lazily]
        Calling a generator function (a genexpr like ``any(f(x) for f in fs)``) runs
        nothing: the caller gets a ``LazyGeneratorVariable`` holding this translator,
        suspended. Each ``next`` (``FOR_ITER``, ``next()``, ``any``/``all``) steps it to
        its next ``YIELD_VALUE`` and takes the value, so a generator consumed partly
        runs only as far as eager would, with only those side effects, and ``any`` /
        ``all`` stop at the first item that decides. Real Dynamo:
        ``LocalGeneratorObjectVariable``.
    """

    return_value: VariableTracker
    is_generator: bool = False
    _yielded: Optional[VariableTracker] = None

    def next_yield(self) -> Optional[VariableTracker]:
        """Run the generator body up to its next yield: the value, or None once it returned."""
        while not self.done:
            self.step()
            if self._yielded is not None:
                value, self._yielded = self._yielded, None
                return value
        return None

    def RETURN_GENERATOR(self, inst) -> None:
        if not self.is_generator:
            unimplemented("generator outside an inlined call", gb_id=gb.GENERATOR)
        self.push(ConstantVariable(None))  # what the first next() sends in (popped by POP_TOP)

    def GET_YIELD_FROM_ITER(self, inst) -> None:
        if not isinstance(self.peek(), ListIteratorVariable):
            self.push(ListIteratorVariable(self.pop().unpack_var_sequence(self)))

    def SEND(self, inst) -> None:
        """``yield from`` / ``await``: the next value of the inner iterator, or its return value and a jump."""
        sent, it = self.peek(1), self.peek(2)
        if not isinstance(it, ListIteratorVariable) or not (sent.is_python_constant() and sent.as_python_constant() is None):
            unimplemented("send() into a generator", gb_id="GB0253", context=f"send() of {sent} into {it}")
        value = it.next_variable(self)
        self.pop()  # the value sent in (None: only next(), never send())
        if value is not None:
            self.push(value)
            return
        result = getattr(getattr(it, "tracer", None), "return_value", None)
        if result is None:
            result = ConstantVariable(None)
        if PYTHON_VERSION < (3, 12):
            self.pop()  # 3.11 pops the iterator too; 3.12+ leaves it for END_SEND
        self.push(result)
        self.jump(inst)

    def END_SEND(self, inst) -> None:
        value = self.pop()
        self.pop()
        self.push(value)

    def YIELD_VALUE(self, inst) -> None:
        if not self.is_generator:
            unimplemented("yield outside an inlined generator", gb_id=gb.GENERATOR)
        self._yielded = self.pop()
        self.push(ConstantVariable(None))  # the value next() sends back in


InliningInstructionTranslator.inlining_translator_class = InliningInstructionTranslator  # a callee's callees too

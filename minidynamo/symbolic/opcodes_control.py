"""Iteration and jumps: FOR_ITER, the unconditional and the conditional jumps.

Place in the pipeline: a mixin of ``InstructionTranslatorBase`` (``translator_base.py``),
which provides push/pop/peek/jump. A conditional jump on a value whose truth is not
known while tracing (a tensor) is one of the two places a graph can break (Note [Where
a graph can break] in ``symbolic_convert.py``): ``break_graph_at_jump`` re-raises in an
inlined frame and is overridden by the root frame (``instruction_translator.py``).
Mirrors ``torch/_dynamo/symbolic_convert.py`` (``generic_jump``, ``FOR_ITER``,
``JUMP_*``/``POP_JUMP_*``).
"""

from __future__ import annotations

from minidynamo.bytecode import FOR_ITER_EXIT_SKIP

from .exc import Unsupported, explain_unsupported, unimplemented
from . import graph_break_registry as gb
from .variables.base import VariableTracker
from .variables.constant import ConstantVariable
from .variables.iter import ListIteratorVariable


class ControlFlowOpcodes:
    """Mixed into InstructionTranslatorBase (which provides push/pop/peek/jump)."""

    ## Iteration
    def GET_ITER(self, inst) -> None:
        seq = self.pop()
        if isinstance(seq, ListIteratorVariable):
            self.push(seq)
        else:
            self.push(ListIteratorVariable(seq.unpack_var_sequence(self)))

    def FOR_ITER(self, inst) -> None:
        it = self.peek()
        if not isinstance(it, ListIteratorVariable):
            unimplemented("a for loop over this value", gb_id=gb.UNSUPPORTED_METHOD, context=f"for loop over {it}")
        value = it.next_variable(self)
        if value is None:
            self.pop()
            self.jump(inst)
            self.ip += FOR_ITER_EXIT_SKIP  # 3.12+: step over END_FOR (3.13: END_FOR, POP_TOP)
        else:
            self.push(value)

    ## Jumps
    def JUMP_FORWARD(self, inst) -> None:
        self.jump(inst)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_ABSOLUTE = JUMP_FORWARD

    def generic_jump(self, inst, value: VariableTracker, jump_if: bool, pop: bool) -> None:
        """Conditional jumps: decide now if the condition is known (Note [Where a graph can break])."""
        if self.rewrite_tensor_assert(inst, value, jump_if, pop):
            return
        try:
            truth = value.truth(self)
        except Unsupported as e:
            explain_unsupported(self, e)
            self.break_graph_at_jump(inst, value, jump_if, pop, e)
            return
        if truth == jump_if:
            if not pop:
                self.push(value)
            self.jump(inst)

    # Note [assert on a tensor is torch._assert_async]
    #     ``assert (y > 0).all()`` compiles to POP_JUMP_IF_TRUE over LOAD_ASSERTION_ERROR
    #     [LOAD_CONST msg, CALL] RAISE_VARARGS. torch (symbolic_convert.py ``generic_jump``,
    #     ``_detect_and_normalize_assert_statement``, config ``rewrite_assert_with_torch_assert``)
    #     puts ``torch._assert_async(value, msg)`` in the graph and jumps past the raise: no
    #     graph break, and the check runs with the graph. Ours does the same for a tensor.
    def rewrite_tensor_assert(self, inst, value, jump_if: bool, pop: bool) -> bool:
        import sys

        import torch

        from minidynamo import config
        from .variables.tensor import TensorVariable

        if not (config.rewrite_assert_with_torch_assert and sys.flags.optimize == 0 and jump_if and pop
                and isinstance(value, TensorVariable)):
            return False
        rest = self.instructions[self.ip:self.ip + 6]
        if not rest or rest[0].opname != "LOAD_ASSERTION_ERROR":
            return False
        end = next((k for k, i in enumerate(rest) if i.opname == "RAISE_VARARGS"), None)
        between = rest[1:end] if end is not None else None
        if between is None or any(i.opname not in ("LOAD_CONST", "PRECALL", "CALL") for i in between):
            return False
        consts = [i.argval for i in between if i.opname == "LOAD_CONST"]
        msg = consts[0] if consts else "assertion error"
        from minidynamo._torch_private import assert_async

        self.output.create_proxy("call_function", assert_async(), (value.as_proxy(), msg), {})
        self.jump(inst)
        return True

    def break_graph_at_jump(self, inst, value, jump_if, pop, e: Unsupported) -> None:
        raise e  # an inlined frame cannot break here; the caller's CALL will

    def POP_JUMP_IF_FALSE(self, inst) -> None:
        self.generic_jump(inst, self.pop(), False, True)

    def POP_JUMP_IF_TRUE(self, inst) -> None:
        self.generic_jump(inst, self.pop(), True, True)

    POP_JUMP_FORWARD_IF_FALSE = POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_IF_FALSE
    POP_JUMP_FORWARD_IF_TRUE = POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_IF_TRUE

    def JUMP_IF_FALSE_OR_POP(self, inst) -> None:
        self.generic_jump(inst, self.pop(), False, False)

    def JUMP_IF_TRUE_OR_POP(self, inst) -> None:
        self.generic_jump(inst, self.pop(), True, False)

    def _is_none(self, value) -> bool:
        if isinstance(value, ConstantVariable):
            return value.value is None
        return False  # tensors, containers, functions, modules are never None

    def POP_JUMP_IF_NONE(self, inst) -> None:
        if self._is_none(self.pop()):
            self.jump(inst)

    def POP_JUMP_IF_NOT_NONE(self, inst) -> None:
        if not self._is_none(self.pop()):
            self.jump(inst)

    POP_JUMP_FORWARD_IF_NONE = POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_IF_NONE
    POP_JUMP_FORWARD_IF_NOT_NONE = POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_IF_NOT_NONE

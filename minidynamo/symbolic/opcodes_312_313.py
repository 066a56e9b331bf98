"""Opcodes new in Python 3.12 and 3.13 (superinstructions, intrinsics, CALL_KW, ...).

Place in the pipeline: a mixin of ``InstructionTranslatorBase`` (``translator_base.py``);
each handler says which version added it (Note [What changes between 3.11, 3.12 and
3.13] in ``minidynamo/bytecode/instructions.py``). Mirrors the same handlers in
``torch/_dynamo/symbolic_convert.py`` (``LOAD_FAST_LOAD_FAST``, ``CALL_INTRINSIC_1``,
``LOAD_SUPER_ATTR``, ``CALL_KW``, ``SET_FUNCTION_ATTRIBUTE``, ``TO_BOOL``).
"""

from __future__ import annotations

import operator

from minidynamo.bytecode import PYTHON_VERSION

from .exc import unimplemented
from . import graph_break_registry as gb
from .variables.builtin import BuiltinVariable, call_operator
from .variables.functions import NestedUserFunctionVariable
from .variables.lists import TupleVariable
from .variables.misc import NullVariable


class Py312Py313Opcodes:
    """Mixed into InstructionTranslatorBase (LOAD_FAST_CHECK, a plain alias, lives there)."""


    def LOAD_FAST_AND_CLEAR(self, inst) -> None:  # 3.12: an inlined comprehension saves its variable
        if inst.argval in self.cells:  # the slot holds a cell (Note [A comprehension's variable may be a cell], ceval_names.py)
            return self.push(self.cells.pop(inst.argval))
        value = self.symbolic_locals.pop(inst.argval, None)
        self.push(NullVariable() if value is None else self.realize(value))

    def LOAD_FAST_LOAD_FAST(self, inst) -> None:  # 3.13 superinstructions: argval holds both names
        for name in inst.argval:
            self.LOAD_FAST(_named(inst, name))

    def STORE_FAST_STORE_FAST(self, inst) -> None:
        for name in inst.argval:
            self.STORE_FAST(_named(inst, name))

    def STORE_FAST_LOAD_FAST(self, inst) -> None:
        store, load = inst.argval
        self.STORE_FAST(_named(inst, store))
        self.LOAD_FAST(_named(inst, load))

    def END_FOR(self, inst) -> None:  # 3.12: pops two values, 3.13: one (FOR_ITER steps over it)
        for _ in range(2 if PYTHON_VERSION == (3, 12) else 1):
            self.stack.pop()

    def TO_BOOL(self, inst) -> None:
        # 3.13: comes before every conditional jump and `not`, which ask the value's truth themselves
        # (so a tensor breaks the graph at the jump, as on 3.11). Real Dynamo skips it the same way.
        pass

    def CALL_INTRINSIC_1(self, inst) -> None:  # 3.12
        if inst.argrepr == "INTRINSIC_UNARY_POSITIVE":
            self.push(call_operator(self, operator.pos, [self.pop()]))
        elif inst.argrepr == "INTRINSIC_LIST_TO_TUPLE":
            self.push(TupleVariable(self.pop().items))
        elif inst.argrepr == "INTRINSIC_STOPITERATION_ERROR":  # PEP 479: a generator's handler (opcodes_exceptions.py)
            self.push(self.stop_iteration_error(self.pop()))
        else:
            unimplemented(f"CALL_INTRINSIC_1 {inst.argrepr}", gb_id=gb.CALL_INTRINSIC_1)

    def LOAD_SUPER_ATTR(self, inst) -> None:
        # 3.12: super().name without the call; arg bit 1: a method load, bit 2: the two-argument form.
        global_super, cls, obj = self.popn(3)
        if not (isinstance(global_super, BuiltinVariable) and global_super.fn is super):
            unimplemented(f"super() is shadowed by {global_super}", gb_id=gb.SUPER)
        from .variables.user_class import SuperVariable

        value = SuperVariable(cls.as_python_constant(), obj).var_getattr(self, inst.argval)
        self.push_callable(value) if inst.arg & 1 else self.push(value)

    def CALL_KW(self, inst) -> None:  # 3.13: the keyword names are a stack operand, not KW_NAMES
        self.kw_names = self.pop().as_python_constant()
        self.CALL(inst)

    def SET_FUNCTION_ATTRIBUTE(self, inst) -> None:  # 3.13: MAKE_FUNCTION's flags, one at a time
        fn, value = self.pop(), self.pop()
        fields = {"defaults": fn.defaults, "kwdefaults": fn.kwdefaults, "closure": fn.closure}
        key = {0x08: "closure", 0x02: "kwdefaults", 0x01: "defaults"}.get(inst.arg)  # 0x04: annotations, dropped
        if key is not None:
            fields[key] = value.items
        self.push(NestedUserFunctionVariable(fn.code, fn.qualname, fn.f_globals, **fields))


def _named(inst, name: str):
    """One half of a 3.13 superinstruction, as the plain instruction it stands for."""
    import dataclasses

    return dataclasses.replace(inst, opname=inst.opname.rsplit("_", 2)[-2] + "_FAST", argval=name, argrepr=name)

"""The concrete interpreter's handlers for opcodes new in Python 3.12 and 3.13.

Place in the pipeline: part of ``VirtualMachine`` (``minidynamo/interpreter/ceval.py``), split out
so each file reads in one sitting, and kept apart so a reader sees what the newer
bytecode adds (Note [What changes between 3.11, 3.12 and 3.13] in ``bytecode.py``;
``symbolic/symbolic_convert.py`` has the same section). Mirrors these instructions in
CPython 3.12/3.13's ``Python/bytecodes.c``.
"""

from __future__ import annotations

import operator
import types
from typing import Any, Callable

from minidynamo.bytecode import PYTHON_VERSION, Instruction, callable_slots
from minidynamo.interpreter.ceval_calls import _set_annotations
from minidynamo.interpreter.frameobject import NULL
from minidynamo.interpreter.genobject import _stopiteration_error

# CALL_INTRINSIC_1 by the name ``dis`` shows (3.12+); the others (typing, import *, print) are outside the subset.
INTRINSICS_1: dict[str, Callable[[Any], Any]] = {
    "INTRINSIC_UNARY_POSITIVE": operator.pos,
    "INTRINSIC_LIST_TO_TUPLE": tuple,
    "INTRINSIC_STOPITERATION_ERROR": _stopiteration_error,
}



class NewOpcodes:
    """Handlers for ``VirtualMachine``: "New in 3.12 and 3.13"."""

    ## New in 3.12 and 3.13 (Note [What changes between 3.11, 3.12 and 3.13] in bytecode.py)

    def byte_LOAD_FAST_CHECK(self, inst: Instruction) -> None:  # 3.12: LOAD_FAST that may be unbound
        self.push(self.load_fast(inst.argval))

    def byte_LOAD_FAST_AND_CLEAR(self, inst: Instruction) -> None:  # 3.12: an inlined comprehension saves x
        # Note [A comprehension's variable may be a cell]: the slot holds a cell when the outer
        # function's closures capture the name; the comprehension saves that cell, not its contents.
        name = inst.argval
        self.push(self.frame.cells.pop(name) if name in self.frame.cells else self.frame.locals.pop(name, NULL))

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

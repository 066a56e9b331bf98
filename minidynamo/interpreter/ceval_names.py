"""The concrete interpreter's name opcodes: the stack itself, constants, locals, globals, cells, imports, attributes.

Place in the pipeline: part of ``VirtualMachine`` (``minidynamo/interpreter/ceval.py``), split out
so each file reads in one sitting; every handler reads or writes the ``Frame``
(``frameobject.py``). Mirrors these instructions in CPython's ``Python/bytecodes.c``
(``Python/ceval.c`` in 3.11) and the same handlers of ``torch/_dynamo/symbolic_convert.py``
(``LOAD_FAST``, ``LOAD_GLOBAL``, ``LOAD_DEREF``, ``LOAD_ATTR``...).
"""

from __future__ import annotations

import types
from typing import Any

from minidynamo.bytecode import LOAD_ATTR_METHOD_BIT, Instruction, callable_slots
from minidynamo.interpreter.frameobject import NULL


class NameOpcodes:
    """Handlers for ``VirtualMachine``: the stack, names and attributes (byterun's sections of the same names)."""

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

    # Note [A comprehension's variable may be a cell]
    #     CPython keeps a local and a cell variable in one slot (``localsplus``): the slot of
    #     a cell variable holds the cell. A 3.12+ inlined comprehension (PEP 709) saves the
    #     slot of its loop variable with LOAD_FAST_AND_CLEAR, makes a fresh cell with
    #     MAKE_CELL if its own lambdas close over it, and restores the slot with STORE_FAST
    #     afterwards; a comprehension whose variable is a cell of the outer function but not
    #     of its own stores plain values into that slot. Ours keeps cells and plain values in
    #     two dicts, so a name is in at most one: LOAD_FAST_AND_CLEAR takes it from either,
    #     and STORE_FAST of a cell variable's saved cell puts it back among the cells
    #     (``[lambda i=i: i for i in range(3)]`` after ``[lambda: i for i in range(3)]``).
    def store_fast(self, name: str, value: Any) -> None:
        cells = self.frame.cells
        if name in cells:  # the slot held a cell: a plain value (or NULL) replaces it
            del cells[name]
        if value is NULL:  # 3.12: restoring a comprehension's variable that was unbound (LOAD_FAST_AND_CLEAR)
            self.frame.locals.pop(name, None)
        elif type(value) is types.CellType and name in self.frame.code.co_cellvars:  # the saved slot restored
            self.frame.locals.pop(name, None)
            cells[name] = value
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

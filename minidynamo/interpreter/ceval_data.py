"""The concrete interpreter's data opcodes: operators, subscripts, containers, unpacking, strings.

Place in the pipeline: part of ``VirtualMachine`` (``minidynamo/interpreter/ceval.py``), split out
so each file reads in one sitting. Every handler pops real values, applies Python's own
operation to them (the ``operator`` tables below, by the symbol ``dis`` shows) and pushes
the result, with CPython's error messages where the operation is the VM's own (unpacking,
``**`` of a non-mapping). Mirrors these instructions in ``Python/bytecodes.c``
(``Python/ceval.c`` in 3.11; ``_func_desc`` is ``_PyObject_FunctionStr`` of
``Objects/call.c``), and ``symbolic/opcodes_data.py`` is their symbolic twin, as in
``torch/_dynamo/symbolic_convert.py``.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Optional

from minidynamo.bytecode import COMPARE_BOOL_BIT, NULL_AFTER_CALLABLE, Instruction

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


class DataOpcodes:
    """Handlers for ``VirtualMachine``: operators, subscripts and slices, containers, unpacking, strings."""

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

    ## Strings

    def byte_FORMAT_VALUE(self, inst: Instruction) -> None:
        spec = self.pop() if inst.arg & 0x04 else ""
        value = self.pop()
        convert = {0: None, 1: str, 2: repr, 3: ascii}[inst.arg & 0x03]
        if convert is not None:
            value = convert(value)
        self.push(format(value, spec))


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

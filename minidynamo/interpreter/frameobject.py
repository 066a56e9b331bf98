"""The interpreter's frame: one activation of a code object, and the values its loop passes around.

Place in the pipeline: stage two, the data of ``minidynamo.interpreter``'s frame loop. A
``Frame`` holds what CPython's ``_PyInterpreterFrame`` holds
(``Include/internal/pycore_frame.h``; the Python-visible object is
``Objects/frameobject.c``): the code, its decoded instructions, globals, builtins, fast
locals, cells, the value stack and the instruction pointer. ``NULL`` is the stack's empty
slot (Note [NULL on the stack] in ``interpreter.py``); ``_Return`` and ``_Yield`` are how a
handler leaves the loop. The symbolic interpreter keeps the same fields on
``InstructionTranslatorBase`` (``torch/_dynamo/symbolic_convert.py``). Mirrors CPython's
``_PyInterpreterFrame`` (``Include/internal/pycore_frame.h``).
"""

from __future__ import annotations

import functools
import types
from typing import Any, Optional

from minidynamo.bytecode import ExceptionTableEntry, Instruction, exception_table, get_instructions, offset_to_index


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

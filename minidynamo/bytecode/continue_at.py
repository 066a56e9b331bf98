"""A code object that continues a function at an offset: the rest of a frame, run by CPython.

Place in the pipeline: stage one's tools, used after a graph break (``symbolic/resume_execution.py``).
Mirrors the part of ``torch/_dynamo/resume_execution.py`` (``ContinueExecutionCache.generate``)
and ``torch/_dynamo/bytecode_transformation.py`` (``encode_exception_table_varint``,
``create_jump_absolute``) that writes new bytecode: a prologue that sets the frame up, then a
jump into a copy of the original instructions.

Note [The rest of a frame as real bytecode]
    When a trace stops at a checkpoint (an instruction with an empty stack, outside any try
    block) and the rest of the frame runs eagerly, torch's ``step_graph_break`` ends the
    transformed code with a jump into the original instructions: CPython runs the rest, and
    every frame it calls passes the frame hook. Ours does the same: :func:`continue_at` copies
    the code object with

    - every local a positional parameter (``co_argcount = co_nlocals``, no ``*args`` or
      ``**kwargs`` flags): the caller passes the live locals' values and ``None`` for the others;
    - the frame's cells as free variables (``co_freevars = co_cellvars + co_freevars``,
      ``co_cellvars = ()``), so the rest reads and writes the very cells the frame's nested
      functions hold, as torch's resume function does (Note [A resume function receives the
      frame's cells], symbolic/resume_execution.py). CPython lays a frame out as its locals,
      then its cell variables, then its free variables, so each cell keeps its slot and every
      ``LOAD_DEREF`` its argument. A parameter that is also a cell variable has its cell in a
      local's slot, which a closure cannot fill: such a frame still runs on our concrete
      interpreter;
    - a prologue: ``COPY_FREE_VARS`` (where there are cells) and the original's ``RESUME``,
      ``DELETE_FAST`` of each local that is not live (so reading it raises ``UnboundLocalError``
      as it would have), and ``JUMP_FORWARD`` to the checkpoint in the copy of the original
      instructions that follows;
    - the exception table shifted by the prologue's length, and the line table given a
      "no location" entry for the prologue, so tracebacks name the user's lines;
    - ``co_qualname`` ending in :data:`MARK`: the frame hook lets such a frame run unasked.

    The instructions are copied byte for byte (jumps are relative from 3.11 on, so they need
    no change), and the stack is empty at a checkpoint, so nothing else is set up.
"""

from __future__ import annotations

import dis
import sys
import types
from typing import Optional

from minidynamo.bytecode.instructions import exception_table

MARK = ".<rest of the frame>"
_NOT_PLAIN = 0x20 | 0x80 | 0x100 | 0x200  # generator, coroutine, iterable coroutine, async generator
_VARARGS, _VARKEYWORDS = 0x04, 0x08
_OP = dis.opmap


def _varint(value: int, first: bool) -> bytes:
    """CPython's exception-table varint (Objects/exception_handling_notes.txt): 6-bit groups,
    most significant first, 64 on every group but the last, 128 on the first byte of an entry."""
    groups = [value & 63]
    value >>= 6
    while value:
        groups.append(value & 63)
        value >>= 6
    groups.reverse()
    out = bytearray(g | 64 for g in groups[:-1]) + bytes([groups[-1]])
    if first:
        out[0] |= 128
    return bytes(out)


def _shifted_exception_table(code: types.CodeType, units: int) -> bytes:
    out = bytearray()
    for e in exception_table(code):
        out += _varint(e.start // 2 + units, True) + _varint((e.end - e.start) // 2, False)
        out += _varint(e.target // 2 + units, False) + _varint(e.depth << 1 | int(e.lasti), False)
    return bytes(out)


def _no_location(units: int) -> bytes:
    """Line-table entries (PEP 626's format from 3.11) saying "no location" for ``units`` code units."""
    out = bytearray()
    while units:
        n = min(units, 8)
        out.append(0x80 | (15 << 3) | (n - 1))
        units -= n
    return bytes(out)


def _with_extended_arg(op: int, arg: int) -> bytes:
    out = bytearray()
    for shift in (24, 16, 8):
        if arg >> shift:
            out += bytes([_OP["EXTENDED_ARG"], (arg >> shift) & 0xFF])
    return bytes(out) + bytes([op, arg & 0xFF])


def _header(code: types.CodeType) -> Optional[bytes]:
    """``COPY_FREE_VARS`` of every cell, then the original's first ``RESUME``, if only setup ops come before it."""
    raw = code.co_code
    for i in range(0, len(raw), 2):
        name = dis.opname[raw[i]]
        if name == "RESUME":
            cells = len(code.co_cellvars) + len(code.co_freevars)
            return (_with_extended_arg(_OP["COPY_FREE_VARS"], cells) if cells else b"") + raw[i : i + 2]
        if name not in ("COPY_FREE_VARS", "MAKE_CELL", "NOP"):
            return None
    return None


def continue_at(code: types.CodeType, offset: int, live: frozenset) -> Optional[types.CodeType]:
    """Note [The rest of a frame as real bytecode]: ``code`` from ``offset`` on, every local a
    parameter, the locals not in ``live`` unbound; None where this cannot be done."""
    if not (3, 11) <= sys.version_info[:2] <= (3, 13) or code.co_flags & _NOT_PLAIN \
            or set(code.co_cellvars) & set(code.co_varnames):  # a parameter that is a cell: its slot is a local's
        return None
    header = _header(code)
    raw = code.co_code
    if header is None or not 0 <= offset < len(raw) or offset % 2:
        return None
    while offset >= 2 and raw[offset - 2] == _OP["EXTENDED_ARG"]:  # jump to the prefix, not past it
        offset -= 2
    prologue = bytearray(header)
    for i, name in enumerate(code.co_varnames):
        if name not in live:
            prologue += _with_extended_arg(_OP["DELETE_FAST"], i)
    prologue += _with_extended_arg(_OP["JUMP_FORWARD"], offset // 2)
    units = len(prologue) // 2
    flags = code.co_flags & ~(_VARARGS | _VARKEYWORDS)
    return code.replace(co_code=bytes(prologue) + raw, co_argcount=code.co_nlocals, co_posonlyargcount=0,
                        co_kwonlyargcount=0, co_flags=flags,
                        co_cellvars=(), co_freevars=code.co_cellvars + code.co_freevars,
                        co_exceptiontable=_shifted_exception_table(code, units),
                        co_linetable=_no_location(units) + code.co_linetable,
                        co_qualname=code.co_qualname + MARK)


def rest_function(rest: types.CodeType, f_globals: dict, values: dict, cells: Optional[dict] = None) -> tuple:
    """``(function, args)`` for a code object made by :func:`continue_at`: ``function(*args)`` runs
    it with the locals in ``values`` and the frame's ``cells`` (by name; a cell not among them is made
    holding the value in ``values``)."""
    cells = cells or {}
    closure = tuple(cells[n] if n in cells else types.CellType(values[n]) if n in values else types.CellType()
                    for n in rest.co_freevars)
    fn = types.FunctionType(rest, f_globals, rest.co_name, None, closure or None)
    return fn, tuple(values.get(n) for n in rest.co_varnames)

"""Decoding the running CPython's bytecode into instructions we can interpret.

Place in the pipeline: the first stage. ``python function -> bytecode`` here, then
the concrete interpreter (``minidynamo.interpreter``) and the symbolic one
(``minidynamo.symbolic``) both loop over the ``Instruction`` list this module makes.

It mirrors ``torch/_dynamo/bytecode_transformation.py`` (``Instruction``,
``cleaned_instructions``, ``parse_exception_table``). The real module also
*rewrites* bytecode (it assembles new code objects for resume functions after a
graph break); ours only reads.

Note [One explicit opcode table per Python version]
    byterun died when CPython's bytecode changed under it: a new opcode hit a
    missing ``byte_X`` method deep inside a run. We keep one written-out table
    per Python version (opname -> family), and ``get_instructions`` checks every
    instruction against the table of the running Python *before* anything runs.
    An opname we have never seen fails at once with its name, offset, source
    line and the Python version. The tables are not generated from ``dis.opmap``
    on purpose: a test compares the table with ``dis.opmap`` so a change in
    CPython shows up as a diff.
    Adding a Python version starts here (its table in ``opcode_tables.py``, and the
    facts of Note [What changes between 3.11, 3.12 and 3.13]) but does not end here: an
    opname that is new also needs a handler in both interpreters
    (``interpreter.py`` and ``symbolic/symbolic_convert.py``), and an old opname
    whose stack effect changed needs its handler to read the fact from here.

Note [What changes between 3.11, 3.12 and 3.13]
    The handlers of both interpreters are written once for all three versions;
    where CPython changed what an *existing* opname does, they read one of the
    facts below instead of testing the version themselves (new opnames simply
    get new handlers, grouped under "New in 3.12 and 3.13").
    - ``NULL_AFTER_CALLABLE`` (3.13): the two slots under a call's arguments
      were ``[NULL, callable]`` or ``[method, self]`` (3.11, 3.12) and are
      ``[callable, NULL]`` or ``[method, self]`` since 3.13. ``LOAD_GLOBAL``,
      ``LOAD_ATTR`` and ``LOAD_SUPER_ATTR`` with their low bit set, and
      ``PUSH_NULL``, lay them out; ``CALL``, ``CALL_KW`` and
      ``CALL_FUNCTION_EX`` read them. :func:`call_target` is the one reader.
    - ``LOAD_ATTR_METHOD_BIT`` (3.12): ``LOAD_METHOD`` is gone; ``LOAD_ATTR``
      with the low bit of its arg set pushes a method and its self (or NULL).
    - ``FOR_ITER_EXIT_SKIP``: an exhausted ``FOR_ITER`` pops the iterator and
      jumps to its target (3.11); since 3.12 the target is ``END_FOR`` (3.13:
      ``END_FOR, POP_TOP``) and CPython steps over those 1 (3.13: 2)
      instructions, so they only run when reached by other paths.
    - ``SEND_KEEPS_RECEIVER`` (3.12): when the sub-iterator of ``yield from``
      returns, ``SEND`` leaves it on the stack and jumps to ``END_SEND``, which
      drops it (3.11: ``SEND`` popped it itself).
    - ``COMPARE_BOOL_BIT`` (3.13): ``COMPARE_OP`` with bit 16 of its arg
      converts its result to ``bool`` (it feeds a jump, so no ``TO_BOOL``).
    - Line numbers: ``dis.Instruction.starts_line`` is the line (int or None)
      up to 3.12 and a bool since 3.13, where ``line_number`` holds the line;
      :func:`get_instructions` reads whichever the running ``dis`` has.
    - 3.13: ``LOAD_CLOSURE`` became a pseudo-instruction, so a closure's cells
      are pushed by ``LOAD_FAST`` of the cell variable (CPython keeps cells in
      fast-local slots); both interpreters' ``LOAD_FAST`` push the cell then.
    3.12 also inlines list/set/dict comprehensions into the function
    (``LOAD_FAST_AND_CLEAR`` saves the loop variable, a ``STORE_FAST`` of the
    saved value, possibly NULL, restores it); generator expressions stay
    separate code objects. The exception table keeps its 3.11 format.

Note [Exception table]
    Since Python 3.11 ``try`` blocks leave no SETUP_FINALLY/POP_BLOCK in the
    bytecode ("zero-cost exceptions"). Instead ``code.co_exceptiontable`` maps
    ranges of instruction offsets to a handler: when an exception is raised at an
    offset in [start, end), the interpreter pops the value stack down to
    ``depth``, pushes the offset of the raising instruction if ``lasti``, pushes
    the exception and jumps to ``target``. The table is a byte string of varints.
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

# the tables live in their own module; re-exported, so ``bytecode.OPCODE_TABLES`` etc. keep working
from minidynamo.bytecode.opcode_tables import OPCODE_TABLES, PYTHON_VERSION, family, opcode_table, table_diff

__all__ = [
    "Instruction",
    "ExceptionTableEntry",
    "UnknownOpcodeError",
    "OPCODE_TABLES",
    "PYTHON_VERSION",
    "opcode_table",
    "family",
    "get_instructions",
    "exception_table",
    "find_exception_handler",
    "offset_to_index",
    "code_of",
    "format_instructions",
    "show",
    "table_diff",
    "NULL_AFTER_CALLABLE",
    "LOAD_ATTR_METHOD_BIT",
    "FOR_ITER_EXIT_SKIP",
    "SEND_KEEPS_RECEIVER",
    "COMPARE_BOOL_BIT",
    "callable_slots",
    "call_target",
]


# Note [What changes between 3.11, 3.12 and 3.13]: the facts the handlers read.
NULL_AFTER_CALLABLE: bool = PYTHON_VERSION >= (3, 13)
LOAD_ATTR_METHOD_BIT: bool = PYTHON_VERSION >= (3, 12)
FOR_ITER_EXIT_SKIP: int = {(3, 11): 0, (3, 12): 1}.get(PYTHON_VERSION, 2)
SEND_KEEPS_RECEIVER: bool = PYTHON_VERSION >= (3, 12)
COMPARE_BOOL_BIT: int = 16 if PYTHON_VERSION >= (3, 13) else 0


def callable_slots(fn: Any, null: Any) -> tuple[Any, Any]:
    """The two stack slots, bottom first, that a call of plain ``fn`` expects below its arguments."""
    return (fn, null) if NULL_AFTER_CALLABLE else (null, fn)


def call_target(first: Any, second: Any, args: list, is_null: Callable[[Any], bool]) -> tuple[Any, list]:
    """``(callable, args)`` from the two slots under a call's arguments (bottom ``first``).

    3.11/3.12: ``[NULL, fn]`` or ``[method, self]``; 3.13: ``[fn, NULL]`` or ``[method, self]``.
    """
    if NULL_AFTER_CALLABLE:
        return (first, list(args)) if is_null(second) else (first, [second, *args])
    return (second, list(args)) if is_null(first) else (first, [second, *args])


@dataclass(frozen=True)
class Instruction:
    """One bytecode instruction, as ``dis`` decodes it, plus its source line.

    ``lineno`` is the source line of this instruction (``dis`` only marks the
    first instruction of each line, ``starts_line``; we carry it forward).
    For a jump, ``argval`` is the target offset.
    Real Dynamo: ``torch._dynamo.bytecode_transformation.Instruction`` (mutable,
    because Dynamo edits instructions; ours is frozen because we only read).
    """

    opname: str
    opcode: int
    arg: Optional[int]
    argval: Any
    argrepr: str
    offset: int
    lineno: Optional[int]
    is_jump_target: bool
    positions: Any = None  # dis.Positions(lineno, end_lineno, col_offset, end_col_offset)

    @property
    def family(self) -> str:
        return family(self.opname)

    @property
    def argtext(self) -> str:
        """``argrepr`` for listings: no addresses (code objects by name), jumps as ``to N``."""
        if isinstance(self.argval, types.CodeType):
            return f"<code object {self.argval.co_name}>"
        if self.family == "jumps" and not self.argrepr:
            return f"to {self.argval}"
        return self.argrepr or ("" if self.arg is None else str(self.arg))

    def __repr__(self) -> str:
        arg = f" {self.argrepr}" if self.argrepr else ("" if self.arg is None else f" {self.arg}")
        return f"<{self.offset}: {self.opname}{arg} (line {self.lineno})>"


@dataclass(frozen=True)
class ExceptionTableEntry:
    """Raise at an offset in [start, end) -> pop stack to ``depth``, push lasti?, jump to ``target``."""

    start: int
    end: int
    target: int
    depth: int
    lasti: bool


class UnknownOpcodeError(NotImplementedError):
    """An opcode that is not in minidynamo's table for the running Python."""


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------


def code_of(fn_or_code: Any) -> types.CodeType:
    """The code object of a function, method, or code object."""
    if isinstance(fn_or_code, types.CodeType):
        return fn_or_code
    fn = getattr(fn_or_code, "__func__", fn_or_code)  # bound methods
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        raise TypeError(f"expected a Python function or code object, got {type(fn_or_code).__name__}")
    return code


def _unknown(opname: str, offset: int, lineno: Optional[int], version: tuple[int, int]) -> UnknownOpcodeError:
    return UnknownOpcodeError(
        f"opcode {opname} at offset {offset} (line {lineno}) is not in minidynamo's opcode table "
        f"for Python {version[0]}.{version[1]}"
    )


def get_instructions(
    fn_or_code: Any,
    *,
    table: Optional[dict[str, str]] = None,
    version: tuple[int, int] = PYTHON_VERSION,
) -> list[Instruction]:
    """Decode ``fn_or_code`` with ``dis`` and check every opname against our table.

    Raises ``UnknownOpcodeError`` on the first opname the table does not know.
    ``table`` overrides the table of ``version`` (tests fake a smaller one).
    Real Dynamo: ``bytecode_transformation.cleaned_instructions`` (which also
    strips EXTENDED_ARG/CACHE and rewrites some instructions; we keep them as is).
    """
    code = code_of(fn_or_code)
    table = opcode_table(version) if table is None else table
    out: list[Instruction] = []
    lineno: Optional[int] = code.co_firstlineno
    for raw in dis.get_instructions(code):
        line = getattr(raw, "line_number", raw.starts_line)  # 3.13: starts_line is a bool (Note [What changes ...])
        if line is not None:
            lineno = line
        if raw.opname not in table:
            raise _unknown(raw.opname, raw.offset, lineno, version)
        out.append(
            Instruction(
                opname=raw.opname,
                opcode=raw.opcode,
                arg=raw.arg,
                argval=raw.argval,
                argrepr=raw.argrepr,
                offset=raw.offset,
                lineno=lineno,
                is_jump_target=raw.is_jump_target,
                positions=raw.positions,
            )
        )
    return out


def offset_to_index(instructions: list[Instruction]) -> dict[int, int]:
    """Map byte offsets (jump targets, exception handlers) to list indices."""
    return {inst.offset: i for i, inst in enumerate(instructions)}


# ---------------------------------------------------------------------------
# The exception table (Note [Exception table])
# ---------------------------------------------------------------------------


def _parse_varint(it: Iterator[int]) -> int:
    # Each byte holds 6 bits of value; bit 6 (0x40) says "more bytes follow";
    # bit 7 (0x80) marks the first byte of an entry (we do not need it).
    b = next(it)
    val = b & 63
    while b & 64:
        val <<= 6
        b = next(it)
        val |= b & 63
    return val


def exception_table(fn_or_code: Any) -> list[ExceptionTableEntry]:
    """Parse ``code.co_exceptiontable`` into entries (offsets in bytes, ``end`` exclusive).

    Each entry is four varints: start and length (in 2-byte code units), the
    handler target (code units), and depth_lasti = depth << 1 | lasti.
    Real Dynamo: ``bytecode_transformation.parse_exception_table``.
    """
    code = code_of(fn_or_code)
    it = iter(code.co_exceptiontable)
    entries: list[ExceptionTableEntry] = []
    while True:
        try:
            start = _parse_varint(it) * 2
        except StopIteration:
            return entries
        length = _parse_varint(it) * 2
        target = _parse_varint(it) * 2
        depth_lasti = _parse_varint(it)
        entries.append(ExceptionTableEntry(start, start + length, target, depth_lasti >> 1, bool(depth_lasti & 1)))


def find_exception_handler(entries: list[ExceptionTableEntry], offset: int) -> Optional[ExceptionTableEntry]:
    """The entry that covers ``offset``, or None (the exception leaves the frame)."""
    for entry in entries:
        if entry.start <= offset < entry.end:
            return entry
    return None


# ---------------------------------------------------------------------------
# Pretty listing
# ---------------------------------------------------------------------------


def format_instructions(fn_or_code: Any, *, exceptions: bool = True) -> str:
    """A listing like ``dis.dis``: line, offset, opname, argrepr; ``>>`` marks jump targets."""
    code = code_of(fn_or_code)
    lines = []
    last_line = None
    for inst in get_instructions(code):
        if inst.opname == "CACHE":
            continue
        line = f"{inst.lineno:>4}" if inst.lineno != last_line else "    "
        last_line = inst.lineno
        mark = ">>" if inst.is_jump_target else "  "
        lines.append(f"{line} {mark} {inst.offset:>4} {inst.opname:<28} {inst.argtext}".rstrip())
    entries = exception_table(code) if exceptions else []
    if entries:
        lines.append("ExceptionTable:")
        for e in entries:
            lasti = " lasti" if e.lasti else ""
            lines.append(f"  {e.start} to {e.end} -> {e.target} [{e.depth}]{lasti}")
    return "\n".join(lines)


def show(fn_or_code: Any, *, exceptions: bool = True, file: Optional[Callable[[str], None]] = None) -> None:
    """Print :func:`format_instructions` (the chapter's ``dis`` beside ours)."""
    (file or print)(format_instructions(fn_or_code, exceptions=exceptions))

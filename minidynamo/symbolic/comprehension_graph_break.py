"""A graph break inside an inlined comprehension (3.12+): the graph before it, the comprehension eagerly, the rest resumed.

Place in the pipeline: the root frame's translator (``instruction_translator.py``) asks
:func:`analyze` at a ``BUILD_LIST``/``BUILD_MAP`` that starts a comprehension; a break met
inside it restarts the trace, which then stops at the comprehension's start, and
``convert_frame.finish`` writes the call of :class:`ComprehensionFunction` and of the resume
function after it. Mirrors ``torch/_dynamo/comprehension_graph_break.py``
(``maybe_setup_comprehension_speculation``, ``_analyze_comprehension``,
``_handle_comprehension_graph_break``, ``_build_comprehension_fn``), called from
``torch/_dynamo/symbolic_convert.py`` (``BUILD_LIST``, ``BUILD_MAP``).

Note [A break inside an inlined comprehension]
    From 3.12 (PEP 709) ``[f(t) for t in xs]`` has no frame of its own: its loop is inlined
    into the function, between ``LOAD_FAST_AND_CLEAR t; SWAP`` (save the outer ``t``, the
    iterator under it) and ``END_FOR`` plus the stores that put ``t`` back. A graph break
    in it is a break inside a loop, where Dynamo cannot resume, so the whole frame would run
    eagerly. Torch 2.13 instead remembers each outermost comprehension's start (a
    speculation point); when something in it cannot be traced, it restarts, compiles the
    graph up to the start, runs the comprehension's own instructions as a small function of
    their own (``__comprehension_<fn>_at_<line>``) and resumes the frame after it, the
    result on the stack or in its variable. Ours does the same, in our terms:

    - :func:`analyze` reads the comprehension from the bytecode: which stack slots are the
      iterator and the saved variables, the outermost ``END_FOR``, and what the function
      does with the result after the restoring stores (torch's four dispositions:
      ``stored`` in a local, ``discarded`` by ``POP_TOP``, ``returned`` or ``consumed`` by
      what follows, both left on the stack);
    - :func:`comprehension_code` copies the original code object (every local a
      parameter, as Note [The rest of a frame as real bytecode]) with a prologue that
      pushes the iterator (passed in the slot of the comprehension's first variable) and a
      NULL for each saved variable, the comprehension's instructions byte for byte (its
      jumps are relative), and an epilogue that returns the result;
    - the transformed function calls it with the frame hook on (every frame it calls is
      compiled), then the resume function at the offset after the comprehension.

    ``md.explain`` then counts as torch's: the graph before the comprehension (none if it
    holds no op, Note [An empty graph is not compiled]) carries the break reason, the
    graph of the resume function none. Torch speculates only where its
    ``should_compile_partial_graph()`` is false at the break, which for a call or a jump
    means the comprehension's exception-table entry covers it; 3.13 leaves jumps out of
    that entry, so a data-dependent ``if`` filter breaks in a loop there and the frame runs
    eagerly, in torch and in ours (``InstructionTranslator.break_in_comprehension``).

    What ours leaves to the old path (the whole frame eagerly): a set comprehension (torch
    speculates only at ``BUILD_LIST`` and ``BUILD_MAP``), a comprehension inside a
    try block (inside a grad-mode, autocast or inference_mode ``with`` block it runs and
    resumes in the block, Note [A break inside a with block]), one that assigns a
    closure cell, a function with cell variables, and a run without the frame hook. Torch
    handles cells too.

Note [A walrus in a comprehension that breaks]
    ``[(z := f(i)) for i in xs]`` assigns the function's ``z`` from inside the inlined
    loop. As torch's ``_build_comprehension_fn`` (its ``walrus_vars``), the comprehension's
    own function returns ``(result, z, ...)``, and the transformed code hands each walrus
    value to the resume function as that local, so the rest of the frame reads what the
    loop left in ``z``.
"""

from __future__ import annotations

import dis
import functools
import sys
import types
from dataclasses import dataclass
from typing import Any, Optional

from minidynamo.bytecode import get_instructions, offset_to_index
from minidynamo.bytecode.continue_at import (_NOT_PLAIN, _VARARGS, _VARKEYWORDS, MARK, _header, _no_location,
                                             _with_extended_arg)

_OP = dis.opmap
_STORES = {"STORE_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST"}
_READS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_LOAD_FAST", "LOAD_DEREF", "STORE_FAST_LOAD_FAST"}
_NOT_IN_BODY = {"STORE_DEREF", "DELETE_FAST", "DELETE_DEREF", "MAKE_CELL", "LOAD_CLOSURE", "RETURN_VALUE",
                "RETURN_CONST", "YIELD_VALUE", "STORE_GLOBAL", "DELETE_GLOBAL"}
ITER = "<iterator>"
RESULT = "<result>"


@dataclass(frozen=True)
class ComprehensionAnalysis:
    """What the bytecode says about one inlined comprehension (torch's ``ComprehensionAnalysis``)."""

    setup: int                 # offset of the GET_ITER before it (a handler there: inside a try or with block)
    start: int                 # offset of its BUILD_LIST / BUILD_MAP
    end_for: int               # offset of its outermost END_FOR
    end: int                   # offset where the function resumes after it
    roles: tuple               # the stack slots under BUILD_LIST, bottom first: ITER or a saved variable's name
    iterator_vars: tuple       # the names LOAD_FAST_AND_CLEAR saves
    reads: tuple               # the function's locals the comprehension reads
    disposition: str           # "stored", "discarded", "returned" or "consumed"
    result_var: Optional[str]  # the local it is stored in ("stored")
    walrus_vars: tuple = ()    # the function's locals a walrus (:=) in it assigns (torch's walrus_vars)

    @property
    def result_on_stack(self) -> bool:
        return self.disposition in ("returned", "consumed")


def _names(inst) -> tuple:
    return inst.argval if isinstance(inst.argval, tuple) else (inst.argval,)


@functools.lru_cache(maxsize=256)
def analyze(code: types.CodeType, offset: int) -> Optional[ComprehensionAnalysis]:
    """The comprehension that starts at ``offset`` (its BUILD_LIST/BUILD_MAP), or None where
    there is none or ours cannot run it on its own (Note [A break inside an inlined comprehension])."""
    if sys.version_info < (3, 12) or code.co_cellvars or code.co_flags & _NOT_PLAIN or _header(code) is None:
        return None
    insts = get_instructions(code)
    index = offset_to_index(insts)
    i = index.get(offset)
    if i is None or insts[i].opname not in ("BUILD_LIST", "BUILD_MAP") or insts[i].arg != 0 or i < 3:
        return None
    # torch's _get_comprehension_bytecode_prefix: LOAD_FAST_AND_CLEAR, SWAP just before
    if insts[i - 1].opname != "SWAP" or insts[i - 2].opname != "LOAD_FAST_AND_CLEAR":
        return None
    j = i - 2
    while j > 0 and insts[j - 1].opname == "LOAD_FAST_AND_CLEAR":
        j -= 1
    if insts[j - 1].opname != "GET_ITER":
        return None
    roles = [ITER]
    for inst in insts[j:i]:
        if inst.opname == "LOAD_FAST_AND_CLEAR":
            roles.append(inst.argval)
        else:  # SWAP n
            roles[-1], roles[-inst.arg] = roles[-inst.arg], roles[-1]
    iterator_vars = tuple(r for r in roles if r != ITER)
    # the outermost END_FOR (torch's _find_comprehension_end_for_ip)
    depth, k = 0, i
    while k < len(insts):
        name = insts[k].opname
        depth += name == "FOR_ITER"
        depth -= name == "END_FOR"
        if name == "END_FOR" and depth == 0:
            break
        k += 1
    else:
        return None
    end_for = k
    reads: list[str] = []
    walrus: list[str] = []
    for inst in insts[i + 1 : end_for]:
        if inst.opname in _NOT_IN_BODY:
            return None
        if inst.opname in _STORES:  # a store of a variable of the function: Note [A walrus in a comprehension that breaks]
            stored = _names(inst)[:1] if inst.opname == "STORE_FAST_LOAD_FAST" else _names(inst)
            walrus += [n for n in stored if n not in iterator_vars and n not in walrus]
        if inst.opname in _READS:
            names = _names(inst)[1:] if inst.opname == "STORE_FAST_LOAD_FAST" else _names(inst)
            reads += [n for n in names if n not in iterator_vars and n not in reads]
        if inst.opcode in dis.hasjrel and not insts[i].offset <= inst.argval <= insts[end_for].offset:
            return None
    # after the loop: [saved..., result]; follow the stores that put the saved variables back
    k = end_for + 1
    if sys.version_info >= (3, 13):
        if insts[k].opname != "POP_TOP":  # 3.13: END_FOR, then POP_TOP of the iterator
            return None
        k += 1
    model = [r for r in roles if r != ITER] + [RESULT]
    disposition = result_var = None
    while k < len(insts):
        saved_left = [m for m in model if m != RESULT]
        if not model:  # every variable put back, the result stored or popped
            break
        inst = insts[k]
        if inst.opname == "SWAP" and inst.arg <= len(model):
            model[-1], model[-inst.arg] = model[-inst.arg], model[-1]
        elif inst.opname in ("STORE_FAST", "STORE_FAST_STORE_FAST") and len(_names(inst)) <= len(model):
            for name in _names(inst):
                top = model.pop()
                if top == RESULT and name not in iterator_vars:
                    disposition, result_var = "stored", name
                elif top != name:
                    return None
        elif inst.opname == "POP_TOP" and model[-1] == RESULT:
            model.pop()
            disposition = "discarded"
        elif not saved_left:  # the result stays on the stack for what follows
            disposition = "returned" if inst.opname == "RETURN_VALUE" else "consumed"
            break
        else:
            return None
        k += 1
    else:
        return None
    if result_var in walrus:
        return None
    return ComprehensionAnalysis(insts[j - 1].offset, insts[i].offset, insts[end_for].offset, insts[k].offset, tuple(roles),
                                 iterator_vars, tuple(reads), disposition, result_var, tuple(walrus))


def _varint(value: int) -> bytes:
    """The line table's varint (Objects/locations.md): 6-bit groups, least significant first."""
    out = bytearray()
    while value >= 64:
        out.append(64 | value & 63)
        value >>= 6
    out.append(value)
    return bytes(out)


def _svarint(value: int) -> bytes:
    return _varint(-value << 1 | 1 if value < 0 else value << 1)


def _line_table(first_line: int, positions: list) -> bytes:
    """A PEP 626 location table, one long-form entry per code unit (``None``: no location)."""
    out, line = bytearray(), first_line
    for pos in positions:
        if pos is None or pos[0] is None:
            out += _no_location(1)
            continue
        lineno, end_lineno, col, end_col = pos
        out.append(0x80 | 14 << 3)
        out += _svarint(lineno - line) + _varint((end_lineno or lineno) - lineno)
        out += _varint(0 if col is None else col + 1) + _varint(0 if end_col is None else end_col + 1)
        line = lineno
    return bytes(out)


@functools.lru_cache(maxsize=256)
def comprehension_code(code: types.CodeType, a: ComprehensionAnalysis) -> types.CodeType:
    """``code``'s comprehension as a function of its own (Note [A break inside an inlined comprehension]):
    every local a parameter, the iterator in the slot of ``a.iterator_vars[0]``; it returns the result."""
    consts = code.co_consts
    if not any(c is None for c in consts):
        consts = consts + (None,)
    none = next(n for n, c in enumerate(consts) if c is None)
    slot = code.co_varnames.index(a.iterator_vars[0])
    prologue = bytearray(_header(code))
    for role in a.roles:
        prologue += _with_extended_arg(_OP["LOAD_FAST"], slot) if role == ITER else bytes([_OP["PUSH_NULL"], 0])
    if a.disposition == "stored":
        epilogue = _with_extended_arg(_OP["LOAD_FAST"], code.co_varnames.index(a.result_var))
    elif a.disposition == "discarded":
        epilogue = _with_extended_arg(_OP["LOAD_CONST"], none)
    else:
        epilogue = b""  # the result is on the stack
    if a.walrus_vars:  # Note [A walrus in a comprehension that breaks]: (result, *walrus values)
        for name in a.walrus_vars:
            epilogue += _with_extended_arg(_OP["LOAD_FAST"], code.co_varnames.index(name))
        epilogue += _with_extended_arg(_OP["BUILD_TUPLE"], 1 + len(a.walrus_vars))
    epilogue += bytes([_OP["RETURN_VALUE"], 0])
    body = code.co_code[a.start : a.end]
    units = list(code.co_positions())
    positions = [None] * (len(prologue) // 2) + units[a.start // 2 : a.end // 2] + [None] * (len(epilogue) // 2)
    lineno = next((p[0] for p in units[a.start // 2 :] if p[0] is not None), code.co_firstlineno)
    return code.replace(co_code=bytes(prologue) + body + epilogue, co_consts=consts,
                        co_argcount=code.co_nlocals, co_posonlyargcount=0, co_kwonlyargcount=0,
                        co_flags=code.co_flags & ~(_VARARGS | _VARKEYWORDS), co_exceptiontable=b"",
                        co_linetable=_line_table(code.co_firstlineno, positions),
                        co_stacksize=code.co_stacksize + 1 + len(a.walrus_vars),
                        co_name=f"__comprehension_{code.co_name}_at_{lineno}",
                        co_qualname=code.co_qualname + MARK)


class ComprehensionFunction:
    """``___comprehension_at_<offset>(x=..., ___iter=...)``: the comprehension, run by CPython with the frame hook on."""

    def __init__(self, code: types.CodeType, f_globals: dict, a: ComprehensionAnalysis, config: Any):
        self.code = comprehension_code(code, a)
        self.analysis = a
        self.f_globals = f_globals
        self.config = config
        self.__name__ = f"___comprehension_at_{a.start}"

    def __call__(self, /, ___iter, **L: Any) -> Any:
        L = dict(L, **{self.analysis.iterator_vars[0]: ___iter})
        closure = tuple(types.CellType(L[n]) if n in L else types.CellType() for n in self.code.co_freevars)
        fn = types.FunctionType(self.code, self.f_globals, self.code.co_name, None, closure or None)
        return self.config.call_hooked(fn, tuple(L.get(n) for n in self.code.co_varnames))

    def __repr__(self) -> str:
        return f"<comprehension of {self.code.co_qualname.removesuffix(MARK)} at offset {self.analysis.start}>"

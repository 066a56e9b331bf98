"""The opcode tables: one written-out table per Python version, opname -> family.

Place in the pipeline: stage one, read by ``minidynamo.bytecode.get_instructions``, which
checks every instruction against the running Python's table before anything runs (Note
[One explicit opcode table per Python version] in ``bytecode.py``); chapter 01 counts and
diffs them. Mirrors CPython's ``Lib/opcode.py`` / ``Include/opcode.h`` (the opnames of one
version) and xdis's ``opcodes/opcode_3x.py`` (one module per version); PyTorch has no
table: ``torch/_dynamo/symbolic_convert.py`` handles each version with
``sys.version_info`` checks.
"""

from __future__ import annotations

import sys

__all__ = ["PYTHON_VERSION", "OPCODE_TABLES", "opcode_table", "family", "table_diff"]

PYTHON_VERSION: tuple[int, int] = sys.version_info[:2]


# ---------------------------------------------------------------------------
# Opcode tables. Families:
#   nop         does nothing we can observe (RESUME, CACHE, EXTENDED_ARG, ...)
#   stack       value-stack shuffling (POP_TOP, COPY, SWAP, PUSH_NULL)
#   names       load/store/delete of fast locals, globals, names, cells, consts
#   attributes  LOAD_ATTR, STORE_ATTR, LOAD_METHOD, ...
#   unary, binary, compare   operators
#   subscr      container[index] and slices
#   build       BUILD_* and the comprehension/unpacking helpers (LIST_APPEND, ...)
#   unpack      UNPACK_SEQUENCE, UNPACK_EX
#   jumps       everything that may move the instruction pointer
#   iter        GET_ITER, FOR_ITER
#   functions   calls, MAKE_FUNCTION, RETURN_VALUE
#   format      f-strings
#   exceptions  raise, handlers, the exception table's helpers
#   with        context managers
#   generators  yield, send, coroutines
#   async       async for/with
#   match       structural pattern matching
#   imports     import statements
#   class       class bodies and annotations
# ---------------------------------------------------------------------------

_PY311: dict[str, str] = {
    # nop
    "CACHE": "nop",
    "NOP": "nop",
    "RESUME": "nop",
    "EXTENDED_ARG": "nop",
    "PRECALL": "nop",
    # stack
    "POP_TOP": "stack",
    "PUSH_NULL": "stack",
    "COPY": "stack",
    "SWAP": "stack",
    # names
    "LOAD_CONST": "names",
    "LOAD_FAST": "names",
    "STORE_FAST": "names",
    "DELETE_FAST": "names",
    "LOAD_GLOBAL": "names",
    "STORE_GLOBAL": "names",
    "DELETE_GLOBAL": "names",
    "LOAD_NAME": "names",
    "STORE_NAME": "names",
    "DELETE_NAME": "names",
    "MAKE_CELL": "names",
    "COPY_FREE_VARS": "names",
    "LOAD_CLOSURE": "names",
    "LOAD_DEREF": "names",
    "STORE_DEREF": "names",
    "DELETE_DEREF": "names",
    "LOAD_CLASSDEREF": "names",
    "LOAD_ASSERTION_ERROR": "names",
    # attributes
    "LOAD_ATTR": "attributes",
    "STORE_ATTR": "attributes",
    "DELETE_ATTR": "attributes",
    "LOAD_METHOD": "attributes",
    # operators
    "UNARY_POSITIVE": "unary",
    "UNARY_NEGATIVE": "unary",
    "UNARY_NOT": "unary",
    "UNARY_INVERT": "unary",
    "BINARY_OP": "binary",
    "COMPARE_OP": "compare",
    "IS_OP": "compare",
    "CONTAINS_OP": "compare",
    # subscr
    "BINARY_SUBSCR": "subscr",
    "STORE_SUBSCR": "subscr",
    "DELETE_SUBSCR": "subscr",
    "BUILD_SLICE": "subscr",
    # build
    "BUILD_TUPLE": "build",
    "BUILD_LIST": "build",
    "BUILD_SET": "build",
    "BUILD_MAP": "build",
    "BUILD_CONST_KEY_MAP": "build",
    "BUILD_STRING": "build",
    "LIST_APPEND": "build",
    "SET_ADD": "build",
    "MAP_ADD": "build",
    "LIST_EXTEND": "build",
    "SET_UPDATE": "build",
    "DICT_MERGE": "build",
    "DICT_UPDATE": "build",
    "LIST_TO_TUPLE": "build",
    # unpack
    "UNPACK_SEQUENCE": "unpack",
    "UNPACK_EX": "unpack",
    # jumps
    "JUMP_FORWARD": "jumps",
    "JUMP_BACKWARD": "jumps",
    "JUMP_BACKWARD_NO_INTERRUPT": "jumps",
    "POP_JUMP_FORWARD_IF_TRUE": "jumps",
    "POP_JUMP_FORWARD_IF_FALSE": "jumps",
    "POP_JUMP_FORWARD_IF_NONE": "jumps",
    "POP_JUMP_FORWARD_IF_NOT_NONE": "jumps",
    "POP_JUMP_BACKWARD_IF_TRUE": "jumps",
    "POP_JUMP_BACKWARD_IF_FALSE": "jumps",
    "POP_JUMP_BACKWARD_IF_NONE": "jumps",
    "POP_JUMP_BACKWARD_IF_NOT_NONE": "jumps",
    "JUMP_IF_TRUE_OR_POP": "jumps",
    "JUMP_IF_FALSE_OR_POP": "jumps",
    # iter
    "GET_ITER": "iter",
    "FOR_ITER": "iter",
    "GET_LEN": "iter",
    # functions
    "KW_NAMES": "functions",
    "CALL": "functions",
    "CALL_FUNCTION_EX": "functions",
    "MAKE_FUNCTION": "functions",
    "RETURN_VALUE": "functions",
    # format
    "FORMAT_VALUE": "format",
    # exceptions
    "RAISE_VARARGS": "exceptions",
    "RERAISE": "exceptions",
    "PUSH_EXC_INFO": "exceptions",
    "POP_EXCEPT": "exceptions",
    "CHECK_EXC_MATCH": "exceptions",
    "CHECK_EG_MATCH": "exceptions",
    "PREP_RERAISE_STAR": "exceptions",
    # with
    "BEFORE_WITH": "with",
    "WITH_EXCEPT_START": "with",
    # generators
    "RETURN_GENERATOR": "generators",
    "YIELD_VALUE": "generators",
    "SEND": "generators",
    "GET_YIELD_FROM_ITER": "generators",
    "GET_AWAITABLE": "generators",
    "ASYNC_GEN_WRAP": "generators",
    # async
    "BEFORE_ASYNC_WITH": "async",
    "GET_AITER": "async",
    "GET_ANEXT": "async",
    "END_ASYNC_FOR": "async",
    # match
    "MATCH_CLASS": "match",
    "MATCH_MAPPING": "match",
    "MATCH_SEQUENCE": "match",
    "MATCH_KEYS": "match",
    # imports
    "IMPORT_NAME": "imports",
    "IMPORT_FROM": "imports",
    "IMPORT_STAR": "imports",
    # class
    "LOAD_BUILD_CLASS": "class",
    "SETUP_ANNOTATIONS": "class",
    "PRINT_EXPR": "class",  # interactive mode only
}

# Python 3.12 (What's New 3.12, "CPython bytecode changes"): PRECALL, KW_NAMES stays,
# LOAD_METHOD folded into LOAD_ATTR (low bit of arg), forward/backward conditional
# jumps merged into POP_JUMP_IF_*, JUMP_IF_*_OR_POP removed, RETURN_CONST,
# BINARY_SLICE/STORE_SLICE, END_FOR, LOAD_FAST_CHECK/LOAD_FAST_AND_CLEAR
# (inlined comprehensions), CALL_INTRINSIC_1/2 replace several small opcodes,
# LOAD_SUPER_ATTR, LOAD_LOCALS, LOAD_FROM_DICT_OR_*.
# Written from the 3.12 ``dis`` documentation and cross-checked by hand against
# xdis's ``opcodes/opcode_312.py``; the test against dis.opmap runs only on the
# interpreter that is actually running. Instrumented opcodes (INSTRUMENTED_*, for
# sys.monitoring) and pseudo-instructions (opcode >= 256) are in 3.12's dis.opmap
# but never come out of dis.get_instructions, so they are not in the table.
_PY312: dict[str, str] = {
    "CACHE": "nop",
    "NOP": "nop",
    "RESUME": "nop",
    "EXTENDED_ARG": "nop",
    "RESERVED": "nop",
    "INTERPRETER_EXIT": "nop",
    "POP_TOP": "stack",
    "PUSH_NULL": "stack",
    "COPY": "stack",
    "SWAP": "stack",
    "END_FOR": "stack",
    "END_SEND": "stack",
    "LOAD_CONST": "names",
    "LOAD_FAST": "names",
    "LOAD_FAST_CHECK": "names",
    "LOAD_FAST_AND_CLEAR": "names",
    "STORE_FAST": "names",
    "DELETE_FAST": "names",
    "LOAD_GLOBAL": "names",
    "STORE_GLOBAL": "names",
    "DELETE_GLOBAL": "names",
    "LOAD_NAME": "names",
    "STORE_NAME": "names",
    "DELETE_NAME": "names",
    "LOAD_LOCALS": "names",
    "LOAD_FROM_DICT_OR_GLOBALS": "names",
    "LOAD_FROM_DICT_OR_DEREF": "names",
    "MAKE_CELL": "names",
    "COPY_FREE_VARS": "names",
    "LOAD_CLOSURE": "names",
    "LOAD_DEREF": "names",
    "STORE_DEREF": "names",
    "DELETE_DEREF": "names",
    "LOAD_ASSERTION_ERROR": "names",
    "LOAD_ATTR": "attributes",
    "STORE_ATTR": "attributes",
    "DELETE_ATTR": "attributes",
    "LOAD_SUPER_ATTR": "attributes",
    "UNARY_NEGATIVE": "unary",
    "UNARY_NOT": "unary",
    "UNARY_INVERT": "unary",
    "CALL_INTRINSIC_1": "unary",
    "CALL_INTRINSIC_2": "binary",
    "BINARY_OP": "binary",
    "COMPARE_OP": "compare",
    "IS_OP": "compare",
    "CONTAINS_OP": "compare",
    "BINARY_SUBSCR": "subscr",
    "STORE_SUBSCR": "subscr",
    "DELETE_SUBSCR": "subscr",
    "BUILD_SLICE": "subscr",
    "BINARY_SLICE": "subscr",
    "STORE_SLICE": "subscr",
    "BUILD_TUPLE": "build",
    "BUILD_LIST": "build",
    "BUILD_SET": "build",
    "BUILD_MAP": "build",
    "BUILD_CONST_KEY_MAP": "build",
    "BUILD_STRING": "build",
    "LIST_APPEND": "build",
    "SET_ADD": "build",
    "MAP_ADD": "build",
    "LIST_EXTEND": "build",
    "SET_UPDATE": "build",
    "DICT_MERGE": "build",
    "DICT_UPDATE": "build",
    "UNPACK_SEQUENCE": "unpack",
    "UNPACK_EX": "unpack",
    "JUMP_FORWARD": "jumps",
    "JUMP_BACKWARD": "jumps",
    "JUMP_BACKWARD_NO_INTERRUPT": "jumps",
    "POP_JUMP_IF_TRUE": "jumps",
    "POP_JUMP_IF_FALSE": "jumps",
    "POP_JUMP_IF_NONE": "jumps",
    "POP_JUMP_IF_NOT_NONE": "jumps",
    "GET_ITER": "iter",
    "FOR_ITER": "iter",
    "GET_LEN": "iter",
    "KW_NAMES": "functions",
    "CALL": "functions",
    "CALL_FUNCTION_EX": "functions",
    "MAKE_FUNCTION": "functions",
    "RETURN_VALUE": "functions",
    "RETURN_CONST": "functions",
    "FORMAT_VALUE": "format",
    "RAISE_VARARGS": "exceptions",
    "RERAISE": "exceptions",
    "PUSH_EXC_INFO": "exceptions",
    "POP_EXCEPT": "exceptions",
    "CHECK_EXC_MATCH": "exceptions",
    "CHECK_EG_MATCH": "exceptions",
    "CLEANUP_THROW": "exceptions",
    "BEFORE_WITH": "with",
    "WITH_EXCEPT_START": "with",
    "RETURN_GENERATOR": "generators",
    "YIELD_VALUE": "generators",
    "SEND": "generators",
    "GET_YIELD_FROM_ITER": "generators",
    "GET_AWAITABLE": "generators",
    "BEFORE_ASYNC_WITH": "async",
    "GET_AITER": "async",
    "GET_ANEXT": "async",
    "END_ASYNC_FOR": "async",
    "MATCH_CLASS": "match",
    "MATCH_MAPPING": "match",
    "MATCH_SEQUENCE": "match",
    "MATCH_KEYS": "match",
    "IMPORT_NAME": "imports",
    "IMPORT_FROM": "imports",
    "LOAD_BUILD_CLASS": "class",
    "SETUP_ANNOTATIONS": "class",
}

# Python 3.13: KW_NAMES gone (CALL_KW), TO_BOOL before every conditional jump,
# FORMAT_VALUE split into CONVERT_VALUE/FORMAT_SIMPLE/FORMAT_WITH_SPEC,
# MAKE_FUNCTION takes no flags (SET_FUNCTION_ATTRIBUTE), superinstructions
# LOAD_FAST_LOAD_FAST / STORE_FAST_LOAD_FAST / STORE_FAST_STORE_FAST,
# LOAD_CLOSURE became a pseudo-instruction. Written from the 3.13 ``dis`` docs,
# cross-checked against xdis's ``opcodes/opcode_313.py``.
_PY313: dict[str, str] = {
    **{k: v for k, v in _PY312.items() if k not in {"KW_NAMES", "FORMAT_VALUE", "LOAD_CLOSURE"}},
    "TO_BOOL": "unary",
    "CALL_KW": "functions",
    "SET_FUNCTION_ATTRIBUTE": "functions",
    "CONVERT_VALUE": "format",
    "FORMAT_SIMPLE": "format",
    "FORMAT_WITH_SPEC": "format",
    "LOAD_FAST_LOAD_FAST": "names",
    "STORE_FAST_LOAD_FAST": "names",
    "STORE_FAST_STORE_FAST": "names",
    "ENTER_EXECUTOR": "nop",
    "EXIT_INIT_CHECK": "functions",
}

OPCODE_TABLES: dict[tuple[int, int], dict[str, str]] = {
    (3, 11): _PY311,
    (3, 12): _PY312,
    (3, 13): _PY313,
}


def opcode_table(version: tuple[int, int] = PYTHON_VERSION) -> dict[str, str]:
    """The opname -> family table for a Python version (NotImplementedError if we have none)."""
    try:
        return OPCODE_TABLES[version]
    except KeyError:
        have = ", ".join(f"{a}.{b}" for a, b in sorted(OPCODE_TABLES))
        raise NotImplementedError(
            f"minidynamo has no opcode table for Python {version[0]}.{version[1]} (it has {have}); "
            "add one to minidynamo/bytecode/opcode_tables.py"
        ) from None


def family(opname: str, version: tuple[int, int] = PYTHON_VERSION) -> str:
    """The family of an opname ("jumps", "names", ...) for the running Python."""
    return opcode_table(version).get(opname, "unknown")


def table_diff(version: tuple[int, int] = PYTHON_VERSION, other: tuple[int, int] = (3, 12)) -> dict[str, list[str]]:
    """What changed between two tables: {"removed": [...], "added": [...]} (sorted)."""
    a, b = set(opcode_table(version)), set(opcode_table(other))
    return {"removed": sorted(a - b), "added": sorted(b - a)}

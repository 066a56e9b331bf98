"""One function's bytecode as CPython 3.11, 3.12 and 3.13 compile it, kept as data.

Place in the pipeline: beside ``minidynamo.bytecode`` (stage one), for chapter 01 only.
A chapter must run the same on any Python, so the listings of the other two versions
cannot come from running those Pythons: they are stored here, written by
``python -m minidynamo.bytecode.versions`` under each version, and a test checks that
the stored listing of the *running* Python still equals what its ``dis`` gives
(``tests/test_bytecode.py``; CI runs it on all three). What changed, and which handler
reads the change, is Note [What changes between 3.11, 3.12 and 3.13] in ``bytecode.py``.
There is no PyTorch counterpart: Dynamo handles each version in ``symbolic_convert.py``
and ``bytecode_transformation.py`` with ``sys.version_info`` checks.
"""

from __future__ import annotations

from typing import Callable, Optional

from minidynamo.bytecode.instructions import PYTHON_VERSION, get_instructions

__all__ = ["EXAMPLE_SOURCE", "LISTINGS", "example", "listing", "side_by_side"]

# Line 1 is the def; listings count lines from there.
EXAMPLE_SOURCE = '''\
def example(xs, k):
    ys = [x * k for x in xs]
    if ys:
        return sorted(ys, reverse=True)
    return None
'''


def example() -> Callable:
    """``example`` compiled by the running Python from ``EXAMPLE_SOURCE``."""
    namespace: dict = {}
    exec(compile(EXAMPLE_SOURCE, "<example>", "exec"), namespace)  # noqa: S102
    return namespace["example"]


def listing(fn: Optional[Callable] = None) -> list[tuple[int, str, str]]:
    """(line, opname, argument) of each instruction, lines from 1 at the def, no CACHE entries."""
    fn = fn or example()
    code = fn.__code__
    rows = []
    for inst in get_instructions(fn):
        if inst.opname == "CACHE":
            continue
        arg = inst.argtext
        if inst.family == "jumps" or inst.opname in ("FOR_ITER", "SEND"):
            arg = f"to {inst.argval}"  # 3.13's dis writes labels (to L2); offsets compare across versions
        elif inst.opname == "KW_NAMES":
            arg = repr(code.co_consts[inst.arg])  # 3.11's dis shows only the index
        rows.append((inst.lineno - code.co_firstlineno + 1, inst.opname, arg))
    return rows


# Written by `python -m minidynamo.bytecode.versions` under each Python; checked by tests.
LISTINGS: dict[tuple[int, int], list[tuple[int, str, str]]] = {
    (3, 11): [
        (1, 'MAKE_CELL', 'k'),
        (1, 'RESUME', '0'),
        (2, 'LOAD_CLOSURE', 'k'),
        (2, 'BUILD_TUPLE', '1'),
        (2, 'LOAD_CONST', '<code object <listcomp>>'),
        (2, 'MAKE_FUNCTION', 'closure'),
        (2, 'LOAD_FAST', 'xs'),
        (2, 'GET_ITER', ''),
        (2, 'PRECALL', '0'),
        (2, 'CALL', '0'),
        (2, 'STORE_FAST', 'ys'),
        (3, 'LOAD_FAST', 'ys'),
        (3, 'POP_JUMP_FORWARD_IF_FALSE', 'to 70'),
        (4, 'LOAD_GLOBAL', 'NULL + sorted'),
        (4, 'LOAD_FAST', 'ys'),
        (4, 'LOAD_CONST', 'True'),
        (4, 'KW_NAMES', "('reverse',)"),
        (4, 'PRECALL', '2'),
        (4, 'CALL', '2'),
        (4, 'RETURN_VALUE', ''),
        (5, 'LOAD_CONST', 'None'),
        (5, 'RETURN_VALUE', ''),
    ],
    (3, 12): [
        (1, 'RESUME', '0'),
        (2, 'LOAD_FAST', 'xs'),
        (2, 'GET_ITER', ''),
        (2, 'LOAD_FAST_AND_CLEAR', 'x'),
        (2, 'SWAP', '2'),
        (2, 'BUILD_LIST', '0'),
        (2, 'SWAP', '2'),
        (2, 'FOR_ITER', 'to 32'),
        (2, 'STORE_FAST', 'x'),
        (2, 'LOAD_FAST', 'x'),
        (2, 'LOAD_FAST', 'k'),
        (2, 'BINARY_OP', '*'),
        (2, 'LIST_APPEND', '2'),
        (2, 'JUMP_BACKWARD', 'to 14'),
        (2, 'END_FOR', ''),
        (2, 'STORE_FAST', 'ys'),
        (2, 'STORE_FAST', 'x'),
        (3, 'LOAD_FAST', 'ys'),
        (3, 'POP_JUMP_IF_FALSE', 'to 68'),
        (4, 'LOAD_GLOBAL', 'NULL + sorted'),
        (4, 'LOAD_FAST', 'ys'),
        (4, 'LOAD_CONST', 'True'),
        (4, 'KW_NAMES', "('reverse',)"),
        (4, 'CALL', '2'),
        (4, 'RETURN_VALUE', ''),
        (5, 'RETURN_CONST', 'None'),
        (5, 'SWAP', '2'),
        (5, 'POP_TOP', ''),
        (2, 'SWAP', '2'),
        (2, 'STORE_FAST', 'x'),
        (2, 'RERAISE', '0'),
    ],
    (3, 13): [
        (1, 'RESUME', '0'),
        (2, 'LOAD_FAST', 'xs'),
        (2, 'GET_ITER', ''),
        (2, 'LOAD_FAST_AND_CLEAR', 'x'),
        (2, 'SWAP', '2'),
        (2, 'BUILD_LIST', '0'),
        (2, 'SWAP', '2'),
        (2, 'FOR_ITER', 'to 32'),
        (2, 'STORE_FAST_LOAD_FAST', 'x, x'),
        (2, 'LOAD_FAST', 'k'),
        (2, 'BINARY_OP', '*'),
        (2, 'LIST_APPEND', '2'),
        (2, 'JUMP_BACKWARD', 'to 14'),
        (2, 'END_FOR', ''),
        (2, 'POP_TOP', ''),
        (2, 'STORE_FAST', 'ys'),
        (2, 'STORE_FAST', 'x'),
        (3, 'LOAD_FAST', 'ys'),
        (3, 'TO_BOOL', ''),
        (3, 'POP_JUMP_IF_FALSE', 'to 74'),
        (4, 'LOAD_GLOBAL', 'sorted + NULL'),
        (4, 'LOAD_FAST', 'ys'),
        (4, 'LOAD_CONST', 'True'),
        (4, 'LOAD_CONST', "('reverse',)"),
        (4, 'CALL_KW', '2'),
        (4, 'RETURN_VALUE', ''),
        (5, 'RETURN_CONST', 'None'),
        (5, 'SWAP', '2'),
        (5, 'POP_TOP', ''),
        (2, 'SWAP', '2'),
        (2, 'STORE_FAST', 'x'),
        (2, 'RERAISE', '0'),
    ],
}


def side_by_side(versions: tuple = ((3, 11), (3, 12), (3, 13)), width: int = 37) -> str:
    """The stored listings in columns, one block of rows per source line."""
    header = "line  " + "".join(f"{f'Python {a}.{b}':<{width}}" for a, b in versions)
    rows = [header, "-" * len(header)]
    blocks = {v: _blocks(LISTINGS[v]) for v in versions}
    order: list = []
    for v in versions:
        order += [key for key in blocks[v] if key not in order]
    for key in order:
        columns = [blocks[v].get(key, []) for v in versions]
        for i in range(max(len(c) for c in columns)):
            cells = "".join(f"{(c[i] if i < len(c) else ''):<{width}}" for c in columns)
            rows.append(f"{key[0] if i == 0 else '':<6}{cells}".rstrip())
    return "\n".join(rows)


def _blocks(rows: list) -> dict:
    """Consecutive instructions of one line, keyed (line, how many runs of that line came before)."""
    blocks: dict = {}
    seen: dict = {}
    previous = None
    for line, op, arg in rows:
        if line != previous:
            seen[line] = seen.get(line, -1) + 1
            previous = line
        blocks.setdefault((line, seen[line]), []).append(f"{op} {arg}".strip())
    return blocks


if __name__ == "__main__":
    print(f"    {PYTHON_VERSION}: [")
    for row in listing():
        print(f"        {row!r},")
    print("    ],")

"""Tests for minidynamo.bytecode: our decoder against ``dis``, the running CPython's own."""

from __future__ import annotations

import dis
import inspect
import json
import re
import textwrap
import types

import pytest

from minidynamo import bytecode
from minidynamo.bytecode import (
    OPCODE_TABLES,
    PYTHON_VERSION,
    ExceptionTableEntry,
    UnknownOpcodeError,
    exception_table,
    get_instructions,
)

pytestmark = pytest.mark.ch01

FAMILIES = {
    "nop", "stack", "names", "attributes", "unary", "binary", "compare", "subscr", "build", "unpack",
    "jumps", "iter", "functions", "format", "exceptions", "with", "generators", "async", "match",
    "imports", "class",
}  # fmt: skip


def _all_code(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _all_code(const)


def _corpus() -> list[types.CodeType]:
    """Code objects from real modules (stdlib + our own tests): what CPython actually emits."""
    import contextlib

    import minidynamo.interpreter as interp
    from minidynamo.interpreter import ceval_312_313, ceval_calls, ceval_control, ceval_data, ceval_names, frameobject, genobject

    modules = [json.decoder, json.encoder, textwrap, inspect, re._parser, contextlib, interp,
               frameobject, ceval_names, ceval_data, ceval_control, ceval_calls, genobject, ceval_312_313]
    codes = []
    for mod in modules:
        codes += list(_all_code(compile(inspect.getsource(mod), mod.__file__, "exec")))
    return codes


CORPUS = _corpus()


def test_table_matches_dis_opmap_for_running_python():
    table = OPCODE_TABLES[PYTHON_VERSION]
    # 3.12+ list instrumented opcodes and pseudo-instructions (>= 256) in opmap; dis never yields them.
    opmap = {name for name, op in dis.opmap.items() if op < 256 and not name.startswith("INSTRUMENTED_")}
    assert set(table) - opmap == set(), "opnames in our table that this CPython does not have"
    assert opmap - set(table) == set(), "opnames this CPython has that our table misses"


@pytest.mark.parametrize("version", sorted(OPCODE_TABLES))
def test_tables_are_well_formed(version):
    table = OPCODE_TABLES[version]
    assert set(table.values()) <= FAMILIES
    assert len(table) > 90
    for name in ("LOAD_FAST", "BINARY_OP", "RESUME", "CALL", "RETURN_VALUE"):
        assert name in table


def test_every_emitted_opname_is_in_the_table():
    emitted = {i.opname for code in CORPUS for i in dis.get_instructions(code)}
    assert len(emitted) > 60
    assert emitted <= set(OPCODE_TABLES[PYTHON_VERSION])
    for code in CORPUS:
        get_instructions(code)  # never raises on real code


def test_instruction_fields_match_dis():
    for code in CORPUS[:200]:
        ours = get_instructions(code)
        theirs = list(dis.get_instructions(code))
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert (a.opname, a.opcode, a.arg, a.argrepr, a.offset, a.is_jump_target, a.positions) == (
                b.opname, b.opcode, b.arg, b.argrepr, b.offset, b.is_jump_target, b.positions,
            )  # fmt: skip
            assert a.argval == b.argval or a.argval is b.argval or (a.argval != a.argval)  # NaN consts


def test_lineno_is_propagated_from_starts_line():
    for code in CORPUS[:200]:
        starts = {offset: line for offset, line in dis.findlinestarts(code) if line is not None}  # 3.13: None too
        current = code.co_firstlineno
        for inst in get_instructions(code):
            current = starts.get(inst.offset, current)
            assert inst.lineno == current and type(inst.lineno) is int  # 3.13's dis: starts_line is a bool


def test_instruction_is_frozen():
    inst = get_instructions(lambda: 1)[0]
    with pytest.raises(Exception):
        inst.opname = "NOP"


def test_unknown_opcode_error_names_opname_offset_line_and_version():
    def f(a, b):
        c = a
        return c + b

    table = {k: v for k, v in OPCODE_TABLES[PYTHON_VERSION].items() if k != "BINARY_OP"}
    offset = next(i.offset for i in dis.get_instructions(f) if i.opname == "BINARY_OP")
    line = f.__code__.co_firstlineno + 2
    with pytest.raises(UnknownOpcodeError) as info:
        get_instructions(f, table=table)
    expected = (
        f"opcode BINARY_OP at offset {offset} (line {line}) is not in minidynamo's opcode table "
        f"for Python {PYTHON_VERSION[0]}.{PYTHON_VERSION[1]}"
    )
    assert str(info.value) == expected
    assert isinstance(info.value, NotImplementedError)


def test_missing_version_table_is_a_clear_error():
    with pytest.raises(NotImplementedError, match=r"no opcode table for Python 3\.99"):
        get_instructions(lambda: 1, version=(3, 99))


def test_exception_table_matches_dis_parser():
    seen = 0
    for code in CORPUS:
        ours = exception_table(code)
        theirs = dis._parse_exception_table(code)  # private: used as the oracle only
        assert [tuple(vars(e).values()) for e in ours] == [tuple(e) for e in theirs]
        seen += len(ours)
    assert seen > 50


def test_exception_table_shape():
    def f(x):
        try:
            return 1 / x
        except ZeroDivisionError:
            return None

    entries = exception_table(f)
    assert entries and all(isinstance(e, ExceptionTableEntry) for e in entries)
    offsets = {i.offset: i.opname for i in get_instructions(f)}
    assert offsets[entries[0].target] == "PUSH_EXC_INFO"
    body = [i for i in get_instructions(f) if i.opname == "BINARY_OP"][0]
    assert bytecode.find_exception_handler(entries, body.offset) is entries[0]
    assert bytecode.find_exception_handler(entries, 0) is None


def test_varint_multi_byte():
    # 200 needs two 6-bit chunks: 0b000011 0b001000 -> bytes 0x43, 0x08 (0x40 = "more follows").
    assert bytecode._parse_varint(iter([0x43, 0x08])) == 200
    assert bytecode._parse_varint(iter([0x80 | 5])) == 5


def test_show_listing_has_no_addresses():
    def f(xs):
        return list(x for x in xs if x)  # a genexpr keeps its own code object on 3.12+ (a listcomp is inlined)

    text = bytecode.format_instructions(f)
    assert "0x" not in text
    assert "<code object <genexpr>>" in text
    assert re.search(r">>\s+\d+ (FOR_ITER|JUMP_BACKWARD|POP_JUMP)", bytecode.format_instructions(f.__code__.co_consts[1]))


def test_show_prints_exception_table(capsys):
    def f():
        try:
            pass
        finally:
            return 1  # noqa: B012

    bytecode.show(f)
    out = capsys.readouterr().out
    assert "ExceptionTable:" in out and ("RETURN_VALUE" in out or "RETURN_CONST" in out)  # 3.12: RETURN_CONST


def test_table_diff_311_to_312():
    diff = bytecode.table_diff((3, 11), (3, 12))
    assert "PRECALL" in diff["removed"] and "RETURN_CONST" in diff["added"]
    assert "POP_JUMP_FORWARD_IF_TRUE" in diff["removed"] and "POP_JUMP_IF_TRUE" in diff["added"]


def test_family_of_every_jump_has_a_target():
    for code in CORPUS[:200]:
        instructions = get_instructions(code)
        offsets = bytecode.offset_to_index(instructions)
        for inst in instructions:
            if inst.family == "jumps":
                assert isinstance(inst.argval, int) and inst.argval in offsets


def test_code_of_rejects_non_functions():
    with pytest.raises(TypeError, match="expected a Python function"):
        get_instructions(len)
    assert bytecode.code_of(textwrap.dedent) is textwrap.dedent.__code__


def test_exception_table_matches_real_dynamo():
    """Real Dynamo's parser stores ``end`` inclusive (the offset of the last covered instruction)."""
    from minidynamo._torch_private import dynamo_parse_exception_table

    for code in CORPUS[:300]:
        theirs = dynamo_parse_exception_table(code.co_exceptiontable)
        ours = exception_table(code)
        assert [(e.start, e.end - 2, e.target, e.depth, e.lasti) for e in ours] == [
            (e.start, e.end, e.target, e.depth, e.lasti) for e in theirs
        ]


def test_line_numbers_are_right_on_every_version():
    """3.13's dis turned ``starts_line`` into a bool; lines must still be the source lines (was "line False")."""

    def f(a):
        b = a + 1
        return b * 2

    first = f.__code__.co_firstlineno
    lines = {i.opname: i.lineno for i in get_instructions(f) if i.opname in ("BINARY_OP", "STORE_FAST")}
    assert lines == {"BINARY_OP": first + 2, "STORE_FAST": first + 1}


def test_version_facts_match_the_running_cpython():
    """Note [What changes between 3.11, 3.12 and 3.13]: each fact, checked against what dis shows."""

    def call(x):
        return len(x)

    def loop(xs):
        for x in xs:
            pass

    ops = [i.opname for i in dis.get_instructions(call)]
    assert ops.index("LOAD_GLOBAL") < ops.index("LOAD_FAST")
    null_after = next(i for i in dis.get_instructions(call) if i.opname == "LOAD_GLOBAL").argrepr.endswith("NULL")
    assert null_after == bytecode.NULL_AFTER_CALLABLE
    insts = list(dis.get_instructions(loop))
    exit_ = next(i for i in insts if i.opname == "FOR_ITER").argval
    after = [i.opname for i in insts if i.offset >= exit_]
    expected = {0: [], 1: ["END_FOR"], 2: ["END_FOR", "POP_TOP"]}[bytecode.FOR_ITER_EXIT_SKIP]
    assert after[: len(expected)] == expected
    assert (dis.opmap.get("LOAD_METHOD", 256) < 256) != bytecode.LOAD_ATTR_METHOD_BIT  # 3.12: a pseudo-op
    assert ("END_SEND" in dis.opmap) == bytecode.SEND_KEEPS_RECEIVER
    assert ("TO_BOOL" in dis.opmap) == bool(bytecode.COMPARE_BOOL_BIT)


def test_stored_listing_of_this_python_is_what_its_dis_gives():
    """Chapter 01 shows three versions from stored data; the running version's entry must not drift."""
    from minidynamo.bytecode import versions as bytecode_versions

    assert bytecode_versions.listing() == bytecode_versions.LISTINGS[PYTHON_VERSION]
    text = bytecode_versions.side_by_side()
    for version in bytecode_versions.LISTINGS:
        assert f"Python {version[0]}.{version[1]}" in text
    assert "CALL_KW" in text and "PRECALL" in text and "LOAD_FAST_AND_CLEAR" in text


def test_symbolic_interpreter_names_opcode_line_and_version_outside_the_subset():
    """Outside the subset the symbolic interpreter falls back to eager, and says which opcode, line, Python."""
    import warnings

    import torch

    import minidynamo as md

    src = "def f(x):\n    match x.shape:\n        case [a]:\n            return x * a\n    return x\n"
    ns: dict = {}
    exec(compile(src, "<match>", "exec"), ns)
    md.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with md.events.record() as log:  # no op before the break: no graph, no break reason (as torch)
            md.explain(ns["f"], torch.ones(3))
    reason = next(e.explanation for e in log if e.kind == "graph_break")
    first_match = next(i for i in dis.get_instructions(ns["f"]) if i.opname.startswith("MATCH_"))
    assert reason.instruction == first_match.opname and reason.lineno == first_match.positions.lineno
    assert f"Python {PYTHON_VERSION[0]}.{PYTHON_VERSION[1]}" in reason.reason

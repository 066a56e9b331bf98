"""Exercises of chapter 01 (bytecode): read a listing, find jump targets, decode a varint.

Place in the pipeline: none; ``notebooks/01_bytecode.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
The checks compare with ``dis`` (CPython's own decoder), never with our answer key alone.
"""

from __future__ import annotations

import dis

from minidynamo.exercises import NotYet, correct

__all__ = [
    "scale_and_shift",
    "check_opnames",
    "solution_opnames",
    "check_jump_targets",
    "solution_jump_targets",
    "check_parse_varint",
    "solution_parse_varint",
]


def scale_and_shift(x, w, b):
    return x * w + b


def check_opnames(answer) -> str:
    """``answer``: the opnames of ``scale_and_shift``, in order, without RESUME (a list of str)."""
    if answer is None:
        raise NotYet("no answer yet: list the opnames of scale_and_shift after RESUME, e.g. ['LOAD_FAST', ...]")
    want = [i.opname for i in dis.get_instructions(scale_and_shift) if i.opname != "RESUME"]
    answer = list(answer)
    for i, (got, exp) in enumerate(zip(answer, want)):
        if got != exp:
            raise NotYet(f"instruction {i}: {got!r} is not right (hint: the stack machine needs its operands first)")
    if len(answer) != len(want):
        raise NotYet(f"{len(answer)} opnames given, the function has {len(want)} after RESUME")
    return correct("two loads, an op, a load, an op, a return: the value stack does the rest")


def solution_opnames():
    import sys

    if sys.version_info >= (3, 13):  # a superinstruction loads x and w in one dispatch
        return ["LOAD_FAST_LOAD_FAST", "BINARY_OP", "LOAD_FAST", "BINARY_OP", "RETURN_VALUE"]
    return ["LOAD_FAST", "LOAD_FAST", "BINARY_OP", "LOAD_FAST", "BINARY_OP", "RETURN_VALUE"]


def _sample_functions():
    def loop(n):
        total = 0
        for i in range(n):
            if i % 2:
                continue
            total += i
        return total

    def branches(x):
        while x > 0:
            x -= 3
        return "neg" if x < 0 else "zero"

    def handler(d, k):
        try:
            return d[k]
        except KeyError:
            return None

    return [loop, branches, handler]


def check_jump_targets(answer) -> str:
    """``answer``: a function ``fn -> set of offsets`` where control can land other than by falling through.

    Two sources: the target (``argval``) of every instruction of the "jumps" family, and the
    exit of every FOR_ITER (a loop ends by jumping). Use ``minidynamo.bytecode.get_instructions``;
    compared with the offsets ``dis.get_instructions`` marks ``is_jump_target``. (Exception
    handlers are reached through the exception table instead; ``dis.dis`` marks them too.)
    """
    if answer is None or not callable(answer):
        raise NotYet("no answer yet: give a function fn -> set of jump-target offsets")
    if not set(answer(_sample_functions()[0])) <= {i.offset for i in dis.get_instructions(_sample_functions()[0])}:
        raise NotYet("the offsets must be offsets of instructions of fn")
    for fn in _sample_functions():
        want = {i.offset for i in dis.get_instructions(fn) if i.is_jump_target}
        got = set(answer(fn))
        if got != want:
            raise NotYet(f"for {fn.__name__}: got {sorted(got)}, dis marks {sorted(want)} as jump targets")
    return correct("a jump's argval is its target offset")


def solution_jump_targets():
    from minidynamo.bytecode import get_instructions

    def jump_targets(fn):
        return {inst.argval for inst in get_instructions(fn) if inst.family == "jumps" or inst.opname == "FOR_ITER"}

    return jump_targets


def check_parse_varint(answer) -> str:
    """``answer``: a function ``list_of_bytes -> int`` that decodes ONE exception-table varint.

    6 bits of value per byte, most significant chunk first; bit 0x40 means "another byte
    follows"; bit 0x80 only marks the start of an entry and carries no value.
    """
    if answer is None or not callable(answer):
        raise NotYet("no answer yet: give a function that decodes one varint from a list of bytes")
    cases = {(0x05,): 5, (0x85,): 5, (0x43, 0x08): 200, (0x41, 0x7F, 0x01): (1 << 12) | (63 << 6) | 1, (0x3F,): 63}
    for data, want in cases.items():
        got = answer(list(data))
        if got != want:
            raise NotYet(f"bytes {[hex(b) for b in data]} decode to {want}, your function gave {got}")
    return correct("the same varints as dis._parse_varint and minidynamo.bytecode._parse_varint")


def solution_parse_varint():
    def parse_varint(data):
        value = 0
        for b in data:
            value = (value << 6) | (b & 63)
            if not b & 64:
                break
        return value

    return parse_varint

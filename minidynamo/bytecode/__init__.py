"""Stage one of the pipeline: the running CPython's bytecode, decoded into instructions.

``python function -> bytecode`` here, then ``interpreter`` (stage two) runs the
instructions concretely and ``symbolic`` (Dynamo) runs them over VariableTrackers.
Mirrors ``torch/_dynamo/bytecode_transformation.py`` (``Instruction``,
``cleaned_instructions``) over ``dis``. Modules:

- ``instructions.py``: ``Instruction``, ``get_instructions``, the exception table, ``show``;
- ``opcode_tables.py``: one written-out opcode table per Python version;
- ``versions.py``: one function's bytecode as 3.11, 3.12 and 3.13 compile it (chapter 01).

The names of ``instructions.py`` are re-exported here, so ``from minidynamo import
bytecode; bytecode.get_instructions(fn)`` reads as the chapters write it.
"""

from __future__ import annotations

from minidynamo.bytecode.instructions import *  # noqa: F401,F403 - the stage's public names
from minidynamo.bytecode.instructions import __all__  # noqa: F401
from minidynamo.bytecode.instructions import _parse_varint  # noqa: F401 - chapter 01 reads the varint format

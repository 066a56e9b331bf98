"""Stage two of the pipeline: a concrete Python bytecode interpreter, written in Python (byterun style).

``minidynamo.bytecode`` decodes a function into instructions; ``VirtualMachine`` runs
them on a value stack in a ``Frame``, as CPython's eval loop does; ``symbolic``
(Dynamo) is the same loop over VariableTrackers. Modules, named after CPython's files:

- ``ceval.py``: ``VirtualMachine`` (the frame loop), ``run``, ``trace_run`` (``Python/ceval.c``);
- ``ceval_names.py``, ``ceval_data.py``, ``ceval_control.py``, ``ceval_calls.py``,
  ``ceval_312_313.py``: the opcode handlers, one family per module;
- ``frameobject.py``: ``Frame`` and the values the loop passes around (``Objects/frameobject.c``);
- ``genobject.py``: generators over a suspended ``Frame`` (``Objects/genobject.c``).

The names of ``ceval.py`` are re-exported here (``from minidynamo.interpreter import VirtualMachine``).
"""

from __future__ import annotations

from minidynamo.interpreter.ceval import *  # noqa: F401,F403 - the stage's public names
from minidynamo.interpreter.ceval import __all__  # noqa: F401
from minidynamo.interpreter.ceval import BINARY_OPERATORS, UNSUPPORTED  # noqa: F401 - chapter 02 and its tests read them

"""The symbolic interpreter: a bytecode loop over VariableTrackers that builds an fx graph.

Place in the pipeline: the heart of Dynamo. ``convert_frame`` hands it a frame's code
and its inputs; it steps through the bytecode like the concrete interpreter
(``minidynamo.interpreter``), but each stack slot holds a VariableTracker, tensor ops
become graph nodes (with fake values), and Python control flow on constants is simply
executed. Mirrors ``torch/_dynamo/symbolic_convert.py`` (``InstructionTranslatorBase``,
``InstructionTranslator``, ``InliningInstructionTranslator``, ``break_graph_if_unsupported``,
``generic_jump``).

The interpreter is split by concept; this module is its overview and keeps every old
import path (``from minidynamo.symbolic.symbolic_convert import InstructionTranslator``):

- ``translator_base.py``: ``InstructionTranslatorBase``, the loop (``step``/``run``), the
  stack helpers, names, attributes, imports; Note [An
  instruction budget per frame] (``MAX_INSTRUCTIONS``).
- opcode families mixed into it: ``opcodes_data.py`` (containers, operators),
  ``opcodes_control.py`` (iteration, jumps, ``generic_jump``), ``opcodes_calls.py``
  (calls, ``MAKE_FUNCTION``, ``inline_user_function_return``, with, return),
  ``opcodes_exceptions.py`` (raise, except, finally: Note [Exceptions are traced through
  the exception table]), ``opcodes_312_313.py`` (opcodes new in 3.12 and 3.13).
- ``inlining.py``: ``InliningInstructionTranslator`` (Note [Generators are inlined lazily]).
- ``instruction_translator.py``: ``InstructionTranslator``, the root frame, which breaks
  the graph at calls and jumps.
- ``variables/lazy.py``: ``LazyVariableTracker``, a frame input realized on first read.
- ``exc.py``: ``explain_unsupported``, a break's user line and stack; it sits below the
  translator, so the loop and every opcode family call it without importing the loop.

Note [One method per opcode]
    As in byterun and early TorchDynamo, the loop looks up ``self.<OPNAME>`` and calls
    it with the instruction. Opcodes that behave alike share one handler by aliasing
    (``POP_JUMP_FORWARD_IF_FALSE = POP_JUMP_BACKWARD_IF_FALSE = ...``). An opcode with no
    method is a graph-break request naming the opcode.

Note [The translator's layers]
    The translator, its VariableTrackers, the graph and the cache call each other, yet
    no module imports one above it (pyproject.toml's "dynamo" contracts, counted with
    the imports inside functions): each call upward goes through an object handed down.
    A tracker makes trackers and runs operators through ``tx`` (Note [The trackers reach
    the builder through the translator], translator_base.py) and a body's graph through
    ``tx.output.subgraph_tracer()``; an opcode mixin inlines a call through
    ``self.inlining_translator_class``, which the concrete translators name; a resume
    function calls its cache through ``CompileConfig.call_frame``; every layer explains a
    break with ``exc.explain_unsupported``. Torch ties these modules by imports inside
    functions instead (``torch/_dynamo/symbolic_convert.py`` and ``variables/``).

Note [Where a graph can break]
    Only at a call (``CALL``, ``CALL_FUNCTION_EX``), at a subscript of a tensor
    (``x[x > 0]``, Note [A data-dependent subscript breaks the graph]) and at a
    conditional jump on a value we cannot decide (a tensor): there the stack is a clean
    list of values we can rebuild, the instruction can be run eagerly, and the rest of
    the function resumes in a new frame (inside a try block, at the last line before the
    block instead: Note [A graph break inside a try block], instruction_translator.py). A failure anywhere else (an unsupported opcode, a data-dependent
    ``not x``) makes the whole frame run eagerly. Real Dynamo can also break at other
    instructions, by restarting and cutting at the last instruction with an empty stack.
"""

from .inlining import InliningInstructionTranslator
from .instruction_translator import InstructionTranslator
from .opcodes_calls import MAX_INLINE_DEPTH
from .exc import explain_unsupported
from .translator_base import JUMP_OPCODES, MAX_INSTRUCTIONS, InstructionTranslatorBase, decoded
from .variables.lazy import LazyVariableTracker

__all__ = [
    "InliningInstructionTranslator", "InstructionTranslator", "InstructionTranslatorBase", "JUMP_OPCODES",
    "LazyVariableTracker", "MAX_INLINE_DEPTH", "MAX_INSTRUCTIONS", "decoded", "explain_unsupported",
]

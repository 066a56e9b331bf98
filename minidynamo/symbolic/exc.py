"""Exceptions of the symbolic interpreter and the graph-break explanation object.

Place in the pipeline: inside ``minidynamo.symbolic``. Mirrors ``torch/_dynamo/exc.py``
(``Unsupported``, ``unimplemented``, ``RestartAnalysis``) and the ``GraphCompileReason``
of ``torch/_dynamo/output_graph.py``.

Note [Unsupported is a graph break request]
    Any handler that meets something the interpreter cannot trace raises
    ``Unsupported`` (through :func:`unimplemented`). Whether that becomes a graph
    break, an eager fallback for the frame or an error (``fullgraph=True``) is decided
    by the instruction translator, not by the place that found the problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class GraphBreak:
    """Why a graph was cut: the explanation object behind every graph break.

    ``instruction`` is the opcode with its argument ("CALL 1", "POP_JUMP_FORWARD_IF_FALSE"),
    ``lineno`` and ``source`` the user line, ``reason`` what we could not trace and
    ``hint`` what the user can do. Real Dynamo: ``GraphCompileReason`` (reason +
    user_stack) and the ``gb_type/explanation/hints`` of ``unimplemented``.
    """

    reason: str
    instruction: str = "?"
    lineno: Optional[int] = None
    filename: str = "?"
    function: str = "?"
    source: str = ""
    hint: str = ""

    def __str__(self) -> str:
        where = f'File "{_short(self.filename)}", line {self.lineno}, in {self.function}'
        text = f"Graph break at {self.instruction} ({where}): {self.reason}"
        if self.source:
            text += f"\n    {self.source.strip()}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


def _short(filename: str) -> str:
    return filename.rsplit("/", 1)[-1]


class Unsupported(Exception):
    """Something the symbolic interpreter cannot trace (a graph break request)."""

    def __init__(self, reason: str, hint: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.hint = hint
        self.explanation: Optional[GraphBreak] = None  # filled in where the instruction is known

    def __str__(self) -> str:
        return str(self.explanation) if self.explanation is not None else self.reason


def unimplemented(reason: str, hint: str = "") -> "NoReturn":  # noqa: F821
    """Raise :class:`Unsupported` (torch/_dynamo/exc.py ``unimplemented``)."""
    raise Unsupported(reason, hint)


class FullGraphError(RuntimeError):
    """``fullgraph=True`` and the trace needed a graph break (real Dynamo raises Unsupported)."""

    def __init__(self, explanation: GraphBreak):
        super().__init__(f"fullgraph=True but the function needs a graph break:\n{explanation}")
        self.explanation = explanation


@dataclass
class RestartAnalysis(Exception):
    """Trace the frame again from the start, now knowing where to break.

    Real Dynamo: ``exc.RestartAnalysis`` + ``SpeculationLog``. A failed attempt to
    inline a call may have added graph nodes and mutated tracked lists; restarting
    from a clean state is simpler and safer than undoing that.
    """

    offset: int = -1
    explanation: Optional[GraphBreak] = field(default=None)
    stop_at: Optional[tuple] = None  # (offset, visit): stop there and run the rest eagerly


class EagerFallback(Exception):
    """The frame cannot be compiled at all; run it eagerly (with this explanation)."""

    def __init__(self, explanation: GraphBreak):
        super().__init__(str(explanation))
        self.explanation = explanation

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
    internal: bool = False  # a failure of ours (not an unsupported construct): warned about once

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
        self.internal = False  # set when this wraps an internal error of the tracer

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


# --- Note [The user's exception reaches the user unchanged] ---------------------------
# A user's `raise` (or a torch op failing at run time) must look as it does without
# compile: the same exception object, its own __cause__/__context__, and a traceback
# that ends at the user's line. Two things of ours get in the way: our exceptions
# (Unsupported, EagerFallback...) caught while the user's code ran, which Python would
# chain as __context__, and our own frames (the cache, the transformed function, the
# interpreter loop). ``tidy_user_exception`` removes both; the interpreter adds one
# traceback entry per user frame it ran (``resume_execution.user_frame_traceback``), so
# the last line is the user's. Real Dynamo gets this for free: user frames are real.

_PACKAGE_DIR = __file__.rsplit("/", 2)[0] + "/"
_USER_CODE_DIRS = (_PACKAGE_DIR + "corpus/", _PACKAGE_DIR + "exercises/")  # the teaching programs: user code


def _is_ours(exc: BaseException) -> bool:
    from .fake_values import TracedUserError

    return isinstance(exc, (Unsupported, RestartAnalysis, EagerFallback, TracedUserError))


def internal_frame(filename: str) -> bool:
    if filename.startswith(_USER_CODE_DIRS):
        return False
    return filename.startswith(_PACKAGE_DIR) or filename.startswith("<minidynamo")


def strip_internal_frames(tb):
    """The traceback without the entries of minidynamo's own code (relinked in place)."""
    kept = []
    while tb is not None:
        if not internal_frame(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    for a, b in zip(kept, kept[1:] + [None]):
        a.tb_next = b
    return kept[0] if kept else None


def tidy_user_exception(exc: BaseException) -> BaseException:
    seen, e = set(), exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if e.__context__ is not None and _is_ours(e.__context__):
            e.__context__ = None
        e.__traceback__ = strip_internal_frames(e.__traceback__)
        e = e.__cause__ if e.__cause__ is not None else e.__context__
    return exc


# --- Note [No internal error reaches the user] --------------------------------------
# Any exception of ours while tracing (a bug, a construct we model wrongly) becomes an
# Unsupported at the instruction it happened in (``InstructionTranslatorBase.step``),
# so it is a graph break like any other, or the frame runs eagerly; the cache keeps
# that outcome, so the frame is not traced again. The user hears of it once, by one
# warning naming their function, file:line, the instruction and the reason.

warned_internal: set = set()


def warn_internal(explanation: GraphBreak) -> None:
    """One warning per internal failure (function, line, reason), however many frames meet it."""
    import warnings

    if not explanation.internal:
        return
    key = (explanation.filename, explanation.lineno, explanation.instruction, explanation.reason)
    if key in warned_internal:
        return
    warned_internal.add(key)
    warnings.warn(f"minidynamo: tracing {explanation.function} failed at {explanation.filename}:"
                  f"{explanation.lineno} ({explanation.instruction}): {explanation.reason}; this part runs "
                  "eagerly, and is not traced again", stacklevel=2)

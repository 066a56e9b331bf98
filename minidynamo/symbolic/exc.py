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

import linecache
import traceback
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class GraphBreak:
    """Why a graph was cut: the explanation object behind every graph break.

    ``instruction`` is the opcode with its argument ("CALL 1", "POP_JUMP_FORWARD_IF_FALSE"),
    ``lineno`` and ``source`` the user's line (Note [The user's line of a graph break]),
    ``reason`` what we could not trace (the explanation), ``hint`` what the user can do,
    ``gb_id`` the id of torch's registry entry for such a break and ``gb_type`` its words
    (Note [Graph-break types come from torch's registry]), ``context`` the developer
    context (our internal names), ``user_stack`` every frame from the compiled one to the
    break, innermost last (``traceback.FrameSummary``). Real Dynamo: ``GraphCompileReason``
    (reason + user_stack) and the ``gb_type/context/explanation/hints`` of ``unimplemented``.
    """

    reason: str
    instruction: str = "?"
    lineno: Optional[int] = None
    filename: str = "?"
    function: str = "?"
    source: str = ""
    hint: str = ""
    internal: bool = False  # a failure of ours (not an unsupported construct): warned about once
    warn: str = ""  # not a failure, but what the user would not expect to run eagerly: warned once per this key
    gb_id: str = ""
    context: str = ""
    user_stack: list = field(default_factory=list)
    hop_name: str = ""  # the higher-order op whose body broke and fell back (torch's ``_hop_name``, add_hop_context)
    # Note [A break the frame cannot resume from]: compiled up to a checkpoint, the rest of the frame eager;
    # ``cause`` is the break met past the checkpoint (what torch's graph_breaks log prints after its preamble)
    cause: Optional["GraphBreak"] = None

    @property
    def gb_type(self) -> Optional[str]:
        """torch's words for this kind of break, read from its registry (None: no entry)."""
        from .graph_break_registry import gb_type

        return gb_type(self.gb_id)

    @property
    def explanation(self) -> str:
        """torch's name for ``reason``."""
        return self.reason

    @property
    def hints(self) -> list[str]:
        return [self.hint] if self.hint else []

    def __str__(self) -> str:
        """torch/_dynamo/exc.py ``format_graph_break_message``'s shape, after the user's file:line."""
        from .graph_break_registry import documentation_link

        where = f'File "{_short(self.filename)}", line {self.lineno}, in {self.function}'
        gb_type = self.gb_type
        if gb_type is None:
            text = f"Graph break at {self.instruction} ({where}): {self.reason}"
        else:
            text = f"Graph break at {self.instruction} ({where}): {gb_type} [{self.gb_id}]"
            if self.hop_name:  # torch/_dynamo/exc.py augment_exc_message_with_hop_name: after the first line
                text += f"\n  Higher Order Operator: {self.hop_name}"
            text += f"\n  Explanation: {self.reason}"
        if self.source:
            text += f"\n    {self.source.strip()}"
        for hint in self.hints:
            text += f"\n  Hint: {hint}"
        if self.context:
            text += f"\n  Developer debug context: {self.context}"
        link = documentation_link(self.gb_id)
        if link:
            text += f"\n  For more details about this graph break, please visit: {link}"
        return text


def _short(filename: str) -> str:
    return filename.rsplit("/", 1)[-1]


class Unsupported(Exception):
    """Something the symbolic interpreter cannot trace (a graph break request)."""

    def __init__(self, reason: str, hint: str = "", warn: str = "", gb_id: str = "", context: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.hint = hint
        self.explanation: Optional[GraphBreak] = None  # filled in where the instruction is known
        self.internal = False  # set when this wraps an internal error of the tracer
        self.warn = warn  # say so in one warning per this key, as for an internal error (GraphBreak.warn)
        self.gb_id = gb_id  # torch's registry id (Note [Graph-break types come from torch's registry])
        self.context = context  # developer context: internal names stay here, out of the reason
        self.hop_name = ""  # set by a higher-order op that falls back to eager (GraphBreak.hop_name)

    def __str__(self) -> str:
        return str(self.explanation) if self.explanation is not None else self.reason


def unimplemented(reason: str, hint: str = "", warn: str = "", *, gb_id: str = "",
                  context: str = "") -> "NoReturn":  # noqa: F821
    """Raise :class:`Unsupported` (torch/_dynamo/exc.py ``unimplemented``).

    ``reason``: the explanation a user reads; ``gb_id``: the id of torch's registry entry
    for this kind of break (``graph_break_registry.py``); ``context``: developer context;
    ``warn``: tell the user, once per key.
    """
    raise Unsupported(reason, hint, warn, gb_id, context)


class ObservedException(Unsupported):
    """An exception the traced code raised (``raise``, ``d[k]`` without the key, ``next()`` at the end).

    torch/_dynamo/exc.py ``ObservedException``: not an error of the tracer but the user's
    program raising, seen while tracing. ``value`` is the exception object's tracker
    (``variables/exceptions.py``). The translator that runs the raising instruction looks up a
    handler in its code's exception table and jumps there (``opcodes_exceptions.py``); with
    none, the exception leaves that frame for its caller's handler, and leaving the compiled
    frame is the "Observed exception" graph break, after which eager raises it for real.

    Note [An observed exception is an Unsupported]
        Ours subclasses ``Unsupported`` (torch's does not): every place that gives up on an
        ``Unsupported`` (a value that is not a constant, a tracker asked a question it cannot
        answer) gives up on an exception it did not expect in the same way, and the tracer
        needs no second path for it. The translator catches it first, by its own class.
    """

    def __init__(self, value, reason: str):
        from . import graph_break_registry as gb

        super().__init__(reason, gb_id=gb.OBSERVED_EXCEPTION)
        self.value = value


class FullGraphError(RuntimeError):
    """``fullgraph=True`` and the trace needed a graph break (real Dynamo raises Unsupported)."""

    def __init__(self, explanation: GraphBreak):
        # the first line is the registry's gb_type, as torch's Unsupported message's (exc.py
        # ``format_graph_break_message``), so the two errors open alike
        gb_type = getattr(explanation, "gb_type", None)
        super().__init__((f"{gb_type}\n" if gb_type else "")
                         + f"fullgraph=True but the function needs a graph break:\n{explanation}")
        self.explanation = explanation


class BackendCompilerFailed(RuntimeError):
    """A backend the user handed ``md.compile`` raised on a graph (torch/_dynamo/exc.py ``BackendCompilerFailed``,
    raised in output_graph.py ``call_user_compiler``): torch's message, the user's exception as ``__cause__``.
    Under ``config.suppress_errors`` (our default) the frame runs eagerly instead, with this as the warning's reason.
    """

    def __init__(self, backend_fn, inner_exception: BaseException):
        self.backend_name = getattr(backend_fn, "__name__", "?")
        self.inner_exception = inner_exception
        super().__init__(f"backend={self.backend_name!r} raised:\n{type(inner_exception).__name__}: {inner_exception}")


class ConstraintViolationError(RuntimeError):
    """A dim marked dynamic (``md.mark_dynamic``) that the trace fixed to a constant (torch's class of this
    name, torch/fx/experimental/symbolic_shapes.py, raised while producing the shape guards). The user's
    mark and the user's code disagree: raised, never a silent fallback."""


class UncapturedHigherOrderOpError(RuntimeError):
    """A higher-order op (``torch.cond``, ``checkpoint``) whose body cannot be captured whole.

    torch raises the class of this name (torch/_dynamo/exc.py ``UncapturedHigherOrderOpError``,
    from ``speculate_subgraph`` in torch/_dynamo/variables/higher_order_ops.py) instead of a graph
    break: a branch of ``torch.cond`` cannot run half in a graph and half eagerly. The message
    begins as torch's does.
    """

    def __init__(self, op: str, reason: str):
        super().__init__("This higher order operator doesn't work unless it is captured completely with "
                         f"torch.compile. Got graph break/error:\n\n{reason}\n  Higher Order Operator: {op}")
        self.op, self.reason = op, reason


class TorchRuntimeError(RuntimeError):
    """An operation that fails on its fake values while tracing, and would fail the same way in eager.

    torch raises the class of this name (torch/_dynamo/exc.py ``TorchRuntimeError``, from
    ``get_fake_value`` in torch/_dynamo/utils.py): for ``torch.cond`` whose branches return
    different shapes, eager's ``torch.cond`` fails too. Raised, not turned into a graph break.
    """


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


class TensorifyScalarRestartAnalysis(Exception):
    """A lifted float the AOT backend could not turn into tensor compute: trace again with it a constant.

    torch's class of this name (torch/_dynamo/exc.py), raised by ``tensorify_python_scalars``
    (torch/fx/passes/_tensorify_python_scalars.py); ours by ``dynamic_shapes.check_tensorify``
    (Note [Tensorify before AOT]). ``sources``: the floats to keep constant from now on.
    """

    def __init__(self, sources: set):
        super().__init__(f"floats kept constant: {sorted(sources)}")
        self.sources = sources


class EagerFallback(Exception):
    """The frame cannot be compiled at all; run it eagerly (with this explanation)."""

    def __init__(self, explanation: GraphBreak):
        super().__init__(str(explanation))
        self.explanation = explanation


class TracedUserError(RuntimeError):
    """The user's code would fail here in eager too (e.g. a shape mismatch); raised by ``fake_values.py``."""


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
    return isinstance(exc, (Unsupported, RestartAnalysis, EagerFallback, TracedUserError))


def internal_frame(filename: str) -> bool:
    if filename.startswith(_USER_CODE_DIRS):
        return False
    return filename.startswith(_PACKAGE_DIR) or filename.startswith("<minidynamo")


# --- Note [The user's line of a graph break] -----------------------------------------
# A break may happen deep inside a library the user called (``logging.warning`` reaching
# ``sys._getframe``); torch's ``user_stack`` then ends in the library. Ours keeps that
# whole stack (``GraphBreak.user_stack``) and names, as the break's ``file:line``, the
# innermost frame that is the user's: not library code as Dynamo's trace rules see it
# (the stdlib, torch, the skip-listed packages: ``trace_rules.is_library_file``), not
# minidynamo itself (its teaching corpus and exercises are user code). When every frame
# is library code, it is the innermost frame, as torch's.


def is_library_file(filename: str) -> bool:
    from minidynamo.trace_rules import is_library_file as library

    return internal_frame(filename) or library(filename)


def explain_unsupported(tx, e: Unsupported) -> GraphBreak:
    """Fill in the explanation object of a graph break: the user's frame, and the stack down to the break.

    ``tx``: the translator the break happened in (its ``parent`` chain is the inlined calls
    around it); passed in, so the translator and its opcode mixins all call this one function.
    """
    if e.explanation is None:
        frames = []  # innermost first
        t = tx
        while t is not None:
            frames.append(t)
            t = getattr(t, "parent", None)
        user_stack = [traceback.FrameSummary(t.code.co_filename, t.lineno or 0, t.code.co_name,
                                             line=linecache.getline(t.code.co_filename, t.lineno or 0).strip())
                      for t in reversed(frames)]
        # Note [The user's line of a graph break]: the innermost frame of the user's
        at = next((t for t in frames if not is_library_file(t.code.co_filename)), tx)
        inst = at.current_inst
        filename = at.code.co_filename
        e.explanation = GraphBreak(
            reason=e.reason,
            instruction=f"{inst.opname} {inst.argrepr}".strip() if inst else "?",
            lineno=at.lineno,
            filename=filename,
            function=at.code.co_name,
            source=linecache.getline(filename, at.lineno or 0),
            hint=e.hint,
            internal=e.internal,
            warn=e.warn,
            gb_id=e.gb_id,
            context=e.context,
            user_stack=user_stack,
            hop_name=e.hop_name,
        )
    return e.explanation


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
    """One warning per internal failure (function, line, reason), however many frames meet it.

    An explanation marked ``warn`` (something we do not trace by design, such as a
    tensor subclass) is worded as such, not as a failure: one warning per its key (the
    subclass), however many frames meet it (torch calls the subclass's own methods too).
    """
    import warnings

    if not (explanation.internal or explanation.warn):
        return
    key = (explanation.filename, explanation.lineno, explanation.instruction, explanation.reason)
    if explanation.warn and not explanation.internal:
        key = explanation.warn
    if key in warned_internal:
        return
    warned_internal.add(key)
    where = f"{explanation.filename}:{explanation.lineno} ({explanation.instruction})"
    if explanation.internal:
        text = (f"minidynamo: tracing {explanation.function} failed at {where}: {explanation.reason}; this part "
                "runs eagerly, and is not traced again")
    else:
        text = (f"minidynamo: {explanation.function} is not traced from {where} on: {explanation.reason}; "
                "this part runs eagerly")
        if explanation.hint:
            text += f" ({explanation.hint})"
    warnings.warn(text, stacklevel=2)


# --- Note [An internal error while the compiled code runs] ---------------------------
# After a trace, the transformed function runs our code beside the user's: the runtime
# wrappers (aliased outputs regenerated, mutated inputs written back), a rebuilt value,
# a side effect replayed. An exception that escapes it is ours when the innermost Python
# frame it was raised in is a module of this package; it is the user's when it was raised
# in the user's code, in torch (a kernel's error inside the graph: the graph's code is
# torch.fx's ``<eval_with_key>``), in the concrete interpreter running the user's code
# (``interpreter/ceval.py`` and its ``ceval_*`` handlers execute the user's own raise), or by
# a line of the transformed function itself (it calls, sets and deletes what the user's
# code did), except a NameError there, which only a bug in our codegen can cause. The
# user's exception propagates unchanged. Ours: the entry is dropped and the frame runs
# eagerly for good, with one warning that names the user's function and our op and
# line, but only when rerunning it is safe: the entry returned straight from its graph
# (no graph break, so no user code ran), mutated no input and replayed no side effect.
# Otherwise eager's rerun would apply a mutation or a print twice, a silently wrong
# result: we raise ``InternalError`` instead, which says so. (A graph with random ops
# has consumed random numbers before the rerun: its outputs are eager's for the next
# random numbers.)


class InternalError(RuntimeError):
    """An internal error of minidynamo while a compiled frame ran, after effects that cannot be undone."""


def raised_by_us(exc: BaseException) -> Optional[str]:
    """``"file:line in function"`` of our frame that raised ``exc``, or None when the user's (see the Note)."""
    if isinstance(exc, InternalError):  # a frame below gave up already: passed on as it is
        return None
    tb, last = exc.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None:
        return None
    code = last.tb_frame.f_code
    where = f"{_short(code.co_filename)}:{last.tb_lineno} in {code.co_name}"
    if code.co_filename.startswith("<minidynamo transformed"):
        return where if isinstance(exc, NameError) else None
    if not internal_frame(code.co_filename) or _runs_user_code(last.tb_frame.f_globals.get("__name__", "")):
        return None
    return where


def _runs_user_code(module: str) -> bool:
    """The concrete interpreter's modules: what they raise, they raise for the user's code."""
    return module == "minidynamo.interpreter" or module.startswith("minidynamo.interpreter.")


def runtime_error_explanation(code, exc: BaseException, where: str) -> GraphBreak:
    """The warning's explanation of an internal error met while ``code``'s compiled entry ran."""
    import linecache

    lineno = code.co_firstlineno
    return GraphBreak(reason=f"internal error of minidynamo at {where}: {type(exc).__name__}: {exc}",
                      instruction="(running the compiled code)", lineno=lineno, filename=code.co_filename,
                      function=code.co_qualname, source=linecache.getline(code.co_filename, lineno), internal=True)

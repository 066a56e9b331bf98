"""The event log: every stage of the pipeline reports what it does here.

Place in the pipeline: beside it. The symbolic interpreter, the fake tensor mode,
the AOT stages and the runtime wrappers all call :func:`emit`; widgets and plots
(``minidynamo.widgets``) only ever read the recorded events.

PyTorch has no single counterpart. The closest are ``torch._dynamo.utils.counters``,
the structured trace (``torch._logging.trace_structured``, read by tlparse) and
``TORCH_LOGS``; ours is one in-memory list so that a notebook can look at it.

Note [Events cost one flag check]
    With nobody recording, ``emit`` returns after testing one module global.
    Hot paths that would build an expensive payload first test ``is_recording()``
    themselves, so nothing is formatted for a log nobody reads.

Usage::

    with events.record() as log:
        md.compile(f)(x)
    [e.op for e in log if e.kind == "op" and e.pass_name == "dynamo"]
"""

from __future__ import annotations

import contextlib
import itertools
from typing import Any, Callable, Iterator

__all__ = [
    "Event",
    "record",
    "emit",
    "emit_lazy",
    "is_recording",
    "pass_scope",
    "current_pass",
    "source_line",
    "current_line",
    "subscribe",
    "listen",
    "unlisten",
    "ops_per_pass",
]

# The known pass names. A stage that makes a further pass adds its own name.
DYNAMO = "dynamo"
AOT_METADATA = "aot_metadata"
AOT_JOINT = "aot_joint"


class Event:
    """One thing a stage did.

    ``kind`` is one of "pass_begin", "pass_end", "op", "graph_break", "guard",
    "recompile", "alias_regen", and the finer ones some stages add:
    "functionalize" (an in-place or view op rewritten), "decomposition",
    "dispatch" (a handler that ran, from ``dispatch.trace``) and
    "interpret_frame" (the concrete interpreter entered a frame); ``pass_name``
    is the pass that was current when it happened; ``op`` is the OpOverload's
    name as torch prints it ("aten.add.Tensor") for op events; ``line`` is the
    user source line being traced, when known. Everything else a stage reports
    sits in ``details`` and reads as an attribute too (``event.how``).

    Note [Events are formatted when read]
        A compile of a small CNN emits thousands of events (one per FakeTensor op
        of each pass, one per guard), and the log records by default; formatting
        each as it happens (``str(op)``, a source's expression, shape tuples, the
        alias scan) cost a tenth of the compile. So a stage may hand over raw
        values instead: ``op`` may be the OpOverload itself, and
        :func:`emit_lazy` takes a function and the raw values it needs. The
        strings and the ``details`` dict are built on first access, once, and
        then read as if they had been stored (the same values, the same types).
        Raw values must be snapshots that cannot change later (a ``torch.Size``,
        an int, a frozen source), never a live tensor.
    """

    __slots__ = ("kind", "pass_name", "_op", "line", "seq", "_details", "_build")

    def __init__(self, kind: str, pass_name: str | None = None, op: Any = None, line: int | None = None,
                 seq: int = 0, details: dict[str, Any] | None = None) -> None:
        self.kind = kind
        self.pass_name = pass_name
        self._op = op
        self.line = line
        self.seq = seq
        self._details = {} if details is None else details
        self._build = None

    @property
    def op(self) -> str | None:
        op = self._op
        if op is None or type(op) is str:
            return op
        self._op = op = str(op)  # an OpOverload: its name as torch prints it
        return op

    @op.setter
    def op(self, value: str | None) -> None:
        self._op = value

    @property
    def details(self) -> dict[str, Any]:
        if self._build is not None:
            build, raw = self._build
            self._build = None
            self._details = build(*raw)
        return self._details

    @details.setter
    def details(self, value: dict[str, Any]) -> None:
        self._build, self._details = None, value

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: expose the details as attributes.
        if name.startswith("_"):
            raise AttributeError(name)
        details = self.details
        if name in details:
            return details[name]
        raise AttributeError(f"{type(self).__name__} of kind {self.kind!r} has no field {name!r}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not Event:
            return NotImplemented
        return (self.kind, self.pass_name, self.op, self.line, self.seq, self.details) == (
            other.kind, other.pass_name, other.op, other.line, other.seq, other.details)

    __hash__ = None  # type: ignore[assignment]  # as the dataclass it was: mutable, unhashable

    def __repr__(self) -> str:
        parts = [f"kind={self.kind!r}", f"pass_name={self.pass_name!r}"]
        if self.op is not None:
            parts.append(f"op={self.op!r}")
        if self.line is not None:
            parts.append(f"line={self.line}")
        parts += [f"{k}={v!r}" for k, v in self.details.items()]
        return f"Event({', '.join(parts)})"


class _Log(list):
    """The list ``record()`` yields: events are kept as a flat tape and become Events when read.

    Note [The log is a tape until read]
        An Event object per op and guard (with its details dict and lists), kept
        until the log is read, is thousands of new objects the garbage collector
        tracks; a recorded mobilenetv3 compile (6112 events) made one more full
        collection of the whole process than an unrecorded one (370k-440k objects,
        torch's included: 0.25-0.35 s of CPU on the shared machine). CPython counts
        every tracked object that survives into the old generation towards its
        next full collection. So while recording, an event is seven plain values
        (kind, pass, line, seq, op, builder, count) and its raw values appended to
        one list, the tape; raw values are long-lived objects (the OpOverload, the
        Source) or tuples of ints, which the collector stops tracking, so no new
        object per event survives for it.
        Every way of reading the log (iterating, ``len``, indexing, ``in``,
        ``repr``, comparing) first turns the tape into Events, in order, so the
        log reads as the list of Events it always was.
    """

    __slots__ = ("_tape",)

    def __init__(self) -> None:
        super().__init__()
        self._tape: list[Any] = []

    def _flush(self) -> None:
        tape = self._tape
        if not tape:
            return
        self._tape = []
        out, i, n = [], 0, len(tape)
        while i < n:
            kind, pass_name, line, seq, op, build, count = tape[i : i + 7]
            raw = tape[i + 7 : i + 7 + count]
            i += 7 + count
            event = Event(kind, pass_name, op, line, seq, raw[0] if build is None else None)
            if build is not None:
                event._build = (build, tuple(raw))
            out.append(event)
        list.extend(self, out)


    def _kinds_and_passes(self) -> Iterator[tuple[str, str | None]]:
        """(kind, pass_name) of every event, in order, without making Events of the tape."""
        for event in list.__iter__(self):
            yield event.kind, event.pass_name
        tape, i = self._tape, 0
        while i < len(tape):
            yield tape[i], tape[i + 1]
            i += 7 + tape[i + 6]


def _reading(name: str):
    method = getattr(list, name)

    def read(self, *args, **kwargs):
        self._flush()
        return method(self, *args, **kwargs)

    read.__name__ = name
    return read


for _name in ("__iter__", "__len__", "__getitem__", "__contains__", "__reversed__", "__repr__", "__eq__",
              "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__add__", "__mul__", "__rmul__", "__iadd__",
              "__imul__", "__setitem__", "__delitem__", "__reduce_ex__", "__copy__", "append", "extend",
              "insert", "pop", "remove", "clear", "count", "index", "copy", "sort", "reverse"):
    if hasattr(list, _name):
        setattr(_Log, _name, _reading(_name))
del _name
_Log.__hash__ = None  # type: ignore[assignment]


# --- state -------------------------------------------------------------------
# _recording is the one flag every emit tests. It is true while at least one
# recorder or subscriber is active.
_recording = False
_logs: list[_Log] = []
_subscribers: list[Callable[[Event], None]] = []
_pass_stack: list[str] = []
_line_stack: list[int | None] = []
_counter = itertools.count()


def _refresh_flag() -> None:
    global _recording
    _recording = bool(_logs or _subscribers)


def is_recording() -> bool:
    """True when someone listens; check it before building an expensive event."""
    return _recording


def current_pass() -> str | None:
    """The name of the pass now running ("dynamo", "aot_metadata", ...), or None."""
    return _pass_stack[-1] if _pass_stack else None


def current_line() -> int | None:
    """The user source line the current stage is working on, when it says."""
    return _line_stack[-1] if _line_stack else None


def emit(kind: str, *, op: Any = None, pass_name: str | None = None, **details: Any) -> None:
    """Report one event. Costs one flag check when nobody records.

    ``op`` may be the OpOverload itself; it is printed when read (Note [Events are formatted when read]).
    """
    if not _recording:
        return
    line = details.pop("line") if "line" in details else (_line_stack[-1] if _line_stack else None)
    if pass_name is None and _pass_stack:
        pass_name = _pass_stack[-1]
    seq = next(_counter)
    for log in _logs:
        log._tape.extend((kind, pass_name, line, seq, op, None, 1, details))
    if _subscribers:
        _tell(Event(kind, pass_name, op, line, seq, details))


def emit_lazy(kind: str, build: Callable[..., dict[str, Any]], *raw: Any, op: Any = None) -> None:
    """Report one event whose ``details`` are ``build(*raw)``, called only if someone reads them.

    For hot call sites (Note [Events are formatted when read]); the caller tests
    ``is_recording()`` first, so that not even the raw values are made for nobody.
    The raw values should be long-lived objects or tuples of plain values (Note
    [The log is a tape until read]): a new list per event would be tracked.
    """
    if not _recording:
        return
    pass_name = _pass_stack[-1] if _pass_stack else None
    line = _line_stack[-1] if _line_stack else None
    seq = next(_counter)
    for log in _logs:
        tape = log._tape
        tape.extend((kind, pass_name, line, seq, op, build, len(raw)))
        tape.extend(raw)
    if _subscribers:
        event = Event(kind, pass_name, op, line, seq)
        event._build = (build, raw)
        _tell(event)


def _tell(event: Event) -> None:
    for callback in list(_subscribers):
        callback(event)


@contextlib.contextmanager
def record() -> Iterator[list[Event]]:
    """Record every event emitted inside the block into the yielded list."""
    log = _Log()
    _logs.append(log)
    _refresh_flag()
    try:
        yield log
    finally:
        del _logs[next(i for i, other in enumerate(_logs) if other is log)]  # by identity: == would read logs
        _refresh_flag()


@contextlib.contextmanager
def subscribe(callback: Callable[[Event], None]) -> Iterator[None]:
    """Call ``callback(event)`` for each event as it happens (live widgets use this)."""
    _subscribers.append(callback)
    _refresh_flag()
    try:
        yield
    finally:
        _subscribers.remove(callback)
        _refresh_flag()


def listen(callback: Callable[[Event], None]) -> None:
    """Call ``callback(event)`` for each event from now on, until :func:`unlisten` (the log switch uses this)."""
    if callback not in _subscribers:
        _subscribers.append(callback)
        _refresh_flag()


def unlisten(callback: Callable[[Event], None]) -> None:
    if callback in _subscribers:
        _subscribers.remove(callback)
        _refresh_flag()


@contextlib.contextmanager
def pass_scope(name: str, **details: Any) -> Iterator[None]:
    """Run a pass: makes ``name`` the current pass and emits pass_begin/pass_end."""
    _pass_stack.append(name)
    emit("pass_begin", **details)
    try:
        yield
    finally:
        emit("pass_end")
        _pass_stack.pop()


class source_line:  # noqa: N801 - used as a function: ``with events.source_line(n):``
    """Stamp events emitted inside the block with the user source line ``lineno``.

    A class rather than a ``contextlib.contextmanager``: it is entered for every
    instruction Dynamo steps and every node the AOT passes run (15k times for a
    MobileNet), and a generator-based one costs five times as much per block.
    """

    __slots__ = ("lineno",)

    def __init__(self, lineno: int | None) -> None:
        self.lineno = lineno

    def __enter__(self) -> None:
        _line_stack.append(self.lineno)

    def __exit__(self, *exc: Any) -> bool:
        _line_stack.pop()
        return False


def ops_per_pass(log: list[Event]) -> dict[str, int]:
    """How many FakeTensor op events each pass made, in the order the passes appear."""
    counts: dict[str, int] = {}
    pairs = log._kinds_and_passes() if isinstance(log, _Log) else ((e.kind, e.pass_name) for e in log)
    for kind, pass_name in pairs:  # a recorded log is counted off its tape (Note [The log is a tape until read])
        if kind == "op" and pass_name is not None:
            counts[pass_name] = counts.get(pass_name, 0) + 1
    return counts

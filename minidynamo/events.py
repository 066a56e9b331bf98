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
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

__all__ = [
    "Event",
    "record",
    "emit",
    "is_recording",
    "pass_scope",
    "current_pass",
    "source_line",
    "current_line",
    "subscribe",
    "ops_per_pass",
]

# The known pass names. A stage that makes a further pass adds its own name.
DYNAMO = "dynamo"
AOT_METADATA = "aot_metadata"
AOT_JOINT = "aot_joint"


@dataclass
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
    """

    kind: str
    pass_name: str | None = None
    op: str | None = None
    line: int | None = None
    seq: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: expose the details as attributes.
        details = self.__dict__.get("details", {})
        if name in details:
            return details[name]
        raise AttributeError(f"{type(self).__name__} of kind {self.kind!r} has no field {name!r}")

    def __repr__(self) -> str:
        parts = [f"kind={self.kind!r}", f"pass_name={self.pass_name!r}"]
        if self.op is not None:
            parts.append(f"op={self.op!r}")
        if self.line is not None:
            parts.append(f"line={self.line}")
        parts += [f"{k}={v!r}" for k, v in self.details.items()]
        return f"Event({', '.join(parts)})"


# --- state -------------------------------------------------------------------
# _recording is the one flag every emit tests. It is true while at least one
# recorder or subscriber is active.
_recording = False
_logs: list[list[Event]] = []
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


def emit(kind: str, *, op: str | None = None, pass_name: str | None = None, **details: Any) -> None:
    """Report one event. Costs one flag check when nobody records."""
    if not _recording:
        return
    event = Event(
        kind=kind,
        pass_name=pass_name if pass_name is not None else current_pass(),
        op=op,
        line=details.pop("line", None) if "line" in details else current_line(),
        seq=next(_counter),
        details=details,
    )
    for log in _logs:
        log.append(event)
    for callback in list(_subscribers):
        callback(event)


@contextlib.contextmanager
def record() -> Iterator[list[Event]]:
    """Record every event emitted inside the block into the yielded list."""
    log: list[Event] = []
    _logs.append(log)
    _refresh_flag()
    try:
        yield log
    finally:
        _logs.remove(log)
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


@contextlib.contextmanager
def source_line(lineno: int | None) -> Iterator[None]:
    """Stamp events emitted inside the block with the user source line ``lineno``."""
    _line_stack.append(lineno)
    try:
        yield
    finally:
        _line_stack.pop()


def ops_per_pass(log: list[Event]) -> dict[str, int]:
    """How many FakeTensor op events each pass made, in the order the passes appear."""
    counts: dict[str, int] = {}
    for e in log:
        if e.kind == "op" and e.pass_name is not None:
            counts[e.pass_name] = counts.get(e.pass_name, 0) + 1
    return counts

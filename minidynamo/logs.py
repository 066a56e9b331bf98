"""Logs like ``TORCH_LOGS``: ``md.set_logs(graph_breaks=True, ...)`` and ``MINIDYNAMO_LOGS``.

Place in the pipeline: beside it, as ``events.py``: it reads the event log only
(every stage already reports its graph breaks, recompiles, cache entries, graphs
and symbols there) and writes what it reads through Python's ``logging``. Mirrors
``torch/_logging/_internal.py`` (``set_logs``, ``getArtifactLogger``,
``TorchLogsFormatter``) and the artifacts of ``torch/_logging/_registrations.py``.

Note [One program, both switches, the same kinds of lines]
    ``TORCH_LOGS="graph_breaks,recompiles"`` (or ``torch._logging.set_logs(...)``)
    makes torch log each artifact through a logger of its own, named
    ``<module>.__<artifact>`` (``torch._dynamo.symbolic_convert.__graph_breaks``),
    with a prefix that says the level, time, process, the file:line that logged it,
    the frame and compile ids (``[0/1]``: frame 0, its second compile) and the
    artifact (``[__graph_breaks]``). Ours uses the same artifact names, logger names
    of the same form (``minidynamo.symbolic.convert_frame.__graph_breaks``), the same
    prefix and the same first lines (``Graph break in user code at file:line``,
    ``Recompiling function f in file:line``, ``TRACED GRAPH``, ``GUARDS:``), so a
    reader runs one program under ``TORCH_LOGS`` and under ``MINIDYNAMO_LOGS`` and
    reads them side by side. What follows those first lines is ours (our guards, our
    graphs). Differences: the ids count our frames and compiles; ``dynamic`` logs the
    symbols our ShapeEnv creates (torch's logs much more, at INFO).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from minidynamo import events

__all__ = ["set_logs", "ARTIFACTS", "get_artifact_logger"]

# artifact -> the module of ours that does what torch's logging module does (the logger's name)
ARTIFACTS = {
    "graph_breaks": "minidynamo.symbolic.convert_frame",   # torch/_dynamo/symbolic_convert.py
    "recompiles": "minidynamo.symbolic.frame_cache",      # torch/_dynamo/guards.py
    "guards": "minidynamo.symbolic.guards",               # torch/_dynamo/guards.py
    "graph_code": "minidynamo.symbolic.output_graph",     # torch/_dynamo/output_graph.py
    "aot_graphs": "minidynamo.aot.graph_compile",         # torch/_functorch/_aot_autograd/graph_capture.py
    "dynamic": "minidynamo.shapes.symbolic_shapes",       # torch/fx/experimental/symbolic_shapes.py (a log)
}
_LEVEL = {"dynamic": logging.INFO}  # torch's "dynamic" is a log at INFO; the artifacts log at DEBUG ("V")

_enabled: set[str] = set()
_handler: logging.Handler | None = None
_ids: dict = {}  # code object (else function name) -> [frame id, compiles so far] (torch's CompileId)


def get_artifact_logger(artifact: str) -> logging.Logger:
    """torch/_logging/_internal.py ``getArtifactLogger``: ``<module>.__<artifact>`` (``dynamic``: the module)."""
    module = ARTIFACTS[artifact]
    return logging.getLogger(module if artifact == "dynamic" else f"{module}.__{artifact}")


class MinidynamoLogsFormatter(logging.Formatter):
    """torch/_logging/_internal.py ``TorchLogsFormatter``: every line of a record gets the prefix."""

    def format(self, record: logging.LogRecord) -> str:
        level = record.levelname[0] if record.levelno != logging.DEBUG else "V"
        t = time.localtime(record.created)
        stamp = time.strftime("%m%d %H:%M:%S", t) + f".{int(record.msecs * 1000):06d}"
        where = getattr(record, "where", None) or f"{record.pathname}:{record.lineno}"
        artifact = getattr(record, "artifact", None)
        compile_id = getattr(record, "compile_id", None)
        prefix = f"{level}{stamp} {record.process} {where}]"
        if compile_id:
            prefix += f" [{compile_id}]"
        if artifact:
            prefix += f" [__{artifact}]"
        return "\n".join(f"{prefix} {line}" for line in record.getMessage().split("\n"))


def _emit(artifact: str, text: str, where: str) -> None:
    logger = get_artifact_logger(artifact)
    compile_id = "" if _current is None else _compile_id(_current)
    extra: dict[str, Any] = {"where": where, "compile_id": compile_id,
                             "artifact": None if artifact == "dynamic" else artifact}
    logger.log(_LEVEL.get(artifact, logging.DEBUG), text, extra=extra)


_seen_breaks: set = set()  # (gb_type, file, line) of the breaks logged in full (Note [A duplicate graph break is logged short])
_current = None  # the frame being compiled (its code object, else its name), from the dynamo pass's pass_begin


def _compile_id(function, new_compile: bool = False) -> str:
    """torch's ``CompileId`` as it prints it: ``frame/compile`` (``[0/1]``: frame 0, its second compile).

    A frame is its code object, as torch's frame ids count code objects: transformers'
    ``wrapper``, ``wrapped_func`` and ``forward`` are three frames though ``functools.wraps``
    names all three ``forward``."""
    ids = _ids.get(function)
    if ids is None:
        ids = _ids[function] = [len(_ids), 0]
    elif new_compile:
        ids[1] += 1
    return f"{ids[0]}/{ids[1]}"


def _emitter() -> str:
    """``file:line`` of the stage's line that emitted the event (torch's prefix names its logging call)."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename in (__file__, events.__file__):
        f = f.f_back
    if f is None:
        return "?"
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    return f"{f.f_code.co_filename.replace(package, '')}:{f.f_lineno}"


# --- what each artifact prints, from the events ---------------------------------------

# what torch's break_graph_if_unsupported says of each instruction it cuts a graph at (its msg_prefix,
# torch/_dynamo/symbolic_convert.py)
_DESCRIBED = {
    "CALL": "a function call, e.g. f(x, y)",
    "CALL_FUNCTION": "a call to a regular function, e.g. f(x, y)",
    "CALL_FUNCTION_EX": "a variadic function call, e.g. f(*args)",
    "CALL_FUNCTION_KW": "a function call with keyword arguments, e.g. f(x=True)",
    "CALL_KW": "a function call with keyword arguments, e.g. f(x=True)",
    "COMPARE_OP": "a comparison operation, e.g. a == b",
    "STORE_ATTR": "storing an object's attribute, e.g. x.attr = y",
    "STORE_SUBSCR": "trying to store subscript, e.g. x[key] = y",
    "BINARY_SUBSCR": "a binary subscript, e.g. x[attr]",
}


def _graph_break(e) -> None:
    exp = e.details.get("explanation")
    if exp is None:
        return
    if exp.cause is not None:  # Note [A break the frame cannot resume from] (instruction_translator.py)
        exp = exp.cause
        preamble = ("Encountered graph break that we cannot resume from. Compiling up to the previous resumable "
                    "state, then skipping the rest of the function. Graph break encountered:")
    elif e.details.get("root_instruction") in _DESCRIBED:
        op = e.details["root_instruction"]
        preamble = f"Encountered graph break when attempting to trace {op}: {_DESCRIBED[op]}:"
    elif e.details.get("root_instruction"):  # a jump: torch's generic_jump logs the break alone
        preamble = None
    else:
        preamble = f"Encountered graph break when attempting to trace {exp.instruction}:"
    gb = exp.gb_type
    # Note [A duplicate graph break is logged short]: torch's log_graph_break (symbolic_convert.py) prints
    # the user stack once per (gb_type, place), through graph_break_dup_warning_checker (utils.py), which
    # each new torch.compile wrapper resets (ConvertFrameAssert); later ones get one line instead
    first = (gb or exp.reason, exp.filename, exp.lineno) not in _seen_breaks
    _seen_breaks.add((gb or exp.reason, exp.filename, exp.lineno))
    head = f"Graph break in user code at {exp.filename}:{exp.lineno}" if first else \
        f"Graph break (user stack suppressed due to duplicate graph break) in user code at {exp.filename}:{exp.lineno}"
    if preamble is None:
        lines = [head, f"Graph Break Reason: {gb if gb else exp.reason}"]
    else:
        lines = [head, f"Graph Break Reason: {preamble}", "", gb if gb else exp.reason]
    if gb and exp.hop_name:  # torch/_dynamo/exc.py augment_exc_message_with_hop_name
        lines.append(f"  Higher Order Operator: {exp.hop_name}")
    if gb:
        lines.append(f"  Explanation: {exp.reason}")
    lines += [f"  Hint: {h}" for h in exp.hints]
    if exp.context:
        lines += ["", f"  Developer debug context: {exp.context}"]
    from minidynamo.symbolic.graph_break_registry import documentation_link

    link = documentation_link(exp.gb_id)
    if link:
        lines += ["", f" For more details about this graph break, please visit: {link}"]
    if not first:
        _emit("graph_breaks", "\n".join(lines) + "\n", _emitter())
        return
    lines += ["", "User code traceback:"]
    for fs in exp.user_stack:
        lines.append(f'  File "{fs.filename}", line {fs.lineno}, in {fs.name}')
        if fs.line:
            lines.append(f"    {fs.line}")
    _emit("graph_breaks", "\n".join(lines) + "\n", _emitter())


def _recompile(e) -> None:
    record = e.details.get("record")
    code = e.details.get("code")
    where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "?"
    global _current
    key = code if code is not None else e.function
    reasons = e.details.get("reasons") or [f"{_compile_id(key)}: {record or e.details.get('guard')}"]
    text = (f"Recompiling function {e.function} in {where}\n"
            f"    triggered by the following guard failure(s):\n"
            + "\n".join(f"    - {reason}" for reason in reasons))  # the cache's own texts (guard_tree.fail_reason)
    _current = key
    _compile_id(key, new_compile=True)
    _emit("recompiles", text, _emitter())


def _cache_entry(e) -> None:
    entry = e.details["entry"]
    _emit("guards", f"GUARDS:\n\n{entry.check.tree}\n", _emitter())  # the tree, as torch's guards log


def _dynamo_graph(e) -> None:
    gm = e.details["gm"]
    code = gm.print_readable(print_output=False)
    _emit("graph_code", f"TRACED GRAPH\n ===== {e.name} =====\n {code}\n", _emitter())


def _aot_graph(e) -> None:
    gm = e.details["gm"]
    code = gm.print_readable(print_output=False)
    _emit("aot_graphs", f"TRACED GRAPH\n ===== {e.which} =====\n {code}\n", _emitter())


def _create_symbol(e) -> None:
    _emit("dynamic", f"create_symbol {e.symbol} = {e.value} for {e.source}", _emitter())


_READERS = {
    "graph_breaks": {"graph_break": _graph_break},
    "recompiles": {"recompile": _recompile},
    "guards": {"cache_entry": _cache_entry},
    "graph_code": {"dynamo_graph": _dynamo_graph},
    "aot_graphs": {"aot_graph": _aot_graph},
    "dynamic": {"create_symbol": _create_symbol},
}


def _on_event(e) -> None:
    global _current
    if e.kind == "optimize":
        _seen_breaks.clear()
    if e.kind == "pass_begin" and e.pass_name == events.DYNAMO:
        _current = e.details.get("code") or e.details.get("function", _current)
    for artifact in _enabled:
        reader = _READERS[artifact].get(e.kind)
        if reader is not None:
            reader(e)


def set_logs(**artifacts: bool) -> None:
    """Turn artifact logs on or off, as ``torch._logging.set_logs(graph_breaks=True, ...)``.

    Names: ``graph_breaks``, ``recompiles``, ``guards``, ``graph_code``, ``aot_graphs``,
    ``dynamic``. Each call sets every artifact anew (torch's does too: what it does not
    name is off). Lines go to stderr through the loggers ``get_artifact_logger`` names.
    """
    global _handler
    unknown = sorted(set(artifacts) - set(ARTIFACTS))
    if unknown:
        raise ValueError(f"unknown log artifact(s) {unknown}; known: {sorted(ARTIFACTS)} (torch's names)")
    for name in ARTIFACTS:
        logger = get_artifact_logger(name)
        on = bool(artifacts.get(name, False))
        logger.setLevel(_LEVEL.get(name, logging.DEBUG) if on else logging.NOTSET)
        logger.propagate = on
    _enabled.clear()
    _enabled.update(n for n, on in artifacts.items() if on)
    root = logging.getLogger("minidynamo")
    if _enabled and _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(MinidynamoLogsFormatter())
        root.addHandler(_handler)
        root.propagate = False
        events.listen(_on_event)
    elif not _enabled and _handler is not None:
        root.removeHandler(_handler)
        _handler = None
        events.unlisten(_on_event)
    _ids.clear()
    _seen_breaks.clear()
    global _current
    _current = None


def _from_env() -> None:
    """``MINIDYNAMO_LOGS="graph_breaks,recompiles"``, read at import (torch reads ``TORCH_LOGS`` so)."""
    value = os.environ.get("MINIDYNAMO_LOGS", "").strip()
    if value:
        set_logs(**{name.strip(): True for name in value.split(",") if name.strip()})

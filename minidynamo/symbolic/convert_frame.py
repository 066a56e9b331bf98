"""Trace one frame into a cache entry: guards + compiled graph + transformed function.

Place in the pipeline: called by the cache (``frame_cache.call_frame``) on a miss.
Runs the InstructionTranslator (restarting when a call turns out to need a graph
break), then writes the transformed function (``codegen.py``) for how the trace ended:
a return, a graph break at a call, or a graph break at a jump on a tensor. Mirrors
``torch/_dynamo/convert_frame.py`` (``_compile``, ``transform_code_object``) and
``OutputGraph.compile_subgraph``.
"""

from __future__ import annotations

import functools
import itertools
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from minidynamo import events
from minidynamo.bytecode import call_target

from . import counters
from . import graph_break_registry as gb
from .codegen import PyCodegen, assemble, graph_args
from .comprehension_graph_break import ITER, ComprehensionFunction
from .dynamic_shapes import install_shape_guards
from .exc import (EagerFallback, FullGraphError, GraphBreak, RestartAnalysis, TensorifyScalarRestartAnalysis,
                  Unsupported, unimplemented, warn_internal)
from .guard_codegen import CheckFunction
from .guards import Guard
from .output_graph import OutputGraph
from .resume_execution import CLOSURE, ResumeFunction, cell_names, live_locals, stack_names
from .source import LocalSource
from .symbolic_convert import InstructionTranslator, LazyVariableTracker, explain_unsupported
from .variables.ctx_manager import (ContextExitVariable, GradModeExit, GradModeVariable, ResumedContext, WithExitVariable,
                                    leave_open_contexts, open_contexts)
from .variables.functions import CellVariable
from .variables.misc import NullVariable

_graph_ids = itertools.count()
_FRAME_READING = (super, locals, vars, dir, globals)
MAX_RESTARTS = 32


@dataclass
class CacheEntry:
    """One compiled version of a frame: valid while ``check(L, G)`` is true."""

    check: CheckFunction
    fn: Callable
    transformed_source: str
    graphs: list = field(default_factory=list)
    break_reason: Any = None
    rerunnable: bool = False  # no break, mutation or side effect: eager may rerun it (Note [An internal error while ...])
    compile_id: str = ""  # "0/1": the frame's number, the entry's number (torch's CompileId), set by the cache
    backend_key: Any = None  # (backend, dynamic) it was compiled for (Note [The cache lives on the code object])
    id_matched_objs: dict = field(default_factory=dict)  # local name -> weakref of an ID_MATCHed module (cache_size.py)

    @property
    def guards(self) -> list[Guard]:
        return self.check.guards

    def __str__(self) -> str:
        return f"guards:\n{self.check}\ntransformed function:\n{self.transformed_source}"


def compile_frame(frame, L: dict, config, frame_state: dict | None = None) -> CacheEntry:
    """Trace ``frame`` (an OptimizedFunction or a ResumeFunction) on inputs ``L``.

    ``frame_state``: the input sizes earlier traces of this frame saw (Note [Automatic dynamic]).
    """
    grad_mode = torch.is_grad_enabled()
    contexts = open_contexts()
    try:
        return _compile_frame(frame, L, config, grad_mode, {} if frame_state is None else frame_state)
    finally:
        leave_open_contexts(contexts)  # a trace that stopped inside `with torch.autocast(...)` (Note [autocast in the graph])
        torch.set_grad_enabled(grad_mode)  # a traced `with torch.no_grad()` switched it while tracing


def _compile_frame(frame, L: dict, config, grad_mode: bool, frame_state: dict) -> CacheEntry:
    break_at: dict[int, GraphBreak] = {}
    stop_at = None
    for _ in range(MAX_RESTARTS):
        counters["frames_traced"] += 1
        torch.set_grad_enabled(grad_mode)  # an attempt that stopped inside a traced `with torch.no_grad()`
        output = OutputGraph(frame.f_globals, L, config.fullgraph)
        output.dynamic, output.frame_state = getattr(config, "dynamic", None), frame_state  # dynamic_shapes.py
        output.guards.GLOBAL_STATE()  # Note [Global state is one guard]
        symbolic_locals = {
            name: LazyVariableTracker(value, LocalSource(name)) for name, value in L.items()
            if not name.startswith("___stack") and name != CLOSURE
        }
        tx = InstructionTranslator(frame.code, frame.f_globals, symbolic_locals, output,
                                   break_at=break_at, stop_at=stop_at, start_offset=frame.offset,
                                   comprehensions=config.hook is not None)
        with events.pass_scope("dynamo", function=frame.__name__, code=frame.code):
            try:
                _setup_resume(tx, frame, L)
                tx.run()
            except RestartAnalysis as restart:
                if config.fullgraph:  # the break itself, as torch's step re-raises under one_graph
                    raise FullGraphError(restart.explanation.cause or restart.explanation) from None
                if restart.stop_at is not None:
                    if stop_at is not None:
                        raise EagerFallback(restart.explanation) from None
                    stop_at = (restart.stop_at, restart.explanation)
                else:
                    break_at[restart.offset] = restart.explanation
                continue
            except Unsupported as e:
                explanation = explain_unsupported(tx, e)
                if config.fullgraph:
                    raise FullGraphError(explanation) from None
                raise EagerFallback(explanation) from None
            if tx.result[0] == "jump" and config.fullgraph:
                raise FullGraphError(tx.result[-1])
            try:
                entry = finish(tx, frame, config)
                entry.check.note_values(L, frame.f_globals, frame.code)  # what its guard tree prints
                return entry
            except TensorifyScalarRestartAnalysis:  # Note [Tensorify before AOT] (dynamic_shapes.py)
                continue
            except Unsupported as e:  # a value at the break cannot be rebuilt
                explanation = explain_unsupported(tx, e)
                at_break = tx.result[-1] if tx.result and isinstance(tx.result[-1], GraphBreak) else None
                if at_break is not None and at_break is not explanation:
                    explanation.reason += f" (needed for the graph break: {at_break.reason})"
                    explanation.internal |= at_break.internal
                if config.fullgraph:
                    raise FullGraphError(explanation) from None
                raise EagerFallback(explanation) from None
    raise EagerFallback(GraphBreak("too many graph-break restarts", function=frame.__name__, gb_id=gb.RESTARTS))


def _setup_resume(tx, frame, L: dict) -> None:
    """A resume function starts mid-frame: its stack and cells come from its arguments."""
    for arg in stack_names(frame):
        if arg is None:  # a NULL it pushes itself (Note [A NULL on the stack is no argument], resume_execution.py)
            tx.stack.append(NullVariable())
            continue
        value = L[arg]
        if type(value) is GradModeExit:  # the resume function starts inside a grad-mode block
            name = f"L[{arg!r}]"
            tx.output.guards.add(LocalSource(arg), "TYPE_MATCH",
                                 f"type({name}) is ___GradModeExit and {name}.target_mode is {value.target_mode} "
                                 f"and {name}.initial_mode is {value.initial_mode}",
                                 "the with-block this resume function starts in", name)
            tx.output.guards.scope["___GradModeExit"] = GradModeExit
            ctx = GradModeVariable(value.target_mode)
            ctx.enter(tx)  # torch's resume prologue re-enters the block: its set_grad_enabled opens the graph
            ctx.initial_mode = value.initial_mode
            tx.stack.append(WithExitVariable(ctx))
        elif type(value) is ResumedContext:  # Note [A resume function re-enters autocast and inference_mode]
            name = f"L[{arg!r}]"
            tx.output.guards.add(LocalSource(arg), "TYPE_MATCH",
                                 f"type({name}) is ___ResumedContext and {name} == "
                                 f"{tx.output.guards.name_for(value, 'resumed_' + value.kind)}",
                                 "the with-block this resume function starts in", name)
            tx.output.guards.scope["___ResumedContext"] = ResumedContext
            tx.stack.append(value.variable(tx))
        else:
            tx.stack.append(LazyVariableTracker(value, LocalSource(arg)))
    closure = L.get(CLOSURE)
    if closure is not None:  # Note [A resume function receives the frame's cells]
        for i, (name, cell) in enumerate(zip(frame.cell_names, closure)):
            var = tx.cells[name] = CellVariable(tx.symbolic_locals.pop(name, None), real_expr=f"L[{CLOSURE!r}][{i}]")
            tx.output.side_effects.track_cell_existing(cell, var)
    elif frame.offset:
        for name in frame.code.co_cellvars:
            value = tx.symbolic_locals.pop(name, None)
            if isinstance(value, LazyVariableTracker):
                value = value.realize(tx)
            tx.cells[name] = CellVariable(value)


def _routes_through_compiler(var) -> bool:
    """Whether the call a graph break runs eagerly goes through ``___compiled`` (``compiled_callee``).

    With the frame hook every such call does (Note [An eager call at a break runs with the hook
    on]), except ``print``, whose only Python frames are its arguments' ``__str__``: kept plain
    so the transformed code reads as the user's line. Without the hook ``compiled_callee`` sends
    user code through the cache and hands anything else back unchanged.
    """
    from .variables.builtin import BuiltinVariable

    return not (isinstance(var, BuiltinVariable) and var.fn is print)


def _record_break(config, explanation: GraphBreak, root_instruction: Optional[str] = None) -> None:
    """Count and report a graph break (the event log, and so the ``graph_breaks`` log of ``minidynamo/logs.py``);
    ``root_instruction``: the compiled frame's own instruction the graph was cut at (a call, a jump)."""
    warn_internal(explanation)
    if explanation.cause is None:  # Note [A break the frame cannot resume from]: not counted, as torch's
        counters["graph_breaks"] += 1
    events.emit("graph_break", reason=explanation.reason, instruction=explanation.instruction,
                root_instruction=root_instruction,
                lineno=explanation.lineno, function=explanation.function, explanation=explanation)


def _explain_break(config, explanation: GraphBreak, compiled: bool) -> None:
    """Note [A break reason comes with a graph]: torch's ``explain`` lists a break reason
    only for a graph compiled at that break (``_explain_graph_detail`` appends the
    ``compile_subgraph_reason`` of each graph it is given); a break before which no op
    was traced compiles no graph and is listed nowhere but the logs. ``md.explain`` does
    the same (``on_break``)."""
    if config.on_break is not None and compiled:
        config.on_break(explanation)


def _live(tx, frame, offset: int, with_cells: bool = False) -> list[tuple[str, Any]]:
    """(name, tracker) of the locals the rest of the frame may read, in a stable order (the cells
    travel on their own: Note [A resume function receives the frame's cells]; ``with_cells``: their
    values too, for code that reads them by name)."""
    wanted = live_locals(frame.code, offset)
    if not with_cells:
        wanted -= set(cell_names(frame.code))
    out = []
    for name in sorted(wanted):
        if name in tx.cells:
            if tx.cells[name].value is not None:
                out.append((name, tx.cells[name].value))
        elif name in tx.symbolic_locals:
            out.append((name, tx.symbolic_locals[name]))
    return out


def _fill_cell(cell, value):
    """A cell the eager code assigned (a comprehension's result), set before the resume function gets it."""
    cell.cell_contents = value
    return cell


def _closure_arg(cg, tx, frame, filled: dict | None = None) -> list[str]:
    """``___closure=(...)``: the frame's cells for the resume function (Note [A resume function receives
    the frame's cells]); a free variable of a frame that received only its contents gets a cell holding them;
    ``filled``: cells the eager code assigned, name -> expression of the value."""
    names = cell_names(frame.code)
    if not names:
        return []
    exprs = []
    for name in names:
        if name in tx.cells:
            expr = cg.cell_expr(tx.cells[name])
        else:
            value = tx.symbolic_locals.get(name)
            expr = f"___CellType({'' if value is None else cg.expr(value)})"
        if filled and name in filled:
            expr = f"{cg.install(_fill_cell, '___fill_cell')}({expr}, {filled[name]})"
        exprs.append(expr)
    return [f"{CLOSURE}=({', '.join(exprs)},)"]


def _keyword_args(cg, live, tx=None, frame=None, filled: dict | None = None) -> list[str]:
    """``name=expr`` per live local; a name that is no identifier (pytest's ``@py_assert1``) via ``**{...}``.
    A value that is a string is already an expression (a local the eager code assigned). With ``tx`` and
    ``frame``, the frame's cells after them (Note [A resume function receives the frame's cells])."""
    expr = lambda v: v if isinstance(v, str) else cg.expr(v)  # noqa: E731
    plain = [f"{n}={expr(v)}" for n, v in live if n.isidentifier()]
    odd = [f"{n!r}: {expr(v)}" for n, v in live if not n.isidentifier()]
    cells = _closure_arg(cg, tx, frame, filled) if tx is not None else []
    return plain + cells + ([f"**{{{', '.join(odd)}}}"] if odd else [])


def _resume_call(cg, tx, frame, config, offset: int, stack_exprs: list[str], assigned: dict | None = None) -> str:
    """The resume function's call; ``assigned``: locals the eager code set, name -> expression."""
    live = _live(tx, frame, offset)
    cells = set(cell_names(frame.code))  # an assigned cell travels in ___closure, filled
    filled = {n: e for n, e in (assigned or {}).items() if n in cells}
    if assigned:
        wanted = live_locals(frame.code, offset) - cells
        live = sorted([(n, v) for n, v in live if n not in assigned] + [(n, e) for n, e in assigned.items() if n in wanted],
                      key=lambda nv: nv[0])
    null_idxes = tuple(i for i, e in enumerate(stack_exprs) if e == "___NULL")  # pushed by the resume function
    key = (frame.code, offset, len(stack_exprs), tuple(n for n, _ in live), null_idxes)
    resume = config.resumes.get(key)
    if resume is None:
        resume = config.resumes[key] = ResumeFunction(frame.code, frame.f_globals, offset, len(stack_exprs),
                                                      key[3], config, null_idxes=null_idxes)
    stack_exprs = [e for e in stack_exprs if e != "___NULL"]  # Note [A NULL on the stack is no argument]
    name = cg.install(resume, resume.__name__)
    args = [f"___stack{i}={e}" for i, e in enumerate(stack_exprs)] + _keyword_args(cg, live, tx, frame, filled)
    return f"{name}({', '.join(args)})"


def _next_offset(tx, inst) -> int:
    return tx.instructions[tx.indexof[inst.offset] + 1].offset


def finish(tx, frame, config) -> CacheEntry:
    """Write the transformed function for how the trace ended (Note [Reconstruct is an expression])."""
    cg = PyCodegen(tx.output)
    cg.frame_code = frame.code  # whose cells a rebuilt closure may share (Note [Rebuilding a closure])
    cg.scope["___compiled"] = config.compiled_callee
    kind = tx.result[0]
    tail: list[str] = []
    explanation = None
    if kind == "return":
        tail.append(f"return {cg.expr(tx.result[1])}")
    elif kind == "stop":
        _, inst, explanation = tx.result
        live = _live(tx, frame, inst.offset)
        key = ("eager", frame.code, inst.offset, tuple(n for n, _ in live))
        rest = config.resumes.get(key)
        if rest is None:
            rest = config.resumes[key] = ResumeFunction(frame.code, frame.f_globals, inst.offset, 0, key[3], config,
                                                        eager_only=True)
        name = cg.install(rest, rest.__name__)
        args = ", ".join(_keyword_args(cg, live, tx, frame))
        tail.append(f"return {name}({args})   # the rest of the frame runs eagerly (no graph)")
    elif kind == "call":
        _, inst, explanation = tx.result
        tail += _codegen_call_break(cg, tx, frame, config, inst)
    elif kind == "comprehension":
        _, inst, analysis, explanation = tx.result
        tail += _codegen_comprehension_break(cg, tx, frame, config, analysis)
    else:
        _, inst, value, jump_if, pop, explanation = tx.result
        cond = cg.expr(value)
        stack = [cg.expr(v) for v in tx.stack]
        taken = _resume_call(cg, tx, frame, config, inst.argval, stack + ([] if pop else [cond]))
        fall = _resume_call(cg, tx, frame, config, _next_offset(tx, inst), stack)
        tail.append(f"if {'' if jump_if else 'not '}{cond}:   # {inst.opname} on a tensor, decided eagerly")
        tail.append(f"    return {taken}")
        tail.append(f"return {fall}")
    side_effects = tx.output.side_effects.codegen(cg)
    if kind in ("call", "comprehension"):  # the graph leaves the blocks open at the break, innermost first, as torch's
        exits = [v for v in tx.stack if isinstance(v, WithExitVariable)
                 or isinstance(v, ContextExitVariable) and v.resumable()]
        outermost_grad = next((v for v in exits if isinstance(v, WithExitVariable)), None)
        for exit_var in reversed(exits):
            if isinstance(exit_var, ContextExitVariable):  # autocast / inference_mode: its exit node
                exit_var.ctx.exit(tx)
            elif exit_var is outermost_grad:  # grad mode as the frame found it
                tx.output.create_proxy("call_function", torch.set_grad_enabled, (tx.grad_blocks()[0].initial_mode,), {})
    elif torch.is_grad_enabled() != tx.entry_grad_mode:
        # the trace left a grad-mode block that the frame entered before it started (a
        # resume function inside `with torch.no_grad()`): a graph's own set_grad_enabled
        # need not reach the caller (AOTAutograd keeps it inside), so the code switches
        side_effects.append(f"torch.set_grad_enabled({torch.is_grad_enabled()})   # the with-block's exit")
    if explanation is not None:  # as torch, the break is logged before its graph is compiled
        _record_break(config, explanation, root_instruction=inst.opname if kind in ("call", "jump") else None)
    graph_call = ""
    name = f"___compiled_fn_{next(_graph_ids)}"
    # torch's OutputGraph.restore_global_state: the backend compiles (AOT picks training or
    # inference) under the grad mode the frame was entered with, not the one the trace left.
    with torch.set_grad_enabled(tx.entry_grad_mode):
        compiled = tx.output.compile_graph(cg.graph_outputs, config.backend, name, code=frame.code)
    graphs = []
    if compiled is not None:
        gm, fn, sources = compiled
        cg.scope[name] = fn  # the transformed code runs with the frame hook off (Note [The frame hook])
        graph_call = f"___graph_out = {name}({graph_args(sources, tx.output.guards.guards, tx.output.guards.read_expr)})"
        graphs.append(gm)
        if config.on_graph is not None:
            config.on_graph(gm)
    if tx.output.random_calls:  # Note [A random number is a graph input] (variables/misc.py)
        from .variables.misc import gen_rand_values_fn

        cg.scope["___gen_rand_values"] = gen_rand_values_fn(tx.output.random_calls)
        graph_call = "; ".join(["___random_values = ___gen_rand_values()"] + ([graph_call] if graph_call else []))
    if explanation is not None:
        _explain_break(config, explanation, compiled is not None)
    fn_name = "___transformed_" + re.sub(r"\W", "_", frame.__name__.lstrip("_"))
    source = assemble(fn_name, graph_call, cg.temps, side_effects, tail)
    exec(compile(source, f"<minidynamo transformed {frame.__name__}>", "exec"), cg.scope)  # noqa: S102
    tx.output.guards.mutated_sources = tx.output.mutated_input_sources()
    tx.output.side_effects.aliasing_guards(tx.output.guards)
    install_shape_guards(tx.output)
    entry = CacheEntry(CheckFunction(tx.output.guards), cg.scope[fn_name], source, graphs, explanation)
    entry.rerunnable = kind == "return" and not side_effects and not tx.output.guards.mutated_sources \
        and not tx.output.random_calls  # a rerun would draw again
    entry.id_matched_objs = dict(tx.output.guards.id_matched_objs)
    if config.on_entry is not None:
        config.on_entry(entry)
    return entry


def _codegen_call_break(cg, tx, frame, config, inst) -> list[str]:
    stack = tx.stack
    is_null = lambda v: isinstance(v, NullVariable)  # noqa: E731
    if inst.opname in ("CALL", "CALL_KW"):  # 3.13's CALL_KW has the keyword names on top
        kw = stack[-1].as_python_constant() if inst.opname == "CALL_KW" else tx.kw_names or ()
        if inst.opname == "CALL_KW":
            stack = stack[:-1]
        n = inst.arg + 2
        below, operands = stack[:-n], stack[-n:]
        fn, args = call_target(operands[0], operands[1], list(operands[2:]), is_null)
        pos, kwv = args[: len(args) - len(kw)], args[len(args) - len(kw) :]
        arg_exprs = [cg.expr(a) for a in pos] + [f"{k}={cg.expr(v)}" for k, v in zip(kw, kwv)]
    elif inst.opname == "BINARY_SUBSCR":  # Note [A data-dependent subscript breaks the graph]
        below = stack[:-2]
        return _eager_then_resume(cg, tx, frame, config, inst, below,
                                  f"___r = {cg.expr(stack[-2])}[{cg.expr(stack[-1])}]   # graph break: run eagerly")
    elif inst.opname == "COMPARE_OP":  # Note [A comparison and a subscript store break like a call]: [a, b]
        below = stack[:-2]
        test = f"{cg.expr(stack[-2])} {inst.argval} {cg.expr(stack[-1])}"
        if sys.version_info >= (3, 13) and inst.arg & 16:  # 3.13's bool bit: the jump after it takes an exact bool
            test = f"bool({test})"
        return _eager_then_resume(cg, tx, frame, config, inst, below, f"___r = ({test})   # graph break: run eagerly")
    elif inst.opname == "STORE_SUBSCR":  # [value, container, key]
        below = stack[:-3]
        line = f"{cg.expr(stack[-2])}[{cg.expr(stack[-1])}] = {cg.expr(stack[-3])}   # graph break: run eagerly"
        return _eager_then_resume(cg, tx, frame, config, inst, below, line, pushes=False)
    elif inst.opname == "STORE_ATTR":  # Note [A tensor attribute store breaks the graph]: [value, obj]
        below = stack[:-2]
        line = f"{cg.expr(stack[-1])}.{inst.argval} = {cg.expr(stack[-2])}   # graph break: run eagerly"
        return _eager_then_resume(cg, tx, frame, config, inst, below, line, pushes=False)
    else:  # CALL_FUNCTION_EX: [NULL, fn, args, kwargs?] (3.13: [fn, NULL, ...])
        n = 2 if inst.arg & 1 else 1
        below, operands = stack[: -n - 2], stack[-n:]
        fn, _ = call_target(stack[-n - 2], stack[-n - 1], [], is_null)
        arg_exprs = [f"*{cg.expr(operands[0])}"] + ([f"**{cg.expr(operands[1])}"] if n == 2 else [])
    if fn.is_python_constant() and any(fn.as_python_constant() is f for f in _FRAME_READING) and not arg_exprs:
        # zero-argument super() / locals() read the frame that calls them: the transformed
        # function is a different frame, so it cannot run them for the user's frame.
        unimplemented(f"{fn.as_python_constant().__name__}() without arguments at a graph break",
                      gb_id=gb.RECONSTRUCTION)
    fn_expr = cg.expr(fn)
    if _routes_through_compiler(fn):  # the callee goes through the cache (with the hook: its frame is hooked)
        fn_expr = f"___compiled({fn_expr})"
    line = f"___r = {fn_expr}({', '.join(arg_exprs)})   # graph break: run eagerly"
    return _eager_then_resume(cg, tx, frame, config, inst, below, line)


def _codegen_comprehension_break(cg, tx, frame, config, a) -> list[str]:
    """Note [A break inside an inlined comprehension] (comprehension_graph_break.py): the comprehension
    as a function of its own, run by CPython, then the resume function after it (torch's
    ``_handle_comprehension_graph_break``)."""
    n = len(a.roles)
    below, slots = tx.stack[:-n], tx.stack[-n:]
    key = ("comprehension", frame.code, a.start)
    fn = config.resumes.get(key)
    if fn is None:
        fn = config.resumes[key] = ComprehensionFunction(frame.code, frame.f_globals, a, config)
    name = cg.install(fn, fn.__name__)
    reads = [(n, v) for n, v in _live(tx, frame, a.start, with_cells=True) if n in a.reads]
    if len(reads) < len(a.reads):  # a local it reads is unbound here: CPython's run of the frame raises for it
        unimplemented(f"a comprehension reads a local that is not bound ({', '.join(sorted(set(a.reads) - {n for n, _ in reads}))})",
                      gb_id=gb.UNDEFINED_LOCAL)
    args = [cg.expr(slots[a.roles.index(ITER)])] + _keyword_args(cg, reads)
    assigned = {a.result_var: "___r"} if a.result_var else {}
    call = f"{name}({', '.join(args)})"
    if a.walrus_vars:  # Note [A walrus in a comprehension that breaks]: (result, *walrus values)
        call = f"(___r, {', '.join(f'___w{j}' for j in range(len(a.walrus_vars)))}) = {call}"
        assigned.update({w: f"___w{j}" for j, w in enumerate(a.walrus_vars)})
    else:
        call = f"___r = {call}"
    line = f"{call}   # graph break: the comprehension runs eagerly"
    return _eager_then_resume(cg, tx, frame, config, None, below, line, pushes=a.result_on_stack, offset=a.end,
                              assigned=assigned or None)


def _eager_then_resume(cg, tx, frame, config, inst, below: list, line: str, pushes: bool = True,
                       offset: int | None = None, assigned: dict | None = None) -> list[str]:
    """``line`` (the instruction run eagerly, into ``___r`` if it ``pushes``), then the resume function after
    ``inst`` (or at ``offset``, with the locals the line ``assigned``: a comprehension's).

    Note [No resume function before a return]: where the frame goes on at ``RETURN_VALUE``, torch's
    ``create_call_resume_at`` (symbolic_convert.py: "We do not need to codegen frames whose resume
    instruction is RETURN_VALUE") makes no resume function: the transformed code returns the call's
    result. So does ours; a resume function there was one more frame, with its own guards on the result
    and its own recompiles (``return m(y)`` after ``m = x.mul``: tests/test_bound_methods_like_torch.py).
    """
    offset = _next_offset(tx, inst) if offset is None else offset
    blocks = [v.ctx for v in below if isinstance(v, WithExitVariable)]
    contexts = [cg.expr(v) for v in below if isinstance(v, ContextExitVariable) and v.resumable()]
    if pushes and not blocks and not contexts and tx.instructions[tx.indexof[offset]].opname == "RETURN_VALUE":
        return [line, "return ___r   # the frame returns what the call returned: no resume function"]
    stack_exprs = [cg.expr(v) for v in below] + (["___r"] if pushes else [])
    resume = f"return {_resume_call(cg, tx, frame, config, offset, stack_exprs, assigned)}"
    call = [line]
    if contexts:  # Note [A resume function re-enters autocast and inference_mode]: around the call only
        call = [f"with {', '.join(contexts)}:   # still inside the `with` block", f"    {line}"]
    if not blocks:
        return [*call, resume]
    # Note [A break inside a with block]: the call and the resume function run in the
    # block's grad mode; an exception leaves the block (the mode from before it)
    return [f"torch.set_grad_enabled({blocks[-1].target_mode})   # still inside the `with` block",
            "try:", *[f"    {part}" for part in call], f"    {resume}", "except BaseException:",
            f"    torch.set_grad_enabled({blocks[0].initial_mode})   # the block's __exit__", "    raise"]


__all__ = ["compile_frame", "CacheEntry"]

"""The root frame's translator: where a trace ends, and where the graph may break.

Place in the pipeline: ``convert_frame`` runs one ``InstructionTranslator`` per attempt
at a frame. On ``RETURN_VALUE`` or at a graph break it records ``result`` and stops;
``convert_frame`` then compiles the graph and writes the resume code. Mirrors
``torch/_dynamo/symbolic_convert.py`` (``InstructionTranslator``,
``break_graph_if_unsupported``, ``SpeculationLog``/``step_graph_break``).
"""

from __future__ import annotations

from typing import Optional

import torch

from minidynamo.bytecode import find_exception_handler

from . import graph_break_registry as gb
from .comprehension_graph_break import analyze as analyze_comprehension
from .exc import EagerFallback, ObservedException, RestartAnalysis, Unsupported, explain_unsupported, unimplemented
from .resume_execution import vm_can_run
from .inlining import InliningInstructionTranslator
from .translator_base import JUMP_OPCODES, InstructionTranslatorBase, _exception_table
from .variables.ctx_manager import ContextExitVariable, WithExitVariable
from .variables.tensor import TensorVariable


class InstructionTranslator(InstructionTranslatorBase):
    """The root frame: on RETURN_VALUE or at a graph break it finishes the compiled piece.

    ``break_at`` maps instruction offsets to the explanation of a break that a previous
    attempt found there (Dynamo's speculation log, see ``RestartAnalysis``);
    ``stop_at`` = (offset, visit) is a checkpoint where a previous attempt decided to
    stop tracing and run the rest of the frame eagerly (Dynamo's ``step_graph_break``).
    """

    inlining_translator_class = InliningInstructionTranslator  # traces the calls it inlines (opcodes_calls.py)

    def __init__(self, *args, break_at: Optional[dict] = None, stop_at=None, start_offset: int = 0,
                 comprehensions: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        # Note [A break inside an inlined comprehension] (comprehension_graph_break.py): the outermost
        # comprehension being traced, if a break in it can compile the graph before it (3.12+, the frame hook on)
        self.comprehensions = comprehensions and not self.output.fullgraph
        self.comprehension = None
        self.break_at = break_at or {}
        self.stop_at = stop_at
        self.ip = self.indexof[start_offset]
        self.result = None  # ("return", value) / ("call", inst, why) / ("jump", ...) / ("stop", inst, why)
        self.exn_table = _exception_table(self.code)
        self.entry_grad_mode = torch.is_grad_enabled()
        self.visits: dict[int, int] = {}
        self.checkpoint = None  # (offset, visit) of the last instruction met with an empty stack
        self.requires_grad_calls: list = []  # (node, offset of the root CALL, explanation): requires_grad_() on an intermediate
        self.output.root_tx = self

    def step(self) -> None:
        inst = self.instructions[self.ip]
        visit = self.visits[inst.offset] = self.visits.get(inst.offset, 0) + 1
        if self.stop_at is not None and self.stop_at[0] == (inst.offset, visit):
            self.current_inst = inst
            self.result = ("stop", inst, self.stop_at[1])
            self.done = True
            return
        # a checkpoint only once the graph holds two calls (torch's is_non_empty_graph: count_calls() > 1,
        # symbolic_convert.py step): an unsupported instruction before that runs the whole frame eagerly
        if not self.stack and not self.in_try_block(inst) and self.output.count_calls() > 1:
            self.checkpoint = (inst.offset, visit)
        c = self.comprehension
        if c is not None and not c.start <= inst.offset <= c.end_for:
            self.comprehension = None  # left it (an exhausted FOR_ITER jumps past END_FOR)
        try:
            super().step()
        except Unsupported as e:
            # Not at a call or a jump (Note [Where a graph can break]): cut at the last
            # checkpoint and let the rest of the frame run eagerly, as Dynamo does.
            explanation = explain_unsupported(self, e)
            self.break_in_comprehension(explanation)
            if self.checkpoint is None or not vm_can_run(self.code, self.checkpoint[0]):
                raise
            raise RestartAnalysis(-1, self.step_unsupported(explanation, in_try=False), stop_at=self.checkpoint) from e

    def in_try_block(self, inst) -> bool:
        return find_exception_handler(self.exn_table, inst.offset) is not None

    # Note [A graph break inside a try block]
    #     A try block's graph cannot be cut at the break: the resumed code would run outside
    #     the block, and its handler would not catch what the rest raises. torch 2.13
    #     (symbolic_convert.py ``InstructionTranslatorBase.step``: "Encountered graph break that
    #     we cannot resume from") compiles up to its last checkpoint before the block (an
    #     instruction with an empty stack, outside any try block) and runs the rest of the frame
    #     eagerly; its break reason is ``step_unsupported``, at the checkpoint's line, with no
    #     registry entry. Ours does the same for a try/except/finally (a with-block of ours
    #     still runs the frame eagerly, or resumes inside a grad-mode block). With no
    #     checkpoint the whole frame runs eagerly, as torch's.
    def in_user_try(self, inst) -> bool:
        """The innermost handler of ``inst`` is a try statement's, not a with-statement's cleanup."""
        entry = find_exception_handler(self.exn_table, inst.offset)
        if entry is None:
            return False
        i = self.indexof[entry.target]
        insts = self.instructions
        return not (insts[i].opname == "PUSH_EXC_INFO" and insts[i + 1].opname == "WITH_EXCEPT_START")

    # Note [A break the frame cannot resume from]
    #     A break at an instruction that is no call or jump (a property's getter run by
    #     LOAD_ATTR, a try block) cannot be resumed after. torch 2.13 (symbolic_convert.py
    #     ``InstructionTranslatorBase.step``) compiles up to the last checkpoint and runs the
    #     rest of the frame eagerly; its graph_breaks log says "Encountered graph break that
    #     we cannot resume from ...", then the break itself; ``explain`` gives the reason
    #     ``step_unsupported``; and it is not counted among ``counters["graph_break"]`` (only
    #     ``break_graph_if_unsupported`` adds to those). Ours does the same: this explanation
    #     has the break it met as its ``cause``, and ``_record_break`` does not count it.
    def step_unsupported(self, explanation, in_try: bool = True):
        """The break torch reports when it compiles up to a checkpoint (Note [A break the frame cannot resume from])."""
        import dataclasses
        import linecache

        inst = next(i for i in self.instructions if i.offset == self.checkpoint[0])
        lineno = inst.lineno or explanation.lineno
        where = ("a graph break inside a try block", "the last line before the block") if in_try else \
            ("a graph break at an instruction the frame cannot resume after", "the last checkpoint")
        import traceback

        code = self.code  # the root frame at its checkpoint, where torch's explain points (its last user frame)
        source = linecache.getline(code.co_filename, lineno or 0)
        # the break keeps its registry entry when it is on the checkpoint's line (``del g`` there, or
        # a property read on it): the line torch's graph_breaks log and its explain both name
        here = (code.co_filename, lineno)
        on_line = (explanation.filename, explanation.lineno) == here or any(
            (fs.filename, fs.lineno) == here for fs in explanation.user_stack)
        return dataclasses.replace(
            explanation, reason=f"step_unsupported: {where[0]} ({explanation.reason}); "
                                f"compiled up to {where[1]}, the rest of the frame runs eagerly",
            lineno=lineno, filename=code.co_filename, function=code.co_name, instruction=inst.opname,
            source=source, gb_id=explanation.gb_id if on_line else "",
            context=f"{explanation.gb_type or ''} {explanation.context}".strip(),
            user_stack=[traceback.FrameSummary(code.co_filename, lineno, code.co_name, line=source.strip())],
            cause=explanation)

    def maybe_has_backedge(self) -> bool:
        """Dynamo's heuristic: a jump after here goes back before here -> we are in a loop."""
        current = self.current_inst.offset
        for inst in self.instructions[self.ip :]:
            if inst.opname in ("RETURN_VALUE", "RETURN_CONST"):
                break
            if inst.opcode in JUMP_OPCODES and inst.argval < current:
                return True
        return False

    def grad_blocks(self) -> list:
        """The grad-mode ``with`` blocks open at this point (their exits on the stack), outermost first."""
        return [v.ctx for v in self.stack if isinstance(v, WithExitVariable)]

    def resumable_blocks(self) -> bool:
        """Open with-blocks a resume function can re-enter, and none it cannot: grad mode's, autocast,
        inference_mode (Note [A resume function re-enters autocast and inference_mode], ctx_manager.py)."""
        exits = [v for v in self.stack if isinstance(v, (WithExitVariable, ContextExitVariable))]
        return bool(exits) and all(isinstance(v, WithExitVariable) or v.resumable() for v in exits)

    def only_with_blocks(self) -> bool:
        """No try/except/finally in the frame: every handler is a with-statement's (Note [A break inside a with block])."""
        insts = self.instructions
        for entry in self.exn_table:
            i = self.indexof[entry.target]
            if insts[i].opname == "PUSH_EXC_INFO" and insts[i + 1].opname != "WITH_EXCEPT_START":
                return False
        return True

    def check_can_break(self, explanation, at_call: bool = False) -> None:
        """Where real Dynamo refuses to split a frame, the whole frame runs eagerly."""
        if at_call and self.in_try_block(self.current_inst) and self.resumable_blocks() and self.only_with_blocks():
            if self.maybe_has_backedge():
                explanation.reason += " (graph break in a for/while loop: the whole frame runs eagerly, as in Dynamo)"
                raise EagerFallback(explanation)
            return  # inside `with torch.no_grad()` (enable_grad, set_grad_enabled, autocast, inference_mode): resumed inside
        if self.in_try_block(self.current_inst):
            if self.in_user_try(self.current_inst) and self.checkpoint is not None \
                    and vm_can_run(self.code, self.checkpoint[0]):
                raise RestartAnalysis(-1, self.step_unsupported(explanation), stop_at=self.checkpoint)
            explanation.reason += " (inside a try/with block: the whole frame runs eagerly)"
            raise EagerFallback(explanation)
        if self.maybe_has_backedge():
            explanation.reason += " (graph break in a for/while loop: the whole frame runs eagerly, as in Dynamo)"
            raise EagerFallback(explanation)

    # Note [A break inside an inlined comprehension] (comprehension_graph_break.py): torch's
    # maybe_setup_comprehension_speculation at BUILD_LIST / BUILD_MAP (symbolic_convert.py)
    def BUILD_LIST(self, inst) -> None:
        if not self._comprehension_start(inst):
            super().BUILD_LIST(inst)

    def BUILD_MAP(self, inst) -> None:
        if not self._comprehension_start(inst):
            super().BUILD_MAP(inst)

    def _comprehension_start(self, inst) -> bool:
        """At the start of an outermost comprehension: stop here if an earlier attempt broke inside it."""
        if not self.comprehensions or self.comprehension is not None or inst.arg != 0:
            return False
        analysis = analyze_comprehension(self.code, inst.offset)
        if analysis is None:
            return False
        setup = self.instructions[self.indexof[analysis.setup]]
        if self.in_try_block(setup) and not (self.resumable_blocks() and self.only_with_blocks()):
            return False  # inside a try block (torch's block_stack can_restore check): a break runs the frame eagerly
        if inst.offset in self.break_at:
            self.stack[:] = [self.realize(v) for v in self.stack]  # as at a call's break
            self.result = ("comprehension", inst, analysis, self.break_at[inst.offset])
            self.done = True
            return True
        self.comprehension = analysis
        return False

    def break_in_comprehension(self, explanation, at=None) -> None:
        """A break inside a comprehension we can run on its own: trace again, stopping at its start.

        ``at``: the call or jump that broke. Torch's ``break_graph_if_unsupported`` and
        ``jump_graph_break`` reach the comprehension's speculation only where
        ``should_compile_partial_graph()`` is false, which on 3.11+ it is for an instruction that the
        comprehension's exception-table entry covers; 3.13 leaves a jump out of that entry, so a
        data-dependent ``if`` in a 3.13 comprehension breaks in a loop and skips the frame, as ours does.
        """
        if self.comprehension is not None and (at is None or self.in_try_block(at)):
            explanation.reason += (" (inside a comprehension, torch's comprehension_graph_break: the graph before it "
                                   "is compiled, the comprehension runs eagerly, the frame resumes after it)")
            raise RestartAnalysis(self.comprehension.start, explanation)

    def RETURN_VALUE(self, inst) -> None:
        self.result = ("return", self.pop())
        self._check_requires_grad_leak(self.result[1])
        self.done = True

    # Note [A requires_grad_() intermediate returned breaks]
    #     ``y = x * 2; y.requires_grad_(); return y`` makes a leaf that requires grad
    #     inside the function. Traced, the graph's output is an output of AOTAutograd's
    #     compiled function, whose functionalization drops the requires_grad_(): the
    #     caller's ``y.sum().backward()`` would raise. Torch 2.13 traces the call, and
    #     when a tensor it tainted (it or one derived from it) that requires grad is among
    #     the outputs, restarts with a graph break at the requires_grad_() call
    #     (``OutputGraph.compile_and_call_fx_graph`` raising ``RequiresGradRestartAnalysis``,
    #     ``TensorVariable.method_requires_grad_`` in torch/_dynamo/variables/tensor.py,
    #     "requires_grad_() intermediate leaked as output"). Ours does the same at RETURN_VALUE.
    def note_requires_grad_(self, *nodes) -> None:
        """``requires_grad_()`` on an intermediate made these nodes: a break here if they are returned."""
        try:
            unimplemented("requires_grad_() intermediate leaked as output: an intermediate tensor with "
                          "requires_grad_() called on it (or a tensor derived from it) is returned from the compiled region",
                          "call .detach() before returning if you only need values, or move requires_grad_() "
                          "outside the compiled function", gb_id=gb.REQUIRES_GRAD_LEAK)
        except Unsupported as e:
            explanation = explain_unsupported(self, e)
        self.requires_grad_calls += [(node, self.current_inst.offset, explanation) for node in nodes]

    def _check_requires_grad_leak(self, value) -> None:
        if not self.requires_grad_calls:
            return
        tainted = {node for node, _, _ in self.requires_grad_calls}
        for node in self.output.graph.nodes:
            if node not in tainted and any(i in tainted for i in node.all_input_nodes):
                tainted.add(node)
        for var in _tensor_leaves(value):
            if var.proxy.node in tainted and getattr(var.example_value, "requires_grad", False):
                _, offset, explanation = self.requires_grad_calls[0]
                if self.output.fullgraph:
                    unimplemented("returning intermediate with requires_grad_(): AOTAutograd's functionalization "
                                  "drops the requires_grad_() effect on graph outputs", explanation.hint,
                                  gb_id=gb.REQUIRES_GRAD_LEAK)
                raise RestartAnalysis(offset, explanation)

    def CALL(self, inst) -> None:
        self._breakable_call(inst, super().CALL)

    def CALL_KW(self, inst) -> None:  # 3.13
        self._breakable_call(inst, super().CALL_KW)

    def CALL_FUNCTION_EX(self, inst) -> None:
        self._breakable_call(inst, super().CALL_FUNCTION_EX)

    def BINARY_SUBSCR(self, inst) -> None:
        # Note [A data-dependent subscript breaks the graph]: ``x[x > 0]`` has a shape the
        # trace cannot know; like a call, the subscript runs eagerly between two graphs
        # (torch's ``break_graph_if_unsupported`` on BINARY_SUBSCR). Only on a tensor, and
        # not for 3.12's BINARY_SLICE, which reaches here with its own operands.
        if inst.opname == "BINARY_SUBSCR" and len(self.stack) >= 2 and isinstance(self.peek(2), TensorVariable):
            self._breakable_call(inst, super().BINARY_SUBSCR)
        else:
            super().BINARY_SUBSCR(inst)

    # Note [A tensor attribute store breaks the graph]
    #     ``y.data = z`` on a tensor made in the trace cannot be traced (torch/_dynamo/
    #     variables/builtin.py ``call_setattr``: "Failed to mutate tensor data attribute").
    #     torch's ``STORE_ATTR`` (symbolic_convert.py ``store_attr_graph_break``) then
    #     compiles the graph so far, runs the store eagerly and resumes after it, as at a
    #     call; ours does the same for a store on a tensor.
    def STORE_ATTR(self, inst) -> None:
        if len(self.stack) >= 2 and isinstance(self.peek(1), TensorVariable):
            self._breakable_call(inst, super().STORE_ATTR)
        else:
            super().STORE_ATTR(inst)

    # Note [A comparison and a subscript store break like a call]
    #     torch 2.13 decorates COMPARE_OP and STORE_SUBSCR with ``break_graph_if_unsupported``
    #     (symbolic_convert.py), as it does its calls: a comparison it cannot trace (two data
    #     pointers it cannot prove equal) or a store it cannot record compiles the graph so
    #     far, runs the one instruction eagerly and resumes after it, in a new frame that is
    #     compiled in turn. Ours does the same, through the same path as a call.
    def COMPARE_OP(self, inst) -> None:
        self._breakable_call(inst, super().COMPARE_OP)

    def STORE_SUBSCR(self, inst) -> None:
        self._breakable_call(inst, super().STORE_SUBSCR)

    def _breakable_call(self, inst, do_call) -> None:
        if inst.offset in self.break_at:
            # the values the eager call and the resume need are realized (wrapped, guarded), bottom
            # first, as torch's reconstruct of a LazyVariableTracker does (Note [An inlined call's ...])
            self.stack[:] = [self.realize(v) for v in self.stack]
            self.result = ("call", inst, self.break_at[inst.offset])
            self.done = True
            return
        try:
            do_call(inst)
        except ObservedException:  # the call raised: the frame's handler (opcodes_exceptions.py), not a break
            raise
        except Unsupported as e:
            explanation = explain_unsupported(self, e)
            if self.output.fullgraph:
                raise
            self.break_in_comprehension(explanation, at=inst)
            self.check_can_break(explanation, at_call=True)
            raise RestartAnalysis(inst.offset, explanation) from e

    def break_graph_at_jump(self, inst, value, jump_if, pop, e: Unsupported) -> None:
        if self.output.fullgraph:
            raise e
        self.break_in_comprehension(e.explanation, at=inst)
        self.check_can_break(e.explanation)
        self.stack[:] = [self.realize(v) for v in self.stack]  # as at a call's break, above
        self.result = ("jump", inst, value, jump_if, pop, e.explanation)
        self.done = True


def _tensor_leaves(value) -> list:
    """The TensorVariables in a returned value (a tensor, or tuples/lists/dicts of them)."""
    if isinstance(value, TensorVariable):
        return [value]
    items = getattr(value, "items", None)
    if isinstance(items, dict):
        items = list(items.values())
    if isinstance(items, (list, tuple)):
        return [t for v in items for t in _tensor_leaves(v)]
    return []

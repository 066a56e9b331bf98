"""The symbolic interpreter: a bytecode loop over VariableTrackers that builds an fx graph.

Place in the pipeline: the heart of Dynamo. ``convert_frame`` hands it a frame's code
and its inputs; it steps through the bytecode like the concrete interpreter
(``minidynamo.interpreter``), but each stack slot holds a VariableTracker, tensor ops
become graph nodes (with fake values), and Python control flow on constants is simply
executed. Mirrors ``torch/_dynamo/symbolic_convert.py`` (``InstructionTranslatorBase``,
``InstructionTranslator``, ``InliningInstructionTranslator``, ``break_graph_if_unsupported``,
``generic_jump``).

Note [One method per opcode]
    As in byterun and early TorchDynamo, the loop looks up ``self.<OPNAME>`` and calls
    it with the instruction. Opcodes that behave alike share one handler by aliasing
    (``POP_JUMP_FORWARD_IF_FALSE = POP_JUMP_BACKWARD_IF_FALSE = ...``). An opcode with no
    method is a graph-break request naming the opcode.

Note [Where a graph can break]
    Only at a call (``CALL``, ``CALL_FUNCTION_EX``) and at a conditional jump on a value
    we cannot decide (a tensor): there the stack is a clean list of values we can
    rebuild, the instruction can be run eagerly, and the rest of the function resumes
    in a new frame. A failure anywhere else (an unsupported opcode, a data-dependent
    ``not x``) makes the whole frame run eagerly. Real Dynamo can also break at other
    instructions, by restarting and cutting at the last instruction with an empty stack.
"""

from __future__ import annotations

import dis
import functools
import linecache
import operator
import types
from typing import Any, Optional

import torch

from minidynamo import events
from minidynamo.bytecode import (FOR_ITER_EXIT_SKIP, LOAD_ATTR_METHOD_BIT, NULL_AFTER_CALLABLE, PYTHON_VERSION,
                                 call_target, callable_slots, exception_table, find_exception_handler,
                                 get_instructions, offset_to_index)

from . import counters
from .exc import EagerFallback, GraphBreak, RestartAnalysis, Unsupported, unimplemented
from .fake_values import TracedUserError
from .source import AttrSource, GetItemSource, GlobalSource, LocalSource, globals_source_for
from .opcodes_data import DataOpcodes
from .resume_execution import vm_can_run
from .variables.base import VariableTracker
from .variables.builder import VariableBuilder, wrap_constant_result, wrap_sourceless
from .variables.builtin import BuiltinVariable, call_operator
from .variables.constant import ConstantVariable
from .variables.dicts import ConstDictVariable
from .variables.functions import NestedUserFunctionVariable, UserFunctionVariable
from .variables.lists import LazyGeneratorVariable, ListIteratorVariable, ListVariable, SliceVariable, TupleVariable
from .variables.ctx_manager import GradModeVariable, WithExitVariable
from .variables.misc import CellVariable, NullVariable, NewObjectVariable, UserDefinedObjectVariable
from .variables.nn_module import NNModuleVariable
from .variables.tensor import TensorVariable
from .variables.torch import PythonModuleVariable

JUMP_OPCODES = set(dis.hasjrel) | set(dis.hasjabs)
MAX_INLINE_DEPTH = 40
# Note [An instruction budget per frame]: one frame's trace (with everything it inlines)
# may step through at most this many instructions. A trace that does not end (a
# `while True` generator drained by list()) then breaks with a named reason instead of
# hanging; eager would hang too only if the loop never ends at run time either.
MAX_INSTRUCTIONS = 500_000
_CONTROL_FLOW = (Unsupported, RestartAnalysis, EagerFallback, TracedUserError)


@functools.lru_cache(maxsize=1024)
def _exception_table(code: types.CodeType) -> list:
    return exception_table(code)


@functools.lru_cache(maxsize=1024)
def decoded(code: types.CodeType) -> tuple[list, dict]:
    """The instructions of a code object and their index by offset (decoded once per code)."""
    instructions = get_instructions(code)
    return instructions, offset_to_index(instructions)


class LazyVariableTracker(VariableTracker):
    """A frame input not read yet: it is wrapped (and guarded) on first read only."""

    def __init__(self, value: Any, source):
        super().__init__(source=source)
        self.value = value
        self.realized: Optional[VariableTracker] = None

    def realize(self, tx) -> VariableTracker:
        # once: every read of the same input is the same tracker (``y is _nil`` in copy.deepcopy)
        if self.realized is None:
            self.realized = VariableBuilder(tx, self.source)(self.value)
        return self.realized


def explain_unsupported(tx, e: Unsupported) -> GraphBreak:
    """Fill in the explanation object of a graph break, at the innermost instruction."""
    if e.explanation is None:
        inst = tx.current_inst
        filename = tx.code.co_filename
        e.explanation = GraphBreak(
            reason=e.reason,
            instruction=f"{inst.opname} {inst.argrepr}".strip() if inst else "?",
            lineno=tx.lineno,
            filename=filename,
            function=tx.code.co_name,
            source=linecache.getline(filename, tx.lineno or 0),
            hint=e.hint,
            internal=e.internal,
            warn=e.warn,
        )
    return e.explanation


class InstructionTranslatorBase(DataOpcodes):
    """The loop and the opcode handlers, shared by the root frame and inlined calls."""

    def __init__(self, code: types.CodeType, f_globals: dict, symbolic_locals: dict, output, *,
                 closure_cells: Optional[dict] = None, globals_source=None, depth: int = 0):
        self.code = code
        self.f_globals = f_globals
        self.symbolic_locals = symbolic_locals
        self.output = output
        self.instructions, self.indexof = decoded(code)
        self.stack: list[VariableTracker] = []
        self.ip = 0
        self.kw_names: Optional[tuple] = None
        self.cells: dict[str, CellVariable] = {}
        self.closure_cells = closure_cells or {}
        self.globals_source = globals_source  # None: the root frame's G
        self.current_inst = None
        self.lineno = code.co_firstlineno
        self.done = False
        self.depth = depth
        if not hasattr(output, "budget"):
            output.budget = MAX_INSTRUCTIONS

    # --- the loop -------------------------------------------------------------
    def step(self) -> None:
        inst = self.instructions[self.ip]
        self.ip += 1
        self.current_inst = inst
        counters["instructions"] += 1
        if inst.lineno is not None:
            self.lineno = inst.lineno
        self.output.budget -= 1
        handler = getattr(self, inst.opname, None)
        with events.source_line(self.lineno):
            try:
                if self.output.budget < 0:
                    unimplemented(f"instruction budget exceeded: the trace ran {MAX_INSTRUCTIONS} instructions "
                                  "without finishing the frame (a loop or generator that does not end?)")
                if handler is None:
                    unimplemented(f"opcode {inst.opname} is not supported by the symbolic interpreter "
                                  f"(Python {PYTHON_VERSION[0]}.{PYTHON_VERSION[1]})")
                handler(inst)
            except Unsupported as e:
                explain_unsupported(self, e)
                raise
            except TracedUserError as e:
                if self.in_user_try_block():  # the user catches it: run the frame eagerly
                    raise self._internal(Unsupported(f"{e} (inside the user's try block)"), e) from e
                raise
            except _CONTROL_FLOW:
                raise
            except Exception as e:  # noqa: BLE001 - Note [No internal error reaches the user]
                raise self._internal(Unsupported(f"internal error in the tracer: {type(e).__name__}: {e}"), e) from e

    def _internal(self, u: Unsupported, cause: BaseException) -> Unsupported:
        u.internal = not isinstance(cause, TracedUserError)
        explain_unsupported(self, u)
        return u

    def in_user_try_block(self) -> bool:
        tx = self
        while tx is not None:
            if find_exception_handler(_exception_table(tx.code), tx.current_inst.offset) is not None:
                return True
            tx = getattr(tx, "parent", None)
        return False

    def run(self) -> None:
        while not self.done:
            self.step()

    # --- stack helpers (byterun's push/pop/popn) ---------------------------------
    def push(self, v: VariableTracker) -> None:
        assert isinstance(v, VariableTracker), v
        self.stack.append(v)

    def realize(self, v: VariableTracker) -> VariableTracker:
        return v.realize(self) if isinstance(v, LazyVariableTracker) else v

    def pop(self) -> VariableTracker:
        return self.realize(self.stack.pop())

    def peek(self, i: int = 1) -> VariableTracker:
        v = self.stack[-i] = self.realize(self.stack[-i])
        return v

    def popn(self, n: int) -> list[VariableTracker]:
        if n == 0:
            return []
        out = [self.realize(v) for v in self.stack[-n:]]
        del self.stack[-n:]
        return out

    def jump(self, inst) -> None:
        self.ip = self.indexof[inst.argval]

    ## Do nothing
    def nop(self, inst) -> None:
        pass

    NOP = RESUME = PRECALL = CACHE = EXTENDED_ARG = COPY_FREE_VARS = nop

    ## Stack manipulation
    def POP_TOP(self, inst) -> None:
        self.stack.pop()  # not realized: a value nobody reads gets no guard

    def PUSH_NULL(self, inst) -> None:
        self.push(NullVariable())

    def COPY(self, inst) -> None:
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst) -> None:
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    ## Names: locals, constants, globals, cells
    def LOAD_CONST(self, inst) -> None:
        self.push(wrap_sourceless(self, inst.argval))

    def LOAD_FAST(self, inst) -> None:
        name = inst.argval
        if inst.opname == "LOAD_FAST" and (name in self.code.co_cellvars or name in self.code.co_freevars):
            return self.LOAD_CLOSURE(inst)  # 3.13: LOAD_CLOSURE is LOAD_FAST of the cell's slot
        if name not in self.symbolic_locals:
            unimplemented(f"local variable {name!r} referenced before assignment (eager raises UnboundLocalError)")
        v = self.symbolic_locals[name]
        if isinstance(v, LazyVariableTracker):
            v = self.symbolic_locals[name] = v.realize(self)
        self.push(v)

    def STORE_FAST(self, inst) -> None:
        value = self.pop()
        if isinstance(value, NullVariable):  # 3.12: an inlined comprehension restores an unbound variable
            self.symbolic_locals.pop(inst.argval, None)
        else:
            self.symbolic_locals[inst.argval] = value

    def DELETE_FAST(self, inst) -> None:
        self.symbolic_locals.pop(inst.argval, None)

    def load_global(self, name: str) -> VariableTracker:
        pending = self.output.side_effects.load_global(self, name)
        if pending is not None:
            return pending
        if name in self.f_globals:
            value = self.f_globals[name]
            if self.globals_source is None:
                return VariableBuilder(self, GlobalSource(name))(value)
            if self.globals_source is False:
                return wrap_sourceless(self, value)
            return VariableBuilder(self, GetItemSource(self.globals_source, name))(value)
        import builtins

        if hasattr(builtins, name):
            return wrap_sourceless(self, getattr(builtins, name))
        unimplemented(f"name {name!r} is not defined (eager raises NameError)")

    def push_callable(self, value: VariableTracker) -> None:
        """A callable for a plain call, with its NULL on the side this Python wants it (Note [NULL on the stack])."""
        for v in callable_slots(value, NullVariable()):
            self.push(v)

    def LOAD_GLOBAL(self, inst) -> None:
        value = self.load_global(inst.argval)
        self.push_callable(value) if inst.arg & 1 else self.push(value)

    def STORE_GLOBAL(self, inst) -> None:
        if self.globals_source is not None:
            unimplemented("writing a global of another module")
        self.output.side_effects.store_global(inst.argval, self.pop())

    def MAKE_CELL(self, inst) -> None:
        name = inst.argval
        value = self.symbolic_locals.pop(name, None)
        if isinstance(value, LazyVariableTracker):
            value = value.realize(self)
        self.cells[name] = CellVariable(value)

    def _cell(self, name: str):
        if name in self.cells:
            return self.cells[name]
        if name in self.closure_cells:
            return self.closure_cells[name]
        return None

    def LOAD_DEREF(self, inst) -> None:
        name = inst.argval
        cell = self._cell(name)
        if cell is None:  # the root frame: free variables arrive as inputs L[name]
            return self.LOAD_FAST(inst)
        value = cell.value if isinstance(cell, CellVariable) else cell
        if value is None:
            unimplemented(f"free variable {name!r} referenced before assignment")
        self.push(value)

    def STORE_DEREF(self, inst) -> None:
        name = inst.argval
        cell = self._cell(name)
        if isinstance(cell, CellVariable):
            cell.value = self.pop()
        elif cell is None and name in self.code.co_cellvars:
            self.cells[name] = CellVariable(self.pop())
        else:
            unimplemented(f"assigning to free variable {name!r} of an enclosing function (nonlocal)")

    def LOAD_CLOSURE(self, inst) -> None:
        name = inst.argval
        cell = self._cell(name)
        if cell is None:
            v = self.symbolic_locals.get(name)
            if isinstance(v, LazyVariableTracker):
                v = v.realize(self)
            cell = CellVariable(v)
        elif not isinstance(cell, CellVariable):
            cell = CellVariable(cell)
        self.push(cell)

    ## Attributes
    def LOAD_ATTR(self, inst) -> None:
        obj = self.pop()
        value = obj.var_getattr(self, inst.argval)
        self.push_callable(value) if LOAD_ATTR_METHOD_BIT and inst.arg & 1 else self.push(value)  # 3.12: LOAD_METHOD

    def LOAD_METHOD(self, inst) -> None:
        obj = self.pop()
        self.push(NullVariable())
        self.push(obj.var_getattr(self, inst.argval))

    def STORE_ATTR(self, inst) -> None:
        obj = self.pop()
        value = self.pop()
        if isinstance(obj, NewObjectVariable):
            obj.store_attr(self, inst.argval, value)
            return
        if isinstance(obj, (NNModuleVariable, UserDefinedObjectVariable, PythonModuleVariable)) and obj.source:
            self.output.side_effects.store_attr(obj, inst.argval, value)
            return
        unimplemented(f"setting attribute {inst.argval!r} on {obj}")

    def IMPORT_NAME(self, inst) -> None:
        fromlist, level = self.pop(), self.pop()
        module = __import__(inst.argval, self.f_globals, None, fromlist.as_python_constant(), level.as_python_constant())
        self.push(PythonModuleVariable(module))

    def IMPORT_FROM(self, inst) -> None:
        self.push(self.peek().var_getattr(self, inst.argval))

    ## Iteration
    def GET_ITER(self, inst) -> None:
        seq = self.pop()
        if isinstance(seq, ListIteratorVariable):
            self.push(seq)
        else:
            self.push(ListIteratorVariable(seq.unpack_var_sequence(self)))

    def FOR_ITER(self, inst) -> None:
        it = self.peek()
        if not isinstance(it, ListIteratorVariable):
            unimplemented(f"for loop over {it}")
        value = it.next_variable(self)
        if value is None:
            self.pop()
            self.jump(inst)
            self.ip += FOR_ITER_EXIT_SKIP  # 3.12+: step over END_FOR (3.13: END_FOR, POP_TOP)
        else:
            self.push(value)

    ## Jumps
    def JUMP_FORWARD(self, inst) -> None:
        self.jump(inst)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP_ABSOLUTE = JUMP_FORWARD

    def generic_jump(self, inst, value: VariableTracker, jump_if: bool, pop: bool) -> None:
        """Conditional jumps: decide now if the condition is known (Note [Where a graph can break])."""
        try:
            truth = value.truth(self)
        except Unsupported as e:
            explain_unsupported(self, e)
            self.break_graph_at_jump(inst, value, jump_if, pop, e)
            return
        if truth == jump_if:
            if not pop:
                self.push(value)
            self.jump(inst)

    def break_graph_at_jump(self, inst, value, jump_if, pop, e: Unsupported) -> None:
        raise e  # an inlined frame cannot break here; the caller's CALL will

    def POP_JUMP_IF_FALSE(self, inst) -> None:
        self.generic_jump(inst, self.pop(), False, True)

    def POP_JUMP_IF_TRUE(self, inst) -> None:
        self.generic_jump(inst, self.pop(), True, True)

    POP_JUMP_FORWARD_IF_FALSE = POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_IF_FALSE
    POP_JUMP_FORWARD_IF_TRUE = POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_IF_TRUE

    def JUMP_IF_FALSE_OR_POP(self, inst) -> None:
        self.generic_jump(inst, self.pop(), False, False)

    def JUMP_IF_TRUE_OR_POP(self, inst) -> None:
        self.generic_jump(inst, self.pop(), True, False)

    def _is_none(self, value) -> bool:
        if isinstance(value, ConstantVariable):
            return value.value is None
        return False  # tensors, containers, functions, modules are never None

    def POP_JUMP_IF_NONE(self, inst) -> None:
        if self._is_none(self.pop()):
            self.jump(inst)

    def POP_JUMP_IF_NOT_NONE(self, inst) -> None:
        if not self._is_none(self.pop()):
            self.jump(inst)

    POP_JUMP_FORWARD_IF_NONE = POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_IF_NONE
    POP_JUMP_FORWARD_IF_NOT_NONE = POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_IF_NOT_NONE

    ## Functions
    def KW_NAMES(self, inst) -> None:
        self.kw_names = self.code.co_consts[inst.arg]

    def _call_args(self, argc: int):
        """Pop a CALL's operands: [NULL|fn, fn|self, args...] (3.13: [fn, NULL|self, ...]) -> fn, args, kwargs."""
        kw_names, self.kw_names = self.kw_names or (), None
        args = self.popn(argc)
        second, first = self.pop(), self.pop()
        fn, args = call_target(first, second, args, lambda v: isinstance(v, NullVariable))
        kwargs = {}
        if kw_names:
            kwargs = dict(zip(kw_names, args[len(args) - len(kw_names) :]))
            args = args[: len(args) - len(kw_names)]
        return fn, args, kwargs

    def CALL(self, inst) -> None:
        fn, args, kwargs = self._call_args(inst.arg)
        self.push(fn.call_function(self, args, kwargs))

    def CALL_FUNCTION_EX(self, inst) -> None:
        kwargs_var = self.pop() if inst.arg & 1 else None
        args_var = self.pop()
        if NULL_AFTER_CALLABLE and self.stack and isinstance(self.stack[-1], NullVariable):
            self.pop()  # 3.13: [fn, NULL, args, kwargs]
        fn = self.pop()
        if self.stack and isinstance(self.stack[-1], NullVariable):
            self.pop()
        args = args_var.unpack_var_sequence(self)
        kwargs = {}
        if kwargs_var is not None:
            if not isinstance(kwargs_var, ConstDictVariable):
                unimplemented(f"**kwargs from {kwargs_var}")
            kwargs = dict(kwargs_var.items)
        self.push(fn.call_function(self, args, kwargs))

    def MAKE_FUNCTION(self, inst) -> None:
        code = self.pop().as_python_constant()
        flags = inst.arg or 0  # 3.13: no flags, SET_FUNCTION_ATTRIBUTE follows
        closure = self.pop().items if flags & 0x08 else None
        if flags & 0x04:
            self.pop()  # annotations
        kwdefaults = self.pop().items if flags & 0x02 else None
        defaults = self.pop().items if flags & 0x01 else None
        self.push(NestedUserFunctionVariable(code, code.co_qualname, self.f_globals, defaults, kwdefaults, closure))

    def inline_user_function_return(self, fn_var, args: list, kwargs: dict) -> VariableTracker:
        """Trace a Python function's body on this graph (Note [Binding arguments ...])."""
        code = fn_var.get_code()
        if code.co_flags & (0x80 | 0x100 | 0x200):  # coroutine, async generator
            unimplemented(f"{code.co_name} is a coroutine")
        generator = bool(code.co_flags & 0x20)
        if self.depth >= MAX_INLINE_DEPTH:
            unimplemented("inlining too deep (recursion?)")
        bound = fn_var.bind_args(self, args, kwargs)
        fn_globals = fn_var.get_globals()
        globals_source = None if fn_globals is self.output.root_globals else \
            globals_source_for(fn_globals, code, getattr(fn_var, "source", None))
        tracer = InliningInstructionTranslator(
            code, fn_globals, bound, self.output, closure_cells=fn_var.closure_cells(self),
            globals_source=globals_source, depth=self.depth + 1,
        )
        tracer.parent = self
        if generator:
            # Note [Generators are inlined lazily]: nothing of the body runs until the
            # first next(); each next() runs it to the following yield.
            tracer.is_generator = True
            return LazyGeneratorVariable(tracer)
        tracer.run()
        return tracer.return_value

    ## Context managers (only the grad-mode ones: torch.no_grad, enable_grad, set_grad_enabled)
    def BEFORE_WITH(self, inst) -> None:
        ctx = self.pop()
        if not isinstance(ctx, GradModeVariable):
            unimplemented(f"with-statement on {ctx}")
        self.push(WithExitVariable(ctx))
        self.push(ctx.enter(self))

    ## Returning and raising
    def RETURN_VALUE(self, inst) -> None:
        self.return_value = self.pop()
        self.done = True

    def RETURN_CONST(self, inst) -> None:  # 3.12
        self.push(wrap_sourceless(self, inst.argval))
        self.RETURN_VALUE(inst)

    def RAISE_VARARGS(self, inst) -> None:
        unimplemented("raise statement (the frame runs eagerly, so the exception is raised as usual)")

    def LOAD_ASSERTION_ERROR(self, inst) -> None:
        unimplemented("assert failed while tracing (eager raises AssertionError)")

    ## New in 3.12 and 3.13 (Note [What changes between 3.11, 3.12 and 3.13] in bytecode.py)
    LOAD_FAST_CHECK = LOAD_FAST  # 3.12: a LOAD_FAST that may find the local unbound

    def LOAD_FAST_AND_CLEAR(self, inst) -> None:  # 3.12: an inlined comprehension saves its variable
        value = self.symbolic_locals.pop(inst.argval, None)
        self.push(NullVariable() if value is None else self.realize(value))

    def LOAD_FAST_LOAD_FAST(self, inst) -> None:  # 3.13 superinstructions: argval holds both names
        for name in inst.argval:
            self.LOAD_FAST(_named(inst, name))

    def STORE_FAST_STORE_FAST(self, inst) -> None:
        for name in inst.argval:
            self.STORE_FAST(_named(inst, name))

    def STORE_FAST_LOAD_FAST(self, inst) -> None:
        store, load = inst.argval
        self.STORE_FAST(_named(inst, store))
        self.LOAD_FAST(_named(inst, load))

    def END_FOR(self, inst) -> None:  # 3.12: pops two values, 3.13: one (FOR_ITER steps over it)
        for _ in range(2 if PYTHON_VERSION == (3, 12) else 1):
            self.stack.pop()

    def TO_BOOL(self, inst) -> None:
        # 3.13: comes before every conditional jump and `not`, which ask the value's truth themselves
        # (so a tensor breaks the graph at the jump, as on 3.11). Real Dynamo skips it the same way.
        pass

    def CALL_INTRINSIC_1(self, inst) -> None:  # 3.12
        if inst.argrepr == "INTRINSIC_UNARY_POSITIVE":
            self.push(call_operator(self, operator.pos, [self.pop()]))
        elif inst.argrepr == "INTRINSIC_LIST_TO_TUPLE":
            self.push(TupleVariable(self.pop().items))
        else:
            unimplemented(f"CALL_INTRINSIC_1 {inst.argrepr}")

    def LOAD_SUPER_ATTR(self, inst) -> None:
        # 3.12: super().name without the call; arg bit 1: a method load, bit 2: the two-argument form.
        global_super, cls, obj = self.popn(3)
        if not (isinstance(global_super, BuiltinVariable) and global_super.fn is super):
            unimplemented(f"super() is shadowed by {global_super}")
        from .variables.misc import SuperVariable

        value = SuperVariable(cls.as_python_constant(), obj).var_getattr(self, inst.argval)
        self.push_callable(value) if inst.arg & 1 else self.push(value)

    def CALL_KW(self, inst) -> None:  # 3.13: the keyword names are a stack operand, not KW_NAMES
        self.kw_names = self.pop().as_python_constant()
        self.CALL(inst)

    def SET_FUNCTION_ATTRIBUTE(self, inst) -> None:  # 3.13: MAKE_FUNCTION's flags, one at a time
        fn, value = self.pop(), self.pop()
        fields = {"defaults": fn.defaults, "kwdefaults": fn.kwdefaults, "closure": fn.closure}
        key = {0x08: "closure", 0x02: "kwdefaults", 0x01: "defaults"}.get(inst.arg)  # 0x04: annotations, dropped
        if key is not None:
            fields[key] = value.items
        self.push(NestedUserFunctionVariable(fn.code, fn.qualname, fn.f_globals, **fields))


def _named(inst, name: str):
    """One half of a 3.13 superinstruction, as the plain instruction it stands for."""
    import dataclasses

    return dataclasses.replace(inst, opname=inst.opname.rsplit("_", 2)[-2] + "_FAST", argval=name, argrepr=name)


class InliningInstructionTranslator(InstructionTranslatorBase):
    """A callee traced on its caller's graph; returns its value to the caller's stack.

    Note [Generators are inlined lazily]
        Calling a generator function (a genexpr like ``any(f(x) for f in fs)``) runs
        nothing: the caller gets a ``LazyGeneratorVariable`` holding this translator,
        suspended. Each ``next`` (``FOR_ITER``, ``next()``, ``any``/``all``) steps it to
        its next ``YIELD_VALUE`` and takes the value, so a generator consumed partly
        runs only as far as eager would, with only those side effects, and ``any`` /
        ``all`` stop at the first item that decides. Real Dynamo:
        ``LocalGeneratorObjectVariable``.
    """

    return_value: VariableTracker
    is_generator: bool = False
    _yielded: Optional[VariableTracker] = None

    def next_yield(self) -> Optional[VariableTracker]:
        """Run the generator body up to its next yield: the value, or None once it returned."""
        while not self.done:
            self.step()
            if self._yielded is not None:
                value, self._yielded = self._yielded, None
                return value
        return None

    def RETURN_GENERATOR(self, inst) -> None:
        if not self.is_generator:
            unimplemented("generator outside an inlined call")
        self.push(ConstantVariable(None))  # what the first next() sends in (popped by POP_TOP)

    def GET_YIELD_FROM_ITER(self, inst) -> None:
        if not isinstance(self.peek(), ListIteratorVariable):
            self.push(ListIteratorVariable(self.pop().unpack_var_sequence(self)))

    def SEND(self, inst) -> None:
        """``yield from`` / ``await``: the next value of the inner iterator, or its return value and a jump."""
        sent, it = self.peek(1), self.peek(2)
        if not isinstance(it, ListIteratorVariable) or not (sent.is_python_constant() and sent.as_python_constant() is None):
            unimplemented(f"send() of {sent} into {it}")
        value = it.next_variable(self)
        self.pop()  # the value sent in (None: only next(), never send())
        if value is not None:
            self.push(value)
            return
        result = getattr(getattr(it, "tracer", None), "return_value", None)
        if result is None:
            result = ConstantVariable(None)
        if PYTHON_VERSION < (3, 12):
            self.pop()  # 3.11 pops the iterator too; 3.12+ leaves it for END_SEND
        self.push(result)
        self.jump(inst)

    def END_SEND(self, inst) -> None:
        value = self.pop()
        self.pop()
        self.push(value)

    def YIELD_VALUE(self, inst) -> None:
        if not self.is_generator:
            unimplemented("yield outside an inlined generator")
        self._yielded = self.pop()
        self.push(ConstantVariable(None))  # the value next() sends back in


class InstructionTranslator(InstructionTranslatorBase):
    """The root frame: on RETURN_VALUE or at a graph break it finishes the compiled piece.

    ``break_at`` maps instruction offsets to the explanation of a break that a previous
    attempt found there (Dynamo's speculation log, see ``RestartAnalysis``);
    ``stop_at`` = (offset, visit) is a checkpoint where a previous attempt decided to
    stop tracing and run the rest of the frame eagerly (Dynamo's ``step_graph_break``).
    """

    def __init__(self, *args, break_at: Optional[dict] = None, stop_at=None, start_offset: int = 0, **kwargs):
        super().__init__(*args, **kwargs)
        self.break_at = break_at or {}
        self.stop_at = stop_at
        self.ip = self.indexof[start_offset]
        self.result = None  # ("return", value) / ("call", inst, why) / ("jump", ...) / ("stop", inst, why)
        self.exn_table = _exception_table(self.code)
        self.entry_grad_mode = torch.is_grad_enabled()
        self.visits: dict[int, int] = {}
        self.checkpoint = None  # (offset, visit) of the last instruction met with an empty stack

    def step(self) -> None:
        inst = self.instructions[self.ip]
        visit = self.visits[inst.offset] = self.visits.get(inst.offset, 0) + 1
        if self.stop_at is not None and self.stop_at[0] == (inst.offset, visit):
            self.current_inst = inst
            self.result = ("stop", inst, self.stop_at[1])
            self.done = True
            return
        if not self.stack and not self.in_try_block(inst) and self.output.count_calls() > 0:
            self.checkpoint = (inst.offset, visit)
        try:
            super().step()
        except Unsupported as e:
            # Not at a call or a jump (Note [Where a graph can break]): cut at the last
            # checkpoint and let the rest of the frame run eagerly, as Dynamo does.
            explanation = explain_unsupported(self, e)
            if self.checkpoint is None or not vm_can_run(self.code, self.checkpoint[0]):
                raise
            raise RestartAnalysis(-1, explanation, stop_at=self.checkpoint) from e

    def in_try_block(self, inst) -> bool:
        return find_exception_handler(self.exn_table, inst.offset) is not None

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
        if at_call and self.in_try_block(self.current_inst) and self.grad_blocks() and self.only_with_blocks():
            if self.maybe_has_backedge():
                explanation.reason += " (graph break in a for/while loop: the whole frame runs eagerly, as in Dynamo)"
                raise EagerFallback(explanation)
            return  # inside `with torch.no_grad()` (or enable_grad, set_grad_enabled): resumed inside the block
        if self.in_try_block(self.current_inst):
            explanation.reason += " (inside a try/with block: the whole frame runs eagerly)"
            raise EagerFallback(explanation)
        if self.maybe_has_backedge():
            explanation.reason += " (graph break in a for/while loop: the whole frame runs eagerly, as in Dynamo)"
            raise EagerFallback(explanation)

    def RETURN_VALUE(self, inst) -> None:
        self.result = ("return", self.pop())
        self.done = True

    def CALL(self, inst) -> None:
        self._breakable_call(inst, super().CALL)

    def CALL_KW(self, inst) -> None:  # 3.13
        self._breakable_call(inst, super().CALL_KW)

    def CALL_FUNCTION_EX(self, inst) -> None:
        self._breakable_call(inst, super().CALL_FUNCTION_EX)

    def _breakable_call(self, inst, do_call) -> None:
        if inst.offset in self.break_at:
            self.result = ("call", inst, self.break_at[inst.offset])
            self.done = True
            return
        try:
            do_call(inst)
        except Unsupported as e:
            explanation = explain_unsupported(self, e)
            if self.output.fullgraph:
                raise
            self.check_can_break(explanation, at_call=True)
            raise RestartAnalysis(inst.offset, explanation) from e

    def break_graph_at_jump(self, inst, value, jump_if, pop, e: Unsupported) -> None:
        if self.output.fullgraph:
            raise e
        self.check_can_break(e.explanation)
        self.result = ("jump", inst, value, jump_if, pop, e.explanation)
        self.done = True

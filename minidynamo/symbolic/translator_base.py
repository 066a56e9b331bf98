"""The frame loop and the opcode handlers every kind of frame shares.

Place in the pipeline: the core of the symbolic interpreter (see ``symbolic_convert.py``
for the overview and its Notes). ``InstructionTranslatorBase`` steps through a code
object's instructions with VariableTrackers on its stack; this module holds the loop
(``step``/``run``), the stack helpers, and the handlers for names, attributes and
imports. The other families are mixins beside it: ``opcodes_data.py`` (containers,
operators, unpacking), ``opcodes_control.py`` (iteration, jumps), ``opcodes_calls.py``
(calls, functions, with, return), ``opcodes_exceptions.py`` (raise, except, finally), ``opcodes_312_313.py`` (opcodes new in 3.12
and 3.13). Mirrors ``torch/_dynamo/symbolic_convert.py`` (``InstructionTranslatorBase``:
``step``, ``run``, ``push``/``pop``, the ``LOAD_*``/``STORE_*`` handlers).
"""

from __future__ import annotations

import dis
import functools
import inspect
import sys
import types
from typing import Optional

import torch

from minidynamo import events
from minidynamo.bytecode import (LOAD_ATTR_METHOD_BIT, PYTHON_VERSION, callable_slots, exception_table,
                                 find_exception_handler, get_instructions, offset_to_index)

from . import counters
from .exc import (EagerFallback, ObservedException, RestartAnalysis, TorchRuntimeError, UncapturedHigherOrderOpError,
                  Unsupported, explain_unsupported, unimplemented)
from . import graph_break_registry as gb
from .fake_values import TracedUserError
from .opcodes_312_313 import Py312Py313Opcodes
from .opcodes_calls import CallOpcodes
from .opcodes_control import ControlFlowOpcodes
from .opcodes_data import DataOpcodes
from .opcodes_exceptions import ExceptionOpcodes
from .source import GetItemSource, GlobalSource
from .variables.base import VariableTracker
from .variables.builder import VariableBuilder, wrap_constant_result, wrap_example, wrap_fx_proxy, wrap_sourceless
from .variables.lazy import LazyVariableTracker
from .variables.operators import call_operator
from .variables.new_object import NewObjectVariable
from .variables.exceptions import ExceptionVariable
from .variables.user_defined import DataclassDictVariable
from .variables.functions import CellVariable
from .variables.misc import NullVariable, UserDefinedObjectVariable
from .variables.nn_module import NNModuleVariable
from .variables.torch import PythonModuleVariable

JUMP_OPCODES = set(dis.hasjrel) | set(dis.hasjabs)
# Note [An instruction budget per frame]: one frame's trace (with everything it inlines)
# may step through at most this many instructions. A trace that does not end (a
# `while True` generator drained by list()) then breaks with a named reason instead of
# hanging; eager would hang too only if the loop never ends at run time either.
MAX_INSTRUCTIONS = 500_000
_CONTROL_FLOW = (Unsupported, RestartAnalysis, EagerFallback, TracedUserError, UncapturedHigherOrderOpError,
                 TorchRuntimeError)


@functools.lru_cache(maxsize=1024)
def _exception_table(code: types.CodeType) -> list:
    return exception_table(code)


@functools.lru_cache(maxsize=1024)
def decoded(code: types.CodeType) -> tuple[list, dict]:
    """The instructions of a code object and their index by offset (decoded once per code)."""
    instructions = get_instructions(code)
    return instructions, offset_to_index(instructions)


class InstructionTranslatorBase(ExceptionOpcodes, ControlFlowOpcodes, CallOpcodes, Py312Py313Opcodes, DataOpcodes):
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
                                  f"(Python {PYTHON_VERSION[0]}.{PYTHON_VERSION[1]})", gb_id=gb.MISSING_BYTECODE)
                handler(inst)
            except ObservedException as e:  # the traced code raised: its handler, or its caller's
                self.exception_handler(e)
            except Unsupported as e:
                explain_unsupported(self, e)
                raise
            except TracedUserError as e:
                if self.in_user_try_block():  # the user catches it: run the frame eagerly
                    raise self._internal(Unsupported(f"{e} (inside the user's try block)",
                                                     gb_id=gb.OBSERVED_EXCEPTION), e) from e
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

    ## Making trackers: the interface the VariableTrackers call back into
    # Note [The trackers reach the builder through the translator]
    #     The builder (variables/builder.py) imports every VariableTracker class, to pick the
    #     one for a value; the trackers in turn make trackers for what they return (an
    #     attribute, a folded constant, a graph node). They do so through ``tx``, the
    #     translator handed to every call, not by importing the builder, so the modules stay
    #     layered: the translator above the builder, the builder above the trackers
    #     (pyproject.toml's "dynamo" contracts). Torch's ``VariableTracker.build(tx, value,
    #     source)`` (torch/_dynamo/variables/base.py) reaches the same builder by an import
    #     at the bottom of base.py, a circle our tests/test_import_contracts.py forbids.
    def variable_builder(self, source) -> VariableBuilder:
        """``VariableBuilder(tx, source)``: call it with the value read from ``source`` (guards it)."""
        return VariableBuilder(self, source)

    def wrap_sourceless(self, value) -> VariableTracker:
        return wrap_sourceless(self, value)

    def wrap_constant_result(self, value) -> VariableTracker:
        return wrap_constant_result(value)

    def wrap_fx_proxy(self, kind: str, target, args: tuple, kwargs: dict) -> VariableTracker:
        return wrap_fx_proxy(self, kind, target, args, kwargs)

    def wrap_example(self, proxy, example) -> VariableTracker:
        return wrap_example(self, proxy, example)

    def call_operator(self, fn, args: list) -> VariableTracker:
        """``a + b``, ``x in seq``: the operator dispatch (variables/operators.py) the opcodes use too."""
        return call_operator(self, fn, args)

    def register_tensor_hook(self, tensor, hook, method: str) -> VariableTracker:
        """``tensor.register_hook(hook)`` (Note [A hook on a tensor of the trace is a node], higher_order_ops.py)."""
        from .variables.higher_order_ops import call_register_hook

        return call_register_hook(self, tensor, hook, method)

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
        if inst.opname == "LOAD_FAST" and (name in self.code.co_cellvars or name in self.code.co_freevars) and not (
                name not in self.cells and name in self.code.co_cellvars and name in self.symbolic_locals):
            return self.LOAD_CLOSURE(inst)  # 3.13: LOAD_CLOSURE is LOAD_FAST of the cell's slot
        if name not in self.symbolic_locals:
            unimplemented(f"local variable {name!r} referenced before assignment (eager raises UnboundLocalError)",
                          gb_id=gb.UNDEFINED_LOCAL)
        v = self.symbolic_locals[name]
        if isinstance(v, LazyVariableTracker) and v.realized is not None:
            v = self.symbolic_locals[name] = v.realized
        self.push(v)  # a lazy input is realized by the instruction that pops it (Note [An inlined call's ...])

    def STORE_FAST(self, inst) -> None:
        value, name = self.pop(), inst.argval
        value.set_name_hint(name)  # the node takes the local's name, as torch's STORE_FAST
        self.cells.pop(name, None)  # a cell variable's slot: a plain value replaces the cell (ceval_names.py,
        # Note [A comprehension's variable may be a cell]); a comprehension's saved cell is put back
        if isinstance(value, NullVariable):  # 3.12: an inlined comprehension restores an unbound variable
            self.symbolic_locals.pop(name, None)
        elif isinstance(value, CellVariable) and name in self.code.co_cellvars:
            self.symbolic_locals.pop(name, None)
            self.cells[name] = value
        else:
            self.symbolic_locals[name] = value

    def DELETE_FAST(self, inst) -> None:
        self.symbolic_locals.pop(inst.argval, None)

    def load_global(self, name: str) -> VariableTracker:
        pending = self.output.side_effects.load_global(self, name)
        if pending is not None:
            return pending
        if name in self.f_globals:
            value = self.f_globals[name]
            if self.globals_source is None:
                if isinstance(value, torch.Tensor):  # wrapped where first used, as an argument
                    return LazyVariableTracker(value, GlobalSource(name))  # (Note [An inlined call's ...])
                return VariableBuilder(self, GlobalSource(name))(value)
            if self.globals_source is False:
                module_name = self.f_globals.get("__name__", "")
                module = sys.modules.get(module_name) if module_name.startswith("torch.backends.") else None
                if module is not None and module.__dict__ is self.f_globals:
                    # a library global is folded unguarded, except torch.backends' switches
                    # (``_is_fastpath_enabled`` read by ``torch.backends.mha.get_fastpath_enabled``),
                    # guarded as when read as a module attribute (Note [torch.backends flags are guarded])
                    from .variables.torch import PythonModuleVariable

                    return PythonModuleVariable(module).var_getattr(self, name)
                return wrap_sourceless(self, value)
            return VariableBuilder(self, GetItemSource(self.globals_source, name))(value)
        import builtins

        if hasattr(builtins, name):
            return wrap_sourceless(self, getattr(builtins, name))
        unimplemented(f"name {name!r} is not defined (eager raises NameError)", gb_id=gb.UNDEFINED_NAME)

    def push_callable(self, value: VariableTracker) -> None:
        """A callable for a plain call, with its NULL on the side this Python wants it (Note [NULL on the stack])."""
        for v in callable_slots(value, NullVariable()):
            self.push(v)

    def LOAD_GLOBAL(self, inst) -> None:
        value = self.load_global(inst.argval)
        self.push_callable(value) if inst.arg & 1 else self.push(value)

    def STORE_GLOBAL(self, inst) -> None:
        if self.globals_source is not None:
            unimplemented("writing a global of another module", gb_id=gb.SETATTR)
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
            unimplemented(f"free variable {name!r} referenced before assignment", gb_id=gb.UNINITIALIZED_CELL)
        self.push(value)

    def STORE_DEREF(self, inst) -> None:
        name = inst.argval
        cell = self._cell(name)
        if isinstance(cell, CellVariable):
            if cell.real_expr is not None:  # a cell the frame received: written after the graph (SideEffects)
                self.output.side_effects.store_cell(name)
            cell.value = self.pop()
            cell.mutated = True
            if name in self.code.co_cellvars:  # torch's STORE_DEREF: a cell of this frame names the node
                cell.value.set_name_hint(name)
        elif cell is None and name in self.code.co_cellvars:
            self.cells[name] = CellVariable(self.pop())
        else:
            unimplemented(f"assigning to free variable {name!r} of an enclosing function (nonlocal)",
                          gb_id=gb.IMMUTABLE_CELL)

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
        if isinstance(obj, (NewObjectVariable, ExceptionVariable, DataclassDictVariable)):
            obj.store_attr(self, inst.argval, value)
            return
        if isinstance(obj, UserDefinedObjectVariable) and obj.source \
                and inspect.isfunction(setattr_ := inspect.getattr_static(type(obj.value), "__setattr__", None)):
            # the class's own __setattr__, inlined with the name as a constant, as torch's
            # UserDefinedObjectVariable.call_method: its super().__setattr__ records the store
            from .variables.constant import ConstantVariable
            from .variables.functions import UserMethodVariable
            from .variables.misc import guard_class_attribute

            guard_class_attribute(self, type(obj.value), "__setattr__", setattr_)
            UserMethodVariable(setattr_, obj).call_function(self, [ConstantVariable(inst.argval), value], {})
            return
        if isinstance(obj, (NNModuleVariable, UserDefinedObjectVariable, PythonModuleVariable)) and obj.source:
            self.output.side_effects.store_attr(obj, inst.argval, value)
            return
        from .variables.tensor import TensorVariable, store_tensor_attr

        if isinstance(obj, TensorVariable) and inst.argval == "data" and obj.source is None:
            unimplemented("only .data of a tensor made outside the compiled function can be set (this one is "
                          "made inside)", "don't set .data on this tensor, or move it out of the compiled function",
                          gb_id=gb.SET_DATA, context=f"setattr({obj}, data, {value})")
        if isinstance(obj, TensorVariable) and store_tensor_attr(self, obj, inst.argval, value):
            return
        unimplemented(f"setting attribute {inst.argval!r} on this object", gb_id=gb.SETATTR,
                      context=f"setting attribute {inst.argval!r} on {obj}")

    # Note [del of an attribute is a side effect]
    #     torch's ``DELETE_ATTR`` (torch/_dynamo/symbolic_convert.py) calls ``delattr`` on the
    #     tracker: on an object made in the trace it is gone from the tracker; on an object
    #     from outside the frame it is a side effect (``DeletedVariable`` in the side-effect
    #     table), done after the graph as ``delattr(obj, name)``. No graph break either way.
    def DELETE_ATTR(self, inst) -> None:
        obj = self.pop()
        if isinstance(obj, NewObjectVariable):
            obj.del_attr(self, inst.argval)
            return
        if isinstance(obj, UserDefinedObjectVariable) and obj.source \
                and inspect.getattr_static(type(obj.value), "__delattr__", None) is object.__delattr__:
            pending = (id(obj) if obj.source is None else obj.source.name(), inst.argval) in \
                self.output.side_effects.attr_stores
            if not pending and inst.argval not in getattr(obj.value, "__dict__", {}):
                unimplemented(f"del of attribute {inst.argval!r}, which the object does not have (eager raises "
                              "AttributeError)", gb_id=gb.OBSERVED_EXCEPTION)
            self.output.side_effects.load_attr(obj, inst.argval)  # deleted twice: eager's AttributeError
            self.output.side_effects.delete_attr(obj, inst.argval)
            return
        unimplemented(f"deleting attribute {inst.argval!r} of this object", gb_id=gb.SETATTR,
                      context=f"delattr({obj}, {inst.argval!r})")

    def IMPORT_NAME(self, inst) -> None:
        fromlist, level = self.pop(), self.pop()
        module = __import__(inst.argval, self.f_globals, None, fromlist.as_python_constant(), level.as_python_constant())
        self.push(PythonModuleVariable(module))

    def IMPORT_FROM(self, inst) -> None:
        self.push(self.peek().var_getattr(self, inst.argval))

    LOAD_FAST_CHECK = LOAD_FAST  # 3.12: a LOAD_FAST that may find the local unbound

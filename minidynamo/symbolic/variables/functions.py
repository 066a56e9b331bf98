"""User Python functions while tracing: calls are inlined, not recorded.

Place in the pipeline: a call to a Python function is traced *through*: a child
``InliningInstructionTranslator`` runs the callee's bytecode on the caller's graph.
Mirrors ``torch/_dynamo/variables/functions.py`` (``UserFunctionVariable``,
``NestedUserFunctionVariable``, ``UserMethodVariable``).

Note [Binding arguments by borrowing Python's]
    To match arguments to parameters we build a throwaway function with the callee's
    code whose defaults are the default values' trackers, and let
    ``inspect.signature(...).bind`` do the work: positional, keyword, defaults,
    ``*args`` and ``**kwargs`` are bound exactly as CPython would.
"""

from __future__ import annotations

import inspect
import types
from typing import Any, Optional

from ..exc import unimplemented
from .. import graph_break_registry as gb
from ..source import AttrSource, ClosureSource
from .base import VariableTracker


def bind_args(tx, code, name, defaults, kwdefaults, args, kwargs) -> dict:
    """Map the call's trackers to the callee's parameter names (Note [Binding arguments ...])."""
    from .dicts import ConstDictVariable
    from .lists import TupleVariable

    dummy_closure = tuple(types.CellType() for _ in code.co_freevars) or None
    dummy = types.FunctionType(code, {}, name, tuple(defaults) if defaults else None, dummy_closure)
    if kwdefaults:
        dummy.__kwdefaults__ = dict(kwdefaults)
    try:
        bound = inspect.signature(dummy).bind(*args, **kwargs)
    except TypeError as e:
        unimplemented(f"calling {name}: {e}", gb_id="GB7312")
    bound.apply_defaults()
    result = {}
    for pname, param in inspect.signature(dummy).parameters.items():
        value = bound.arguments[pname]
        if param.kind is inspect.Parameter.VAR_POSITIONAL:  # packed: realized (Note [An inlined call's
            value = TupleVariable([tx.realize(v) for v in value])  # arguments stay lazy], opcodes_calls.py)
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            value = ConstDictVariable({k: tx.realize(v) for k, v in value.items()})
        if pname.startswith("implicit") and "." + pname[8:] in code.co_varnames:
            pname = "." + pname[8:]  # a comprehension's hidden iterator argument ".0"
        result[pname] = value
    return result


class CellVariable(VariableTracker):
    """A closure cell shared between a frame and the nested functions it defines.

    ``real_expr``: for a cell that exists before the trace (a resume function's cell, Note [A resume
    function receives the frame's cells]), how the transformed code reads it (``L['___closure'][0]``);
    its ``value`` changes while tracing only here, and a changed value is written to the real cell
    after the graph (``SideEffects.codegen``). torch: ``SideEffects.track_cell_existing``.
    """

    def __init__(self, value: Optional[VariableTracker] = None, real_expr: Optional[str] = None, **kwargs):
        super().__init__(**kwargs)
        self.value = value
        self.real_expr = real_expr
        self.mutated = False  # STORE_DEREF / DELETE_DEREF while tracing

    def reconstruct(self, codegen) -> str:
        return codegen.cell_expr(self)

    def __repr__(self) -> str:
        return f"CellVariable({self.value!r})"


class BaseUserFunctionVariable(VariableTracker):
    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        return tx.inline_user_function_return(self, list(args), dict(kwargs))


def _default(tx, source, table: str, key, value) -> VariableTracker:
    """A default value: read (and guarded) through ``fn.__defaults__[i]`` when the function has a source."""
    from ..source import GetItemSource
    from .lazy import LazyVariableTracker

    if source is None:
        return tx.wrap_sourceless(value)
    return LazyVariableTracker(value, GetItemSource(AttrSource(source, table), key))  # guarded only if read


class UserFunctionVariable(BaseUserFunctionVariable):
    """A Python function that exists before the trace (a global, an attribute)."""

    def __init__(self, fn: types.FunctionType, **kwargs):
        super().__init__(**kwargs)
        self.fn = fn

    def as_python_constant(self) -> Any:
        return self.fn

    def python_type(self) -> type:
        return types.FunctionType

    def get_code(self):
        return self.fn.__code__

    def get_globals(self) -> dict:
        return self.fn.__globals__

    def get_name(self) -> str:
        return self.fn.__name__

    def bind_args(self, tx, args, kwargs) -> dict:
        defaults = [_default(tx, self.source, "__defaults__", i, d) for i, d in enumerate(self.fn.__defaults__ or ())]
        kwdefaults = {k: _default(tx, self.source, "__kwdefaults__", k, v)
                      for k, v in (self.fn.__kwdefaults__ or {}).items()}
        return bind_args(tx, self.fn.__code__, self.fn.__name__, defaults, kwdefaults, args, kwargs)

    def closure_cells(self, tx) -> dict:
        """Free variables of the callee: real cells, wrapped (and guarded when they have a source)."""
        out = {}
        for i, (name, cell) in enumerate(zip(self.fn.__code__.co_freevars, self.fn.__closure__ or ())):
            tracked = tx.output.side_effects.tracked_cell(cell)
            if tracked is not None:  # a cell of the frame being traced: its value as the trace left it
                out[name] = tracked
                continue
            try:
                value = cell.cell_contents
            except ValueError:
                unimplemented(f"free variable {name!r} of {self.fn.__name__} is not set yet",
                              gb_id=gb.UNINITIALIZED_CELL)
            if self.source is not None:
                out[name] = tx.variable_builder(ClosureSource(self.source, i))(value)
            else:
                out[name] = tx.wrap_sourceless(value)
        return out

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in ("__name__", "__qualname__", "__module__", "__doc__", "__code__"):
            return tx.wrap_sourceless(getattr(self.fn, name))
        return super().var_getattr(tx, name)

    def reconstruct(self, codegen) -> str:
        if self.source is not None:
            return codegen.source_expr(self.source)
        return codegen.constant_expr(self.fn)

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        from ..polyfills import POLYFILLS, RE_CONSTANT_FOLD_FNS

        if self.fn in RE_CONSTANT_FOLD_FNS:
            args, kwargs = [tx.realize(a) for a in args], {k: tx.realize(v) for k, v in kwargs.items()}
        if self.fn in RE_CONSTANT_FOLD_FNS and all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            # Note [re's functions fold on constants] (polyfills.py)
            result = self.fn(*[a.as_python_constant() for a in args],
                             **{k: v.as_python_constant() for k, v in kwargs.items()})
            return tx.wrap_sourceless(result)
        if self.fn in POLYFILLS:  # a library function traced through its Python stand-in
            return UserFunctionVariable(POLYFILLS[self.fn]).call_function(tx, args, kwargs)
        if getattr(self.fn, "_dynamo_marked_constant", False) \
                and all(a.is_python_constant() for a in [*args, *kwargs.values()]):
            # ``torch._dynamo.assume_constant_result(f)`` (decorators.py) sets this flag, and so does
            # transformers' ``_make_compile_constant`` (``is_torch_available``): torch's
            # UserFunctionVariable calls ``f`` now and keeps its result as a constant of the trace
            # (``invoke_and_store_as_constant``, torch/_dynamo/variables/functions.py), not traced
            result = self.fn(*[a.as_python_constant() for a in args],
                             **{k: v.as_python_constant() for k, v in kwargs.items()})
            return tx.wrap_sourceless(result)
        if inspect.getattr_static(self.fn, "_torchdynamo_disable", False):
            # ``torch._dynamo.disable(f)`` / ``torch.compiler.disable``: the wrapper is never inlined;
            # the call is a graph break and runs eagerly, as torch's SkipFunctionVariable.call_function
            # (torch/_dynamo/variables/functions.py) says for a function wrapped with it
            msg = inspect.getattr_static(self.fn, "_torchdynamo_disable_msg", None)
            unimplemented(f"skip calling function `{self.fn.__name__}` since it was wrapped with "
                          f"`torch.compiler.disable` (reason: {msg})", "remove the `torch.compiler.disable` call",
                          gb_id=gb.COMPILER_DISABLED, context=str(self.fn))
        return super().call_function(tx, args, kwargs)

    def __repr__(self) -> str:
        return f"UserFunctionVariable({self.fn.__name__})"


class SkipFunctionVariable(VariableTracker):
    """A function the trace does not enter: its call is a graph break and runs eagerly.

    Ours holds only what torch's ``SkipFunctionVariable`` (torch/_dynamo/variables/functions.py)
    makes of a C method bound to a torch object read from the frame (``m = x.mul`` carried over
    a break: Note [A tensor's bound method read from outside the frame], builder.py): no guard,
    rebuilt from its source, so each call uses the method the frame holds now.
    """

    def __init__(self, value: Any, **kwargs):
        super().__init__(**kwargs)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        owner = getattr(self.value, "__self__", None)
        qualname = getattr(self.value, "__qualname__", getattr(self.value, "__name__", "?"))
        module = getattr(self.value, "__module__", None) or "<unknown module>"
        unimplemented(f"Dynamo does not know how to trace the builtin `{module}.{qualname}.` (a method of a "
                      f"{type(owner).__name__} read from outside the frame; it runs eagerly)",
                      "call the method inside the compiled function (`x.mul(2)`), where it is traced",
                      gb_id=gb.SKIPPED_FUNCTION, context=f"builtin {qualname} with arguments {args!r}")

    def __repr__(self) -> str:
        return f"SkipFunctionVariable({getattr(self.value, '__qualname__', self.value)})"


class NestedUserFunctionVariable(BaseUserFunctionVariable):
    """A function made by ``MAKE_FUNCTION`` inside the traced code (nested def, lambda)."""

    def __init__(self, code, qualname: str, f_globals: dict, defaults=None, kwdefaults=None, closure=None, **kw):
        super().__init__(**kw)
        self.code = code
        self.qualname = qualname
        self.f_globals = f_globals
        self.defaults = defaults  # list of trackers
        self.kwdefaults = kwdefaults  # dict name -> tracker
        self.closure = closure  # list of CellVariable

    def get_code(self):
        return self.code

    def get_globals(self) -> dict:
        return self.f_globals

    def get_name(self) -> str:
        return self.code.co_name

    def python_type(self) -> type:
        return types.FunctionType

    def bind_args(self, tx, args, kwargs) -> dict:
        return bind_args(tx, self.code, self.code.co_name, self.defaults, self.kwdefaults, args, kwargs)

    def closure_cells(self, tx) -> dict:
        return dict(zip(self.code.co_freevars, self.closure or ()))

    def reconstruct(self, codegen) -> str:
        """Rebuild the function for the code after a graph break (Note [Rebuilding a closure])."""
        if not self.code.co_freevars and not self.defaults and not self.kwdefaults:
            return codegen.constant_expr(types.FunctionType(self.code, self.f_globals, self.code.co_name))
        cells = []
        for name, cell in zip(self.code.co_freevars, self.closure or ()):
            if not isinstance(cell, CellVariable):
                unimplemented(f"a nested function whose closure cell {name!r} is not a cell of the trace cannot be "
                              "rebuilt after a graph break", gb_id=gb.NESTED_CLOSURE)
            cells.append(codegen.cell_expr(cell))
        closure = f"({', '.join(cells)},)" if cells else "None"
        defaults = f"({', '.join(codegen.expr(d) for d in self.defaults)},)" if self.defaults else "None"
        kwdefaults = ("{" + ", ".join(f"{k!r}: {codegen.expr(v)}" for k, v in self.kwdefaults.items()) + "}"
                      if self.kwdefaults else "None")
        code = codegen.install(self.code, f"code_{self.code.co_name}")
        f_globals = codegen.install(self.f_globals, "globals")
        return f"___make_function({code}, {f_globals}, {self.qualname!r}, {defaults}, {closure}, {kwdefaults})"

    def __repr__(self) -> str:
        return f"NestedUserFunctionVariable({self.qualname})"


class UserMethodVariable(UserFunctionVariable):
    """``obj.method`` for a Python method: the function plus the tracker of ``self``."""

    def __init__(self, fn, obj: VariableTracker, **kwargs):
        super().__init__(fn, **kwargs)
        self.obj = obj

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        return tx.inline_user_function_return(self, [self.obj] + list(args), dict(kwargs))

    def var_getattr(self, tx, name: str) -> VariableTracker:
        # torch/_dynamo/variables/functions.py UserMethodVariable.var_getattr: the bound
        # method's two halves (``m.forward.__func__``: the kernels package, transformers 5.25)
        if name == "__self__":
            return self.obj
        if name == "__func__":
            return UserFunctionVariable(self.fn, source=self.source and AttrSource(self.source, "__func__"))
        return super().var_getattr(tx, name)

    def closure_cells(self, tx) -> dict:
        source = self.source and AttrSource(self.source, "__func__")
        obj_source = getattr(self.obj, "source", None)
        name = self.fn.__name__
        if source is None and obj_source is not None and hasattr(self.obj, "value") \
                and inspect.getattr_static(type(self.obj.value), name, None) is self.fn:
            # Note [A method's closure is read through its class]
            #     ``m.forward`` of a module is inlined from its class, without a source of its
            #     own. A decorator's wrapper (the ``kernels`` package's ``new_forward`` on a
            #     transformers layer, 5.25) keeps modules and functions in its closure; as torch
            #     reads ``type(m).forward`` through a source, so the cells are read (and
            #     guarded) as ``L['m'].__class__.forward.__closure__[i].cell_contents``.
            source = AttrSource(AttrSource(obj_source, "__class__"), name)
        return UserFunctionVariable(self.fn, source=source).closure_cells(tx)

    def reconstruct(self, codegen) -> str:
        obj = codegen.expr(self.obj)
        try:
            plain = getattr(self.obj.python_type(), self.fn.__name__, None) is self.fn
        except Exception:  # noqa: BLE001 - no type known: bind explicitly
            plain = False
        if plain:
            return f"{obj}.{self.fn.__name__}"
        # found through super() (or under another name): ``obj.name`` would find a different function
        method_type = codegen.install(types.MethodType, "MethodType")
        return f"{method_type}({codegen.install(self.fn, self.fn.__name__)}, {obj})"

    def __repr__(self) -> str:
        return f"UserMethodVariable({self.fn.__qualname__})"


# Note [Rebuilding a closure]
#     A nested function live at a graph break is rebuilt as a new function object over
#     the same code and the same cells: a cell of the frame is made once by the transformed
#     code (``___cell_N = ___CellType(value)``, an empty one for a name not bound yet) or read
#     where it already lives (a resume function's ``L['___closure'][i]``), and that one cell
#     object is shared by every closure rebuilt over it and handed on to the resume function
#     (Note [A resume function receives the frame's cells], resume_execution.py). So a write
#     after the break, by the frame or by the nested code (``nonlocal``), is seen by all, as
#     torch's resume functions share the frame's cells (``ContinueExecutionCache.generate``).


def make_function(code, f_globals, qualname, defaults, closure, kwdefaults):
    fn = types.FunctionType(code, f_globals, code.co_name, defaults, closure)
    fn.__qualname__ = qualname
    fn.__kwdefaults__ = kwdefaults
    return fn


def is_user_function(fn: Any) -> bool:
    """A Python function whose frames we would trace (not library code, ``minidynamo.trace_rules``)."""
    from minidynamo.trace_rules import is_library_file

    return isinstance(fn, types.FunctionType) and not is_library_file(fn.__code__.co_filename)


__all__ = ["UserFunctionVariable", "NestedUserFunctionVariable", "SkipFunctionVariable", "UserMethodVariable", "is_user_function",
           "Optional"]

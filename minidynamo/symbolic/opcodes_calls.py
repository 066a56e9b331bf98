"""Calls and functions: CALL, CALL_FUNCTION_EX, MAKE_FUNCTION, inlining, with, return.

Place in the pipeline: a mixin of ``InstructionTranslatorBase`` (``translator_base.py``).
A call hands its operands to the callee's VariableTracker (``call_function``); a call of
a Python function comes back to ``inline_user_function_return``, which runs its body in
an ``InliningInstructionTranslator`` (``inlining.py``) on the same graph. The root frame
(``instruction_translator.py``) wraps ``CALL`` to break the graph there. Mirrors
``torch/_dynamo/symbolic_convert.py`` (``CALL``, ``CALL_FUNCTION_EX``, ``MAKE_FUNCTION``,
``inline_user_function_return``, ``BEFORE_WITH``, ``RETURN_VALUE``).
"""

from __future__ import annotations

from minidynamo.bytecode import NULL_AFTER_CALLABLE, call_target

from .exc import unimplemented
from . import graph_break_registry as gb
from .source import globals_source_for
from .variables.base import VariableTracker
from .variables.builder import wrap_sourceless
from .variables.ctx_manager import (AutocastModeVariable, ContextlibContextManagerVariable, ContextExitVariable, GradModeVariable,
                                     InferenceModeVariable, WithExitVariable)
from .variables.dicts import ConstDictVariable
from .variables.functions import NestedUserFunctionVariable
from .variables.lists import LazyGeneratorVariable
from .variables.misc import BuildClassVariable, NullVariable

MAX_INLINE_DEPTH = 40



def _inlined_callees() -> tuple:
    from .variables.functions import UserFunctionVariable, UserMethodVariable
    from .variables.nn_module import NNModuleVariable

    return (UserFunctionVariable, UserMethodVariable, NestedUserFunctionVariable, NNModuleVariable)


# Note [An inlined call's arguments stay lazy]
#     A frame's argument is wrapped (a placeholder, its guards) when the trace first uses
#     it, not when ``LOAD_FAST`` pushes it (torch/_dynamo/variables/lazy.py). A call the
#     trace inlines (a Python function, a method, a module) binds the arguments to the
#     callee's locals as they are, so ``self.lin(x)`` wraps ``x`` inside ``Linear.forward``,
#     at ``F.linear(input, self.weight, self.bias)``, after the parameters it read first:
#     torch's graph takes the parameters before ``x``, and so does ours. Any other callee
#     gets its arguments realized, in order.
_INLINED_CALLEES = _inlined_callees()

class CallOpcodes:
    """Mixed into InstructionTranslatorBase (which provides push/pop/popn/output/depth)."""

    # The class that traces a callee: InliningInstructionTranslator, named by each concrete
    # translator (inlining.py, instruction_translator.py), which sit above this mixin
    # (Note [The translator's layers], symbolic_convert.py).
    inlining_translator_class: type

    ## Functions
    def KW_NAMES(self, inst) -> None:
        self.kw_names = self.code.co_consts[inst.arg]

    def _call_args(self, argc: int):
        """Pop a CALL's operands: [NULL|fn, fn|self, args...] (3.13: [fn, NULL|self, ...]) -> fn, args, kwargs."""
        kw_names, self.kw_names = self.kw_names or (), None
        args = self.stack[len(self.stack) - argc:]  # not realized yet (Note [An inlined call's arguments stay lazy])
        del self.stack[len(self.stack) - argc:]
        second, first = self.pop(), self.pop()
        fn, args = call_target(first, second, args, lambda v: isinstance(v, NullVariable))
        if type(fn) not in _INLINED_CALLEES:
            args = [self.realize(a) for a in args]
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
        if NULL_AFTER_CALLABLE:  # 3.13: [fn, NULL, args, kwargs]
            if self.stack and isinstance(self.stack[-1], NullVariable):
                self.pop()
            fn = self.pop()  # a NULL below fn is an outer call's: Parameter(torch.empty(..., **kw))
        else:  # 3.11/3.12: [NULL, fn, args, kwargs]
            fn = self.pop()
            if self.stack and isinstance(self.stack[-1], NullVariable):
                self.pop()
        args = args_var.unpack_var_sequence(self)
        kwargs = {}
        if kwargs_var is not None:
            if not isinstance(kwargs_var, ConstDictVariable):
                unimplemented(f"**kwargs from {kwargs_var}", gb_id="GB0167")
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

    def inline_user_function_return(self, fn_var, args: list, kwargs: dict, output=None) -> VariableTracker:
        """Trace a Python function's body on this graph (Note [Binding arguments ...]).

        ``output``: another graph to trace it on (a higher-order op's subgraph, higher_order_ops.py).
        """
        code = fn_var.get_code()
        if code.co_flags & (0x80 | 0x100 | 0x200):  # coroutine, async generator
            unimplemented(f"{code.co_name} is a coroutine", gb_id=gb.INLINE_SKIPPED)
        generator = bool(code.co_flags & 0x20)
        if self.depth >= MAX_INLINE_DEPTH:
            unimplemented("inlining too deep (recursion?)", gb_id=gb.INLINE_SKIPPED)
        bound = fn_var.bind_args(self, args, kwargs)
        fn_globals = fn_var.get_globals()
        globals_source = None if fn_globals is self.output.root_globals else \
            globals_source_for(fn_globals, code, getattr(fn_var, "source", None))
        tracer = self.inlining_translator_class(
            code, fn_globals, bound, self.output if output is None else output, closure_cells=fn_var.closure_cells(self),
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
        if self.user_context_manager(ctx):
            return
        if isinstance(ctx, (ContextlibContextManagerVariable, InferenceModeVariable, AutocastModeVariable)):
            # Note [A @contextmanager function is its generator], Note [inference_mode in the graph]
            entered = ctx.enter(self)
            self.push(ContextExitVariable(ctx))
            self.push(entered)
            return
        if not isinstance(ctx, GradModeVariable):
            unimplemented("a with-statement on a context manager minidynamo does not trace (it traces the grad-mode "
                          "ones)", gb_id=gb.CONTEXT_MANAGER,
                          context=f"with-statement on {ctx}")
        self.push(WithExitVariable(ctx))
        self.push(ctx.enter(self))

    # Note [A user's context manager is inlined]
    #     ``with Timer():`` on a class whose ``__enter__`` and ``__exit__`` are Python
    #     functions: as torch's ``UserDefinedObjectVariable`` (symbolic_convert.py
    #     ``BEFORE_WITH`` -> ``enter_ctx``), ``__enter__`` is inlined here and the bound
    #     ``__exit__`` is left on the stack, where the with-statement's normal exit calls it
    #     (inlined too) with three Nones; an exception in the block calls it with the exception
    #     (``WITH_EXCEPT_START``, opcodes_exceptions.py), and a true result swallows it. A graph
    #     break inside the block runs the frame eagerly (the block is a try block: ``check_can_break``).
    def user_context_manager(self, ctx) -> bool:
        import inspect

        from .variables.misc import UserDefinedObjectVariable
        from .variables.new_object import NewObjectVariable

        if isinstance(ctx, NewObjectVariable):
            cls = ctx.cls
        elif isinstance(ctx, UserDefinedObjectVariable):
            cls = type(ctx.value)
        else:
            return False
        if not all(inspect.isfunction(inspect.getattr_static(cls, name, None)) for name in ("__enter__", "__exit__")):
            return False
        exit_fn = ctx.var_getattr(self, "__exit__")
        entered = ctx.var_getattr(self, "__enter__").call_function(self, [], {})
        self.push(exit_fn)
        self.push(entered)
        return True

    ## Returning
    def RETURN_VALUE(self, inst) -> None:
        self.return_value = self.pop()
        self.done = True

    def RETURN_CONST(self, inst) -> None:  # 3.12
        self.push(wrap_sourceless(self, inst.argval))
        self.RETURN_VALUE(inst)

    # raise, assert and except: opcodes_exceptions.py

    def LOAD_BUILD_CLASS(self, inst) -> None:
        self.push(BuildClassVariable())  # its call is the break (a class statement in the frame)

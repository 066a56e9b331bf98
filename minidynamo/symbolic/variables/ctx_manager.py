"""Grad-mode context managers while tracing: ``with torch.no_grad():`` goes into the graph.

Place in the pipeline: ``BEFORE_WITH`` on one of these records a
``torch.set_grad_enabled(False)`` node (and really switches grad mode while tracing,
so fake values get the right ``requires_grad``); the ``__exit__`` call records the
switch back. Mirrors ``torch/_dynamo/variables/ctx_manager.py`` (``GradModeVariable``,
``WithExitFunctionVariable``); Dynamo records ``torch._C._set_grad_enabled``.
"""

from __future__ import annotations

import torch

from .base import VariableTracker
from .constant import ConstantVariable


def _record(tx, mode: bool) -> None:
    tx.output.create_proxy("call_function", torch.set_grad_enabled, (mode,), {}).node.meta["example_value"] = None
    torch.set_grad_enabled(mode)


class GradModeVariable(VariableTracker):
    """``torch.no_grad()`` / ``torch.enable_grad()`` / ``torch.set_grad_enabled(b)`` while tracing."""

    def __init__(self, target_mode: bool, cls=None, **kwargs):
        super().__init__(**kwargs)
        self.target_mode = target_mode
        self.initial_mode = None
        self.cls = cls  # torch.no_grad / torch.enable_grad; None for set_grad_enabled (already switched)

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        """``torch.no_grad()(fn)``: the decorator form (Note [A grad-mode decorator])."""
        from .functions import BaseUserFunctionVariable

        if self.cls is None or kwargs or len(args) != 1 or not isinstance(args[0], BaseUserFunctionVariable):
            return super().call_function(tx, args, kwargs)
        return GradModeWrappedFunctionVariable(self, args[0])

    def reconstruct(self, codegen) -> str:
        if self.cls is None:
            return super().reconstruct(codegen)
        return f"{codegen.constant_expr(self.cls)}()"

    def enter(self, tx) -> VariableTracker:
        self.initial_mode = torch.is_grad_enabled()
        _record(tx, self.target_mode)
        return ConstantVariable(None)

    def exit(self, tx) -> VariableTracker:
        _record(tx, self.initial_mode)
        return ConstantVariable(None)


class GradModeWrappedFunctionVariable(VariableTracker):
    """A function decorated with ``@torch.no_grad()`` / ``@torch.enable_grad()`` inside the trace.

    Note [A grad-mode decorator]
        ``@torch.no_grad()`` on a nested ``def`` calls the context manager object with
        the function; the result runs the function inside the block. Calling it here
        does what the block does: record the switch, inline the function's body, record
        the switch back. If the body cannot be traced, the grad mode is put back before
        the error travels up (the frame is traced again with a break at the call).
        Rebuilt after a graph break as ``torch.no_grad()(fn)``. Mirrors Dynamo's
        ``ContextWrappingVariable.call_function`` -> ``WrappedUserFunctionVariable``.
    """

    def __init__(self, ctx: GradModeVariable, fn: VariableTracker, **kwargs):
        super().__init__(**kwargs)
        self.ctx = ctx
        self.fn = fn

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        ctx = GradModeVariable(self.ctx.target_mode, self.ctx.cls)
        ctx.enter(tx)
        try:
            result = self.fn.call_function(tx, args, kwargs)
        except BaseException:
            torch.set_grad_enabled(ctx.initial_mode)
            raise
        ctx.exit(tx)
        return result

    def reconstruct(self, codegen) -> str:
        return f"{codegen.expr(self.ctx)}({codegen.expr(self.fn)})"

    def __repr__(self) -> str:
        return f"GradModeWrappedFunctionVariable({self.ctx.cls.__name__}, {self.fn!r})"


class WithExitVariable(VariableTracker):
    """The ``__exit__`` that ``BEFORE_WITH`` leaves on the stack."""

    def __init__(self, ctx: GradModeVariable, **kwargs):
        super().__init__(**kwargs)
        self.ctx = ctx

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        return self.ctx.exit(tx)

    def reconstruct(self, codegen) -> str:
        cls = codegen.install(GradModeExit, "GradModeExit")
        return f"{cls}({self.ctx.target_mode!r}, {self.ctx.initial_mode!r})"


class GradModeExit:
    """The ``__exit__`` of a grad-mode block, handed to a resume function that starts inside it.

    Note [A break inside a with block]
        At a graph break inside ``with torch.no_grad():`` the transformed function runs
        the unsupported call with the block's grad mode and calls the resume function
        still in that mode, with this object in the stack slot where the block's
        ``__exit__`` was. The resume function (traced or run eagerly) leaves the block
        by calling it, which restores the mode from before the block, as the real
        ``__exit__`` would. Real Dynamo does the same with its resume prologue, which
        re-enters the context (``ContinueExecutionCache`` with ``setup_fn_target_values``).
        Only grad-mode blocks, only at a call, only in a frame without try/except.
    """

    def __init__(self, target_mode: bool, initial_mode: bool):
        self.target_mode = target_mode
        self.initial_mode = initial_mode

    def __call__(self, *exc_info) -> None:
        torch.set_grad_enabled(self.initial_mode)

    def __repr__(self) -> str:
        return f"GradModeExit(target={self.target_mode}, initial={self.initial_mode})"


class GradModeClassVariable(VariableTracker):
    """The classes themselves: calling one makes a GradModeVariable."""

    def __init__(self, value, **kwargs):
        super().__init__(**kwargs)
        self.value = value

    def as_python_constant(self):
        return self.value

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        if self.value is torch.no_grad:
            return GradModeVariable(False, torch.no_grad)
        if self.value is torch.enable_grad:
            return GradModeVariable(True, torch.enable_grad)
        if any(self.value is c for c in AUTOCAST_CLASSES):
            return AutocastModeVariable.create(tx, self.value, args, kwargs)
        if self.value is torch.inference_mode:
            mode = args[0] if args else kwargs.get("mode", ConstantVariable(True))
            if len(args) + len(kwargs) > 1 or not mode.is_python_constant():
                return super().call_function(tx, args, kwargs)
            return InferenceModeVariable(bool(mode.as_python_constant()))
        # torch.set_grad_enabled(b) switches at once, even when not used in a with-statement
        var = GradModeVariable(bool(args[0].as_python_constant()))
        var.enter(tx)
        var.enter = lambda tx: ConstantVariable(None)
        return var


AUTOCAST_CLASSES = (torch.amp.autocast_mode.autocast, torch.cpu.amp.autocast, torch.cuda.amp.autocast)
# the context-manager classes whose call makes one of this module's variables
GRAD_MODE_CLASSES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled, torch.inference_mode, *AUTOCAST_CLASSES)


class ContextlibContextManagerVariable(VariableTracker):
    """``with cm(k):`` where ``cm`` is a ``@contextlib.contextmanager`` generator function.

    Note [A @contextmanager function is its generator]
        Calling the decorated function runs contextlib's ``helper``, which makes a
        ``contextlib._GeneratorContextManager(func, args, kwds)``. As Dynamo does
        (torch/_dynamo/variables/user_defined.py ``UserDefinedClassVariable.call_function``
        wraps ``func`` in ``FunctionDecoratedByContextlibContextManagerVariable``,
        functions.py), that object is the user's generator, inlined lazily: entering
        runs it to its ``yield`` (the ``as`` value), leaving runs it to its end. Where
        Dynamo traces contextlib's own ``__enter__``/``__exit__`` around the generator
        (their ``try/except StopIteration``), ours does what they do directly: a
        generator that does not yield, or yields twice, makes eager raise RuntimeError,
        a graph break here. An exception in the block, or a graph break inside it, runs
        the frame eagerly (the block is a try block), as for a user's class.
    """

    def __init__(self, gen: VariableTracker, **kwargs):
        super().__init__(**kwargs)
        self.gen = gen

    @staticmethod
    def create(tx, func: VariableTracker, args: VariableTracker, kwds: VariableTracker) -> VariableTracker:
        from .. import graph_break_registry as gb
        from ..exc import unimplemented
        from .lists import LazyGeneratorVariable

        gen = func.call_function(tx, args.unpack_var_sequence(tx), dict(getattr(kwds, "items", {})))
        if not isinstance(gen, LazyGeneratorVariable):
            unimplemented("a function decorated with @contextlib.contextmanager that is not a generator",
                          "use `yield` in the function body", gb_id=gb.NON_GENERATOR_CONTEXTMANAGER,
                          context=str(func))
        return ContextlibContextManagerVariable(gen)

    def enter(self, tx) -> VariableTracker:
        from .. import graph_break_registry as gb
        from ..exc import unimplemented

        value = self.gen.next_variable(tx)
        if value is None:
            unimplemented("the @contextmanager generator did not yield (eager raises RuntimeError)",
                          gb_id=gb.OBSERVED_EXCEPTION)
        return value

    def exit(self, tx) -> VariableTracker:
        from .. import graph_break_registry as gb
        from ..exc import unimplemented

        if self.gen.next_variable(tx) is not None:
            unimplemented("the @contextmanager generator did not stop (eager raises RuntimeError)",
                          gb_id=gb.OBSERVED_EXCEPTION)
        return ConstantVariable(False)

    def __repr__(self) -> str:
        return f"ContextlibContextManagerVariable({self.gen!r})"


class ContextExitVariable(VariableTracker):
    """The ``__exit__`` that ``BEFORE_WITH`` leaves on the stack for a context other than grad mode's.

    A graph break inside such a block runs the frame eagerly, unless it is an autocast or
    inference_mode block (``resumable()``): Note [A resume function re-enters autocast and
    inference_mode]."""

    def __init__(self, ctx: ContextlibContextManagerVariable, **kwargs):
        super().__init__(**kwargs)
        self.ctx = ctx

    def call_function(self, tx, args: list, kwargs: dict) -> VariableTracker:
        return self.ctx.exit(tx)

    def resumable(self) -> bool:
        return isinstance(self.ctx, (AutocastModeVariable, InferenceModeVariable))

    def resumed_context(self) -> "ResumedContext":
        if isinstance(self.ctx, AutocastModeVariable):
            return ResumedContext("autocast", tuple(self.ctx.target_values))
        return ResumedContext("inference_mode", (self.ctx.mode,))

    def reconstruct(self, codegen) -> str:
        if not self.resumable():
            return super().reconstruct(codegen)
        cls = codegen.install(ResumedContext, "ResumedContext")
        ctx = self.resumed_context()
        return f"{cls}({ctx.kind!r}, ({', '.join(codegen.constant_expr(v) for v in ctx.values)},))"


class ResumedContext:
    """An autocast or inference_mode block that a resume function starts inside, by its constant arguments.

    Note [A resume function re-enters autocast and inference_mode]
        torch resumes after a graph break inside ``with torch.autocast(...)`` or ``with
        torch.inference_mode()`` inside the block (symbolic_convert.py ``create_call_resume_at``,
        ``ContextWrappingVariable.reconstruct_type``): the graph before the break leaves the
        context (its ``_exit_autocast`` node), the transformed code re-enters it around the
        unsupported call only, and the resume function's prologue enters it again
        (resume_execution.py ``setup_fn_target_values``), so the next graph opens with
        ``_enter_autocast`` and the block's own end leaves it. Ours does the same: this object,
        in the stack slot where the block's ``__exit__`` was, is the ``with`` around the call in
        the transformed code; a traced resume function enters the block in its graph
        (``_setup_resume``, convert_frame.py); one run eagerly enters the real context and puts
        its ``__exit__`` in that slot (``ResumeFunction.run_eagerly``). Only at a call, in a frame
        without try/except, as grad-mode blocks (Note [A break inside a with block]).
    """

    def __init__(self, kind: str, values: tuple):
        self.kind = kind  # "autocast" (values: device_type, dtype, enabled, cache_enabled) or "inference_mode"
        self.values = values
        self._entered: list = []

    def make(self):
        """A new real context manager for this block."""
        if self.kind == "autocast":
            device_type, dtype, enabled, cache_enabled = self.values
            return torch.autocast(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        return torch.inference_mode(*self.values)

    def __enter__(self) -> None:
        ctx = self.make()
        ctx.__enter__()
        self._entered.append(ctx)

    def __exit__(self, *exc_info) -> None:
        self._entered.pop().__exit__(*exc_info)

    def enter_for_resume(self):
        """The prologue of a resume function run eagerly: enter the block, return its ``__exit__``."""
        ctx = self.make()
        ctx.__enter__()
        return ctx.__exit__

    def variable(self, tx) -> VariableTracker:
        """A traced resume function's prologue: the block entered in the graph, its exit for the stack slot."""
        ctx = AutocastModeVariable(list(self.values)) if self.kind == "autocast" else InferenceModeVariable(*self.values)
        ctx.enter(tx)
        return ContextExitVariable(ctx)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ResumedContext) and (self.kind, self.values) == (other.kind, other.values)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ResumedContext({self.kind!r}, {self.values!r})"


class InferenceModeVariable(VariableTracker):
    """``with torch.inference_mode():`` while tracing: two calls in the graph, grad off while tracing.

    Note [inference_mode in the graph]
        As Dynamo's ``InferenceModeVariable`` (torch/_dynamo/variables/ctx_manager.py), entering
        records ``torch.autograd.grad_mode._enter_inference_mode(mode)`` and leaving records
        ``_exit_inference_mode`` of what it returned, so the compiled code enters the mode as
        eager does. While tracing, the mode itself stays off (torch's
        ``config.fake_tensor_disable_inference_mode``): grad is switched off instead, which is
        the part of inference mode a fake value shows (no ``requires_grad``).
    """

    def __init__(self, mode: bool, **kwargs):
        super().__init__(**kwargs)
        self.mode = mode
        self.proxy = None
        self.initial_grad = None

    def enter(self, tx) -> VariableTracker:
        from minidynamo._torch_private import inference_mode_enter_exit

        self.initial_grad = torch.is_grad_enabled()
        self.proxy = tx.output.create_proxy("call_function", inference_mode_enter_exit()[0], (self.mode,), {})
        self.proxy.node.meta["example_value"] = None
        if self.mode:
            torch.set_grad_enabled(False)
        return ConstantVariable(None)

    def exit(self, tx) -> VariableTracker:
        from minidynamo._torch_private import inference_mode_enter_exit

        tx.output.create_proxy("call_function", inference_mode_enter_exit()[1], (self.proxy,), {}).node.meta[
            "example_value"] = None
        torch.set_grad_enabled(self.initial_grad)
        return ConstantVariable(None)

    def python_type(self) -> type:
        return torch.inference_mode


_OPEN_AUTOCASTS: list = []  # autocast contexts entered while tracing and not yet left (Note [autocast in the graph])


def leave_open_contexts(mark: int) -> None:
    """Leave the autocast contexts a trace entered past ``mark`` (a graph break or error inside the block)."""
    from minidynamo._torch_private import autocast_enter_exit

    while len(_OPEN_AUTOCASTS) > mark:
        autocast_enter_exit()[1](_OPEN_AUTOCASTS.pop())


def open_contexts() -> int:
    return len(_OPEN_AUTOCASTS)


class AutocastModeVariable(VariableTracker):
    """``with torch.autocast("cpu", dtype=torch.bfloat16):`` while tracing.

    Note [autocast in the graph]
        As Dynamo's ``AutocastModeVariable`` (torch/_dynamo/variables/ctx_manager.py), the
        constructor's arguments are bound to ``autocast.__init__``'s signature as constants
        (``device_type, dtype, enabled, cache_enabled``); entering really enters autocast
        (``torch.amp._enter_autocast``), so the fake values of the ops inside get autocast's
        dtypes, and records that call; leaving records ``torch.amp._exit_autocast`` of its
        result and leaves. A trace that stops inside the block leaves it too
        (``leave_open_contexts``, called by ``compile_frame`` as torch's cleanup hooks are).
    """

    def __init__(self, target_values: list, **kwargs):
        super().__init__(**kwargs)
        self.target_values = target_values
        self.proxy = None
        self.ctx = None

    @staticmethod
    def create(tx, cls, args: list, kwargs: dict) -> VariableTracker:
        import inspect

        from .. import graph_break_registry as gb
        from ..exc import unimplemented

        if not all(v.is_python_constant() for v in [*args, *kwargs.values()]):
            unimplemented("torch.autocast with an argument that is not a constant", gb_id=gb.NOT_A_CONSTANT)
        bound = inspect.signature(cls).bind(*[a.as_python_constant() for a in args],
                                           **{k: v.as_python_constant() for k, v in kwargs.items()})
        bound.apply_defaults()
        values = [bound.arguments.get(k) for k in ("device_type", "dtype", "enabled", "cache_enabled")]
        if cls is not torch.amp.autocast_mode.autocast:
            values[0] = "cuda" if cls is torch.cuda.amp.autocast else "cpu"
        return AutocastModeVariable(values)

    def enter(self, tx) -> VariableTracker:
        from minidynamo._torch_private import autocast_enter_exit

        self.ctx = autocast_enter_exit()[0](*self.target_values)
        _OPEN_AUTOCASTS.append(self.ctx)
        self.proxy = tx.output.create_proxy("call_function", autocast_enter_exit()[0], tuple(self.target_values), {})
        self.proxy.node.meta["example_value"] = None
        return ConstantVariable(None)

    def exit(self, tx) -> VariableTracker:
        from minidynamo._torch_private import autocast_enter_exit

        tx.output.create_proxy("call_function", autocast_enter_exit()[1], (self.proxy,), {}).node.meta[
            "example_value"] = None
        if _OPEN_AUTOCASTS and _OPEN_AUTOCASTS[-1] is self.ctx:
            _OPEN_AUTOCASTS.pop()
            autocast_enter_exit()[1](self.ctx)
        return ConstantVariable(None)

    def python_type(self) -> type:
        return torch.amp.autocast_mode.autocast

"""An exception object made while tracing, and how the tracer raises one.

Place in the pipeline: ``raise ValueError("no")``, ``d["a"]`` on a dict without the key,
``next(it)`` at the end of an iterator: the traced code makes an exception object, which
this tracker stands for, and "raises" it by raising ``ObservedException`` (exc.py) inside
the tracer; the translator then looks up the handler in the code's exception table
(``opcodes_exceptions.py``). Mirrors ``torch/_dynamo/variables/misc.py``
(``ExceptionVariable``; ``UserDefinedExceptionObjectVariable`` of
torch/_dynamo/variables/user_defined.py for a user's class) and
``torch/_dynamo/exc.py`` (``raise_observed_exception``).

Note [An exception object in the trace]
    The tracker keeps what a handler reads: the class, ``args`` (what
    ``BaseException.__init__`` stored), ``__cause__``, ``__context__`` and
    ``__suppress_context__``, and the attributes a user's ``__init__`` set. Its
    ``__traceback__`` is None while tracing (torch's too, until it attaches one). A
    user's class with its own ``__init__`` runs that ``__init__`` inlined, as torch's
    ``UserDefinedExceptionObjectVariable``; ``super().__init__(msg)`` in it is a graph
    break, as in torch 2.13 (user_class.py ``SuperVariable``). Should the object outlive the graph (returned,
    or alive at a graph break), it is rebuilt by calling its class with the arguments it
    was made with; a ``__cause__``/``__context__`` set in the trace is not rebuilt (we
    simplify: torch rebuilds the object the same way, ``ExceptionVariable.reconstruct``).
"""

from __future__ import annotations

import inspect
from typing import Optional

from .. import graph_break_registry as gb
from ..exc import ObservedException, unimplemented
from .base import GetAttrVariable, VariableTracker
from .constant import ConstantVariable


def is_exception_class(value) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)


def has_python_init(cls: type) -> bool:
    """A user's exception class whose ``__init__`` is Python code (inlined when it is made)."""
    return inspect.isfunction(inspect.getattr_static(cls, "__init__", None))


class ExceptionVariable(VariableTracker):
    """An exception object made in the trace (``ValueError("no")``, a user's ``MyError(...)``)."""

    def __init__(self, exc_type: type, args: list, *, init_args: Optional[list] = None,
                 init_kwargs: Optional[dict] = None, **kwargs):
        super().__init__(**kwargs)
        self.exc_type = exc_type
        self.args = list(args)
        self.init_args = list(args) if init_args is None else list(init_args)  # what the class was called with
        self.init_kwargs = dict(init_kwargs or {})
        self.cause: VariableTracker = ConstantVariable(None)
        self.context: VariableTracker = ConstantVariable(None)
        self.suppress_context = False
        self.attrs: dict[str, VariableTracker] = {}

    @classmethod
    def create(cls, tx, exc_type: type, args: list, kwargs: dict) -> "ExceptionVariable":
        """Calling an exception class in the trace: ``BaseException.__init__`` or the user's, inlined."""
        if not has_python_init(exc_type):
            if kwargs:  # torch's ExceptionVariable.__init__ (torch/_dynamo/variables/misc.py) breaks here
                unimplemented("keyword arguments passed to an exception constructor are not traced",
                              gb_id=gb.EXCEPTION_KWARGS, context=f"{exc_type.__name__} with kwargs {sorted(kwargs)}")
            return cls(exc_type, args)
        made = cls(exc_type, [], init_args=args, init_kwargs=kwargs)
        made.args = list(args)  # BaseException.__new__ stores them before __init__ runs
        init = inspect.getattr_static(exc_type, "__init__")
        tx.wrap_sourceless(init).call_function(tx, [made, *args], kwargs)
        return made

    def python_type(self) -> type:
        return self.exc_type

    def truth(self, tx) -> bool:
        return True

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.attrs:
            return self.attrs[name]
        if name == "args":
            return _tuple(self.args)
        if name == "__cause__":
            return self.cause
        if name == "__context__":
            return self.context
        if name == "__suppress_context__":
            return ConstantVariable(self.suppress_context)
        if name == "__traceback__":
            return ConstantVariable(None)
        if name == "__class__":
            return tx.wrap_sourceless(self.exc_type)
        attr = inspect.getattr_static(self.exc_type, name, None)
        if name == "value" and issubclass(self.exc_type, StopIteration):
            return self.args[0] if self.args else ConstantVariable(None)
        if inspect.isfunction(attr):  # a method of the user's class: called with this object (call_method)
            return GetAttrVariable(self, name)
        if isinstance(attr, property) and inspect.isfunction(attr.fget):
            return tx.wrap_sourceless(attr.fget).call_function(tx, [self], {})
        if attr is not None and not callable(attr) and not isinstance(attr, property):
            return tx.wrap_sourceless(attr)  # a class attribute (a constant)
        return super().var_getattr(tx, name)

    def store_attr(self, tx, name: str, value: VariableTracker) -> None:
        """``self.code = code`` in the user's ``__init__``, ``e.__cause__ = ...``: kept on the tracker."""
        if name == "__cause__":
            self.cause, self.suppress_context = value, True
        elif name == "__context__":
            self.context = value
        elif name == "__suppress_context__":
            self.suppress_context = bool(value.as_python_constant())
        elif name == "args":
            self.args = list(value.unpack_var_sequence(tx))
        else:
            self.attrs[name] = value

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> VariableTracker:
        if name == "__setattr__" and len(args) == 2 and not kwargs:
            self.store_attr(tx, args[0].as_python_constant(), args[1])
            return ConstantVariable(None)
        if name == "with_traceback" and len(args) == 1:
            return self
        if name in ("__str__", "__repr__") and not args and not kwargs:
            return ConstantVariable((str if name == "__str__" else repr)(self.as_constant_exception()))
        attr = inspect.getattr_static(self.exc_type, name, None)
        if inspect.isfunction(attr) and name not in self.attrs:
            return tx.wrap_sourceless(attr).call_function(tx, [self, *args], kwargs)
        return super().call_method(tx, name, args, kwargs)

    def as_constant_exception(self) -> BaseException:
        """A real exception with the same class and constant ``args`` (for ``str(e)``/``repr(e)``)."""
        made = BaseException.__new__(self.exc_type)
        made.args = tuple(a.as_python_constant() for a in self.args)
        return made

    def reconstruct(self, codegen) -> str:
        cls = codegen.install(self.exc_type, self.exc_type.__name__)
        parts = [codegen.expr(a) for a in self.init_args]
        parts += [f"{k}={codegen.expr(v)}" for k, v in self.init_kwargs.items()]
        return f"{cls}({', '.join(parts)})"

    def debug_repr(self) -> str:
        """torch's ``ExceptionVariable.debug_repr``: ``ValueError('no')`` when the args are constants."""
        try:
            return repr(self.as_constant_exception())
        except Exception:  # noqa: BLE001 - an argument that is not a constant
            return f"{self.exc_type.__name__}(...)"

    def __repr__(self) -> str:
        return f"ExceptionVariable({self.exc_type.__name__})"


def _tuple(items: list) -> VariableTracker:
    from .lists import TupleVariable

    return TupleVariable(list(items))


def raise_observed_exception(exc_type: type, tx, args: Optional[list] = None, reason: str = "") -> "NoReturn":  # noqa: F821
    """Raise ``exc_type(*args)`` as the traced code would: an observed exception (torch/_dynamo/exc.py).

    ``args``: VariableTrackers or plain constants. The handler, if any, is found by the
    translator (``exception_handler``); ``reason`` is the explanation when none is.
    """
    made = ExceptionVariable(exc_type, [a if isinstance(a, VariableTracker) else ConstantVariable(a)
                                        for a in (args or [])])
    tx.exn_vt_stack.set_current_exception(made)
    raise ObservedException(made, reason or f"raised exception {made.debug_repr()}")

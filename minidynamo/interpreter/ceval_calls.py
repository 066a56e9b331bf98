"""The concrete interpreter's calls: the call opcodes, building functions, and binding arguments.

Place in the pipeline: part of ``VirtualMachine`` (``minidynamo/interpreter/ceval.py``), split out
so each file reads in one sitting. ``CALL`` finds the callable and its arguments on the
stack (Note [NULL on the stack] in ``interpreter.py``) and hands them to
``VirtualMachine.call_function``, which decides whether the callee runs in a new ``Frame``
(Note [Calls into user code stay in the VM]); ``bind_arguments`` fills that frame's fast
locals. Mirrors ``CALL``/``MAKE_FUNCTION``/``RETURN_VALUE`` in ``Python/bytecodes.c``
(``Python/ceval.c`` in 3.11), CPython's ``initialize_locals`` (``Python/ceval.c``) for the
binding, and the same handlers of ``torch/_dynamo/symbolic_convert.py``.
"""

from __future__ import annotations

import dis
import types
from typing import Any

from minidynamo.bytecode import NULL_AFTER_CALLABLE, Instruction, call_target
from minidynamo.interpreter.ceval_data import _func_desc
from minidynamo.interpreter.frameobject import NULL, UnsupportedInstructionError, _Return

_GENERATOR_FLAGS = 0x20 | 0x80 | 0x100 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR
_CO_VARARGS, _CO_VARKEYWORDS = 0x04, 0x08


class CallOpcodes:
    """Handlers for ``VirtualMachine``: calls, building functions, returning."""

    ## Functions

    def byte_KW_NAMES(self, inst: Instruction) -> None:
        self.frame.kw_names = self.frame.code.co_consts[inst.arg]  # dis 3.11 shows no argval for it

    def byte_CALL(self, inst: Instruction) -> None:
        # Stack: [NULL, callable, *args] or [method, self, *args] (Note [NULL on the stack]).
        args = self.popn(inst.arg)
        second, first = self.pop(), self.pop()
        fn, args = call_target(first, second, args, lambda v: v is NULL)
        kw_names, self.frame.kw_names = self.frame.kw_names, ()
        if kw_names:
            kwargs = dict(zip(kw_names, args[-len(kw_names) :]))
            args = args[: -len(kw_names)]
        else:
            kwargs = {}
        self.push(self.call_function(fn, args, kwargs))

    def byte_CALL_FUNCTION_EX(self, inst: Instruction) -> None:
        kwargs = self.pop() if inst.arg & 1 else {}
        args = self.pop()
        second, first = self.pop(), self.pop()
        fn, null = (first, second) if NULL_AFTER_CALLABLE else (second, first)
        if null is not NULL:  # f(*a) is compiled as PUSH_NULL/LOAD_GLOBAL(NULL+f) ...
            raise UnsupportedInstructionError(f"CALL_FUNCTION_EX at offset {inst.offset}: expected NULL beside the callable")
        if not isinstance(args, tuple):
            if not hasattr(args, "__iter__") and not hasattr(args, "__getitem__"):
                raise TypeError(f"{_func_desc(fn)} argument after * must be an iterable, not {type(args).__name__}")
            args = tuple(args)
        self.push(self.call_function(fn, list(args), dict(kwargs)))

    def byte_MAKE_FUNCTION(self, inst: Instruction) -> None:
        code, flags = self.pop(), inst.arg or 0  # 3.13: no flags, SET_FUNCTION_ATTRIBUTE follows
        closure = self.pop() if flags & 0x08 else None
        if closure is None and code.co_freevars:  # 3.13: SET_FUNCTION_ATTRIBUTE(closure) replaces these
            closure = tuple(types.CellType() for _ in code.co_freevars)
        annotations = self.pop() if flags & 0x04 else None
        kwdefaults = self.pop() if flags & 0x02 else None
        defaults = self.pop() if flags & 0x01 else None
        fn = types.FunctionType(code, self.frame.globals, code.co_name, defaults, closure)
        fn.__qualname__ = code.co_qualname
        if kwdefaults:
            fn.__kwdefaults__ = kwdefaults
        if annotations:
            _set_annotations(fn, annotations)
        self.push(fn)

    def byte_RETURN_VALUE(self, inst: Instruction) -> None:
        raise _Return(self.pop())

    def byte_RETURN_CONST(self, inst: Instruction) -> None:  # 3.12
        raise _Return(inst.argval)


def _set_annotations(fn: types.FunctionType, annotations: Any) -> None:
    """3.11-3.13 pass annotations as a flat tuple of name, value pairs (or a dict)."""
    if isinstance(annotations, tuple):
        annotations = dict(zip(annotations[::2], annotations[1::2]))
    fn.__annotations__ = annotations


def _plain_class_with_python_init(fn: Any) -> bool:
    """A class whose instances come from object.__new__ and a Python __init__ (no metaclass magic)."""
    return (
        type(fn) is type
        and fn.__new__ is object.__new__
        and isinstance(fn.__dict__.get("__init__", getattr(fn, "__init__", None)), types.FunctionType)
    )


def bind_arguments(fn: types.FunctionType, args: list, kwargs: dict) -> dict:
    """Bind a call's arguments to ``fn``'s parameters, as CPython does before the first instruction.

    Returns the initial fast locals by name. On a bad call, raise CPython's own TypeError by
    calling a body-less copy of ``fn`` (so the message matches exactly).
    """
    code = fn.__code__
    nargs, nkwonly = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    positional, kwonly = names[:nargs], names[nargs : nargs + nkwonly]
    rest = nargs + nkwonly
    locals_: dict[str, Any] = dict(zip(positional, args))
    if code.co_flags & _CO_VARARGS:
        locals_[names[rest]] = tuple(args[nargs:])
        rest += 1
    elif len(args) > nargs:
        _raise_binding_error(fn, args, kwargs)
    extra: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in names[code.co_posonlyargcount : nargs] or key in kwonly:
            if key in locals_:
                _raise_binding_error(fn, args, kwargs)
            locals_[key] = value
        elif code.co_flags & _CO_VARKEYWORDS:
            extra[key] = value
        else:
            _raise_binding_error(fn, args, kwargs)
    if code.co_flags & _CO_VARKEYWORDS:
        locals_[names[rest]] = extra
    defaults = fn.__defaults__ or ()
    for i, name in enumerate(positional[nargs - len(defaults) :]):
        locals_.setdefault(name, defaults[i])
    for name in kwonly:
        if name not in locals_ and fn.__kwdefaults__ and name in fn.__kwdefaults__:
            locals_[name] = fn.__kwdefaults__[name]
    if any(name not in locals_ for name in (*positional, *kwonly)):
        _raise_binding_error(fn, args, kwargs)
    return locals_


def _raise_binding_error(fn: types.FunctionType, args: list, kwargs: dict) -> None:
    """Call a copy of ``fn`` whose body is just ``return None``: CPython raises its own binding error."""
    stub_code = fn.__code__.replace(
        co_code=bytes([dis.opmap["RESUME"], 0, dis.opmap["LOAD_CONST"], 0, dis.opmap["RETURN_VALUE"], 0]),
        co_consts=(None,), co_linetable=b"", co_exceptiontable=b"", co_flags=fn.__code__.co_flags & ~_GENERATOR_FLAGS,
    )  # fmt: skip
    stub = types.FunctionType(stub_code, {}, fn.__name__, fn.__defaults__, fn.__closure__)
    stub.__kwdefaults__, stub.__qualname__ = fn.__kwdefaults__, fn.__qualname__
    stub(*args, **kwargs)  # raises CPython's message
    raise TypeError(f"minidynamo could not bind the arguments of {fn.__qualname__}()")  # pragma: no cover

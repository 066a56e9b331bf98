"""Python stand-ins for C functions the trace must see through (``copy.deepcopy``'s pieces).

Place in the pipeline: when the trace calls a C builtin listed in ``POLYFILLS`` on
something we track, it inlines the Python function here instead, like any user
function. Mirrors ``torch/_dynamo/polyfills/copy.py`` (``reduce_ex_user_defined_object``,
registered with ``substitute_in_graph``).

Note [copy.deepcopy of a user object]
    ``copy.deepcopy(obj)`` is Python (``copy.py``) down to ``obj.__reduce_ex__(4)``, which
    is C: ``object.__reduce_ex__``. For a plain class (no ``__reduce__``/``__getstate__``
    /``__getnewargs__`` of its own, no ``__slots__``) protocol 2+ returns
    ``(copyreg.__newobj__, (cls,), obj.__dict__ or None, None, None)``. ``copy._reconstruct``
    then calls ``cls.__new__(cls)`` (a new object of the trace) and
    ``y.__dict__.update(deepcopy(state))``. With this one function in Python, the whole
    copy is traced: its ``id()`` memo, the dict copy, the new object's attributes.
"""

from __future__ import annotations

import copyreg


def reduce_ex_user_defined_object(obj, protocol):
    """``object.__reduce_ex__(obj, protocol)`` for protocol >= 2 on a plain class (Note [copy.deepcopy of a user object])."""
    state = obj.__dict__
    return (copyreg.__newobj__, (type(obj),), state if state else None, None, None)


def plain_reduce(cls: type) -> bool:
    """Does ``object.__reduce_ex__`` reduce instances of ``cls`` as ``reduce_ex_user_defined_object`` says?"""
    import copyreg as _copyreg

    return (
        isinstance(cls, type)
        and cls.__reduce_ex__ is object.__reduce_ex__
        and cls.__reduce__ is object.__reduce__
        and getattr(cls, "__getstate__", object.__getstate__) is object.__getstate__
        and not hasattr(cls, "__getnewargs_ex__") and not hasattr(cls, "__getnewargs__")
        and not any("__slots__" in vars(k) for k in cls.__mro__)
        and cls not in _copyreg.dispatch_table
        and cls.__new__ is object.__new__
    )


def keep_alive(x, memo):
    """``copy._keep_alive`` without its ``try/except KeyError`` (the trace does not follow a raise)."""
    key = id(memo)
    if key in memo:
        memo[key].append(x)
    else:
        memo[key] = [x]


def _python_polyfills() -> dict:
    import copy

    return {copy._keep_alive: keep_alive}


# a Python function of a library -> the function the trace inlines instead (same behaviour)
POLYFILLS = _python_polyfills()

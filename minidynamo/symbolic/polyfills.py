"""Python stand-ins for C functions the trace must see through (``copy.deepcopy``'s pieces, ``operator.itemgetter``).

Place in the pipeline: when the trace calls a C builtin listed in ``POLYFILLS`` on
something we track, it inlines the Python function here instead, like any user
function. Mirrors ``torch/_dynamo/polyfills/copy.py`` (``reduce_ex_user_defined_object``,
registered with ``substitute_in_graph``) and ``torch/_dynamo/polyfills/operator.py``.

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
import sys


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


# Note [C functions folded on constants]
#     Some C functions only compute a value from their arguments: ``struct.pack("i", 1)``,
#     ``os.fspath("/tmp")``, ``sys.intern("a")``. Torch gives each a Python stand-in with
#     ``substitute_in_graph(fn, can_constant_fold_through=True)`` (torch/_dynamo/polyfills/
#     struct.py, os.py, sys.py): called on constants, the real function runs
#     while tracing and its result is a constant of the trace, with no graph break
#     (``PolyfilledFunctionVariable.call_function``, torch/_dynamo/variables/functions.py).
#     On anything else ours still breaks, where torch would trace the stand-in.
def _constant_fold_through() -> frozenset:
    import os
    import struct

    # (torch's operator.concat/countOf stand-ins are not needed: ours runs operator.* on constants
    # in call_operator, variables/operators.py)
    return frozenset({struct.pack, struct.unpack, os.fspath, sys.intern, sys.getrecursionlimit})


CONSTANT_FOLD_THROUGH = _constant_fold_through()


# Note [re's functions fold on constants]
#     torch 2.13 skips the ``re`` module (``BUILTIN_SKIPLIST``, torch/_dynamo/trace_rules.py),
#     so a call of ``re.compile`` is a ``SkipFunctionVariable``; its ``call_function``
#     (torch/_dynamo/variables/functions.py, ``RE_CONSTANT_FOLD_FNS``) runs these
#     functions while tracing when every argument is a constant, and the result (a
#     pattern, a match, a string) is a value of the trace, with no graph break. Ours
#     folds the same functions, instead of tracing into re's cache.
def _re_constant_fold() -> frozenset:
    import re

    return frozenset({re.search, re.match, re.fullmatch, re.compile, re.sub, re.subn, re.split, re.findall,
                      re.escape})


RE_CONSTANT_FOLD_FNS = _re_constant_fold()


# Note [operator.itemgetter in the trace]
#     ``operator.itemgetter(1)``, ``attrgetter("weight")`` and ``methodcaller("sum", 0)`` are
#     C classes: the trace cannot build one, nor look inside one. Their whole behaviour
#     is a small closure, so a call of the class inlines the closure-making function below
#     instead (torch does the same: ``substitute_in_graph(operator.itemgetter)``), and the
#     closure it returns is traced like any nested function. Arguments the class itself
#     would refuse (no item, a name that is not a string) are not substituted: the call
#     breaks the graph and the class raises its own TypeError eagerly.
def itemgetter(*items):
    if len(items) == 1:
        item = items[0]

        def getter(obj):
            return obj[item]
    else:
        def getter(obj):
            return tuple(obj[i] for i in items)
    return getter


def attrgetter(*attrs):
    def resolve(obj, dotted):
        for name in dotted.split("."):
            obj = getattr(obj, name)
        return obj

    if len(attrs) == 1:
        attr = attrs[0]

        def getter(obj):
            return resolve(obj, attr)
    else:
        def getter(obj):
            return tuple(resolve(obj, a) for a in attrs)
    return getter


def methodcaller(name, /, *args, **kwargs):
    def caller(obj):
        return getattr(obj, name)(*args, **kwargs)
    return caller


def class_polyfill(cls, args: list, kwargs: dict):
    """The Python stand-in for calling the C class ``cls`` with these arguments, or None."""
    import operator

    def names(vs):
        return all(v.is_python_constant() and isinstance(v.as_python_constant(), str) for v in vs)

    if cls is operator.itemgetter and args and not kwargs:
        return itemgetter
    if cls is operator.attrgetter and args and not kwargs and names(args):
        return attrgetter
    if cls is operator.methodcaller and args and names(args[:1]):
        return methodcaller
    return None

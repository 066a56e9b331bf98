"""Mapping methods of user objects: ``in``, ``.get`` and ``os.environ`` while tracing.

Place in the pipeline: ``UserDefinedObjectVariable.call_method`` asks here first. Mirrors
the mapping cases of ``torch/_dynamo/variables/user_defined.py`` and ``os.environ`` in
``torch/_dynamo/variables/misc.py``.

Note [Mapping methods without exceptions]
    ``collections.abc.Mapping`` implements ``key in m`` and ``m.get(key, default)`` as
    ``try: self[key] except KeyError: ...``. Real Dynamo traces that try/except; ours cannot
    trace a raised exception, so for a class that keeps the ABC's own methods we trace
    ``m[key]`` (the user's ``__getitem__``, inlined, its reads guarded): when it returns,
    ``key in m`` is True and ``m.get`` is that value. When the user's ``__getitem__`` would
    raise, tracing it is a graph break, never a wrong answer.

Note [os.environ is read while tracing]
    ``os.environ.get("FLAG", "0")`` is folded to the value the variable has while tracing,
    as Dynamo folds it; no guard watches the environment, so setting the variable later
    does not recompile (in either).
"""

from __future__ import annotations

import collections.abc
import os
from typing import Optional

from .base import VariableTracker
from .constant import ConstantVariable

_ENVIRON_METHODS = ("get", "__getitem__", "__contains__")


def is_mapping_method(value, name: str) -> bool:
    """Does ``mapping_call_method`` handle ``value.name(...)``?"""
    if value is os.environ:
        return name in _ENVIRON_METHODS
    own = getattr(type(value), name, None) if isinstance(value, collections.abc.Mapping) else None
    return own is not None and own in (collections.abc.Mapping.__contains__, collections.abc.Mapping.get)


def mapping_call_method(tx, obj, name: str, args: list, kwargs: dict) -> Optional[VariableTracker]:
    """``obj.name(*args)`` for the mapping protocol of a user object, or None (not ours to do)."""
    value = obj.value
    if value is os.environ and name in _ENVIRON_METHODS and not kwargs and all(a.is_python_constant() for a in args):
        key, *rest = [a.as_python_constant() for a in args]  # Note [os.environ is read while tracing]
        if name == "__getitem__" and key not in os.environ:
            return None
        return ConstantVariable(getattr(os.environ, name)(key, *rest))
    if not isinstance(value, collections.abc.Mapping) or kwargs:
        return None
    own = getattr(type(value), name, None)
    if name == "__contains__" and own is collections.abc.Mapping.__contains__ and len(args) == 1:
        obj.call_method(tx, "__getitem__", args, {})  # Note [Mapping methods without exceptions]
        return ConstantVariable(True)
    if name == "get" and own is collections.abc.Mapping.get and len(args) in (1, 2):
        return obj.call_method(tx, "__getitem__", args[:1], {})
    if is_mapping_method(value, name):
        from ..exc import unimplemented

        unimplemented(f"{type(value).__name__}.{name} with these arguments")
    return None


__all__ = ["mapping_call_method", "is_mapping_method"]

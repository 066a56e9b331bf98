"""``wrap_inline``: a Python frame around a callable that has none, so that ``md.compile`` can trace it.

Place in the pipeline: the front door (``eval_frame._optimize_with``) wraps an object
with ``__call__``, a ``functools.partial`` or a builtin in it before compiling.
Mirrors ``torch/_dynamo/external_utils.py`` (``wrap_inline``), which
``torch/_dynamo/eval_frame.py``'s ``_TorchDynamoContext.__call__`` uses the same way.
"""

from __future__ import annotations

import functools
from typing import Any, Callable


def wrap_inline(fn: Callable) -> Callable:
    """A Python frame around a callable that has none of its own (torch/_dynamo/external_utils.py).

    Note [md.compile of any callable]
        ``torch.compile`` takes any callable. A module becomes an ``OptimizedModule``, a
        function is compiled as it is; anything else (an object with ``__call__``, a
        ``functools.partial``, a builtin such as ``torch.sin``) has no frame of its own
        that the hook could catch, so torch wraps it in this one-line function and
        compiles that: the frame of ``inner`` is traced, the call inlines the object's
        ``__call__`` (its attributes guarded through the closure cell, as torch's
        ``L['fn']``), and ``torch.sin`` becomes a graph of one node. A callable the
        tracer cannot enter (``math.sin``, a C extension) breaks the graph and runs
        eagerly, as in torch. A class is not wrapped: torch compiles its ``__call__``
        in place (``_optimize_class``). Plain functions and bound methods never take
        this path: they are compiled as they are, with no frame in between.
    """

    @functools.wraps(fn)  # an object's attributes too (Note [What md.compile returns looks like what it wraps])
    def inner(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    # a code object of its own (torch's "copy hack"): caches, skip marks and the hook's
    # table are keyed by code, and two wrapped callables must not share them
    inner.__code__ = inner.__code__.replace(co_varnames=inner.__code__.co_varnames)
    return inner

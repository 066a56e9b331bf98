"""minidynamo: the front half of torch.compile, rebuilt to be read.

The pipeline, one module per stage (see ``../shared/DESIGN.md`` and the book)::

    bytecode -> interpreter -> symbolic (Dynamo) -> fake -> dispatch
             -> aot (metadata, joint, partition, runtime) -> backends

Public API::

    md.compile(fn=None, *, backend="aot_eager", fullgraph=False)
    md.explain(fn, *args, **kwargs)
    md.reset()
"""

from __future__ import annotations

__all__ = ["compile", "explain", "reset"]
__version__ = "0.1.0"


def compile(fn=None, *, backend="aot_eager", fullgraph=False):
    """Compile ``fn`` with minidynamo, like ``torch.compile``.

    Works as a decorator (``@md.compile``, ``@md.compile(backend="eager")``) and as
    a call (``md.compile(fn)``). ``backend`` is "eager", "aot_eager" or any
    ``callable(gm, example_inputs) -> callable``. With ``fullgraph=True`` the first
    graph break raises instead of splitting the function.
    """
    from minidynamo.symbolic.eval_frame import optimize

    if fn is None:
        return lambda f: optimize(f, backend=backend, fullgraph=fullgraph)
    return optimize(fn, backend=backend, fullgraph=fullgraph)


def explain(fn, *args, **kwargs):
    """Trace ``fn(*args, **kwargs)`` and report graphs, graph breaks and guards.

    The result has ``graph_count``, ``graph_break_count``, ``break_reasons``,
    ``graphs`` (a list of ``torch.fx.GraphModule``) and ``guards``, like
    ``torch._dynamo.explain``.
    """
    from minidynamo.symbolic.eval_frame import explain as _explain

    return _explain(fn, *args, **kwargs)


def reset() -> None:
    """Clear every cache minidynamo keeps (compiled entries, AOT caches)."""
    from minidynamo.symbolic.eval_frame import reset as _reset

    _reset()

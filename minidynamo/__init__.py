"""minidynamo: the front half of torch.compile, rebuilt to be read.

The pipeline, one module per stage (see ``../shared/DESIGN.md`` and the book)::

    bytecode -> interpreter -> symbolic (Dynamo) -> fake -> dispatch
             -> aot (metadata, joint, partition, runtime) -> backends

Public API::

    md.compile(fn=None, *, backend="aot_eager", fullgraph=False, dynamic=None, mode=None, options=None)
    md.mark_dynamic(t, dim); md.mark_static(t, dim); md.mark_unbacked(t, dim)
    md.explain(fn, *args, **kwargs)
    md.reset()
    md.config                      # torch._dynamo.config's names; md.config.patch(recompile_limit=2)
    md.set_logs(graph_breaks=True, recompiles=True, guards=True, graph_code=True, aot_graphs=True, dynamic=True)
                                   # as torch._logging.set_logs; env MINIDYNAMO_LOGS="graph_breaks,recompiles"
"""

from __future__ import annotations

__all__ = ["compile", "config", "explain", "reset", "mark_dynamic", "maybe_mark_dynamic", "mark_static", "mark_unbacked",
           "set_logs"]
__version__ = "0.1.0"

from minidynamo import config  # noqa: E402  (torch._dynamo.config's names: md.config.patch(...))


def compile(fn=None, *, backend="aot_eager", fullgraph=False, dynamic=None, mode=None, options=None, disable=False):
    """Compile ``fn`` with minidynamo, like ``torch.compile``.

    Works as a decorator (``@md.compile``, ``@md.compile(backend="eager")``) and as
    a call (``md.compile(fn)``). ``fn`` is any callable, as torch's: a function, a bound
    method, an ``nn.Module``, an object with ``__call__``, a ``functools.partial``, a builtin
    such as ``torch.sin``, or a class (its instances' calls are compiled). ``backend`` is "eager", "aot_eager" or any
    ``callable(gm, example_inputs) -> callable``. With ``fullgraph=True`` the first
    graph break raises instead of splitting the function. ``dynamic`` as torch's:
    None (automatic dynamic: a size that changes between calls gets a symbol on
    the recompile), True (every size symbolic from the first call, except 0 and 1),
    False (every size static). ``mode`` and ``options`` are handed to the backend as torch's
    ``_TorchCompileWrapper`` hands them (Note [mode= and options= go to the backend] in
    backends.py); ``disable=True`` returns ``fn`` itself, as torch's.
    """
    from minidynamo.symbolic.eval_frame import optimize

    if mode is not None and options is not None:  # torch/__init__.py: compile, word for word
        raise RuntimeError("Either mode or options can be specified, but both can't be specified at the same time.")
    if fn is None:
        def decorate(f):
            if f is None:
                raise RuntimeError("Model can't be None")  # torch's words
            return compile(f, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode, options=options,
                           disable=disable)
        return decorate
    if disable:  # torch/_dynamo/eval_frame.py: optimize(disable=True) is a null decorator
        return fn
    return optimize(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode, options=options)


def mark_dynamic(t, dim) -> None:
    """Trace dim ``dim`` of tensor ``t`` with a symbolic size from the first call (``torch._dynamo.mark_dynamic``)."""
    from minidynamo.symbolic.dynamic_shapes import mark_dynamic as _mark

    _mark(t, dim)


def maybe_mark_dynamic(t, dim) -> None:
    """Trace dim ``dim`` of ``t`` with a symbol if it can be (``torch._dynamo.maybe_mark_dynamic``)."""
    from minidynamo.symbolic.dynamic_shapes import maybe_mark_dynamic as _mark

    _mark(t, dim)


def mark_static(t, dim=None) -> None:
    """Keep dim ``dim`` of ``t`` static, even under automatic dynamic (``torch._dynamo.mark_static``)."""
    from minidynamo.symbolic.dynamic_shapes import mark_static as _mark

    _mark(t, dim)


def mark_unbacked(t, dim) -> None:
    """Trace dim ``dim`` of ``t`` with an unbacked symbol ``u0`` (``torch._dynamo.decorators.mark_unbacked``)."""
    from minidynamo.symbolic.dynamic_shapes import mark_unbacked as _mark

    _mark(t, dim)


def explain(fn, *args, **kwargs):
    """Trace ``fn(*args, **kwargs)`` and report graphs, graph breaks and guards.

    The result has ``graph_count``, ``graph_break_count``, ``break_reasons``,
    ``graphs`` (a list of ``torch.fx.GraphModule``) and ``guards``, like
    ``torch._dynamo.explain``.
    """
    from minidynamo.symbolic.explain import explain as _explain

    return _explain(fn, *args, **kwargs)


def reset() -> None:
    """Clear every cache minidynamo keeps (compiled entries, AOT caches)."""
    from minidynamo.symbolic.eval_frame import reset as _reset

    _reset()


def set_logs(**artifacts: bool) -> None:
    """Log what the stages do, as ``torch._logging.set_logs`` (``TORCH_LOGS``) does: ``minidynamo/logs.py``.

    ``md.set_logs(graph_breaks=True, recompiles=True, guards=True, graph_code=True,
    aot_graphs=True, dynamic=True)``; the names are torch's artifacts, what is not named is
    off. The environment variable ``MINIDYNAMO_LOGS="graph_breaks,recompiles"`` does the
    same when minidynamo is imported.
    """
    from minidynamo.logs import set_logs as _set_logs

    _set_logs(**artifacts)


def _logs_from_env() -> None:
    import os

    if os.environ.get("MINIDYNAMO_LOGS", "").strip():
        from minidynamo.logs import _from_env

        _from_env()


_logs_from_env()

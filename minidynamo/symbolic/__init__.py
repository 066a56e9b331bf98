"""minidynamo.symbolic: the symbolic interpreter (our Dynamo), chapters 3-5.

Place in the pipeline: ``python function -> [symbolic] -> fx graphs + guards -> backend``.
Mirrors ``torch/_dynamo``. The modules, in the order a call meets them:

- ``eval_frame``: ``optimize`` (md.compile), ``reset``; the frame hook's callback. Beside it:
  ``explain`` (md.explain, ``ExplainOutput``) and ``external_utils`` (``wrap_inline``).
- ``frame_cache``: a frame's cache of entries: guard checks, recompiles, eager fallbacks.
- ``convert_frame``: trace one frame into a compiled entry.
- ``symbolic_convert``: the instruction loop (``InstructionTranslator``).
- ``variables/``: the VariableTrackers on its stack; ``variables/builder.py`` wraps inputs.
- ``output_graph``: the fx graph being built; ``guards``, ``source``, ``side_effects``.
- ``codegen``: the transformed function (readable Python) that runs the compiled pieces.
- ``resume_execution``: the functions that continue a frame after a graph break.

What a chapter can look at::

    compiled = md.compile(fn)               # an OptimizedFunction (OptimizedModule for modules)
    compiled.cache.entries[i]               # CacheEntry: .guards, .check, .transformed_source, .graphs
    compiled.cache.recompiles               # RecompileRecord: .guard (the one that failed), .change
    out = md.explain(fn, *args)             # ExplainOutput: graph_count, graph_break_count,
                                            #   break_reasons (GraphBreak), graphs, guards, entries, out
    md.events.record()                      # "op" (pass "dynamo"), "guard", "graph_break", "recompile"

``counters`` counts what happened (``instructions`` interpreted, ``frames_traced``,
``graphs``, ``graph_breaks``, ``recompiles``, ``cache_hits``, ``eager_fallbacks``);
``reset()`` clears it. Real Dynamo: ``torch._dynamo.utils.counters``.
"""

from collections import Counter

counters: Counter = Counter()

__all__ = ["counters"]

"""Widgets and plots: they read the event log (``minidynamo.events``) and nothing else.

Place in the pipeline: beside it, for the chapters. Every widget here has a
deterministic text repr (nbval compares it) and a static HTML snapshot, and steps
through its content in a static page with no kernel (see ``stepper.py``).

    Stepper              stepper.py           a slider + Prev/Next over pre-rendered steps
    DispatchKeyExplorer  dispatch_explorer.py the dispatch keys an op visits, step by step
    PassTimeline         pass_timeline.py     the FakeTensor passes of one compile, step by step
    plot_passes, ...     pass_plots.py        ops per pass, ours vs torch vs one pass (table, bar chart)
    RuntimeEpilogue      runtime_epilogue.py  one AOT call: which input is written back, which output rebuilt
    size_cache_map, ...  size_cache.py        which sizes reused which graph, ours beside torch's (chapter 15)

Names are imported lazily, so ``import minidynamo.widgets`` does not load ipywidgets
(or a widget module that has not been written yet) until a name is used.
"""

from __future__ import annotations

from minidynamo._lazy import lazy_exports

_EXPORTS = {
    "Stepper": "stepper",
    "html_to_text": "stepper",
    "pre": "stepper",
    "DispatchKeyExplorer": "dispatch_explorer",
    "PassTimeline": "pass_timeline",
    "count_passes": "pass_plots",
    "workload_counts": "pass_plots",
    "plot_passes": "pass_plots",
    "counts_table": "pass_plots",
    "size_cache_map": "size_cache",
    "plot_size_cache": "size_cache",
    "RuntimeEpilogue": "runtime_epilogue",
}

__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)

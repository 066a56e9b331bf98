"""Medians and their confidence intervals for the benchmark (Note [How sure a figure is]).

Place in the pipeline: outside it; ``bench/__init__.py`` calls it on the figures its workers
return (``bench/measure.py``) before ``bench/report.py`` prints them. No torch file
mirrors it (``torch.utils.benchmark`` reports a median and an interquartile range per
measurement; it has no two-system ratio).

Note [How sure a figure is]
    Every figure of a workload comes from several fresh processes per system, and the
    per-call overhead from many paired rounds in each (Note [Paired rounds] in
    ``bench/measure.py``). A figure is the median of all its values pooled (each
    process's rounds, or one value per process for compile latencies), and its 95%
    confidence interval comes from a two-level bootstrap: resample the processes with
    replacement, then each chosen process's values with replacement, take the pooled
    median; 2000 times, with a fixed seed (the same figures give the same interval).
    Resampling processes first keeps what differs between processes (memory layout,
    the machine's speed that minute) in the interval; resampling rounds alone would
    pretend 200 rounds from 3 processes were 200 independent draws.

    A ratio ours / torch's gets its interval the same way: the two systems' bootstrap
    medians are drawn independently and divided, replicate by replicate. When torch's
    interval includes 0 (its overhead is not told apart from eager's, as with a 70 ms
    training step whose overhead is below the step's noise), a ratio has no meaning:
    the report says "within noise" instead of a number that could be -6 or +3. When
    only ours includes 0, the ratio's interval is still valid (it includes 0).

    The method does not look at which way a figure leans: the number of rounds is set
    by a time budget and a minimum before any round is timed, never by the result.
"""

from __future__ import annotations

import statistics

REPLICATES = 2000
LEVEL = 0.95


def _rng():
    import numpy

    return numpy.random.default_rng(0)


def bootstrap_medians(groups: list[list[float]], replicates: int = REPLICATES):
    """``replicates`` medians of the pooled values, processes then values resampled (Note [How sure a figure is])."""
    import numpy

    groups = [numpy.asarray(g, dtype=float) for g in groups if len(g)]
    rng = _rng()
    out = numpy.empty(replicates)
    for r in range(replicates):
        chosen = rng.integers(0, len(groups), len(groups))
        pooled = numpy.concatenate([groups[i][rng.integers(0, len(groups[i]), len(groups[i]))] for i in chosen])
        out[r] = numpy.median(pooled)
    return out


def _interval(samples) -> list[float]:
    import numpy

    tail = (1 - LEVEL) / 2 * 100
    lo, hi = numpy.percentile(samples, [tail, 100 - tail])
    return [float(lo), float(hi)]


def summarize(groups: list[list[float]]) -> dict:
    """The pooled median of ``groups`` (one list per process) and its confidence interval."""
    pooled = [v for g in groups for v in g]
    if not pooled:
        return {"median": None, "ci": None, "n": 0, "processes": 0, "boot": None}
    boot = bootstrap_medians(groups) if len(pooled) > 1 else None
    return {"median": statistics.median(pooled), "ci": _interval(boot) if boot is not None else None,
            "n": len(pooled), "processes": sum(1 for g in groups if g), "boot": boot}


def includes_zero(ci: list[float] | None) -> bool:
    return ci is not None and ci[0] <= 0 <= ci[1]


def ratio(ours: dict, theirs: dict) -> dict:
    """ours / torch's: the ratio of medians, its interval, and whether torch's figure is within noise."""
    a, b = ours["median"], theirs["median"]
    value = a / b if a is not None and b and b > 0 else None
    noise = includes_zero(theirs["ci"])
    ci = None
    if value is not None and not noise and ours["boot"] is not None and theirs["boot"] is not None:
        ci = _interval(ours["boot"] / theirs["boot"])
    return {"ratio": value, "ci": ci, "within_noise": noise or value is None}

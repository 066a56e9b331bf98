"""Ops per FakeTensor pass, ours vs the real torch.compile (and the one-pass design), as numbers and a plot.

Place in the pipeline: beside it, for chapter 12. Our counts come from the op
events of ``minidynamo.events``; torch's from ``minidynamo.real_passes``, which
attributes every real ``FakeTensorMode.__torch_dispatch__`` call to its pass.
``python -m minidynamo.bench`` measures the same figures in fresh processes; this
module counts them in the notebook's process, on the benchmark's workloads.

Note [Why the counts differ]
    The passes agree in shape (three of them, the joint one the largest) but not
    op for op: torch's FakeTensorMode is re-entered by the decompositions it runs
    inside an op and by its own metadata queries (each counts again), while ours
    reports one event per op the program ran; torch's backend also fakeifies its
    inputs ("aot_other"). The plot shows both so the reader can see where.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from minidynamo import events

__all__ = ["count_passes", "workload_counts", "plot_passes", "counts_table"]

PASSES = (events.DYNAMO, events.AOT_METADATA, events.AOT_JOINT)


def count_passes(fn: Callable, make_inputs: Callable[[], tuple], backward: bool = True) -> dict[str, dict[str, int]]:
    """``{"ours": .., "torch": .., "one_pass": .., "merged": ..}``: ops per pass for one compile of ``fn``.

    ``one_pass`` is the naive design (no Dynamo interpreter), ``merged`` the fair one
    (Dynamo's pass, then AOT's two passes merged: Note [The merged design]).
    """
    import minidynamo as md
    from minidynamo._torch_private import dynamo_reset
    from minidynamo.bench import _call
    from minidynamo.one_pass import merged_backend, one_pass_compile
    from minidynamo.real_passes import counting_backend, record_real_passes

    result: dict[str, dict[str, int]] = {}
    md.reset()
    with events.record() as log:
        _call(md.compile(fn), make_inputs(), backward)
    result["ours"] = events.ops_per_pass(log)
    dynamo_reset()
    with record_real_passes() as real:
        _call(torch.compile(fn, backend=counting_backend()), make_inputs(), backward)
    dynamo_reset()
    result["torch"] = real.counts()
    with events.record() as log:
        _call(one_pass_compile(fn), make_inputs(), backward)
    result["one_pass"] = {"one_pass": sum(1 for e in log if e.kind == "op")}
    md.reset()
    with events.record() as log:
        _call(md.compile(fn, backend=merged_backend()), make_inputs(), backward)
    result["merged"] = events.ops_per_pass(log)  # dynamo + one merged AOT pass
    md.reset()
    return result


def workload_counts(names: tuple[str, ...] = ("mlp", "transformer_block", "pointwise_chain")) -> dict[str, Any]:
    """:func:`count_passes` on the benchmark's workloads at their small ("quick") sizes."""
    from minidynamo.bench import _BUILDERS

    out = {}
    for name in names:
        torch.manual_seed(0)
        workload = _BUILDERS[name](True)
        out[name] = count_passes(workload.fn, workload.make_inputs, workload.backward)
    return out


def counts_table(counts: dict[str, Any]) -> str:
    """One row per workload and design: the ops of each pass, and the total.

    ``ours``/``torch``: the three-pass stack; ``merged``: Dynamo's pass plus one merged
    AOT pass; ``naive``: one pass with no Dynamo interpreter.
    """
    names = list(PASSES) + sorted({p for c in counts.values() for s in ("ours", "torch") for p in c[s]} - set(PASSES))
    names.append("one_pass")
    head = f"{'workload':<18}{'design':<8}" + "".join(f"{n:>13}" for n in names) + f"{'total':>8}"
    rows = [head]
    for workload, c in counts.items():
        designs = [("ours", c["ours"]), ("torch", c["torch"]), ("merged", c.get("merged", {})), ("naive", c["one_pass"])]
        for label, per_pass in designs:
            cells = "".join(f"{per_pass[n] if n in per_pass else '-':>13}" for n in names)
            rows.append(f"{workload:<18}{label:<8}{cells}{sum(per_pass.values()):>8}")
    return "\n".join(rows)


def plot_passes(counts: dict[str, Any]):
    """A bar chart per workload: ops per pass, ours beside torch's, and the one-pass total."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(counts), figsize=(4.2 * len(counts), 3.4), squeeze=False)
    for ax, (workload, c) in zip(axes[0], counts.items()):
        width = 0.38
        xs = range(len(PASSES))
        ax.bar([x - width / 2 for x in xs], [c["ours"].get(p, 0) for p in PASSES], width, label="minidynamo")
        ax.bar([x + width / 2 for x in xs], [c["torch"].get(p, 0) for p in PASSES], width, label="torch.compile")
        ax.bar([len(PASSES)], [c["one_pass"]["one_pass"]], width, color="tab:green", label="naive one pass")
        merged = c.get("merged", {}).get("one_pass", 0)
        ax.bar([len(PASSES) + 1], [merged], width, color="tab:purple", label="merged AOT pass")
        ax.set_xticks(
            list(xs) + [len(PASSES), len(PASSES) + 1],
            [p.replace("_", "\n") for p in PASSES] + ["naive\none pass", "merged\nAOT pass"],
        )
        ax.set_title(workload)
        ax.set_ylabel("FakeTensor ops")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return fig

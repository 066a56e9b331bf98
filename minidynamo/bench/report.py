"""What the benchmark prints and plots, and the comparison with the previous landed run.

Place in the pipeline: outside it; ``bench/__init__.py`` hands its report (one entry per
workload, figures and 95% intervals from ``bench/stats.py``) to :func:`format_table`,
:func:`regressions` and :func:`plot`. No torch file mirrors it.
"""

from __future__ import annotations

from minidynamo.bench.workloads import REAL_MODELS

RATIOS = ("compile_ratio", "cold_ratio", "overhead_ratio")
PREVIOUS = "test-artifacts/bench.json"  # the last full run's figures, compared with the next one


def _workloads(report: dict) -> list:
    """The workload rows of a report (not ``_imports``, ``_timing`` or ``dynamic_shapes``)."""
    return [(n, e) for n, e in report.items() if isinstance(e, dict) and "compile_ratio" in e and "ours" in e]


def regressions(report: dict, previous: dict, tolerance: float = 0.10) -> list[str]:
    """Each ratio more than ``tolerance`` worse (higher) than in ``previous``, as a line to print.

    A ratio whose 95% interval still reaches the previous figure plus ``tolerance`` is
    a regression "within noise" (this run cannot tell it from the previous one); a
    previous ratio that is missing, not positive, or was within noise is not compared.
    """
    lines = []
    for name, e in _workloads(report):
        old = previous.get(name)
        if not isinstance(old, dict):
            continue
        for key in RATIOS:
            a, b = e.get(key), old.get(key)
            if a is None or b is None or b <= 0 or old.get(key + "_within_noise"):
                continue
            limit = b * (1 + tolerance)
            if e.get(key + "_within_noise"):
                continue  # no figure this run (torch's overhead not told from 0); see the table
            if a > limit:
                line = f"REGRESSION {name} {key}: {b:.2f} -> {a:.2f} ({(a / b - 1) * 100:+.0f}%)"
                ci = e.get(key + "_ci")
                if ci and ci[0] <= limit:
                    line += f", within noise: 95% interval [{ci[0]:.2f}, {ci[1]:.2f}] reaches {limit:.2f}"
                lines.append(line)
    return lines


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.1f}"


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e6:.0f}"


def _ratio(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _overhead_ratio(e: dict) -> str:
    if e.get("overhead_ratio_within_noise"):
        return "noise"
    ci = e.get("overhead_ratio_ci")
    if e.get("overhead_ratio") is None or not ci:
        return _ratio(e.get("overhead_ratio"))
    return f"{e['overhead_ratio']:.2f}±{(ci[1] - ci[0]) / 2:.2f}"


def _interval_us(side: dict) -> str:
    ci = side.get("overhead_ci_s")
    if not ci:
        return f"{_us(side.get('overhead_s'))} us"
    return f"{_us(side['overhead_s'])} us [{_us(ci[0])}, {_us(ci[1])}]"


def format_table(report: dict) -> str:
    lines = [
        f"{'workload':<24}{'compile ms (ours/torch)':>26}{'ratio':>7}{'cold ms (ours/torch)':>24}{'ratio':>7}"
        f"{'overhead us (ours/torch)':>27}{'ratio':>12}",
    ]
    for name, e in _workloads(report):
        o, t = e["ours"], e["torch"]
        lines.append(
            f"{name:<24}{_ms(o.get('compile_s')) + ' / ' + _ms(t.get('compile_s')):>26}{_ratio(e['compile_ratio']):>7}"
            f"{_ms(o.get('compile_cold_s')) + ' / ' + _ms(t.get('compile_cold_s')):>24}{_ratio(e.get('cold_ratio')):>7}"
            f"{_us(o.get('overhead_s')) + ' / ' + _us(t.get('overhead_s')):>27}{_overhead_ratio(e):>12}"
        )
    if report.get("guards"):  # the guard check of one entry per call, in us (bench/guards.py)
        from minidynamo.bench.guards import table_rows

        lines += table_rows(report["guards"])
    lines.append("")
    lines.append("per-call overhead over eager, median and 95% interval (Note [How sure a figure is], bench/stats.py):")
    for name, e in _workloads(report):
        o, t = e["ours"], e["torch"]
        if o.get("overhead_s") is None:
            continue
        ci = e.get("overhead_ratio_ci")
        if e.get("overhead_ratio_within_noise"):
            verdict = "ratio: within noise (torch's interval includes 0)"
        elif ci:
            verdict = f"ratio {e['overhead_ratio']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"
        else:
            verdict = f"ratio {_ratio(e.get('overhead_ratio'))}"
        rounds = f" ({o['overhead_rounds']} / {t['overhead_rounds']} rounds)" if o.get("overhead_rounds") else ""
        lines.append(f"  {name:<24} ours {_interval_us(o)}, torch {_interval_us(t)}; {verdict}{rounds}")
    lines.append("")
    lines.append("FakeTensor ops per pass (ours | torch):")
    for name, e in _workloads(report):
        ours = ", ".join(f"{k}={v}" for k, v in e["ops_per_pass"]["ours"].items())
        theirs = ", ".join(f"{k}={v}" for k, v in e["ops_per_pass"]["torch"].items())
        lines.append(f"  {name:<18} {ours} | {theirs}")
    for name, e in _workloads(report):
        on, off = e["ours"].get("compile_recording_on_s"), e["ours"].get("compile_recording_off_s")
        if on and off:
            lines.append(f"event log, {name}: our compile {_ms(on)} ms recording, {_ms(off)} ms not "
                         f"({(on / off - 1) * 100:+.0f}%)")
    for name, e in _workloads(report):
        if "first_backward_s" in e["ours"]:
            lines.append(f"first backward, {name}: ours {_ms(e['ours']['first_backward_s'])} ms, "
                         f"torch {_ms(e['torch']['first_backward_s'])} ms")
    colds = [(n, e) for n, e in _workloads(report) if e["ours"].get("compile_cold_s") and e["torch"].get("compile_cold_s")]
    if colds:  # the one-time cost of a fresh process: imports, first-op caches (issue 17: ours at most 500 ms on mlp)
        lines.append("cold minus warm compile, ms (ours / torch): " + ", ".join(
            f"{n} {_ms(e['ours']['compile_cold_s'] - e['ours']['compile_s'])} / "
            f"{_ms(e['torch']['compile_cold_s'] - e['torch']['compile_s'])}" for n, e in colds))
    for name in (n for n in REAL_MODELS if n in report):
        o, t = report[name]["ours"], report[name]["torch"]
        if o.get("eager_call_s") and t.get("eager_call_s"):
            lines.append(f"real model, {name}: per call vs eager: ours {o['compiled_call_s'] / o['eager_call_s']:.3f}x, "
                         f"torch {t['compiled_call_s'] / t['eager_call_s']:.3f}x (target: ours within 1.05x)")
    if "scaling" in report.get("pointwise_chain", {}):
        s = report["pointwise_chain"]["scaling"]
        lines.append("compile latency of pointwise chains (ms): " + ", ".join(
            f"{n}: {_ms(a)} / {_ms(b)}" for n, a, b in zip(s["sizes"], s["ours_s"], s["torch_s"])))
    if "_timing" in report:
        lines.append(format_timing(report["_timing"]))
    return "\n".join(lines)


def format_timing(timing: dict) -> str:
    """Where the run's time went: per workload, and inside the workers by phase."""
    per = ", ".join(f"{n} {s:.0f}" for n, s in timing["per_workload_s"].items())
    phases = ", ".join(f"{n} {s:.0f}" for n, s in timing["phases_s"].items())
    return (f"run time {timing['total_s']:.0f} s ({timing['workers']} workers, {timing['mode']}); per workload, s: {per}; "
            f"inside workers, s: {phases}")


def plot(report: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, e in _workloads(report) if "ops_per_pass" in e]  # not the dynamic-shape row
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    axes[0].bar(names, [report[n]["compile_ratio"] or 0 for n in names])
    axes[0].axhline(0.25, color="red", linestyle="--", label="target 0.25")
    axes[0].set_title("compile latency, ours / torch (warm)")
    axes[0].legend()
    values = [0 if report[n].get("overhead_ratio_within_noise") else (report[n]["overhead_ratio"] or 0) for n in names]
    errors = [[0, 0] if not report[n].get("overhead_ratio_ci") else
              [max(0, v - report[n]["overhead_ratio_ci"][0]), max(0, report[n]["overhead_ratio_ci"][1] - v)]
              for n, v in zip(names, values)]
    axes[1].bar(names, values, yerr=list(zip(*errors)) if names else None)
    axes[1].axhline(0.5, color="red", linestyle="--", label="target 0.5")
    axes[1].set_title("per-call overhead, ours / torch (95% interval; 0: within noise)")
    axes[1].legend()
    for ax in axes[:2]:
        ax.tick_params(axis="x", rotation=30)
    s = report.get("pointwise_chain", {}).get("scaling")
    if s:
        axes[2].plot(s["sizes"], [x * 1000 for x in s["ours_s"]], "o-", label="minidynamo")
        axes[2].plot(s["sizes"], [x * 1000 for x in s["torch_s"]], "s-", label="torch.compile")
        axes[2].set_xlabel("ops in the chain")
        axes[2].set_ylabel("compile latency (ms)")
        axes[2].set_title("compile time vs ops")
        axes[2].legend()
    fig.tight_layout()
    fig.savefig(path)

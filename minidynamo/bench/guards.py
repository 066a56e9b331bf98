"""The guard-check rows of the benchmark: what one cache entry's guards cost per call, ours and torch's.

Place in the pipeline: beside ``bench/__init__.py``, whose table prints these rows (run
here in a fresh process, ``run_in_process``); ``python -m minidynamo.bench.guards`` runs
them alone. For a function of 1, 10 and 100 tensor inputs and a module of 200
parameters, each system compiles once, and the row times the check of the entry that
serves the call: ours, the generated check function of the guard tree
(``entry.check.fn(L, G)``, guard_tree.py: Note [The tree is walked by one generated
function]); the flat guards, the same entry's guards as one flat ``and`` of their
readable expressions (each source read anew in each guard, no C++ TENSOR_MATCH: the
design before the tree); torch's, ``cache_entry.guard_manager.check(f_locals)``, its C++
``RootGuardManager`` (``torch/_dynamo/guards.py``). Also the Python walk of our tree
(``RootGuardManager.check``), which only the miss path runs. One thread, best of
several repeats; absolute times drift on a noisy machine, ratios less.
"""

from __future__ import annotations

import argparse
import json
import timeit
from typing import Any

INPUTS = (1, 10, 100)
PARAMETERS = 200


def _many(*xs):
    out = xs[0] + 1
    for x in xs[1:]:
        out = out + x
    return out


def _apply(m, x):
    return m(x)


def _module():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(PARAMETERS // 2)])


def _per_call(fn, number: int) -> float:
    """Best of 5 repeats, in us per call; at most ``number`` calls a repeat, fewer where a call is slow
    (about 20 ms a repeat: the flat guards of the 200-parameter module take milliseconds a call)."""
    first = timeit.timeit(fn, number=1)
    number = max(1, min(number, int(0.02 / max(first, 1e-9))))
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def _case(name: str, fn, args: tuple, f_locals: dict, code, number: int) -> dict[str, Any]:
    import torch

    import minidynamo as md
    from minidynamo._torch_private import dynamo_cache_entries, dynamo_reset

    md.reset()
    ours = md.compile(fn, backend="eager")
    ours(*args)
    entry = ours.cache.entries[0]
    G = getattr(fn, "__globals__", {})
    dynamo_reset()
    theirs = torch.compile(fn, backend="eager")
    theirs(*args)
    manager = dynamo_cache_entries(code)[0].guard_manager
    flat = _flat_check(entry.check)
    assert flat(f_locals, G), "the flat guards must hold for the call they were traced on"
    row = {
        "case": name,
        "ours_us": _per_call(lambda: entry.check.fn(f_locals, G), number),
        "flat_us": _per_call(lambda: flat(f_locals, G), number),
        "torch_us": _per_call(lambda: manager.check(f_locals), number),
        "ours_tree_walk_us": _per_call(lambda: entry.check.tree.check(f_locals, G, entry.check.scope), max(1, number // 20)),
        "guards": len(entry.guards),
    }
    dynamo_reset()
    md.reset()
    return row


def _flat_check(check):
    """The entry's guards as one flat ``and`` of their readable expressions (no tree, no C++)."""
    body = " and ".join(f"({g.expr})" for g in check.guards) or "True"
    scope = dict(check.scope)
    exec(compile(f"def ___flat(L, G):\n    return bool({body})\n", "<flat guards>", "exec"), scope)  # noqa: S102
    return scope["___flat"]


def run(quick: bool = False) -> list[dict[str, Any]]:
    import torch

    torch.set_num_threads(1)
    number = 200 if quick else 2000
    rows = []
    for n in INPUTS:
        xs = tuple(torch.randn(4) for _ in range(n))
        rows.append(_case(f"{n} inputs", _many, xs, {"xs": xs}, _many.__code__, number))
    model, x = _module(), torch.randn(2, 4)
    rows.append(_case(f"module, {PARAMETERS} parameters", _apply, (model, x), {"m": model, "x": x},
                      _apply.__code__, number))
    return rows


def run_in_process(quick: bool = False) -> list[dict[str, Any]]:
    """``run`` in a fresh interpreter (the main benchmark's workers are fresh processes too)."""
    import os
    import subprocess
    import sys
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        proc = subprocess.run([sys.executable, "-m", "minidynamo.bench.guards", "--json", path]
                              + (["--quick"] if quick else []), capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"guard-check worker failed:\n{proc.stderr[-3000:]}")
        with open(path) as f:
            return json.load(f)
    finally:
        os.unlink(path)


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def format_report(rows: list[dict[str, Any]]) -> str:
    lines = ["guard check per call (one entry, the call it serves)",
             f"  {'case':<26}{'guards':>8}{'ours us':>10}{'flat us':>10}{'torch us':>10}{'ours/torch':>12}"
             f"{'flat/torch':>12}{'tree walk us':>14}"]
    for r in rows:
        lines.append(f"  {r['case']:<26}{r['guards']:>8}{r['ours_us']:>10.1f}{r['flat_us']:>10.1f}{r['torch_us']:>10.1f}"
                     f"{_ratio(r['ours_us'], r['torch_us']):>12.2f}{_ratio(r['flat_us'], r['torch_us']):>12.2f}"
                     f"{r['ours_tree_walk_us']:>14.1f}")
    return "\n".join(lines)


def table_rows(rows: list[dict[str, Any]]) -> list[str]:
    """The rows of the main table (``bench/report.py``): the check's cost per call, ours / torch and its ratio."""
    out = []
    for r in rows:
        ours = f"{r['ours_us']:.1f} / {r['torch_us']:.1f}"
        out.append(f"{'guards, ' + r['case']:<36}{'-':>14}{'-':>7}{'-':>24}{'-':>7}{ours:>27}"
                   f"{_ratio(r['ours_us'], r['torch_us']):>12.2f}   flat/torch {_ratio(r['flat_us'], r['torch_us']):.2f}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", help="write the rows to this file")
    args = parser.parse_args(argv)
    rows = run(args.quick)
    print(format_report(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

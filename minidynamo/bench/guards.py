"""The guard-check row of the benchmark: what one cache entry's guards cost per call, ours and torch's.

Place in the pipeline: beside ``bench/__init__.py``; ``python -m minidynamo.bench.guards``
runs it alone (it is not yet a column of the main table). For a function of 1, 10 and
100 tensor inputs and a module of 200 parameters, each system compiles once, and the row
times the check of the entry that serves the call: ours, the generated check function
of the guard tree (``entry.check.fn(L, G)``, guard_tree.py: Note [The tree is walked by
one generated function]); torch's, ``cache_entry.guard_manager.check(f_locals)``, its C++
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
    row = {
        "case": name,
        "ours_us": _per_call(lambda: entry.check.fn(f_locals, G), number),
        "torch_us": _per_call(lambda: manager.check(f_locals), number),
        "ours_tree_walk_us": _per_call(lambda: entry.check.tree.check(f_locals, G, entry.check.scope), max(1, number // 20)),
        "guards": len(entry.guards),
    }
    dynamo_reset()
    md.reset()
    return row


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


def format_report(rows: list[dict[str, Any]]) -> str:
    lines = ["guard check per call (one entry, the call it serves)",
             f"  {'case':<26}{'guards':>8}{'ours us':>10}{'torch us':>10}{'ours/torch':>12}{'tree walk us':>14}"]
    for r in rows:
        ratio = r["ours_us"] / r["torch_us"] if r["torch_us"] else float("nan")
        lines.append(f"  {r['case']:<26}{r['guards']:>8}{r['ours_us']:>10.1f}{r['torch_us']:>10.1f}"
                     f"{ratio:>12.2f}{r['ours_tree_walk_us']:>14.1f}")
    return "\n".join(lines)


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

"""The benchmark's dynamic-shape row runs and reports both systems (no timed assertions)."""

import json
import math
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ch15


def test_dynamic_shapes_row(tmp_path):
    path = tmp_path / "dyn.json"
    proc = subprocess.run([sys.executable, "-m", "minidynamo.bench.dynamic", "--quick", "--json", str(path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(path.read_text())
    ours = data["ours"]
    assert ours["entries"] == 2  # one static entry, then one dynamic entry for every later size
    assert ours["dynamo_traces"] == 2
    assert ours["aot_compiles"] == ours["dynamo_traces"]  # AOT over SymInts: once per graph, as torch (its count is its graphs)
    assert data["torch"]["total_first_calls_s"] > 0 and data["compile_ratio"] > 0
    assert "dynamic shapes: an MLP called with" in proc.stdout
    ratio = data["dynamic_static_ratio"]["ours"]
    if ours["static_overhead_s"] > 0:
        assert ratio == ours["dynamic_overhead_s"] / ours["static_overhead_s"]
    else:  # an overhead is a difference of two timings: on a loaded machine it can come out <= 0, no ratio then
        assert math.isnan(ratio)
    assert f"dynamic / static       ours {ratio:.2f}" in proc.stdout

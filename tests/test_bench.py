"""The benchmark runs and writes the figures the issue names (no timed assertions)."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ch12

MAIN_PASSES = ("dynamo", "aot_metadata", "aot_joint")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "minidynamo.bench", "--quick", "--only", "mutation_views",
         "--no-scaling", "--no-cold", "--json", str(path)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(path.read_text()), proc.stdout


def test_json_has_one_object_per_workload_with_ratios(report):
    data, _ = report
    assert list(data) == ["mutation_views"]
    entry = data["mutation_views"]
    assert isinstance(entry["compile_ratio"], float) and entry["compile_ratio"] > 0
    assert entry["overhead_ratio"] is None or isinstance(entry["overhead_ratio"], float)
    for system in ("ours", "torch"):
        assert entry[system]["compile_s"] > 0
        assert entry[system]["eager_call_s"] > 0


def test_ops_per_pass_counts_the_three_passes_on_both_sides(report):
    data, _ = report
    ops = data["mutation_views"]["ops_per_pass"]
    assert set(ops) == {"ours", "torch"}
    for system in ("ours", "torch"):
        for name in MAIN_PASSES:
            assert ops[system].get(name, 0) > 0, (system, name, ops[system])


def test_table_is_printed(report):
    _, stdout = report
    assert "mutation_views" in stdout
    assert "FakeTensor ops per pass" in stdout


def test_unknown_workload_is_a_clear_error():
    proc = subprocess.run([sys.executable, "-m", "minidynamo.bench", "--only", "nope"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "unknown workload" in proc.stderr and "nope" in proc.stderr


def test_recording_cost_is_measured_and_printed(report):
    data, stdout = report
    ours = data["mutation_views"]["ours"]
    assert ours["compile_recording_on_s"] > 0 and ours["compile_recording_off_s"] > 0
    assert "event log, mutation_views: our compile" in stdout


def test_a_ratio_more_than_ten_percent_worse_is_flagged():
    from minidynamo import bench

    def row(**ratios):
        return {"ours": {}, "torch": {}, "compile_ratio": 0.2, "cold_ratio": 0.5, "overhead_ratio": 0.4, **ratios}

    previous = {"mlp": row(), "gpt2_tiny": row()}
    now = {"mlp": row(overhead_ratio=0.45), "gpt2_tiny": row(cold_ratio=0.54), "new": row(), "_imports": {}}
    found = bench.regressions(now, previous)
    assert len(found) == 1 and "mlp overhead_ratio" in found[0] and "+12%" in found[0]


def test_import_breakdown_groups_a_first_compile():
    from minidynamo import bench

    imports = bench.import_breakdown()
    assert imports["ok"] and imports["groups_s"]["minidynamo"] > 0 and imports["groups_s"]["torch (import torch)"] > 0
    assert any(n.startswith("minidynamo.symbolic") for n in imports["ours_top_s"])
    # the first compile needs no real Dynamo (Note [torch._dynamo on the first meta kernel])
    assert imports["groups_s"]["torch._dynamo"] == 0
    assert "torch.distributed.tensor" in imports["first_compile_top_s"]  # torch's DTensor check, named
    assert "import time of a first md.compile" in bench.format_imports(imports)


def test_cold_figure_is_the_median_of_alternating_fresh_workers(monkeypatch):
    from minidynamo import bench

    cold_values = {"ours": [3.0, 1.0, 2.0], "torch": [4.0, 6.0, 5.0]}
    calls = []

    def fake_worker(spec):
        calls.append((spec["system"], spec["warm"]))
        if spec["warm"]:
            return {"compile_s": 0.1, "overhead_s": 0.001, "ops_per_pass": {}}
        return {"compile_s": cold_values[spec["system"]][sum(1 for s, w in calls if s == spec["system"] and not w) - 1]}

    monkeypatch.setattr(bench, "_run_worker", fake_worker)
    report = bench.run(("mutation_views",), quick=True, scaling=False, cold=True, progress=lambda m: None, repeats=3)
    entry = report["mutation_views"]
    assert entry["ours"]["compile_cold_s"] == 2.0 and entry["torch"]["compile_cold_s"] == 5.0
    assert entry["cold_ratio"] == 0.4
    assert [s for s, w in calls if not w] == ["ours", "torch", "torch", "ours", "ours", "torch"]
    assert "cold minus warm compile, ms (ours / torch): mutation_views 1900.0 / 4900.0" in bench.format_table(report)

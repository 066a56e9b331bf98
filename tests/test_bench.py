"""The benchmark runs and writes the figures the issue names (no timed assertions)."""

import json
import os
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
    assert [k for k in data if not k.startswith("_")] == ["mutation_views"]
    assert data["_timing"]["workers"] == 2 and data["_timing"]["per_workload_s"]["mutation_views"] > 0
    entry = data["mutation_views"]
    assert isinstance(entry["compile_ratio"], float) and entry["compile_ratio"] > 0
    assert entry["overhead_ratio"] is None or isinstance(entry["overhead_ratio"], float)
    for system in ("ours", "torch"):
        assert entry[system]["compile_s"] > 0
        assert entry[system]["eager_call_s"] > 0
        lo, hi = entry[system]["overhead_ci_s"]
        assert lo <= entry[system]["overhead_s"] <= hi and entry[system]["overhead_rounds"] >= 5


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
    # nor torch's DTensor check (Note [The device question has a torch_dispatch rule]); sympy is torch's, named
    assert imports["groups_s"]["torch.distributed"] == 0 and "sympy" in imports["first_compile_top_s"]
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


def test_a_forked_worker_starts_its_timer_with_the_modules_of_a_new_interpreter():
    # Note [Fresh processes from a zygote]: the zygote must not have imported anything a new
    # worker process would only import inside the cold figure (torch._dynamo, our stages, sympy)
    from minidynamo.bench.measure import Zygotes, spawn_worker

    spec = {"workload": "mutation_views", "system": "ours", "quick": True, "warm": False, "steady": False,
            "list_modules": True}
    zygotes = Zygotes()
    try:
        forked = set(zygotes.run(dict(spec))["modules_at_timer"])
        with pytest.raises(RuntimeError, match="KeyError"):  # a failing worker's traceback reaches the driver
            zygotes.run({**spec, "workload": "nope"})
    finally:
        zygotes.close()
    spawned = set(spawn_worker(dict(spec))["modules_at_timer"])
    assert "torch" in forked and not any(m.startswith("torch._dynamo") for m in forked)
    assert forked - spawned == set(), sorted(forked - spawned)
    assert not {m for m in spawned - forked if not m.startswith(("encodings.", "_"))}, sorted(spawned - forked)


def _stats_row(ours_rounds, torch_rounds):
    from minidynamo import bench

    entry = {"compile_ratio": 0.2, "ours": {}, "torch": {}}
    ours = bench._steady_figures(entry["ours"], [{"overhead_s": 0.0, "overhead_rounds_s": r} for r in ours_rounds])
    theirs = bench._steady_figures(entry["torch"], [{"overhead_s": 0.0, "overhead_rounds_s": r} for r in torch_rounds])
    r = bench._ratio_ci(ours, theirs)
    entry.update(overhead_ratio=r["ratio"], overhead_ratio_ci=r["ci"], overhead_ratio_within_noise=r["within_noise"])
    return entry


def test_overhead_interval_and_ratio_from_pooled_rounds():
    import random

    rng = random.Random(0)
    ours = [[50e-6 + rng.gauss(0, 2e-6) for _ in range(40)] for _ in range(3)]
    theirs = [[100e-6 + rng.gauss(0, 2e-6) for _ in range(40)] for _ in range(3)]
    entry = _stats_row(ours, theirs)
    lo, hi = entry["ours"]["overhead_ci_s"]
    assert lo < entry["ours"]["overhead_s"] < hi and hi - lo < 5e-6
    assert entry["ours"]["overhead_rounds"] == 120 and entry["ours"]["overhead_processes"] == 3
    assert not entry["overhead_ratio_within_noise"]
    assert entry["overhead_ratio_ci"][0] < 0.5 < entry["overhead_ratio_ci"][1]
    assert _stats_row(ours, theirs) == entry  # a fixed seed: the same rounds, the same interval


def test_a_ratio_over_an_overhead_within_noise_is_not_a_number():
    from minidynamo import bench

    import random

    rng = random.Random(1)
    ours = [[-3e-3 + rng.gauss(0, 2e-3) for _ in range(31)] for _ in range(3)]
    theirs = [[0.5e-3 + rng.gauss(0, 2e-3) for _ in range(31)] for _ in range(3)]  # a 70 ms step's noise
    entry = _stats_row(ours, theirs)
    assert entry["overhead_ratio_within_noise"] and entry["overhead_ratio_ci"] is None
    table = bench.format_table({"resnet18_train": {**entry, "cold_ratio": None, "ops_per_pass": {"ours": {}, "torch": {}}}})
    assert "within noise (torch's interval includes 0)" in table and "noise" in table.splitlines()[1]
    # and it is not reported as a regression (nor compared) against a previous run
    assert bench.regressions({"resnet18_train": entry}, {"resnet18_train": {"overhead_ratio": 0.4}}) == []


def test_the_table_prints_small_overheads_in_microseconds():
    from minidynamo import bench

    entry = _stats_row([[15e-6] * 5], [[30e-6] * 5])
    table = bench.format_table({"mutation_views": {**entry, "cold_ratio": None,
                                                   "ops_per_pass": {"ours": {}, "torch": {}}}})
    assert "overhead us" in table and "15 / 30" in table.splitlines()[1]


def test_a_regression_inside_this_runs_interval_says_within_noise():
    from minidynamo import bench

    def row(value, ci=None):
        return {"ours": {}, "torch": {}, "compile_ratio": 0.2, "overhead_ratio": value, "overhead_ratio_ci": ci}

    previous = {"mlp": row(0.40), "gpt2_tiny": row(0.40), "resnet18_train": row(-6.16)}
    now = {"mlp": row(0.50, [0.47, 0.53]), "gpt2_tiny": row(0.50, [0.30, 0.70]), "resnet18_train": row(0.3)}
    found = bench.regressions(now, previous)
    assert len(found) == 2  # a previous negative ratio is not compared
    assert "mlp overhead_ratio" in found[0] and "within noise" not in found[0]
    assert "gpt2_tiny overhead_ratio" in found[1] and "within noise" in found[1]


def test_plot_draws_a_report_with_the_dynamic_shape_row(tmp_path):
    pytest.importorskip("matplotlib")
    from minidynamo import bench

    entry = _stats_row([[15e-6] * 5], [[30e-6] * 5])
    report = {"mlp": {**entry, "cold_ratio": None, "ops_per_pass": {"ours": {}, "torch": {}}},
              "dynamic_shapes": {"ours": {}, "torch": {}, "compile_ratio": 0.2}}
    bench.plot(report, str(tmp_path / "bench.png"))
    assert (tmp_path / "bench.png").stat().st_size > 0


def test_inductor_models_cold_figure_is_the_median_of_alternating_fresh_processes(monkeypatch):
    from minidynamo.bench import inductor_models as im

    cold_values = {"ours": [30.0, 34.0, 31.0], "torch": [33.0, 32.0, 36.0]}
    order = []

    def fake_subprocess(argv, cache_dir):
        if argv[0] == "--cold":
            system, path = argv[3], argv[4]
            order.append(system)
            os.makedirs(cache_dir, exist_ok=True)
            with open(path, "w") as f:
                json.dump({"compile_s": cold_values[system][order.count(system) - 1], "graphs": "1/0/0",
                           "warnings": []}, f)
        else:
            assert os.path.isdir(os.path.join(os.path.dirname(cache_dir), "cache-ours"))
            with open(argv[3], "w") as f:
                json.dump({"per_call": {"ours": 1.0, "torch": 1.0}}, f)

    monkeypatch.setattr(im, "_subprocess", fake_subprocess)
    row = im.measure("resnet10t", "train", rounds=0, cold_repeats=3)
    assert order == ["ours", "torch", "torch", "ours", "ours", "torch"]
    assert row["ours"]["compile_s"] == 31.0 and row["torch"]["compile_s"] == 33.0
    assert row["ours"]["compile_samples"] == [30.0, 34.0, 31.0]


def test_inductor_models_per_call_is_the_median_of_paired_processes(monkeypatch):
    from minidynamo.bench import inductor_models as im

    per_call = [(1.10, 1.0), (0.98, 1.0), (1.02, 1.0)]  # ours/torch 1.10, 0.98, 1.02: the median process is 1.02's
    paired = []

    def fake_subprocess(argv, cache_dir):
        if argv[0] == "--cold":
            os.makedirs(cache_dir, exist_ok=True)
            with open(argv[4], "w") as f:
                json.dump({"compile_s": 1.0, "graphs": "1/0/0", "warnings": []}, f)
        else:
            ours, theirs = per_call[len(paired)]
            paired.append(argv[3])
            with open(argv[3], "w") as f:
                json.dump({"per_call": {"ours": ours, "torch": theirs}, "ours_vs_torch": "bitwise",
                           "fastest_ours_over_torch": ours}, f)

    monkeypatch.setattr(im, "_subprocess", fake_subprocess)
    row = im.measure("resnet10t", "train", rounds=5, paired_repeats=3)
    assert len(set(paired)) == 3  # three processes, each its own result file
    assert row["paired"]["per_call"]["ours"] == 1.02 and row["paired"]["fastest_ours_over_torch"] == 1.02
    assert row["paired"]["per_call_samples"] == [1.10, 0.98, 1.02]
    assert row["paired"]["numerics_in_every_process"] == ["bitwise"]
    paired.clear()
    single = im.measure("resnet10t", "train", rounds=5)  # one process: its own figures, no samples
    assert "per_call_samples" not in single["paired"] and single["paired"]["per_call"]["ours"] == 1.10

"""The benchmark's guard-check row runs and reports both systems (no timed assertions)."""

import json
import subprocess
import sys


def test_guard_check_row(tmp_path):
    path = tmp_path / "guards.json"
    proc = subprocess.run([sys.executable, "-m", "minidynamo.bench.guards", "--quick", "--json", str(path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(path.read_text())
    assert [r["case"] for r in rows] == ["1 inputs", "10 inputs", "100 inputs", "module, 200 parameters"]
    for r in rows:
        assert r["ours_us"] > 0 and r["torch_us"] > 0 and r["flat_us"] > 0 and r["guards"] > 0
    assert rows[-1]["guards"] > rows[0]["guards"]
    assert "guard check per call" in proc.stdout


def test_guard_rows_are_rows_of_the_main_table_as_ratios_against_torch():
    from minidynamo.bench.report import format_table

    rows = [{"case": "1 inputs", "guards": 14, "ours_us": 1.0, "flat_us": 5.0, "torch_us": 2.0, "ours_tree_walk_us": 40.0},
            {"case": "module, 200 parameters", "guards": 900, "ours_us": 90.0, "flat_us": 900.0, "torch_us": 45.0,
             "ours_tree_walk_us": 4000.0}]
    table = format_table({"guards": rows}).splitlines()
    assert table[1].startswith("guards, 1 inputs") and table[1].split()[-3:] == ["0.50", "flat/torch", "2.50"]
    assert table[2].startswith("guards, module, 200 parameters") and "90.0 / 45.0" in table[2]
    assert table[2].split()[-3:] == ["2.00", "flat/torch", "20.00"]

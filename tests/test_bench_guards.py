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
        assert r["ours_us"] > 0 and r["torch_us"] > 0 and r["guards"] > 0
    assert rows[-1]["guards"] > rows[0]["guards"]
    assert "guard check per call" in proc.stdout

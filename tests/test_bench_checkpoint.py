"""The benchmark's checkpointing rows run and report both systems (no timed assertions)."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ch16


def test_checkpoint_rows(tmp_path):
    path = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, "-m", "minidynamo.bench", "--quick", "--only", "checkpoint", "--no-imports",
                           "--json", str(path)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(path.read_text())["checkpoint"]
    for system in ("ours", "torch"):
        for w in ("mlp", "mlp_checkpointed", "block", "block_checkpointed"):
            assert r[system][w]["saved_tensors"] > 0 and r[system][w]["per_call_s"] > 0
        assert r[system]["cond_compile_s"] > 0
        for w in ("mlp", "block"):  # checkpointing frees what it was written to free, in both systems
            assert r[system][f"{w}_checkpointed"]["saved_bytes"] < r[system][w]["saved_bytes"]
    assert r["cond_compile_ratio"] > 0 and all(v > 0 for v in r["time_ratio"].values())
    # issue 28: the checkpointed workloads save the same number of tensors and bytes as torch's aot_eager
    assert r["same_saved_as_torch"] == {w: True for w in ("mlp", "mlp_checkpointed", "block", "block_checkpointed")}
    assert "activation checkpointing, training" in proc.stdout and "torch.cond model" in proc.stdout

"""``python -m minidynamo.check_device`` runs here, on CPU, as a GPU session will run it on cuda.

Issue 29: the command must work from a plain checkout (only torch and the package on
``PYTHONPATH``), with nothing heavy imported (no jupyter, widgets or transformers), and on a
machine without CUDA report every CUDA claim as not checked rather than fail.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEAVY = ("ipywidgets", "IPython", "jupyter_client", "ipykernel", "transformers", "timm", "matplotlib")


def test_check_device_runs_on_this_machine(tmp_path):
    out = tmp_path / "check.json"
    code = (
        "import sys; from minidynamo.check_device import main; rc = main(['--only', 'F.rms_norm', '--tests', '--json', "
        f"{str(out)!r}]); print('HEAVY', sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})); "
        "sys.exit(rc)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "HEAVY []" in proc.stdout, proc.stdout.splitlines()[-1]
    result = json.loads(out.read_text())
    assert result["torch"] == torch.__version__
    tests = result["cuda_tests"]  # --tests: pytest -m cuda tests/test_devices.py, in a child
    assert tests["returncode"] == 0 and ("skipped" in tests["summary"] or "passed" in tests["summary"]), tests
    if not torch.cuda.is_available():
        assert "passed" not in tests["summary"], tests  # every cuda case skipped here
    cases = result["compile_cases"]
    assert [(c["mode"], c["shapes"]) for c in cases] == [
        ("training", "static"), ("training", "dynamic=True"), ("inference", "static"), ("inference", "dynamic=True")]
    for c in cases:  # equal to eager, no warning, as many graphs as torch.compile
        assert c["ok"] and c["max_diff_ours_vs_eager"] <= 1e-5 and c["graphs_ours"] == c["graphs_torch"] >= 1, c
    claims = result["claims"]
    assert len({c["id"] for c in claims}) == len(claims) >= 10
    if not torch.cuda.is_available():
        assert {c["verdict"] for c in claims} == {"not checked: no CUDA"}
    assert "chapters 06-08: CUDA claims on this build" in proc.stdout


def test_every_claim_check_runs_here(monkeypatch):
    """Each CUDA claim's check, run on this build with meta standing in for cuda where it must: none raises.

    The verdicts mean nothing here (there is no CUDA kernel to find); what this catches is a
    check that would crash on the GPU machine instead of reporting.
    """
    import minidynamo.check_device as cd

    rms_inputs, aot_graph_ops = cd._rms_inputs, cd._aot_graph_ops
    monkeypatch.setattr(cd, "_rms_inputs", lambda device: rms_inputs("meta" if device == "cuda" else device))
    monkeypatch.setattr(cd, "_aot_graph_ops", lambda device, table: aot_graph_ops(
        "meta" if device == "cuda" else device, table))
    rows = cd.cuda_claims(True)
    raised = [r for r in rows if r["shows"].startswith("the check raised")]
    if not torch.cuda.is_available():  # the factory and backward children need a real CUDA build
        raised = [r for r in raised if r["id"] not in ("06-factory", "06-fake-backward")]
    assert not raised, raised
    assert {r["verdict"] for r in rows} <= {"holds", "wrong"} | {r["verdict"] for r in rows if r["verdict"].startswith("version")}

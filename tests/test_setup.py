"""A learner's own code after the README's install: transformers, timm and torchvision import.

The README's install removes a torchvision that cannot load (PyPI's CUDA build beside a
CPU torch): ``python -c "import torchvision" || pip uninstall -y torchvision``. Each check
runs in a fresh interpreter that imports nothing of ours first, as a learner's script
would (``minidynamo.zoo`` hides a broken torchvision from timm; a learner's code does not
go through it).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

FIX = 'python -c "import torchvision" 2>/dev/null || pip uninstall -y torchvision  (README, Quickstart)'


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def _torchvision_installed() -> bool:
    """Installed in the environment: asked of its metadata, not of sys.modules, where minidynamo.zoo's
    stand-in for timm (Note [timm without torchvision]) may sit after an earlier test in this worker."""
    import importlib.metadata

    try:
        importlib.metadata.distribution("torchvision")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def test_transformers_imports_in_a_learners_script():
    done = _run("""
        from transformers import GPT2LMHeadModel, GPT2Config
        model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=16, n_positions=8))
        print(type(model).__name__)
    """)
    assert done.returncode == 0 and "GPT2LMHeadModel" in done.stdout, (
        f"`from transformers import GPT2LMHeadModel` fails in a fresh interpreter; fix the install: {FIX}\n"
        + done.stderr[-2000:])


def test_torchvision_is_usable_or_not_installed():
    if not _torchvision_installed():
        return  # removed by the README's install step: transformers runs without it
    done = _run("import torchvision.ops; import timm; print(timm.create_model('resnet10t', pretrained=False).__class__)")
    assert done.returncode == 0, f"torchvision is installed but cannot load; fix the install: {FIX}\n" + done.stderr[-2000:]


@pytest.mark.skipif(_torchvision_installed(), reason="torchvision works here: timm imports directly")
def test_timm_models_run_through_the_zoo_without_torchvision():
    done = _run("""
        import torch
        from minidynamo import zoo
        model, args, kwargs = zoo.resnet10t()
        print(tuple(model(*args, **kwargs).shape))
    """)
    assert done.returncode == 0, done.stderr[-2000:]

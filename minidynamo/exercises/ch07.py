"""Exercises of chapter 07 (the dispatcher): where the Python key runs; what inference drops.

Place in the pipeline: none; ``notebooks/07_the_dispatcher.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
The checks run the experiment themselves (``dispatch.trace``) or ask the real
dispatcher (``torch._C._dispatch_keys``), so an answer is judged by observation.
"""

from __future__ import annotations

import torch

from minidynamo.exercises import NotYet, correct

__all__ = [
    "check_python_key_position",
    "solution_python_key_position",
    "check_inference_drops",
    "solution_inference_drops",
]


def _observed_with_mode() -> list[str]:
    from minidynamo import dispatch

    with dispatch.probe() as p:
        tr = dispatch.trace(p, torch.randn(3), mode=True)
    return [s.key for s in tr if s.phase == "forward" and not s.inferred]


def check_python_key_position(answer) -> str:
    """``answer``: a dict with ``"first"`` (the key whose handler runs first when a
    TorchDispatchMode is active) and ``"just_before"`` (the key whose handler runs
    right before the Python key's)."""
    if answer is None:
        raise NotYet('no answer yet: give {"first": KEY, "just_before": KEY}')
    if not isinstance(answer, dict) or set(answer) != {"first", "just_before"}:
        raise NotYet('give a dict with exactly the keys "first" and "just_before"')
    ran = _observed_with_mode()
    before = ran[ran.index("Python") - 1]
    if answer["first"] != ran[0]:
        raise NotYet(f"{answer['first']!r} is not the first handler; run dispatch.trace(p, x, mode=True) and look")
    if answer["just_before"] != before:
        raise NotYet(f"{answer['just_before']!r} does not run right before Python; the trace says otherwise")
    return correct(
        f"{ran[0]} runs first and Python runs after {before}, just before the backend: "
        "the mode sees the op below autograd"
    )


def solution_python_key_position():
    from minidynamo import dispatch

    with dispatch.probe() as p:
        tr = dispatch.trace(p, torch.randn(3), mode=True)
    ran = [s.key for s in tr if not s.inferred]
    return {"first": ran[0], "just_before": ran[ran.index("Python") - 1]}


def _names(keyset) -> set[str]:
    text = str(keyset)
    return {n for n in text[text.index("(") + 1 : text.rindex(")")].split(", ") if n}


def check_inference_drops(answer) -> str:
    """``answer``: the set of dispatch keys a CPU tensor made under ``torch.inference_mode``
    does not carry but a normal CPU tensor does."""
    if answer is None:
        raise NotYet("no answer yet: give a set of key names, e.g. {'SomeKey'}")
    if isinstance(answer, str) or not hasattr(answer, "__iter__"):
        raise NotYet("give a set of key names")
    from minidynamo._torch_private import dispatch_keys

    with torch.inference_mode():
        inf = torch.randn(2)
    want = _names(dispatch_keys(torch.randn(2))) - _names(dispatch_keys(inf))
    got = set(answer)
    if got != want:
        raise NotYet(f"not quite: {len(want)} keys differ; you named {sorted(got)}")
    return correct(
        "an inference tensor carries neither Autograd<device> nor ADInplaceOrView, so autograd is skipped; "
        "ADInplaceOrView can still run, because the thread's include set adds it outside inference_mode "
        "(the trace of the inference tensor above shows it)"
    )


def solution_inference_drops():
    from minidynamo import dispatch

    with torch.inference_mode():
        inf = torch.randn(2)
    return set(dispatch.tensor_keys(torch.randn(2))) - set(dispatch.tensor_keys(inf))

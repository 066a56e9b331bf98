"""Exercises of chapter 00 (welcome): the pipeline's order, and the three fake passes.

Place in the pipeline: none; ``notebooks/00_welcome.ipynb`` calls these checks.
See ``minidynamo/exercises/__init__.py`` for the check_NAME / solution_NAME convention.
"""

from __future__ import annotations

from minidynamo.exercises import NotYet, correct

__all__ = [
    "PIPELINE_STAGES",
    "check_pipeline_order",
    "solution_pipeline_order",
    "check_fake_passes",
    "solution_fake_passes",
]

# The stages of DESIGN.md's pipeline, in the order a function goes through them.
PIPELINE_STAGES = (
    "bytecode",
    "interpreter",
    "symbolic",
    "fake",
    "dispatch",
    "aot.metadata",
    "aot.joint",
    "aot.partition",
    "aot.runtime",
    "backends",
)


def check_pipeline_order(answer) -> str:
    """``answer``: the stage names of ``PIPELINE_STAGES`` in pipeline order (a list)."""
    if answer is None:
        raise NotYet("no answer yet: give a list of the stage names, first stage first")
    if isinstance(answer, str) or not hasattr(answer, "__iter__"):
        raise NotYet(f"give a list of stage names, not a {type(answer).__name__}")
    answer = list(answer)
    unknown = [name for name in answer if name not in PIPELINE_STAGES]
    if unknown:
        raise NotYet(f"unknown stage names {unknown}; the stages are {sorted(PIPELINE_STAGES)}")
    missing = [name for name in PIPELINE_STAGES if name not in answer]
    if missing or len(answer) != len(PIPELINE_STAGES):
        raise NotYet(f"each stage exactly once, please; missing {missing}, given {len(answer)} names")
    for i, (got, want) in enumerate(zip(answer, PIPELINE_STAGES)):
        if got != want:
            before = PIPELINE_STAGES[i - 1] if i else "the Python function"
            raise NotYet(f"position {i}: {got!r} is not what comes right after {before!r}")
    return correct("a function goes bytecode -> ... -> backends, one module per stage")


def solution_pipeline_order():
    return [
        "bytecode",       # decode the instructions
        "interpreter",    # run them concretely (the loop Dynamo's is modelled on)
        "symbolic",       # run them on VariableTrackers -> fx graph (Dynamo)
        "fake",           # fake tensors give Dynamo each op's output metadata
        "dispatch",       # the dispatcher routes every op through its keys
        "aot.metadata",   # AOTAutograd learns mutations and aliasing
        "aot.joint",      # ... traces forward + backward together
        "aot.partition",  # ... splits them
        "aot.runtime",    # ... and wraps the compiled graphs
        "backends",       # a backend compiles the graphs
    ]


def check_fake_passes(answer) -> str:
    """``answer``: a dict {pass name: what it is for} for each fake-tensor pass over a forward.

    Pass names are DESIGN.md's event-log names: "dynamo", "aot_metadata", "aot_joint".
    """
    if answer is None:
        raise NotYet("no answer yet: give a dict mapping each pass name to its purpose")
    if not isinstance(answer, dict):
        raise NotYet(f"give a dict {{pass name: purpose}}, not a {type(answer).__name__}")
    want = {"dynamo", "aot_metadata", "aot_joint"}
    got = set(answer)
    if got != want:
        extra, missing = sorted(got - want), sorted(want - got)
        raise NotYet(f"there are {len(want)} passes; missing {missing}, unexpected {extra}")
    keywords = {
        "dynamo": ("output", "stack", "shape", "graph"),
        "aot_metadata": ("mutat", "alias"),
        "aot_joint": ("backward", "joint", "aten"),
    }
    for name, words in keywords.items():
        purpose = str(answer[name]).lower()
        if not any(word in purpose for word in words):
            raise NotYet(f"the purpose of {name!r} should mention one of {list(words)}; got {answer[name]!r}")
    return correct("three passes: Dynamo's, AOTAutograd's metadata pass, and its joint-graph trace")


def solution_fake_passes():
    return {
        "dynamo": "compute each op's fake output (shape, dtype) to push on the symbolic stack",
        "aot_metadata": "find which inputs are mutated and which outputs alias inputs",
        "aot_joint": "trace the ATen-level joint forward and backward graph",
    }

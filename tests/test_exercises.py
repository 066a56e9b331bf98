"""Every chapter's exercise checks accept their own solution and reject a wrong answer.

Generic over ``minidynamo/exercises/chNN.py`` (convention in
``minidynamo/exercises/__init__.py``): for each ``check_NAME`` there is a
``solution_NAME``; the solution passes and returns a message starting "Correct";
``None`` (a reader who has not answered) raises ``NotYet`` with a message.
Each test carries its chapter's marker, so ``pytest -m ch03`` grades chapter 3 too.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import minidynamo.exercises as exercises_pkg
from minidynamo.exercises import NotYet

_MODULE = re.compile(r"^ch(\d\d)$")


def _chapter_modules():
    found = []
    for info in pkgutil.iter_modules(exercises_pkg.__path__):
        match = _MODULE.match(info.name)
        if match:
            found.append((match.group(1), info.name))
    return sorted(found)


def _exercise_params():
    params = []
    for number, modname in _chapter_modules():
        module = importlib.import_module(f"minidynamo.exercises.{modname}")
        names = sorted(n[len("check_"):] for n, obj in vars(module).items() if n.startswith("check_") and callable(obj))
        marks = [getattr(pytest.mark, f"ch{number}")]
        if not names:
            params.append(pytest.param(modname, None, marks=marks, id=f"{modname}-no-checks"))
        for name in names:
            params.append(pytest.param(modname, name, marks=marks, id=f"{modname}.{name}"))
    return params


PARAMS = _exercise_params()


def test_there_are_exercise_modules():
    assert any(modname == "ch00" for _n, modname in _chapter_modules()), "minidynamo/exercises/ch00.py is missing"


@pytest.mark.parametrize("modname,name", PARAMS)
def test_solution_passes_its_check(modname, name, capsys):
    module = importlib.import_module(f"minidynamo.exercises.{modname}")
    assert name is not None, f"{modname} defines no check_NAME functions"
    solution = getattr(module, f"solution_{name}", None)
    assert solution is not None, f"{modname}.check_{name} has no solution_{name}"
    assert not inspect.signature(solution).parameters or all(
        p.default is not inspect.Parameter.empty for p in inspect.signature(solution).parameters.values()
    ), f"{modname}.solution_{name} must be callable with no arguments"
    result = getattr(module, f"check_{name}")(solution())
    assert isinstance(result, str) and result.startswith("Correct"), (
        f"{modname}.check_{name}(solution_{name}()) returned {result!r}; expected a message starting 'Correct'"
    )


@pytest.mark.parametrize("modname,name", PARAMS)
def test_wrong_answer_raises_notyet(modname, name):
    module = importlib.import_module(f"minidynamo.exercises.{modname}")
    assert name is not None, f"{modname} defines no check_NAME functions"
    check = getattr(module, f"check_{name}")
    with pytest.raises(NotYet) as info:
        check(None)
    assert str(info.value).strip(), f"{modname}.check_{name}(None) raised NotYet without a message"


@pytest.mark.ch00
def test_ch00_rejects_a_wrong_order_with_the_position():
    from minidynamo.exercises import ch00

    wrong = ch00.solution_pipeline_order()
    wrong[2], wrong[3] = wrong[3], wrong[2]
    with pytest.raises(NotYet, match="position 2"):
        ch00.check_pipeline_order(wrong)
    with pytest.raises(NotYet, match="aot_metadata"):
        ch00.check_fake_passes({"dynamo": "output shapes", "aot_joint": "joint graph"})


def test_feedback_counts_agree_in_number():
    """Feedback says "1 graph" and "3 breaks", never "1 graphs" or "time(s)"."""
    import pathlib
    import re

    from minidynamo.exercises import counted

    assert counted(1, "graph") == "1 graph" and counted(3, "break") == "3 breaks" and counted(0, "time") == "0 times"
    folder = pathlib.Path(__file__).resolve().parents[1] / "minidynamo" / "exercises"
    # An f-string field followed by a plural count noun is a count that can be 1: use counted().
    bare = re.compile(r"\{[^{}]*(count|len\()[^{}]*\} (graphs|breaks|times|recompiles|guards|ops|entries)\b")
    offenders = []
    for path in sorted(folder.glob("*.py")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            if "(s)" in line or bare.search(line):
                offenders.append(f"{path.name}:{lineno}: {line.strip()}")
    assert not offenders, "counts without their number agreement (use exercises.counted):\n" + "\n".join(offenders)

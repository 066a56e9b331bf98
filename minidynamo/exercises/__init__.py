"""Checked exercises, one module per chapter (``minidynamo.exercises.ch03`` ...).

Place in the pipeline: none; the chapters' exercises call these checks.

Convention, which ``tests/test_exercises.py`` relies on: a chapter module defines,
for each exercise NAME, a pair

    check_NAME(answer)   raises ``NotYet`` saying what is wrong, or returns a
                         short message starting with "Correct"
    solution_NAME()      the answer an instructor can reveal; it must pass check_NAME

A notebook cell calls ``check_NAME(my_answer)``; a reader who is stuck calls
``show_solution(chNN.solution_NAME)`` to print the solution's source.
"""

from __future__ import annotations

import inspect

__all__ = ["NotYet", "correct", "counted", "show_solution"]


class NotYet(AssertionError):
    """The reader's answer is not right yet; the message says what is wrong."""


def correct(message: str = "") -> str:
    """What a check returns (and prints) when the answer is right."""
    text = "Correct" + (f": {message}" if message else ".")
    print(text)
    return text


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` with its noun in the right number: ``counted(1, "graph")`` is "1 graph",
    ``counted(3, "break")`` is "3 breaks", ``counted(1, "time")`` is "1 time"."""
    word = singular if n == 1 else (plural or singular + "s")
    return f"{n} {word}"


def show_solution(solution) -> None:
    """Print the source of a ``solution_NAME`` function (for instructors)."""
    print(inspect.getsource(solution))

"""No typed figure: a count or time a chapter's prose quotes is one its cells print.

A number in a markdown cell followed by a count word or a unit ("3 graphs", "12 ops",
"30 µs", "85 to 130 µs", "4x") must appear, as a number, in some saved output of the
same notebook. A figure typed into the prose drifts from what the cells print the
moment the code changes; printed, it cannot. (A heuristic: it reads figures only where
a count word follows the number; code spans are quoted code and are skipped.)

Numbers that are not figures of a run (a PEP's number, a fixed constant of torch named
in its source) go in ``NOT_FIGURES`` with the reason. Chapters whose owner has yet to
print a figure are marked in ``PENDING`` with the owner, so the suite stays green
while they do; the marker is not strict, so remove it when the chapter passes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

_UNITS = (
    r"graphs?|graph breaks?|breaks?|ops?|operators?|nodes?|placeholders?|guards?|entries|entry|recompiles?|"
    r"recompilations?|passes|calls?|instructions?|tensors?|values?|inputs?|outputs?|frames?|kernels?|keys?|"
    r"dispatches|lines?|times|bytes?|KiB|MiB|GiB|KB|MB|GB|ns|us|µs|ms|s|seconds?|minutes?|%|x|×"
)
_NUM = r"(\d+(?:\.\d+)?)"
FIGURE = re.compile(
    rf"(?<![\w.`/-]){_NUM}(?:\s*(?:to|-|–)\s*{_NUM})?(?:\s|-)?(?:{_UNITS})(?![\w-])"
)

# (chapter, figure text as found) -> why it is not a figure a cell should print.
NOT_FIGURES: dict[tuple[str, str], str] = {}

# chapter -> who is printing its figures (issue 27's list; not strict: remove once it passes).
PENDING: dict[str, str] = {
}


def _outputs(cells: list[dict]) -> str:
    texts = []
    for cell in cells:
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            data = out.get("data", {})
            for part in (out.get("text"), data.get("text/plain"), data.get("text/html"), data.get("text/markdown")):
                if part:
                    texts.append("".join(part))
    return "\n".join(texts)


def typed_figures(nb: Path) -> list[str]:
    """The figures of ``nb``'s markdown that no output of ``nb`` contains."""
    cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
    printed = set(re.findall(r"\d+(?:\.\d+)?", _outputs(cells)))
    chapter = nb.name[:2]
    missing = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        prose = re.sub(r"`[^`\n]*`", "", "".join(cell["source"]))
        for match in FIGURE.finditer(prose):
            if (chapter, match.group(0)) in NOT_FIGURES:
                continue
            numbers = [n for n in match.groups() if n]
            if any(n not in printed for n in numbers):
                missing.append(f"cell {index}: {match.group(0)!r} in '...{prose[max(0, match.start() - 50):match.end()]}'")
    return missing


def test_the_heuristic_finds_a_typed_figure(tmp_path):
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": ["It makes 3 graphs in 12 ms; `7 ops` is code. Chapter 5."]},
            {"cell_type": "code", "source": [], "outputs": [{"output_type": "stream", "text": ["graphs: 3\n"]}]},
        ]
    }
    path = tmp_path / "99_x.ipynb"
    path.write_text(json.dumps(nb))
    found = typed_figures(path)
    assert len(found) == 1 and "12 ms" in found[0], found


@pytest.mark.parametrize("nb", CHAPTERS, ids=[nb.name[:2] for nb in CHAPTERS])
def test_prose_figures_are_printed(nb, request):
    if nb.name[:2] in PENDING:
        request.applymarker(pytest.mark.xfail(reason=PENDING[nb.name[:2]], strict=False))
    missing = typed_figures(nb)
    assert not missing, f"{nb.name}: figures in the prose that no cell prints (print them or read them from the output):\n" + "\n".join(missing)

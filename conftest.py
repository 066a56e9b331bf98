"""Mark every notebook cell with its chapter, so ``pytest -m ch03`` runs chapter 3 too."""

import re

import pytest

_CHAPTER = re.compile(r"^(\d\d)_")


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = getattr(item, "path", None)
        if path is None or path.suffix != ".ipynb":
            continue
        match = _CHAPTER.match(path.name)
        if match:
            item.add_marker(getattr(pytest.mark, f"ch{match.group(1)}"))

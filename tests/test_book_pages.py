"""The book's own pages stay true to the code and the chapters, without building the book.

- ``book/module_map.md`` is what ``python -m minidynamo.module_map`` writes from the
  modules' docstrings (stale or missing a module: regenerate with ``--write``);
- every chapter ``notebooks/NN_*.ipynb`` is in ``_toc.yml`` (its glob) and in the
  chapter map of ``intro.md``;
- every glossary term links to a chapter that exists, to a heading that exists in it,
  and that chapter uses the term.

(``test_book.py`` builds the book and checks the rendered links; these run in a second.)
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

import pytest
from docutils.nodes import make_id

pytestmark = pytest.mark.ch00

ROOT = Path(__file__).resolve().parents[1]
BOOK = ROOT / "book"
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ROLE = re.compile(r"\{chapter\}`(?:[^`<]*<)?(\d\d)(?:#([^`>]+))?>?`")


def _cells(nb: Path) -> list[dict]:
    return json.loads(nb.read_text(encoding="utf-8"))["cells"]


def _chapter(number: str) -> Path | None:
    found = [nb for nb in CHAPTERS if nb.name.startswith(f"{number}_")]
    return found[0] if found else None


def _heading_ids(nb: Path) -> set[str]:
    """The HTML ids Sphinx gives the chapter's headings (docutils ``make_id`` of the title)."""
    ids = set()
    for cell in _cells(nb):
        if cell["cell_type"] != "markdown":
            continue
        for line in "".join(cell["source"]).splitlines():
            match = re.match(r"#{1,6} (.+)", line)
            if match:
                ids.add(make_id(match.group(1).replace("`", "")))
    return ids


def _text(nb: Path) -> str:
    return "\n".join("".join(c["source"]) for c in _cells(nb)).lower().replace("`", "")


def test_module_map_is_generated_from_the_docstrings():
    from minidynamo import module_map

    page = module_map.PAGE.read_text(encoding="utf-8")
    assert page == module_map.render(), (
        "book/module_map.md is stale (a module added, moved or re-described): "
        "run `python -m minidynamo.module_map --write`"
    )
    listed = set(re.findall(r"^\| `([\w/]+\.py)` \|", page, re.MULTILINE))
    on_disk = {p.relative_to(module_map.PACKAGE).as_posix() for p in module_map.modules()}
    assert on_disk == listed, f"modules missing from the map: {sorted(on_disk - listed)}"


def test_module_map_names_a_torch_counterpart_for_each_pipeline_module():
    """The stages of the pipeline (symbolic, fake, dispatch, aot) each say what torch file they mirror."""
    from minidynamo import module_map

    unnamed = [
        p.relative_to(module_map.PACKAGE).as_posix()
        for p in module_map.modules()
        if p.parent.name in ("symbolic", "variables", "fake", "dispatch", "aot", "shapes", "interpreter", "bytecode")
        and p.name != "__init__.py"
        and not module_map.mirrors(module_map._docstring(p))
    ]
    assert not unnamed, f"these modules' docstrings name no torch file they mirror: {unnamed}"


def test_every_chapter_is_in_the_toc():
    toc = (BOOK / "_toc.yml").read_text(encoding="utf-8")
    globs = re.findall(r"glob: (\S+)", toc)
    files = re.findall(r"file: (\S+)", toc)
    missing = [
        nb.name
        for nb in CHAPTERS
        if not any(fnmatch.fnmatch(f"notebooks/{nb.stem}", g) for g in globs) and f"notebooks/{nb.stem}" not in files
    ]
    assert not missing, f"chapters not in book/_toc.yml: {missing}"
    # The comment must not name a last chapter that goes stale when one is added.
    comment = " ".join(line for line in toc.splitlines() if line.startswith("#"))
    named = re.findall(r"\b(\d\d)_\w+", comment)
    assert all(_chapter(n) for n in named), f"_toc.yml's comment names chapters that do not exist: {named}"


def test_every_chapter_is_in_the_intro_chapter_map():
    intro = (BOOK / "intro.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| (\d\d) \| \{chapter\}`(\d\d)` \|", intro, re.MULTILINE))
    missing = [nb.name for nb in CHAPTERS if (nb.name[:2], nb.name[:2]) not in rows]
    assert not missing, f"chapters missing from the chapter map of book/intro.md: {missing}"


def _glossary() -> list[tuple[str, str]]:
    text = (BOOK / "glossary.md").read_text(encoding="utf-8")
    block = text.split("```{glossary}")[1].split("```\n")[0]
    entries, term, body = [], None, []
    for line in block.splitlines():
        if line and not line.startswith(" "):
            if term:
                entries.append((term, " ".join(body)))
            term, body = line.strip(), []
        elif line.strip():
            body.append(line.strip())
    if term:
        entries.append((term, " ".join(body)))
    return entries


def test_glossary_has_terms():
    assert len(_glossary()) >= 30


@pytest.mark.parametrize("term,definition", _glossary(), ids=[t for t, _ in _glossary()])
def test_glossary_term_is_used_where_it_links(term, definition):
    """The chapter a term links to (first link) exists, has the heading linked, and uses the term."""
    links = ROLE.findall(definition)
    assert links, f"{term!r}: the definition links no chapter"
    for number, anchor in links:
        nb = _chapter(number)
        assert nb is not None, f"{term!r} links chapter {number}, which does not exist"
        if anchor:
            assert anchor in _heading_ids(nb), f"{term!r} links {number}#{anchor}: no such heading in {nb.name}"
    number, _ = links[0]
    word = term.replace("`", "").lower()
    assert word in _text(_chapter(number)), f"{term!r}: chapter {number}, the first it links, never uses the term"

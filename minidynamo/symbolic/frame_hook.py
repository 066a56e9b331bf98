"""The PEP 523 frame hook (``frame_hook.c``): built on first use, or the reason it is not there.

Place in the pipeline: the entry point. While a compiled function runs, CPython hands
every fresh frame to ``frame_hook.c``, which asks the running ``CompileConfig``'s
``frame_callback`` (``eval_frame.py``, Note [The frame hook]) whether to run a cache
entry or let CPython run the frame. Mirrors ``torch/csrc/dynamo/eval_frame.c``
(``set_eval_frame``, ``callback_from_eval_frame``) and its Python side
``torch/_dynamo/eval_frame.py`` (``_TorchDynamoContext``).

The first call in a fresh environment compiles ``frame_hook.c`` with the C compiler
Python was built with (about a second) into ``~/.cache/minidynamo/<name>/``
(``MINIDYNAMO_CACHE`` moves it), the name carrying a hash of the source and of
Python's version, so a changed file is a new build. Where it cannot be built (no C
compiler, no Python headers, a Python other than CPython 3.11-3.13) or
``MINIDYNAMO_NO_FRAME_HOOK=1`` is set, ``get()`` returns None, ``reason()`` says why,
and compiled code calls resume functions and callees through the cache explicitly
(Note [No PEP 523: calls go through the cache explicitly]).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator, Optional

_SOURCE = Path(__file__).with_name("frame_hook.c")
_MODULE = "minidynamo_frame_hook"  # the C file's PyInit_ name
_state: dict[str, Any] = {}
ON_BY_DEFAULT = True  # MINIDYNAMO_NO_FRAME_HOOK=1 turns it off (the explicit-call design)


def get() -> Optional[ModuleType]:
    """The C module (``set_callback``, ``call_with``, ``SKIP``, ``DEFAULT``, ``stats``), or None."""
    if "module" not in _state:
        _state["module"], _state["reason"] = _load()
    return _state["module"]


def build() -> Optional[ModuleType]:
    """The C module whether or not it is on by default (tests, benchmarks); None where it cannot build."""
    if get() is None and "built" not in _state:
        _state["built"] = _load(force=True)
    return get() or _state["built"][0]


@contextlib.contextmanager
def using(on: bool = True) -> Iterator[Optional[ModuleType]]:
    """Functions compiled inside use the hook (``on``, where it builds) or the explicit calls."""
    get()
    saved = dict(_state)
    module = build() if on else None
    _state.update(module=module, reason="" if module else "inside frame_hook.using(False)")
    try:
        yield module
    finally:
        _state.clear()
        _state.update(saved)


def reason() -> str:
    """Why the frame hook is not used ("" when it is)."""
    get()
    return _state["reason"]


def describe() -> str:
    """Which entry point runs: what ``md.explain(...).frame_hook`` says."""
    if get() is not None:
        return "PEP 523 frame hook (frame_hook.c): every fresh frame passes the cache"
    return f"explicit calls through the cache, no frame hook: {reason()}"


def build_location() -> tuple[Path, Path]:
    """The build folder and the extension file inside it."""
    digest = hashlib.sha256(_SOURCE.read_bytes())
    digest.update(f"{sys.version} {sys.platform} {sys.executable}".encode())
    root = Path(os.environ.get("MINIDYNAMO_CACHE") or Path.home() / ".cache" / "minidynamo").expanduser()
    folder = root / f"{_MODULE}_{digest.hexdigest()[:12]}"
    return folder, folder / (_MODULE + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))


def _build(target: Path) -> None:
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    include = sysconfig.get_paths()["include"]
    target.parent.mkdir(parents=True, exist_ok=True)
    # build beside the target, then rename: two processes building at once never see half a file
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        cmd = [*cc, "-shared", "-fPIC", "-O2", "-w", f"-I{include}", str(_SOURCE), "-o", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)  # noqa: S603
        if done.returncode != 0:
            raise RuntimeError((done.stderr or done.stdout).strip().splitlines()[0][:200])
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _load(force: bool = False) -> tuple[Optional[ModuleType], str]:
    if os.environ.get("MINIDYNAMO_NO_FRAME_HOOK"):
        return None, "MINIDYNAMO_NO_FRAME_HOOK is set"
    if not (force or ON_BY_DEFAULT or os.environ.get("MINIDYNAMO_FRAME_HOOK")):
        return None, "the frame hook is turned off here (ON_BY_DEFAULT is False; MINIDYNAMO_FRAME_HOOK=1 turns it on)"
    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 13):
        return None, f"the hook supports CPython 3.11-3.13, not {sys.implementation.name} {sys.version.split()[0]}"
    try:
        _, built = build_location()
        if not built.exists():
            _build(built)
        spec = importlib.util.spec_from_file_location(_MODULE, built)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module, ""
    except Exception as e:  # noqa: BLE001 - no compiler, no headers: the explicit-call design still works
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return None, f"frame_hook.c could not be built ({type(e).__name__}: {first[:200]})"

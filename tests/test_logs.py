"""The log switch: ``MINIDYNAMO_LOGS`` / ``md.set_logs`` against ``TORCH_LOGS`` / ``torch._logging.set_logs``.

Differential: one program (a graph break, then a recompile) runs in a fresh interpreter
under ``TORCH_LOGS=graph_breaks,recompiles,graph_code`` with ``torch.compile`` and under
``MINIDYNAMO_LOGS=graph_breaks,recompiles,graph_code`` with ``md.compile``; both stderrs
are parsed the same way. Every log line has torch's prefix shape; each artifact appears
in both; the first lines of a graph break, a recompile and a traced graph say the same
thing (the user's file:line, the function, the compile ids).
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

import minidynamo as md
from minidynamo import events, logs

pytestmark = [pytest.mark.ch13]

PROGRAM = textwrap.dedent('''
    import sys
    import torch

    def f(x, n):
        y = x.sin() * n
        print("between the graphs")
        return y.cos()

    if sys.argv[1] == "torch":
        g = torch.compile(f, backend="eager")
    else:
        import minidynamo as md
        g = md.compile(f, backend="eager")
    g(torch.randn(3), 2)
    g(torch.randn(3), 3)
''')
BREAK_LINE, DEF_LINE = 7, 5  # lines of PROGRAM (it starts with a newline)
PREFIX = re.compile(r"^(?P<level>[VIWEC])\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ (?P<where>\S+\.py:\d+)\] "
                    r"\[(?P<id>\d+/\d+)(_\d+)?\] (\[__(?P<artifact>\w+)\] )?(?P<text>.*)$")
ARTIFACTS = "graph_breaks,recompiles,graph_code"


def _run(which: str, tmp_path) -> dict[str, list[tuple[str, str]]]:
    path = tmp_path / "program.py"
    path.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env["TORCH_LOGS" if which == "torch" else "MINIDYNAMO_LOGS"] = ARTIFACTS
    env.pop("MINIDYNAMO_LOGS" if which == "torch" else "TORCH_LOGS", None)
    done = subprocess.run([sys.executable, str(path), which], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    by_artifact: dict[str, list[tuple[str, str]]] = {}
    for line in done.stderr.splitlines():
        m = PREFIX.match(line)
        if m and m["artifact"]:
            by_artifact.setdefault(m["artifact"], []).append((m["id"], m["text"]))
        elif m is None and line.startswith(("V1", "I1", "W1")):  # a log line of another shape
            raise AssertionError(f"{which}: a log line without torch's prefix shape: {line!r}")
    return by_artifact, str(path)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    return _run("torch", tmp_path_factory.mktemp("torch_logs")), _run("ours", tmp_path_factory.mktemp("our_logs"))


def test_every_artifact_is_logged_by_both(both):
    (theirs, _), (ours, _) = both
    assert set(ARTIFACTS.split(",")) <= set(theirs) and set(ARTIFACTS.split(",")) <= set(ours), (
        sorted(theirs), sorted(ours))


def test_a_graph_break_starts_as_torchs(both):
    (theirs, their_path), (ours, our_path) = both
    t = [text for _, text in theirs["graph_breaks"]]
    o = [text for _, text in ours["graph_breaks"]]
    assert t[0] == f"Graph break in user code at {their_path}:{BREAK_LINE}"
    assert o[0] == f"Graph break in user code at {our_path}:{BREAK_LINE}"
    for lines in (t, o):
        assert lines[1].startswith("Graph Break Reason: Encountered graph break when attempting to trace CALL")
        assert "Failed to trace builtin operator" in lines  # the registry's gb_type, on a line of its own
        assert any(ln.startswith("  Explanation: ") for ln in lines)
        assert any(ln.startswith("  Developer debug context: ") for ln in lines)
        assert "User code traceback:" in lines
    assert t[1] == o[1]  # torch's words for the instruction: "CALL: a function call, e.g. f(x, y):"
    assert theirs["graph_breaks"][0][0] == ours["graph_breaks"][0][0] == "0/0"


def test_a_recompile_starts_as_torchs(both):
    (theirs, their_path), (ours, our_path) = both
    t = [text for _, text in theirs["recompiles"]]
    o = [text for _, text in ours["recompiles"]]
    assert t[0] == f"Recompiling function f in {their_path}:{DEF_LINE}"
    assert o[0] == f"Recompiling function f in {our_path}:{DEF_LINE}"
    assert t[1] == o[1] == "    triggered by the following guard failure(s):"
    assert t[2].startswith("    - 0/0: n == 2") and o[2].startswith("    - 0/0: n == 2")  # the failed guard
    assert theirs["recompiles"][0][0] == ours["recompiles"][0][0] == "0/1"


def test_a_traced_graph_starts_as_torchs(both):
    (theirs, _), (ours, _) = both
    for records in (theirs["graph_code"], ours["graph_code"]):
        texts = [text for _, text in records]
        assert texts[0] == "TRACED GRAPH"
        assert re.fullmatch(r" ===== \S+ =====", texts[1])
        assert any("def forward(self" in t for t in texts)


def test_set_logs_names_torchs_artifacts_and_turns_off():
    with pytest.raises(ValueError, match="graph_breakz"):
        md.set_logs(graph_breakz=True)
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record)

    logger = logs.get_artifact_logger("graph_breaks")
    assert logger.name == "minidynamo.symbolic.convert_frame.__graph_breaks"
    handler = Keep()
    logger.addHandler(handler)
    try:
        md.set_logs(graph_breaks=True)

        def f(x):
            y = x + 1
            print("x", end="")
            return y * 2

        md.compile(f, backend="eager")(torch.randn(2))
        assert len(seen) == 1 and seen[0].getMessage().startswith("Graph break in user code at")
        md.set_logs()
        assert not events.is_recording()
        md.reset()
        md.compile(f, backend="eager")(torch.randn(2))
        assert len(seen) == 1
    finally:
        md.set_logs()
        logger.removeHandler(handler)

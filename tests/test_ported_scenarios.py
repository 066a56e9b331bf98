"""Scenarios ported from PyTorch's test/dynamo (``minidynamo/corpus/dynamo_scenarios*.py``).

Each scenario calls a compiled callable, changes the world (a global, a module
attribute, a hook, the parameters' order, grad mode), and calls again. It runs three
times from a fresh world: eagerly, through ``md.compile`` and through ``torch.compile``,
both with a counting backend.

* Ours must log what eager logs, call for call (results, the user's exceptions, what
  was printed, the arguments after the call, what the scenario reads back); a wrong
  value or a stale cache entry fails at once, and so does an internal error of ours.
* The graphs handed to the backend after each call must equal torch's, except the
  scenarios in ``COUNT_DIFFERENCES`` (each with the reason; the test checks that each
  still differs, so the table cannot go stale).
"""

from __future__ import annotations

import pytest

from minidynamo.corpus.dynamo_scenarios import SCENARIOS, run
from minidynamo.corpus.dynamo_testing import same

pytestmark = [pytest.mark.ch04, pytest.mark.usefixtures("real_dynamo")]

# Scenarios where ours is wrong today, each with the reason (strict: a fix turns it into a failure).
WRONG: dict[str, str] = {}

# Scenarios whose graph counts differ from torch's while ours stays right, each with the reason.
COUNT_DIFFERENCES: dict[str, str] = {
    "store_global_new_name": "torch.compile hands the backend no graph for a frame that binds a new module global; "
    "ours compiles one graph and replays the store",
    "dataclass_argument_mutated": "ours recompiles when s.name changes (the returned f-string read it); torch hands "
    "the backend no new graph for that call",
    "keyerror_caught_then_key_added": "a frame that raises (a KeyError caught in the frame) runs eagerly in ours; "
    "torch traces it (and is wrong once the key exists: TORCH_WRONG)",
    "dicts_keyed_by_dtype_and_enum": "ours breaks on a dict keyed by a dtype or an enum (its keys guard and item "
    "sources are written as literals): the frame runs eagerly; torch traces it (and is wrong when the enum "
    "argument changes: TORCH_WRONG)",
    "forward_hook_on_the_compiled_module": "torch compiles the module's forward and its forward hook as two frames "
    "(2 graphs at the first call); ours traces the call with its hooks as one graph",
    "submodule_order_changed": "ours breaks on a dict keyed by modules (weight[m]): the frame runs eagerly; torch "
    "guards such keys by identity",
    "layer_appended_to_module_list": "after `del layers[0]` the list holds one Linear(4, 4) again: ours guards "
    "modules by type and layout (parameters are graph inputs) and reuses the first entry; torch recompiles",
    "global_defaultdict_history": "ours breaks the graph at `HISTORY['loss']` (a collections.defaultdict is not "
    "traced) and runs the rest eagerly, so the growing lists cause no recompile; torch guards their lengths "
    "and recompiles every call",
}

# Scenarios where torch 2.13 itself is wrong (eager is the oracle), each with what it does. Checked to still be
# wrong, so the list cannot go stale when torch is fixed.
TORCH_WRONG: dict[str, str] = {
    "keyerror_caught_then_key_added": "torch.compile reuses the entry traced when table['w'] raised KeyError after "
    "the key is added: x * 1.0 where eager gives x * 3.0 (no guard that the key is still absent)",
    "dicts_keyed_by_dtype_and_enum": "called with _Act.TANH after _Act.RELU, torch.compile reuses the RELU entry "
    "(G_BY_ENUM[act] with an enum argument: no guard on the enum) and returns relu(x)",
}


def _params(names, marks_for=None):
    marks_for = marks_for or {}
    return [pytest.param(n, id=n, marks=[pytest.mark.xfail(strict=True, reason=marks_for[n])] if n in marks_for else [])
            for n in names]


_runs: dict = {}


def _run(name, system):
    """Each scenario runs once per system in a session (each run starts from a fresh world)."""
    if (name, system) not in _runs:
        _runs[name, system] = run(SCENARIOS[name], system)
    return _runs[name, system]


def _torch(name):
    return _run(name, "torch")


@pytest.mark.parametrize("name", _params(SCENARIOS, WRONG))
def test_ours_logs_what_eager_logs(name):
    eager, ours = _run(name, "eager"), _run(name, "ours")
    assert not ours.internal_errors, ours.internal_errors
    assert len(ours.log) == len(eager.log), (ours.log, eager.log)
    for i, (got, want) in enumerate(zip(ours.log, eager.log)):
        same(want, got, f"{name} step {i}")


@pytest.mark.parametrize("name", _params([n for n in SCENARIOS if n not in COUNT_DIFFERENCES]))
def test_graph_counts_equal_torch(name):
    theirs, ours = _torch(name), _run(name, "ours")
    assert ours.counts == theirs.counts, f"graphs after each call: ours {ours.counts}, torch {theirs.counts}"


@pytest.mark.parametrize("name", _params(list(COUNT_DIFFERENCES)))
def test_count_difference_still_differs(name):
    assert _run(name, "ours").counts != _torch(name).counts, f"{name} agrees now: remove it"


def test_torch_agrees_with_eager_except_where_listed():
    """The oracle is eager; torch's own runs are checked too, so a scenario cannot hide a torch quirk."""
    differ = []
    for name in SCENARIOS:
        theirs, eager = _torch(name), _run(name, "eager")
        try:
            assert len(theirs.log) == len(eager.log)
            for want, got in zip(eager.log, theirs.log):
                same(want, got)
        except AssertionError:
            differ.append(name)
    assert sorted(differ) == sorted(TORCH_WRONG), f"torch differs from eager on {differ}; listed: {list(TORCH_WRONG)}"

"""Fixtures every test file shares.

Each test starts and ends with a fresh minidynamo (no cached entries, counters at
zero, graph numbering from 0), so a test never sees another's compiled frames.
A test that also runs the real ``torch.compile`` asks for ``real_dynamo``.
FakeTensor dispatch-cache hits are cross-checked against the kernel in every test.
"""

import os

import pytest

import minidynamo as md

# Every FakeTensor dispatch-cache hit also runs the kernel and compares (Note [The dispatch cache]);
# subprocesses (notebooks, benchmark workers) inherit it.
os.environ.setdefault("MINIDYNAMO_FAKE_CACHE_CROSSCHECK", "1")


@pytest.fixture(autouse=True)
def _fresh_minidynamo():
    md.reset()
    yield
    md.reset()


@pytest.fixture(scope="session")
def _quiet_dynamo_logs():
    """torch's log levels, set once: nothing else in the tests sets them (each set_logs walks every logger)."""
    from minidynamo._torch_private import silence_dynamo_logs

    silence_dynamo_logs()


@pytest.fixture
def real_dynamo(_quiet_dynamo_logs):
    """The real Dynamo, reset and quiet, for tests that compare against it."""
    from minidynamo._torch_private import dynamo_reset

    dynamo_reset()
    yield
    dynamo_reset()


# Note [Longest files first]
# CI runs ``-n 2 --dist loadfile`` (pyproject.toml): each test file, and each notebook, goes
# whole to one of two workers, in the order given here (``--no-loadscope-reorder``). xdist's
# default order, by number of tests, put the files with few but long tests last (the browser,
# the benchmark's subprocesses): one worker ran them while the other had finished and waited.
# So the files that take longest start first (longest-processing-time-first scheduling), and the
# many short ones fill in at the end. The figures are rough seconds with ``-n0`` on one core;
# only their order matters, and a file not listed runs after these, in collection order.
_SECONDS = {
    "tests/test_browser.py": 257, "tests/test_models.py": 246, "tests/test_dynamic_shapes.py": 188,
    "tests/test_bench.py": 151, "tests/test_aot_ported.py": 143, "tests/test_dynamo_differential.py": 134,
    "tests/test_ported_scenarios.py": 86, "tests/test_book.py": 80, "tests/test_state_changes.py": 70,
    "tests/test_learner_habits.py": 67, "tests/test_aot_ported_scenarios.py": 62,
    "tests/test_aot_soundness.py": 46, "tests/test_aot_runtime.py": 45, "tests/test_bench_dynamic.py": 43,
    "notebooks/14_your_own_model.ipynb": 42, "tests/test_foreign_constructs.py": 40,
    "tests/test_tensor_match.py": 37, "tests/test_breaks_self_live.py": 36, "tests/test_real_passes.py": 35,
    "tests/test_max_flow.py": 35, "tests/test_python_semantics.py": 35,
    "tests/test_aot_storage_mutations.py": 34, "tests/test_cold_start.py": 34,
    "tests/test_python_features.py": 32, "tests/test_dynamo_hypothesis.py": 31,
    "tests/test_symbolic_core.py": 31, "tests/test_ported_dynamo.py": 30,
    "notebooks/12_why_three_passes.ipynb": 29,
    "tests/test_higher_order_ops.py": 150, "tests/test_unbacked.py": 40, "notebooks/16_values_that_decide.ipynb": 40,
    "tests/test_models_like_torch_more.py": 50,
}


def pytest_collection_modifyitems(items):
    files = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], len(files))
    # a stable sort on the file alone: each file's (each notebook's) tests keep their order
    items.sort(key=lambda item: (-_SECONDS.get(item.nodeid.split("::")[0], 0), files[item.nodeid.split("::")[0]]))

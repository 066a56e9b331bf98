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


@pytest.fixture
def real_dynamo():
    """The real Dynamo, reset and quiet, for tests that compare against it."""
    from minidynamo._torch_private import dynamo_reset, silence_dynamo_logs

    silence_dynamo_logs()
    dynamo_reset()
    yield
    dynamo_reset()

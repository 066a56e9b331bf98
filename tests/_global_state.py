"""Context managers that change one field of torch's global state for a block, then put it back.

Shared by tests/test_state_changes.py and tests/test_tensor_match.py (the global-state
guard, Note [Global state is one guard] in guards.py). Grad mode, inference mode and
autocast have their own context managers in torch; these two do not.
"""

import contextlib

import torch


@contextlib.contextmanager
def default_dtype(dtype):
    """``torch.set_default_dtype(dtype)`` inside the block."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


@contextlib.contextmanager
def deterministic(on=True, warn_only=False):
    """``torch.use_deterministic_algorithms(on, warn_only=warn_only)`` inside the block."""
    old = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
    torch.use_deterministic_algorithms(on, warn_only=warn_only)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(old[0], warn_only=old[1])

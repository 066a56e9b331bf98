"""Every import of a private PyTorch API lives in this one module.

Place in the pipeline: none; it is the seam between minidynamo and the torch
internals it mirrors or uses as an oracle. Private torch APIs move between
releases, so a torch upgrade should touch this file and no other.

Rule for contributors: a module of minidynamo that needs ``torch._something``
imports it from here (``from minidynamo._torch_private import ...``). Tests that
use the real torch as the oracle import it from here too. Add new names at the end,
in a section named after the part of the project that needs them.
"""

from __future__ import annotations

import torch

# --- shared -------------------------------------------------------------------


def dynamo_reset() -> None:
    """torch._dynamo.reset(): clear the real Dynamo's caches (notebooks, tests)."""
    import torch._dynamo

    torch._dynamo.reset()


def silence_dynamo_logs() -> None:
    """Keep real torch.compile's graph-break warnings off stderr (nbval compares it)."""
    import logging

    import torch._logging

    torch._logging.set_logs(dynamo=logging.ERROR, aot=logging.ERROR, graph_breaks=False, recompiles=False)

"""A module of its own for tests/test_state_changes.py: functions and classes whose globals live here.

A method defined in another module reads that module's globals (Note [Every module's
globals are guarded], source.py); these are the other module.
"""

import torch

SCALE = 2.0
OFFSET = torch.ones(3)
FLAGS = {"double": False}


def scaled(x):
    return x * SCALE


def shifted(x):
    return x + OFFSET


def activation(x):
    return torch.relu(x)


class Scaler:
    def __init__(self, k=1.0):
        self.k = k

    def apply(self, x):
        return x * SCALE * self.k

    @property
    def factor(self):
        return SCALE * self.k

    def maybe_double(self, x):
        return x * 2 if FLAGS["double"] else x


class Block(torch.nn.Module):
    """A module defined here: its forward reads this module's global SCALE."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * SCALE

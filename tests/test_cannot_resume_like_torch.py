"""A graph break the frame cannot resume after, counted and logged as torch's.

A break at an instruction that is no call (a property getter that LOAD_ATTR runs, a break
inside a try block) makes torch 2.13 compile up to its last checkpoint and run the rest of
the frame eagerly (torch/_dynamo/symbolic_convert.py ``InstructionTranslatorBase.step``): its
graph_breaks log says "Encountered graph break that we cannot resume from", and the break is
not among ``counters["graph_break"]``, which only ``break_graph_if_unsupported`` adds to.
GPT-2's ``self.loss_function`` (a property that logs) is one. Ours: Note [A break the frame
cannot resume from] (minidynamo/symbolic/instruction_translator.py).

Each program runs under both with the graph_breaks log on: graphs, counted breaks and the
first line of each break's reason are compared, and the result against eager.
"""

from __future__ import annotations

import contextlib
import io
import re

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_counters, dynamo_reset
from minidynamo.symbolic import counters


class Loud:
    @property
    def scale(self):
        print("reading scale")
        return 3.0

    @property
    def fn(self):
        print("reading fn")
        return lambda t: t * 2


LOUD = Loud()


def r_property_getter_prints(x):
    y = x.sin()
    z = y.cos()
    return z * LOUD.scale + 1


def r_property_getter_then_call(x):
    y = x.sin()
    z = y.cos()
    w = LOUD.fn(z)
    return w + 1


def r_break_inside_try(x):
    y = x.sin()
    z = y.cos()
    try:
        print("in try")
        z = z + 1
    except ValueError:
        z = z - 1
    return z * 2


def r_resumable_call_break(x):
    y = x.sin()
    print("between")
    return y.cos()


def _wraps(fn):
    import functools

    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)

    return wrapper


@_wraps
def _outer_step(x):
    y = x.sin()
    z = y.cos()
    return z * LOUD.scale + 1


def r_nested_frames_named_alike(x):
    """transformers' decorators: every frame is named ``_outer_step`` by functools.wraps, each its own
    compile id, and a break met again at the same place logged short after the first."""
    return _outer_step(x) + 1


PROGRAMS = {name: fn for name, fn in dict(globals()).items() if name.startswith("r_")}
_REASON = re.compile(r"\[(\d+/\d+)\] \[__graph_breaks\] (Graph break (?:in|\(user stack suppressed)[^\n]*?)(?: in user code)? at "
                     r"[^\n]*\n[^\n]*Graph Break Reason: ([^\n]*)")


def _run(compile_fn, set_logs, fn, capfd):
    x = torch.linspace(-1, 1, 4)
    set_logs(True)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            result = compile_fn(fn)(x)
    finally:
        set_logs(False)
    return result, _REASON.findall(capfd.readouterr().err)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_counted_and_logged_like_torch(name, capfd):
    fn = PROGRAMS[name]
    with contextlib.redirect_stdout(io.StringIO()):
        expected = fn(torch.linspace(-1, 1, 4))
    md.reset()
    ours, our_reasons = _run(lambda f: md.compile(f, backend="eager"),
                             lambda on: md.set_logs(graph_breaks=on), fn, capfd)
    mine = (counters["graphs"], counters["graph_breaks"])
    dynamo_reset()
    dynamo_counters().clear()
    theirs, their_reasons = _run(lambda f: torch.compile(f, backend="eager"),
                                 lambda on: torch._logging.set_logs(graph_breaks=on), fn, capfd)
    c = dynamo_counters()
    torch.testing.assert_close(ours, expected)
    torch.testing.assert_close(theirs, expected)
    assert mine == (c["stats"]["unique_graphs"], sum(c["graph_break"].values())), "graphs, counted breaks"
    assert our_reasons == their_reasons
    assert our_reasons, "the log printed a break"

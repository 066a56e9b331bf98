"""``python -m minidynamo tour``: the whole pipeline on a small model, in the terminal.

Place in the pipeline: all of it, end to end. A small MLP (forward and backward)
goes through minidynamo's Dynamo and AOTAutograd; the tour prints what each stage
did: the model's source and the bytecode interpreted, the Dynamo graph and its
guards, the three FakeTensor passes with op counts and times (one-time costs, the
imports of torch's compiler modules and the C++ guard's build, are timed apart),
the metadata table, the forward and backward graphs, and a check that results and
gradients equal eager's; it ends with what to open next. It exits with status 1
if anything disagrees.

Real PyTorch's nearest equivalent is ``TORCH_LOGS="bytecode,graph_code,guards,aot_graphs"``.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import sys
import threading
import time
from collections import Counter

import torch

USAGE = "usage: python -m minidynamo tour"


class TinyMLP(torch.nn.Module):
    """The tour's model: two linear layers, a relu, and a mean."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return self.fc2(h).mean()


def _heading(title: str) -> None:
    print(f"\n== {title} " + "=" * max(0, 70 - len(title)))


class _PassClock:
    """Times each pass from its pass_begin to its pass_end event, and counts its ops."""

    def __init__(self) -> None:
        self.ops: Counter = Counter()
        self.seconds: dict[str, float] = {}
        self.order: list[str] = []
        self._started: dict[str, float] = {}

    def __call__(self, event) -> None:
        name = event.pass_name
        if event.kind == "pass_begin":
            self._started[name] = time.perf_counter()
            if name not in self.order:
                self.order.append(name)
        elif event.kind == "pass_end":
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - self._started.pop(name)
        elif event.kind == "op":
            self.ops[name] += 1


@contextlib.contextmanager
def _progress(what: str, every: float = 10.0):
    """Print ``what ... N s`` every ``every`` seconds until the block ends (a cold build takes minutes)."""
    if not what:
        yield
        return
    done = threading.Event()
    start = time.perf_counter()

    def tick():
        while not done.wait(every):
            print(f"  ... {what}: {time.perf_counter() - start:.0f} s", flush=True)

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def tour() -> int:
    import minidynamo as md
    from minidynamo import bytecode, events
    from minidynamo.aot import aot_module_simplified
    from minidynamo.notebook import normalize_graph
    from minidynamo.symbolic import counters

    from minidynamo.symbolic import frame_hook, tensor_match

    _heading("0. one-time set-up (not part of any pass below)")
    name, folder = tensor_match.build_location()
    cold = not (folder / f"{name}.so").exists()
    print("  building or loading the C++ TENSOR_MATCH guard (minidynamo/symbolic/tensor_match.cpp):")
    print(f"  cache folder: {folder.parent} (MINIDYNAMO_CACHE moves it)")
    print("  the first run compiles it with g++ there (about 30 s on two cores), later runs load it ...")
    sys.stdout.flush()
    start = time.perf_counter()
    with _progress("compiling the C++ guard with g++" if cold else ""):
        tensor_match.get()
        frame_hook.build()  # the PEP 523 frame hook (C): built on the first run (~1 s)
    print(f"  C++ guard ready in {time.perf_counter() - start:.1f} s" if tensor_match.get() is not None else f"  no C++ guard: {tensor_match.reason()}")
    start = time.perf_counter()
    md.compile(lambda t: (t + 1).sum())(torch.ones(2, requires_grad=True)).backward()  # first use of every stage
    print(f"  first use of every stage (a one-op function, compiled and differentiated): {time.perf_counter() - start:.1f} s")
    print("  (mostly imports: our stages, and sympy, which torch's meta kernels import on their first call;")
    print("  not torch._dynamo, nor torch.distributed: python -m minidynamo.bench prints the breakdown)")
    torch.manual_seed(0)
    md.reset()
    model = TinyMLP()
    x = torch.randn(4, 8)

    _heading("1. the model, then the bytecode the interpreter reads (TinyMLP.forward)")
    print(inspect.getsource(TinyMLP.forward))
    print(bytecode.format_instructions(TinyMLP.forward, exceptions=False))

    captured: dict[str, list] = {"dynamo": [], "forward": [], "backward": []}

    def fw_compiler(gm, example_inputs):
        captured["forward"].append(gm)
        return gm

    def bw_compiler(gm, example_inputs):
        captured["backward"].append(gm)
        return gm

    def backend(gm, example_inputs):
        captured["dynamo"].append(gm)
        compiled = aot_module_simplified(gm, example_inputs, fw_compiler=fw_compiler, bw_compiler=bw_compiler)
        captured.setdefault("artifacts", []).append(compiled)
        return compiled

    clock = _PassClock()
    compiled_model = md.compile(model, backend=backend)
    with events.subscribe(clock):
        out = compiled_model(x)
        out.backward()
    instructions_first = counters["instructions"]

    _heading("2. Dynamo: the captured fx graph (FakeTensor pass 1)")
    for gm in captured["dynamo"]:
        print(normalize_graph(gm))

    _heading("3. guards: checked before every call")
    explained = md.explain(model, x)
    for guard in explained.guards:
        print(f"  {guard}")
    if tensor_match.get() is not None:
        print("  (each tensor's TENSOR_MATCH lines run as one C++ call: minidynamo/symbolic/tensor_match.cpp)")
    else:
        print(f"  (TENSOR_MATCH runs as the Python lines above: {tensor_match.reason()})")
    print(f"  (entry point: {explained.frame_hook})")

    _heading("4. the three FakeTensor passes (set-up costs were paid in section 0)")
    print(f"  {'pass':<14}{'fake ops':>10}{'ms':>10}")
    for name in clock.order:
        print(f"  {name:<14}{clock.ops[name]:>10}{clock.seconds.get(name, 0.0) * 1000:>10.1f}")

    _heading("5. AOTAutograd metadata (ViewAndMutationMeta)")
    artifacts = captured["artifacts"][0].artifacts
    print(artifacts.meta.table())
    print("  (mutations_hidden_from_autograd is True for an input that is not mutated at all: there is")
    print("   no mutation for autograd to see. It matters only with mutates_data; chapter 09 explains it.)")

    _heading("6. forward graph (from the partitioner)")
    for gm in captured["forward"]:
        print(normalize_graph(gm))

    _heading("7. backward graph")
    for gm in captured["backward"]:
        print(normalize_graph(gm))

    _heading("8. check against eager")
    compiled_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    expected = model(x)
    expected.backward()
    eager_grads = [p.grad.clone() for p in model.parameters()]

    counters["instructions"] = 0
    second = compiled_model(x)
    problems = []
    if not torch.allclose(out, expected, atol=1e-6):
        problems.append(f"result differs: compiled {out.item():.6f} vs eager {expected.item():.6f}")
    for (name, _), got, want in zip(model.named_parameters(), compiled_grads, eager_grads):
        if not torch.allclose(got, want, atol=1e-6):
            problems.append(f"gradient of {name} differs (max abs diff {(got - want).abs().max().item():.3g})")
    if not torch.allclose(second, expected, atol=1e-6):
        problems.append("second call's result differs from eager")
    if counters["instructions"] != 0:
        problems.append(f"second call interpreted {counters['instructions']} instructions (expected 0: cache hit)")
    if len(clock.order) < 3:
        problems.append(f"expected three FakeTensor passes, saw {clock.order}")

    print(f"  first call interpreted {instructions_first} instructions; second call {counters['instructions']}")
    print(f"  result: compiled {out.item():.6f}, eager {expected.item():.6f}")
    print(f"  gradients of {len(eager_grads)} parameters compared with eager")
    if problems:
        for p in problems:
            print(f"  MISMATCH: {p}")
        return 1
    print("  all equal: the pipeline reproduced eager's results and gradients")
    _heading("next")
    print("  Read how each step works, one chapter per stage:  jupyter lab notebooks/   (start with 00_welcome;")
    print("  as root add --allow-root). Chapter 13 is this tour in depth; the README's 'Using minidynamo on your")
    print("  own function' shows md.explain and md.compile on your code; jupyter-book build book/ makes the book.")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minidynamo", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["tour"], help="tour: run a small model through the whole pipeline")
    args = parser.parse_args(argv)
    if args.command == "tour":
        return tour()
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

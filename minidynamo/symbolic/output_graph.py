"""OutputGraph: the torch.fx graph a trace is building, with its inputs, guards and side effects.

Place in the pipeline: one OutputGraph per traced frame (and per resume function).
The interpreter adds nodes through ``create_proxy``; input tensors become placeholders
through ``add_graph_input``; at the end ``compile_graph`` turns it into a GraphModule
and hands it to the backend. Mirrors ``torch/_dynamo/output_graph.py``
(``OutputGraph``, ``compile_subgraph``, ``compile_and_call_fx_graph``,
``remove_unused_graphargs``).

Note [An empty graph is not compiled]
    If the piece of code before a graph break (or a whole frame) made no call in the
    graph, there is nothing to run: no graph is compiled and none is counted. Real
    Dynamo's test is the same (``count_calls(self.graph) == 0``, ``compile_subgraph``),
    which is why ``explain(...).graph_count`` can be smaller than "pieces between breaks".
    torch counts before it prunes: a comparison on a symbolic size decided into a guard
    (``x if n == 0 else x * n``), or an unused ``.item()`` of a lifted float, is a call, so
    such a piece compiles a graph that returns its inputs. Ours erases those nodes earlier
    and counts them all the same.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import torch
import torch.fx

from minidynamo import events
from minidynamo._torch_private import lazy_graph_module

from . import counters
from .fake_values import make_fake_mode, wrap_to_fake
from .guards import GuardSet
from .side_effects import SideEffects
from .source import SizeSource, Source, TensorPropertySource
from .variables.tensor import TensorVariable, UnspecializedPythonVariable


class OutputGraph:
    def __init__(self, root_globals: dict, L: dict, fullgraph: bool = False):
        self.fullgraph = fullgraph
        self.graph = torch.fx.Graph()
        self.tracer = torch.fx.proxy.GraphAppendingTracer(self.graph)
        self.fake_mode = make_fake_mode()
        self.guards = GuardSet()
        self.side_effects = SideEffects()
        self.root_globals = root_globals
        self.L = L
        self.input_source_to_var: dict[str, Any] = {}
        self.graphargs: list[tuple[Source, torch.fx.Node, torch.Tensor]] = []
        self._tensor_ids: dict[int, TensorVariable] = {}
        self._input_versions: list[tuple[str, torch.Tensor, int]] = []  # (source, fake, version when wrapped)
        # dynamic shapes (dynamic_shapes.py): the compile's dynamic= setting, the frame's recorded
        # input sizes (Note [Automatic dynamic]), the ShapeEnv once needed, one placeholder per symbol
        self.dynamic = None
        self.frame_state: dict = {}
        self.shape_env = None
        self.symbol_proxies: dict = {}
        self.subgraphs: dict[str, torch.fx.GraphModule] = {}  # higher-order ops' bodies (higher_order_ops.py)
        self.random_calls: list[tuple] = []  # (fn, args, kwargs): Note [A random number is a graph input] (misc.py)

    def subgraph_tracer(self) -> "SubgraphTracer":
        """The graph of a higher-order op's body, beside this one (torch: ``OutputGraph.subtracer``).

        The VariableTrackers that trace a body (variables/higher_order_ops.py) ask the graph
        they hold (``tx.output``) for it: they sit below this module and do not import it.
        """
        return SubgraphTracer(self)

    def install_subgraph(self, prefix: str, gm: torch.fx.GraphModule) -> str:
        """A higher-order op's body as an attribute of the graph's module: ``cond_true_0``, ``wrap_body_0``."""
        i = 0
        while f"{prefix}_{i}" in self.subgraphs:
            i += 1
        name = f"{prefix}_{i}"
        self.subgraphs[name] = gm
        return name

    def graph_root(self) -> torch.nn.Module:
        """The module the GraphModule is built from: its ``get_attr`` targets (the subgraphs) as attributes."""
        root = torch.nn.Module()
        for name, gm in self.subgraphs.items():
            setattr(root, name, gm)
        return root

    # --- building -----------------------------------------------------------------
    def create_proxy(self, kind: str, target: Any, args: tuple, kwargs: dict) -> torch.fx.Proxy:
        proxy = self.tracer.create_proxy(kind, target, args, kwargs)
        # the user line being interpreted (Note [AOT ops carry Dynamo's source lines], aot_autograd.py)
        proxy.node.meta["source_line"] = events.current_line()
        return proxy

    def add_graph_input(self, source: Source, value: torch.Tensor, dynamic_dims: tuple = ()) -> TensorVariable:
        """A placeholder for a real tensor the frame reads (an argument, a parameter, a global)."""
        if id(value) in self._tensor_ids:  # the same tensor reached twice: one input
            # Note [A duplicate input is one guard over two sources]
            #     Torch guards the second source of a tensor it met already with no TENSOR_MATCH of
            #     its own, only ``first is second`` (``GuardBuilder.DUPLICATE_INPUT``,
            #     torch/_dynamo/guards.py), a lambda guard over two sources that its tree checks
            #     after every manager (``use_lamba_guard_for_object_aliasing``). Ours too: the
            #     guard has no source, and a recompile names it only once the managers hold.
            first = self._tensor_ids[id(value)]
            self.guards.add(None, "DUPLICATE_INPUT", f"{first.source.name()} is {source.name()}",
                            "the trace saw these two as the same tensor", source.name())
            self.guards.duplicate_sources.add(source.name())
            return first
        if dynamic_dims:  # its symbols' placeholders come first (dynamic_shapes.py)
            from .dynamic_shapes import convert_input

            fake = convert_input(self, source, value, dynamic_dims, self._new_placeholder)
        else:
            fake = wrap_to_fake(self.fake_mode, value)
        node = self._new_placeholder(source.fx_name(), type(value))
        node.meta["example_value"] = fake
        node.meta["source"] = source.name()
        self._input_versions.append((source.name(), fake, fake._version))
        proxy = torch.fx.Proxy(node, self.tracer)
        var = TensorVariable(proxy, fake, source=source)
        self.graphargs.append((source, node, value))
        self._tensor_ids[id(value)] = var
        return var

    def add_random_value_input(self, value: Any) -> TensorVariable:
        """The graph input for the value of the last ``random`` call recorded in ``random_calls``.

        As torch's ``call_random_fn`` (torch/_dynamo/variables/user_defined.py): a placeholder
        ``random_value_<i>`` fed ``torch.as_tensor(___random_values[i])``, a 0-d tensor
        (Note [A random number is a graph input], variables/misc.py).
        """
        from .source import AsTensorSource, RandomValueSource

        raw = RandomValueSource(len(self.random_calls) - 1)
        source = AsTensorSource(raw)
        wrapped = torch.as_tensor(value)
        fake = wrap_to_fake(self.fake_mode, wrapped)
        node = self._new_placeholder(source.fx_name(), torch.Tensor)
        node.meta["example_value"] = fake
        node.meta["source"] = source.name()
        self.graphargs.append((source, node, wrapped))
        var = UnspecializedPythonVariable(torch.fx.Proxy(node, self.tracer), fake, source=source)
        var.raw_source = raw
        return var

    def _new_placeholder(self, name: str, type_expr: Any = None) -> torch.fx.Node:
        """A placeholder after the last one (inputs are wrapped as the trace meets them).

        As torch's ``SubgraphTracer.create_graph_input`` (torch/_dynamo/output_graph.py): the
        target is ``name`` made unique with ``_0``, ``_1``... (``get_unique_name_wrt``), fx
        names the node from it (``L_x_`` -> ``l_x_``), and ``type_expr`` is the annotation
        ``gm.code`` prints (Note [A placeholder is named after its source], source.py).
        """
        placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
        used = {n.target for n in placeholders} | {n.name for n in self.graph.nodes}
        if name in used:
            name = next(f"{name}_{i}" for i in range(len(used) + 1) if f"{name}_{i}" not in used)
        anchor = placeholders[-1].next if placeholders else next(iter(self.graph.nodes), None)
        if anchor is None or anchor.op == "root":
            return self.graph.placeholder(name, type_expr=type_expr)
        with self.graph.inserting_before(anchor):
            return self.graph.placeholder(name, type_expr=type_expr)

    def mutated_input_sources(self) -> set[str]:
        """Inputs the trace wrote to (directly, through a view, or their metadata): their fake's version moved."""
        return {name for name, fake, version in self._input_versions if fake._version != version}

    def count_calls(self) -> int:
        return sum(1 for n in self.graph.nodes if n.op in ("call_function", "call_method", "call_module"))

    # --- finishing ------------------------------------------------------------------
    def _remove_unused_sym_nodes(self, outputs: list) -> None:
        """Size arithmetic and ``getitem``s nothing reads leave the graph.

        As torch's ``remove_unused_graphargs``: a SymInt/SymBool node without users is
        pure (``n == 1`` that an ``if`` turned into a guard), so erasing it (last first)
        changes nothing, and an int input read only by such nodes is then unused too. So
        is an unused ``operator.getitem``: the items of ``a, *_ = x.split(2)`` that the
        code never reads, or a bare ``x[0]`` (only getitem: an unused ``y.add_(1)`` stays).
        """
        keep = {id(o) for o in outputs}
        sym = (torch.SymInt, torch.SymBool, torch.SymFloat)
        for node in reversed(list(self.graph.nodes)):
            if (node.op == "call_function" and not node.users and id(node) not in keep
                    and (node.target is operator.getitem or isinstance(node.meta.get("example_value"), sym))):
                self.graph.erase_node(node)
            elif node.op == "call_method" and not node.users and id(node) not in keep and node.meta.get("float_input"):
                self.graph.erase_node(node)  # a lifted float only decided on (``if scale > 1``): no input of the graph

    def compile_graph(self, outputs: list[torch.fx.Node], backend: Callable, name: str, code: Any = None):
        """Turn the graph into a GraphModule, call the backend; returns (gm, compiled, input sources).

        Returns None when the graph makes no call (Note [An empty graph is not compiled]).
        """
        calls_made = self.count_calls() + getattr(self.graph, "_md_dropped_calls", 0)
        self._remove_unused_sym_nodes(outputs)
        if calls_made == 0:
            assert not outputs, "graph outputs without any call"
            return None
        if self.shape_env is not None and self.shape_env.creation_range:  # unbacked ranges (runtime_assert.py)
            from .runtime_assert import insert_deferred_runtime_asserts

            insert_deferred_runtime_asserts(self.graph, self.shape_env)
        self.graph.output(tuple(outputs))
        # remove_unused_graphargs: inputs nothing reads do not become graph arguments
        used, provided = [], {}
        for source, node, value in self.graphargs:
            example = node.meta.get("example_value")
            of_tensor = isinstance(source, (SizeSource, TensorPropertySource))  # a size, stride or offset
            if isinstance(example, torch.SymInt) and of_tensor and not _still_symbolic(example):
                node.replace_all_uses_with(int(example))  # the trace fixed this size (a guard ``== 6``): a constant
            elif isinstance(example, torch.SymInt) and of_tensor and example.node.expr in provided:
                # unified with an earlier symbol (a guard ``s1 == s0``, Note [Duck sizing]): one input, as torch's
                node.replace_all_uses_with(provided[example.node.expr])
                example = None
            elif isinstance(example, torch.SymInt) and of_tensor:
                provided[example.node.expr] = node
            if node.users or (_still_symbolic(example)  # a size's symbol stays, as
                              and of_tensor):  # torch's, unless the trace fixed it to a
                # constant (``torch.as_tensor(x.size(0))``); an unused int input goes
                used.append((source, node, value))
            else:
                self.graph.erase_node(node)
        self.graph.lint()
        if self.symbol_proxies and backend_is_aot(backend):  # Note [Tensorify before AOT] (dynamic_shapes.py)
            from .dynamic_shapes import check_tensorify

            check_tensorify(self.graph, self.frame_state, getattr(self, "floats_leaving", set()))
        gm = lazy_graph_module(self.graph_root(), self.graph, class_name=name)  # code written when first run
        if code is not None:  # whose graph it is, for a backend's warnings
            gm.meta["user_code"] = f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})"
        example_inputs = [value for _, _, value in used]
        events.emit("dynamo_graph", gm=gm, name=name, function=code.co_name if code is not None else name)
        if self.symbol_proxies:  # Note [AOT backends specialize per size] (backends.py)
            from minidynamo.backends import compile_symbolic_or_per_size

            if not backend_is_aot(backend):
                compiled = call_user_compiler(backend, gm, example_inputs)
            else:
                compiled = compile_symbolic_or_per_size(backend, gm, example_inputs, name)
        else:
            compiled = call_user_compiler(backend, gm, example_inputs)
        counters["graphs"] += 1
        return gm, compiled, [source for source, _, _ in used]


def call_user_compiler(backend: Callable, gm, example_inputs: list) -> Any:
    """``backend(gm, example_inputs)``; a user's backend that raises is torch's ``BackendCompilerFailed``
    (output_graph.py ``call_user_compiler``). Ours (eager, aot_eager, inductor) raise as they are."""
    try:
        return backend(gm, example_inputs)
    except Exception as e:
        from minidynamo.backends import BACKENDS

        if any(backend is fn for fn in BACKENDS.values()):
            raise
        from .exc import BackendCompilerFailed

        raise BackendCompilerFailed(backend, e) from e


def _still_symbolic(value: Any) -> bool:
    """A SymInt whose expression still has a symbol (not replaced by a constant after a guard ``s0 == 6``)."""
    if not isinstance(value, torch.SymInt):
        return False
    expr = getattr(value.node, "expr", None)
    return expr is None or bool(getattr(expr, "free_symbols", True))


def backend_is_aot(backend: Callable) -> bool:
    """One of our backends that runs AOTAutograd (not ``eager``, not a user's callable)."""
    from minidynamo.backends import eager

    return backend is not eager and getattr(backend, "__module__", "").startswith("minidynamo.backends")


class SubgraphTracer:
    """The graph of a higher-order op's body, traced beside its parent's (torch: ``SubgraphTracer``).

    Note [A subgraph lifts what it reads from outside]
        A branch of ``torch.cond`` or a checkpointed function is traced into a graph of
        its own. Everything else about the trace (guards, the fake mode, side effects,
        the frame's inputs) is the parent's, so this object answers with the parent's
        attributes; only ``graph``, ``tracer`` and ``create_proxy`` are its own. A value
        of the parent graph that the body reads (a closure's tensor, a global) becomes a
        placeholder of the body and is remembered in ``lifted``, so the higher-order op's
        node passes it in as an operand: torch's ``lift_tracked_freevar_to_input``
        (torch/_dynamo/output_graph.py). A body inside a body lifts through each level.
    """

    def __init__(self, parent) -> None:
        self.__dict__["parent"] = parent
        self.__dict__["graph"] = torch.fx.Graph()
        self.__dict__["tracer"] = torch.fx.proxy.GraphAppendingTracer(self.graph)
        self.__dict__["lifted"] = {}  # parent node -> our placeholder node
        self.__dict__["subgraphs"] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.parent, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("budget",):  # the instruction budget is the frame's, shared
            setattr(self.parent, name, value)
        else:
            self.__dict__[name] = value

    install_subgraph = OutputGraph.install_subgraph
    subgraph_tracer = OutputGraph.subgraph_tracer  # a body inside a body: its parent is this one
    graph_root = OutputGraph.graph_root

    def placeholder(self, name: str, example: Any) -> torch.fx.Proxy:
        first = next((n for n in self.graph.nodes if n.op != "placeholder"), None)  # placeholders stay first
        if first is None:
            node = self.graph.placeholder(name)
        else:
            with self.graph.inserting_before(first):
                node = self.graph.placeholder(name)
        node.meta["example_value"] = example
        return torch.fx.Proxy(node, self.tracer)

    def lift(self, proxy: torch.fx.Proxy) -> torch.fx.Proxy:
        """A parent's (or an ancestor's) value read in the body: a placeholder of ours."""
        node = proxy.node
        if node.graph is self.graph:
            return proxy
        if node.graph is not self.parent.graph:  # an ancestor's: the parent lifts it first
            proxy = self.parent.lift(proxy)
            node = proxy.node
        if node not in self.lifted:
            self.lifted[node] = self.placeholder(node.name, node.meta.get("example_value")).node
        return torch.fx.Proxy(self.lifted[node], self.tracer)

    def create_proxy(self, kind: str, target: Any, args: tuple, kwargs: dict) -> torch.fx.Proxy:
        lift = lambda a: self.lift(a) if isinstance(a, torch.fx.Proxy) else a  # noqa: E731
        args = torch.fx.node.map_aggregate(args, lift)
        kwargs = torch.fx.node.map_aggregate(kwargs, lift)
        proxy = self.tracer.create_proxy(kind, target, args, kwargs)
        proxy.node.meta["source_line"] = events.current_line()
        return proxy

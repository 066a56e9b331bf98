"""A mini ``make_fx``: record every ATen op a function runs into a ``torch.fx.Graph``.

Place in the pipeline: FakeTensor pass 3. ``graph_capture`` calls :func:`make_fx`
on the joint forward+backward function; the tracer sits on the dispatcher's Python
key as a ``TorchDispatchMode``, so it sees the ops *below* autograd: the forward
ops, the ops autograd runs for the backward, and CompositeImplicitAutograd ops
already decomposed (``linear`` arrives as ``t`` + ``addmm``).

Mirrors ``torch/fx/experimental/proxy_tensor.py`` (``make_fx``,
``ProxyTorchDispatchMode``, ``PythonKeyTracer``, ``track_tensor_tree``).

Note [Tensors are tracked by identity]
    The real make_fx stores each tensor's proxy on the tensor itself (a weak
    "tracker" table keyed by the tensor). Ours keeps one dict
    ``id(tensor) -> (tensor, node)``; holding the tensor keeps its id from being
    reused while the trace lasts. An in-place op returns its input object, so
    tracking its output simply rebinds that tensor to the new node.

Note [Modes stack: tracer above fake]
    ``with fake_mode: with tracer_mode:`` puts the tracer on top of the mode
    stack. Each op reaches the tracer first; the tracer records a node and calls
    the op again, which (the tracer being popped while it runs) now reaches the
    fake mode, which computes the output's metadata on meta tensors. A
    functionalization mode may sit above the tracer (Note [Functionalize above
    the tracer] in graph_capture.py): then only functional ops reach us.

Note [Graph modules compile their code lazily]
    An ``fx.GraphModule`` writes its graph out as Python source and compiles it
    as soon as it is built. Most graph modules of a compile are never run: the
    joint graph is only read by the partitioner, the partition's two halves are
    copied into the boxed graphs the runtime calls, Dynamo's graph is traced
    through by AOT, not called. So they are ``_LazyGraphModule``s, as torch's
    (``torch.fx._lazy_graph_module``): the code is written the first time the
    module is called or its ``.code`` is read; the graph is the same.

Note [Decomposing with the backend's table]
    ``make_fx(fn, decomposition_table=table)`` as torch's: an op the table names is
    not recorded; its decomposition runs with the tracer pushed again, so the ops
    it calls are recorded instead (torch: ``proxy_call``, ``with proxy_mode:
    r = CURRENT_DECOMPOSITION_TABLE[func](...)``; ``NotImplemented`` from a
    decomposition records the op as it is). Without a table, decomposition is
    whatever the dispatcher does below autograd (CompositeImplicitAutograd).
    A CompositeImplicitAutograd op that reaches the tracer anyway (called from a
    decomposition, which runs below autograd: ``x.to(dtype)``) is decomposed
    there, as torch's ``proxy_call`` does with ``func.decompose``, when autograd
    would have (no kernel of the device's own: ``autograd_would_have_decomposed``).
    The inductor backend traces with Inductor's table (``select_decomp_table()``).

Note [A lifted constant is copied]
    ``torch.tensor(0)`` inside a traced function makes a real tensor and calls
    ``aten.lift_fresh`` on it; the tracer stores the tensor as ``_tensor_constantN``.
    ``lift_fresh`` returns its argument itself, so recorded as it is, a later
    ``add_`` on the result would write into the constant, and Inductor cannot
    lower a graph whose value is the constant itself (``Found <class
    'torch._inductor.ir.Constant'>, which is not a supported top level IR node``:
    T5's and DeBERTa-v2's training graphs fell back to eager here). So, as torch's
    ``proxy_call`` (torch/fx/experimental/proxy_tensor.py), the tracer records and
    runs ``aten.lift_fresh_copy`` instead: a fresh copy of the constant.

Ours is simpler: symbolic sizes only through Dynamo's ShapeEnv (sym_tracing.py), no pre-dispatch mode,
tensor constants are stored as ``_tensor_constantN`` attributes.
"""

from __future__ import annotations

import contextlib
import operator
from typing import Any, Callable, Sequence

import torch
import torch.fx as fx

from minidynamo import events
from minidynamo._torch_private import (
    DispatchKey,
    HigherOrderOperator,
    TorchDispatchMode,
    autograd_would_have_decomposed,
    graph_target_to_str,
    lazy_graph_module,
    tree_flatten,
    tree_unflatten,
)
from minidynamo.aot.activation_checkpoint import current_tags
from minidynamo.aot.sym_tracing import SymTracker, check_no_symbolic_constants

__all__ = ["make_fx", "PythonKeyTracer", "ProxyTorchDispatchMode", "DecomposingProxyMode", "TraceError"]


class TraceError(RuntimeError):
    """make_fx met something it cannot record (names the op and the value)."""


class PythonKeyTracer:
    """Owns the graph being built and the tensor -> node table (Note [Tensors are tracked by identity])."""

    def __init__(self, fake_mode: Any = None) -> None:
        self.fake_mode = fake_mode
        self.graph = fx.Graph()
        self.root = torch.nn.Module()
        self._tensor_to_node: dict[int, tuple[torch.Tensor, fx.Node]] = {}
        self._num_constants = 0
        self._constant_fakes: dict[int, torch.Tensor] = {}
        self.sym = SymTracker(self.graph)  # Note [A SymInt argument becomes a node] (sym_tracing.py)

    # -- the tracker -----------------------------------------------------
    def track(self, tensor: torch.Tensor, node: fx.Node) -> None:
        self._tensor_to_node[id(tensor)] = (tensor, node)
        node.meta["val"] = tensor
        self.sym.output(node, tensor)  # a new unbacked size (nonzero's u0) is read off this node

    def is_tracked(self, tensor: torch.Tensor) -> bool:
        return id(tensor) in self._tensor_to_node

    def node_for(self, tensor: torch.Tensor, func: Any = None) -> fx.Node:
        """The node that computes ``tensor``; an untracked real tensor becomes a constant."""
        entry = self._tensor_to_node.get(id(tensor))
        if entry is not None:
            return entry[1]
        if type(tensor) is not torch.Tensor:
            raise TraceError(
                f"make_fx: {func} got a {type(tensor).__name__} that is neither an input of the traced "
                f"function nor produced inside it (shape {tuple(tensor.shape)}); pass it as an input"
            )
        # A real tensor captured from outside (e.g. the constant under lift_fresh):
        # the real make_fx stores it as a _tensor_constant attribute too.
        name = f"_tensor_constant{self._num_constants}"
        self._num_constants += 1
        setattr(self.root, name, tensor)
        node = self.graph.get_attr(name)
        self.track(tensor, node)
        if self.fake_mode is not None:
            # The op below runs on fake tensors: give it a fake twin, tracked to the same constant.
            fake = self.fake_mode.from_tensor(tensor)
            self._tensor_to_node[id(fake)] = (fake, node)
            self._constant_fakes[id(tensor)] = fake
        return node

    def runtime_value(self, value: Any) -> Any:
        """What the op below us gets: a constant's fake twin when tracing on fake tensors."""
        if isinstance(value, torch.Tensor):
            return self._constant_fakes.get(id(value), value)
        return value

    def placeholder(self, name: str, value: Any) -> fx.Node:
        node = self.graph.placeholder(name)
        if isinstance(value, torch.Tensor):
            self.track(value, node)
        else:
            node.meta["val"] = value
        self.sym.placeholder(node, value)
        return node

    def to_arg(self, value: Any, func: Any = None) -> Any:
        """A value as an fx argument: tensors become their nodes, the rest stays constant."""
        if isinstance(value, torch.Tensor):
            return self.node_for(value, func)
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            return self.sym.to_arg(value)
        return value


class _ImplicitOps:
    """``func in _IMPLICIT``: the op has a CompositeImplicitAutograd kernel (asked once per op).

    torch's proxy_call never decomposes size, stride and storage_offset (metadata queries).
    """

    def __init__(self) -> None:
        self._known: dict = {}
        self._never = {torch.ops.aten.size.default, torch.ops.aten.stride.default,
                       torch.ops.aten.storage_offset.default}

    def __contains__(self, func: Any) -> bool:
        known = self._known.get(func)
        if known is None:
            known = self._known[func] = func not in self._never and func.has_kernel_for_dispatch_key(
                DispatchKey.CompositeImplicitAutograd)
        return known


_IMPLICIT = _ImplicitOps()


class ProxyTorchDispatchMode(TorchDispatchMode):
    """The tracer on the Python dispatch key: record the op, then let it run below."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # not wrapped in torch._disable_dynamo: that imports real Dynamo (seconds) at the first op (issue 17)
        return False


    def __init__(self, tracer: PythonKeyTracer) -> None:
        super().__init__()
        self.tracer = tracer
        self.num_ops = 0

    supports_higher_order_operators = True  # torch.cond reaches __torch_dispatch__ (aot/higher_order.py)

    def _cond(self, pred, true_fn, false_fn, operands):
        """torch's ``trace_cond`` (torch/_higher_order_ops/cond.py): the branches become attributes of the
        traced module (``true_graph_0``), the call one node; the fake mode below computes the outputs."""
        tracer = self.tracer
        names = []
        for gm, prefix in ((true_fn, "true_graph"), (false_fn, "false_graph")):
            i = 0
            while hasattr(tracer.root, f"{prefix}_{i}"):
                i += 1
            setattr(tracer.root, f"{prefix}_{i}", gm)
            names.append(f"{prefix}_{i}")
        t, f = (tracer.graph.get_attr(n) for n in names)
        node = tracer.graph.call_function(
            torch.ops.higher_order.cond, (tracer.to_arg(pred), t, f, tuple(tracer.to_arg(o) for o in operands)))
        out = tuple(torch.ops.higher_order.cond(pred, true_fn, false_fn, tuple(operands)))
        node.meta["val"] = out
        tags = current_tags()
        if tags is not None:
            node.meta.update(tags)
        for i, o in enumerate(out):
            tracer.track(o, tracer.graph.call_function(operator.getitem, (node, i)))
        self.num_ops += 1
        return out

    def _while_loop(self, cond_fn, body_fn, carried, additional):
        """torch's ``while_loop_tracing`` (torch/_higher_order_ops/while_loop.py): the subgraphs become
        ``while_loop_cond_graph_0`` / ``while_loop_body_graph_0``, the call one node; the subgraphs
        arrive traced to ATen ops (aot/higher_order.py: ``run_while_loop``)."""
        tracer = self.tracer
        i = 0
        while hasattr(tracer.root, f"while_loop_cond_graph_{i}"):
            i += 1
        setattr(tracer.root, f"while_loop_cond_graph_{i}", cond_fn)
        setattr(tracer.root, f"while_loop_body_graph_{i}", body_fn)
        c = tracer.graph.get_attr(f"while_loop_cond_graph_{i}")
        b = tracer.graph.get_attr(f"while_loop_body_graph_{i}")
        node = tracer.graph.call_function(
            torch.ops.higher_order.while_loop,
            (c, b, tuple(tracer.to_arg(o) for o in carried), tuple(tracer.to_arg(o) for o in additional)))
        out = tuple(torch.ops.higher_order.while_loop(cond_fn, body_fn, tuple(carried), tuple(additional)))
        node.meta["val"] = out
        for j, o in enumerate(out):
            tracer.track(o, tracer.graph.call_function(operator.getitem, (node, j)))
        self.num_ops += 1
        return out

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if isinstance(func, HigherOrderOperator):
            if func is torch.ops.higher_order.cond:
                return self._cond(*args, **kwargs)
            if func is torch.ops.higher_order.while_loop:
                return self._while_loop(*args, **kwargs)
            return NotImplemented
        if func is torch.ops.prim.device.default:
            return func(*args, **kwargs)  # a metadata query, not a computation: not recorded
        if func is torch.ops.aten.lift_fresh.default:
            func = torch.ops.aten.lift_fresh_copy.default  # Note [A lifted constant is copied]
        tracer = self.tracer
        flat, spec = tree_flatten((args, kwargs))
        node_args, node_kwargs = tree_unflatten([tracer.to_arg(a, func) for a in flat], spec)
        # Run the op below us (the fake mode, or real kernels when tracing on real tensors).
        if tracer._constant_fakes:
            args, kwargs = tree_unflatten([tracer.runtime_value(a) for a in flat], spec)
        out = func(*args, **kwargs)
        # torch names nodes after the overload packet ("mm", "add_1"), so do we.
        name = graph_target_to_str(tracer.graph, func.overloadpacket.__name__) if hasattr(func, "overloadpacket") else None
        node = tracer.graph.create_node("call_function", func, tuple(node_args), dict(node_kwargs), name=name)
        tags = current_tags(func, args, kwargs)  # inside a checkpointed region (activation_checkpoint.py)
        if tags is not None:
            node.meta.update(tags)
        self.num_ops += 1
        if isinstance(out, torch.Tensor):
            tracer.track(out, node)
        elif isinstance(out, (tuple, list)):
            node.meta["val"] = out
            for i, item in enumerate(out):
                if isinstance(item, torch.Tensor):
                    item_node = tracer.graph.call_function(operator.getitem, (node, i))
                    if tags is not None:
                        item_node.meta.update(tags)  # a getitem shares its op's tags
                    tracer.track(item, item_node)
        else:
            node.meta["val"] = out
            tracer.sym.track(node, out)
        return out


class DecomposingProxyMode(ProxyTorchDispatchMode):
    """The tracer, decomposing first (Note [Decomposing with the backend's table]); what ``make_fx`` pushes.

    Before an op is recorded by ``ProxyTorchDispatchMode.__torch_dispatch__``: an op the table names
    runs its decomposition instead, and a CompositeImplicitAutograd op with no kernel of the device's
    own runs ``func.decompose``, both with this mode pushed again, as torch's ``proxy_call``. Every
    node recorded gets ``meta["original_aten"]``: the op being traced at the top, the one a
    decomposition came from (torch's ``set_original_aten_op``; Inductor names its kernels after it).
    """

    def __init__(self, tracer: PythonKeyTracer, decomposition_table: dict | None = None) -> None:
        super().__init__(tracer)
        self.decomposition_table = decomposition_table or {}
        self.original_aten: Any = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.prim.device.default:
            return super().__torch_dispatch__(func, types, args, kwargs)
        outermost = self.original_aten is None
        if outermost:
            self.original_aten = func
        graph = self.tracer.graph
        before = len(graph.nodes)
        try:
            decomposition = self.decomposition_table.get(func)
            if decomposition is not None:
                with self:
                    out = decomposition(*args, **kwargs)
                if out is not NotImplemented:
                    return out
            if func in _IMPLICIT and autograd_would_have_decomposed(func, tree_flatten((args, kwargs))[0]):
                with self:
                    out = func.decompose(*args, **kwargs)
                if out is not NotImplemented:
                    return out
            return super().__torch_dispatch__(func, types, args, kwargs)
        finally:
            if outermost:
                self.original_aten = None
                added = len(graph.nodes) - before
                for node in reversed(graph.nodes):
                    if added <= 0:
                        break
                    added -= 1
                    if node.op == "call_function":
                        node.meta.setdefault("original_aten", func)


def _output_arg(tracer: PythonKeyTracer, value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if not tracer.is_tracked(value):
            raise TraceError(
                f"make_fx: the traced function returned a tensor (shape {tuple(value.shape)}) "
                "that it did not compute and that is not an input"
            )
        return tracer.node_for(value)
    if value is None or isinstance(value, (int, float, bool)):
        return value
    if isinstance(value, torch.SymInt):
        return tracer.sym.to_arg(value)
    raise TraceError(f"make_fx: cannot return a {type(value).__name__} from a traced function")


def make_fx(
    fn: Callable,
    *,
    fake_mode: Any = None,
    placeholder_names: Sequence[str] | None = None,
    outer_modes: Sequence[Any] = (),
    pass_name: str | None = events.AOT_JOINT,
    on_start: Callable[[PythonKeyTracer], None] | None = None,
    dead_code_elimination: bool = False,
    decomposition_table: dict | None = None,
) -> Callable[..., fx.GraphModule]:
    """Return ``wrapped(*args) -> fx.GraphModule`` recording the ATen ops ``fn`` runs.

    ``args`` is a flat list (tensors and constants); tensors become placeholders
    named ``placeholder_names`` (default ``arg0_1, arg1_1, ...`` like torch's).
    With ``fake_mode``, real tensor args are converted with
    ``fake_mode.from_tensor`` (aliasing kept) and the ops run on fake tensors.
    ``outer_modes`` are dispatch modes pushed above the tracer (functionalization).
    The trace runs inside ``events.pass_scope(pass_name)`` so the fake mode's op
    events carry that pass name. ``on_start(tracer)`` is called before ``fn`` runs.
    """

    def wrapped(*args: Any) -> fx.GraphModule:
        tracer = PythonKeyTracer(fake_mode)
        names = list(placeholder_names) if placeholder_names is not None else [
            f"arg{i}_1" for i in range(len(args))
        ]
        if len(names) != len(args):
            raise TraceError(f"make_fx: {len(args)} args but {len(names)} placeholder names")
        if fake_mode is not None:
            args = tuple(fake_mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args)
        for name, a in zip(names, args):
            tracer.placeholder(name, a)
        mode = DecomposingProxyMode(tracer, decomposition_table)
        if on_start is not None:
            on_start(tracer)
        scope = events.pass_scope(pass_name) if pass_name else contextlib.nullcontext()
        with scope, contextlib.ExitStack() as stack:
            if fake_mode is not None:
                stack.enter_context(fake_mode)
            stack.enter_context(mode)
            for outer in outer_modes:
                stack.enter_context(outer)
            out = fn(*args)
        flat_out, spec = tree_flatten(out)
        out_args = tree_unflatten([_output_arg(tracer, o) for o in flat_out], spec)
        tracer.graph.output(out_args)
        if dead_code_elimination:  # torch's make_fx does not; AOTAutograd does it right after
            tracer.graph.eliminate_dead_code()
        if tracer.sym.nodes:  # a symbolic trace: no SymInt object may stay a constant
            check_no_symbolic_constants(tracer.graph)
        gm = lazy_graph_module(tracer.root, tracer.graph)  # Note [Graph modules compile their code lazily]
        gm.meta["num_traced_ops"] = mode.num_ops
        return gm

    return wrapped


def graph_op_names(gm: fx.GraphModule) -> list[str]:
    """The ``str`` of every call_function target in order ("aten.mm.default", ...)."""
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


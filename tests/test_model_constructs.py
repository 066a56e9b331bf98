"""Python constructs that real models (transformers, timm) use, one small test each.

Each construct is compiled with ``md.compile`` and compared with eager, and its graph
count with the real ``torch._dynamo.explain`` on the same function (ours ``<=`` torch's).
Issue 13; the models themselves are in ``test_models.py``.
"""

from __future__ import annotations

import copy
import functools
import inspect

import pytest
import torch

import minidynamo as md
from minidynamo._torch_private import dynamo_explain
from minidynamo.symbolic import counters

# an internal tracing error must fail these tests, not fall back to eager quietly
pytestmark = [pytest.mark.filterwarnings("error:minidynamo. tracing"), pytest.mark.usefixtures("real_dynamo")]


def check(fn, *args, count_breaks=True, **kwargs):
    """fn compiled == eager, ours graph count <= torch's, and the second call traces nothing."""
    expected = fn(*args, **kwargs)
    ours = md.explain(fn, *args, **kwargs)
    theirs = dynamo_explain(fn, *args, **kwargs)
    torch.testing.assert_close(ours.out, expected)
    assert ours.graph_count <= theirs.graph_count, (ours.break_reasons, theirs.break_reasons)
    if count_breaks:
        assert len(ours.break_reasons) <= len(theirs.break_reasons), (ours.break_reasons, theirs.break_reasons)
    compiled = md.compile(fn, backend="eager")
    torch.testing.assert_close(compiled(*args, **kwargs), expected)
    traced = counters["frames_traced"]
    torch.testing.assert_close(compiled(*args, **kwargs), expected)
    assert counters["frames_traced"] == traced, "the second call traced again"
    return ours, theirs


# -- functools.wraps: bind with the code that runs ---------------------------------------

def passthrough(f):
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        return f(*args, **kwargs) * 2

    return wrapper


@passthrough
def wrapped_forward(x, scale=3.0, *, shift=1.0):
    return x * scale + shift


def test_wraps_wrapper_binds_its_own_star_args():
    # inspect.signature follows __wrapped__ to (x, scale, *, shift); the frame that runs is
    # wrapper(*args, **kwargs): binding by the former left `args` unbound
    x = torch.randn(4)
    check(wrapped_forward, x)
    check(wrapped_forward, x, 2.0, shift=0.5)


class WrappedModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    @passthrough
    def forward(self, x, mask=None):
        return self.lin(x) if mask is None else self.lin(x) * mask


def test_wraps_wrapper_on_module_forward():
    m = WrappedModule()
    x = torch.randn(2, 4)
    check(m, x)
    check(m, x, mask=torch.ones(2, 4))


# -- cls.__name__, func.__code__ (transformers' deprecation and output-capturing wrappers) --

class Named(torch.nn.Module):
    def forward(self, x):
        if type(self).__name__ == "Named" and self.__class__.__qualname__.endswith("Named"):
            return x + 1
        return x - 1


def test_class_name_is_the_name_not_the_descriptor():
    # type.__dict__['__name__'] is a getset descriptor: returning it made the comparison False
    check(Named(), torch.randn(3))


def test_class_name_in_fstring():
    def f(x, m):
        x = x.sin()
        tag = f"{m.__class__.__name__}.forward"
        return x * len(tag)

    check(f, torch.randn(3), Named())


def uses_kwarg(x, scale=2.0):
    return x * scale


def test_function_code_varnames():
    def f(x):
        x = x.cos()
        if "scale" in uses_kwarg.__code__.co_varnames:
            return uses_kwarg(x, scale=3.0)
        return uses_kwarg(x)

    check(f, torch.randn(3))


# -- torch.compiler.is_compiling() (transformers: is_torchdynamo_compiling) -------------

def test_is_compiling_is_true_while_tracing():
    def f(x):
        if torch.compiler.is_compiling():
            return x + 1
        return x - 1

    x = torch.randn(3)  # eager says False; while compiling, torch and we say True
    ours, theirs = md.explain(f, x), dynamo_explain(f, x)
    torch.testing.assert_close(ours.out, torch.compile(f, backend="eager")(x))
    torch.testing.assert_close(ours.out, x + 1)
    assert ours.graph_count <= theirs.graph_count
    assert f(x).equal(x - 1)


# -- `in` and .get over a user Mapping, os.environ.get ------------------------------------

class Registry(__import__("collections").abc.Mapping):
    """Like transformers' AttentionInterface: the ABC's __contains__ and get (try/except KeyError)."""

    _global = {"sdpa": 2.0, "eager": 3.0}

    def __init__(self):
        self._local = {}

    def __getitem__(self, key):
        if key in self._local:
            return self._local[key]
        return self._global[key]

    def __iter__(self):
        return iter({**self._global, **self._local})

    def __len__(self):
        return len(self._global.keys() | self._local.keys())


REGISTRY = Registry()


def test_in_and_get_over_a_user_mapping():
    def f(x, impl):
        x = x.sin()
        if impl in REGISTRY:
            return x * REGISTRY.get(impl)
        return x

    check(f, torch.randn(3), "sdpa")


def test_os_environ_get_missing_key():
    import os

    def f(x):
        x = x.cos()
        if os.environ.get("MINIDYNAMO_TEST_SURELY_UNSET", "0") == "1":
            return x + 1
        return x * 2

    assert "MINIDYNAMO_TEST_SURELY_UNSET" not in os.environ
    check(f, torch.randn(3))


# -- constant guards on a str-enum and on -inf (transformers' config flags, attention masks) --

class Mode(str, __import__("enum").Enum):
    NONE = "none"
    ALL = "all"


def test_str_enum_and_inf_constant_guards():
    def f(x, mode, floor):
        x = x.clamp(min=floor)
        return x + 1 if mode == Mode.NONE else x - 1

    check(f, torch.randn(3), Mode.NONE, -float("inf"))
    check(f, torch.randn(3), Mode.ALL, float("inf"))


# -- slicing an nn.ModuleList (Llama: `for layer in self.layers[: config.num_hidden_layers]`) --

class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(4))

    def forward(self, x, n=3):
        for layer in self.layers[:n]:
            x = layer(x).relu()
        assert isinstance(self.layers[1:], torch.nn.ModuleList)
        return x + len(self.layers[::2])


def test_slicing_a_module_list():
    check(Stack(), torch.randn(2, 4))


# -- constructing a ModelOutput (a dataclass that is an OrderedDict) ------------------------

def test_constructing_a_model_output():
    from transformers.modeling_outputs import BaseModelOutput, CausalLMOutput

    lin = torch.nn.Linear(4, 4)

    def inner(x):
        return BaseModelOutput(last_hidden_state=lin(x))

    def f(x, labels):
        h = inner(x)
        hidden = h.last_hidden_state + h[0] + h["last_hidden_state"] + h.to_tuple()[0]
        loss = (hidden - labels).pow(2).mean()
        out = CausalLMOutput(loss=loss, logits=hidden)
        assert isinstance(out, CausalLMOutput) and "loss" in out and "hidden_states" not in out
        assert len(out) == 2 and list(out.keys()) == ["loss", "logits"]
        return out

    ours, theirs = check(f, torch.randn(2, 4), torch.randn(2, 4))
    assert type(ours.out) is CausalLMOutput and list(ours.out.keys()) == ["loss", "logits"]


# -- a layer's frame serves every layer: modules guarded by type and structure, not identity --

class BreakingLayer(torch.nn.Module):
    def __init__(self, with_norm=False):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4) if with_norm else None

    def forward(self, x):
        x = self.lin(x)
        torch._dynamo.graph_break()  # each layer's forward becomes a frame of its own
        return (x if self.norm is None else self.norm(x)).relu()


class Deep(torch.nn.Module):
    def __init__(self, n=12):
        super().__init__()
        self.layers = torch.nn.ModuleList(BreakingLayer() for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_twelve_layers_with_a_break_share_one_entry():
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*cache size limit")
        # (ours also lists the loop frame's whole-frame fallback as a reason: graphs are compared)
        check(Deep(), torch.randn(2, 4), count_breaks=False)


def test_a_module_of_another_structure_recompiles():
    # same class, but a LayerNorm where the first had None: the layout guard fails
    plain, normed = BreakingLayer(), BreakingLayer(with_norm=True)
    compiled = md.compile(BreakingLayer.forward, backend="eager")
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(plain, x), plain(x))
    torch.testing.assert_close(compiled(normed, x), normed(x))
    torch.testing.assert_close(compiled(plain, x), plain(x))


# -- super().get of a dict subclass (transformers' _CanRecordRegistry) -----------------------

class ClassRegistry(dict):
    def get(self, model):
        return super().get(type(model).__name__) or {}


CLASS_REGISTRY = ClassRegistry({"Named": {"scale": 3.0}})


def test_super_get_of_a_dict_subclass():
    def f(x, m):
        x = x.sin()
        flags = CLASS_REGISTRY.get(m)
        return x * flags.get("scale", 1.0) + ("scale" in flags)

    check(f, torch.randn(3), Named())
    check(f, torch.randn(3), torch.nn.ReLU())  # a missing key: the default


def test_super_get_of_a_dict_subclass_sees_a_new_entry():
    def f(x, m):
        return x * CLASS_REGISTRY.get(m).get("scale", 1.0)

    compiled = md.compile(f, backend="eager")
    x, m = torch.randn(3), torch.nn.Tanh()
    torch.testing.assert_close(compiled(x, m), f(x, m))
    CLASS_REGISTRY["Tanh"] = {"scale": 5.0}
    try:
        torch.testing.assert_close(compiled(x, m), x * 5.0)  # the presence guard failed: retraced
    finally:
        del CLASS_REGISTRY["Tanh"]


# -- a collections.abc.Sequence made in the trace and iterated (transformers' _PerLayerConfigView) --

class PerLayerView(__import__("collections").abc.Sequence):
    """A Sequence (so an ABCMeta class) over a config: its __iter__ is the ABC's generator."""

    def __init__(self, config):
        self._config = config

    def __len__(self):
        return self._config.n_layer

    def __getitem__(self, i):
        if i < 0 or i >= len(self):
            raise IndexError("layer index out of range")
        return self._config.scales[i]


class LayerConfig:
    def __init__(self, n_layer, scales):
        self.n_layer, self.scales = n_layer, scales


def test_iterating_a_sequence_made_in_the_trace():
    def f(x, config):
        x = x.sin()
        view = PerLayerView(config)
        for scale in view:
            x = x * scale
        return x + len(view) + view[-1 + len(view)]

    check(f, torch.randn(3), LayerConfig(3, [1.0, 2.0, 3.0]))


def test_iterating_a_sequence_sees_a_new_length():
    def f(x, config):
        return x * sum(s for s in PerLayerView(config))

    compiled = md.compile(f, backend="eager")
    config, x = LayerConfig(2, [1.0, 2.0, 3.0]), torch.randn(3)
    torch.testing.assert_close(compiled(x, config), f(x, config))
    config.n_layer = 3  # the length read inside __len__ is guarded: retraced
    torch.testing.assert_close(compiled(x, config), x * 6.0)


# -- a class that overrides __getattribute__ (transformers' configs: attribute_map, per-layer checks) --

class MappedMixin:
    def __getattribute__(self, key):
        spec = super().__getattribute__("__dict__").get("_per_layer_spec")
        if spec is not None and key in spec:
            raise AttributeError(f"{key} is per layer")
        return super().__getattribute__(key)


class MappedConfig(MappedMixin):
    attribute_map = {"num_layers": "n_layer"}

    def __init__(self, n_layer, scale):
        self.n_layer, self.scale = n_layer, scale

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


def test_attribute_through_an_overridden_getattribute():
    def f(x, config):
        x = x.cos()
        for _ in range(config.num_layers):  # num_layers is n_layer through attribute_map
            x = x * config.scale
        return x + getattr(config, "num_layers", 100) + (getattr(config, "missing", None) is None)

    check(f, torch.randn(3), MappedConfig(2, 3.0))


def test_overridden_getattribute_sees_a_change():
    def f(x, config):
        return x * config.num_layers

    compiled = md.compile(f, backend="eager")
    config, x = MappedConfig(2, 1.0), torch.randn(3)
    torch.testing.assert_close(compiled(x, config), x * 2)
    config.n_layer = 5
    torch.testing.assert_close(compiled(x, config), x * 5)


# -- inspect.signature (transformers' apply_chunking_to_forward) -------------------------------

class Chunked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def chunk(self, hidden):
        return self.lin(hidden).relu()

    def forward(self, x):
        n_args = len(inspect.signature(self.chunk).parameters)
        names = list(inspect.signature(uses_kwarg).parameters)
        return self.chunk(*([x] * n_args)) + len(names)


def test_inspect_signature_of_a_method_and_a_function():
    check(Chunked(), torch.randn(2, 4))


# -- a torch.nn loss module constructed in forward (BertForSequenceClassification) ----------------

class WithLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, labels):
        logits = self.lin(x)
        loss_fct = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
        mse = torch.nn.MSELoss(reduction="sum")
        return loss_fct(logits.view(-1, 3), labels.view(-1)) + mse(logits, logits.detach() * 2)


def test_constructing_a_loss_module_in_forward():
    check(WithLoss(), torch.randn(2, 4), torch.tensor([0, 2]))


def test_a_module_with_parameters_made_in_forward_is_not_folded():
    def f(x):
        return torch.nn.Linear(3, 3)(x)  # new random weights each call: never a constant of the trace

    torch.manual_seed(0)
    expected = f(torch.ones(2, 3))
    compiled = md.compile(f, backend="eager")
    torch.manual_seed(0)
    torch.testing.assert_close(compiled(torch.ones(2, 3)), expected)


# -- torch.finfo(dtype) (attention masks: torch.finfo(x.dtype).min) -----------------------------

def test_finfo_of_a_dtype_folds():
    def f(x):
        x = x.sin()
        floor = torch.finfo(x.dtype).min
        return torch.where(x > 0, x, torch.tensor(floor, dtype=x.dtype)) + torch.iinfo(torch.int8).max

    check(f, torch.randn(4))


# -- hasattr on an object made in the trace (masking_utils: hasattr(cache, "is_sliding")) -----------

class Cache:
    kind = "dynamic"

    def __init__(self, n):
        self.n = n

    @property
    def doubled(self):
        return self.n * 2


def test_hasattr_on_an_object_made_in_the_trace():
    def f(x):
        cache = Cache(3)
        found = [hasattr(cache, name) for name in ("n", "kind", "doubled", "is_sliding")]
        return x * sum(found) + (cache.doubled if hasattr(cache, "doubled") else 0)

    check(f, torch.randn(3))


# -- a functools.partial stored on a module (transformers' GELUTanh: self.act = partial(gelu, ...)) --

class PartialAct(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.act = functools.partial(torch.nn.functional.gelu, approximate="tanh")
        self.scaled = functools.partial(torch.mul, 2.0)

    def forward(self, x):
        return self.scaled(self.act(self.lin(x)))


def test_calling_a_partial_stored_on_a_module():
    check(PartialAct(), torch.randn(2, 4))


def test_a_changed_partial_recompiles():
    m = PartialAct()
    compiled = md.compile(m, backend="eager")
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), m(x))
    m.act = functools.partial(torch.nn.functional.gelu, approximate="none")  # keywords guarded: retraced
    torch.testing.assert_close(compiled(x), m(x))


# -- a custom torch.autograd.Function (transformers' Bloom: GeLUFunction.apply in train mode) -------

class TripleGrad(torch.autograd.Function):
    """Forward is x.sin(); backward is its own (3x the true gradient), so tracing forward alone is caught."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * x.cos() * 3


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_custom_autograd_function_keeps_its_backward(backend):
    def f(x):
        return TripleGrad.apply(x * 2).sum()

    x = torch.randn(4, requires_grad=True)
    f(x).backward()
    expected = x.grad.clone()
    x.grad = None
    compiled = md.compile(f, backend=backend)
    compiled(x).backward()
    torch.testing.assert_close(x.grad, expected)
    traced = counters["frames_traced"]
    compiled(x)
    assert counters["frames_traced"] == traced, "the second call traced again"
    check(f, x.detach())


# -- logger.warning_once (transformers' lru_cache'd Logger method, in GPT-2's loss_function) --------

def test_warning_once_breaks_as_torchs_logger_call_and_logs_once():
    """torch/_dynamo/variables/misc.py ``LoggingLoggerVariable``: any logger method breaks the
    graph (outside export), ``warning_once`` too; the call then runs eagerly, so its cache logs
    once, as eager does."""
    import logging

    import transformers.utils.logging  # noqa: F401  (installs logging.Logger.warning_once)

    logger = logging.getLogger("minidynamo.test.warning_once")
    seen = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logger.addHandler(handler)
    logger.propagate = False
    message = "minidynamo test: this loss type is unrecognized"

    def f(x):
        x = x.sin()
        logger.warning_once(message)
        return x * 2

    try:
        x = torch.randn(3)
        compiled = md.compile(f, backend="eager")
        for _ in range(3):
            torch.testing.assert_close(compiled(x), x.sin() * 2)
        assert seen == [message]  # once, as eager
        logging.Logger.warning_once.cache_clear()  # eager would log again, and so do we
        compiled(x)
        assert seen == [message, message]
        ours, theirs = check(f, x)
        assert (ours.graph_count, len(ours.break_reasons)) == (theirs.graph_count, len(theirs.break_reasons)) == (2, 1)
        assert ours.break_reasons[0].gb_type == "logging.Logger method not supported for non-export cases"
    finally:
        logger.removeHandler(handler)


# -- getattr(obj, name, default) takes the default only when the attribute is missing ---------------

class Opaque:
    @property
    def scale(self):
        return len(repr(object())) * 0 + 3.0  # repr of an object: not traced (a graph break)


def test_getattr_default_is_not_taken_for_an_attribute_we_cannot_trace():
    def f(x, obj):
        x = x.sin()
        return x * getattr(obj, "scale", 100.0) + getattr(obj, "missing", 1.0)

    x = torch.randn(3)
    torch.testing.assert_close(md.compile(f, backend="eager")(x, Opaque()), f(x, Opaque()))


# -- copy.deepcopy of a user object, traced (id(), object.__reduce_ex__, __dict__.update) ---

class _Settings:
    def __init__(self):
        self.scale = 3.0
        self.sizes = [1, 2]
        self.names = {"a": "b"}


_settings = _Settings()


def copies_its_settings(x):
    s = copy.deepcopy(_settings)
    s.scale = s.scale + 1.0  # the copy, not the original
    s.sizes.append(5)
    return x * s.scale + s.sizes[-1] + len(s.names)


def test_deepcopy_of_a_user_object_is_traced():
    x = torch.randn(4)
    check(copies_its_settings, x)
    assert _settings.scale == 3.0 and _settings.sizes == [1, 2]  # the original is untouched


def test_deepcopy_of_a_user_object_sees_a_changed_original():
    x = torch.randn(4)
    compiled = md.compile(copies_its_settings, backend="eager")
    torch.testing.assert_close(compiled(x), copies_its_settings(x))
    _settings.scale = 5.0
    try:
        torch.testing.assert_close(compiled(x), copies_its_settings(x))
    finally:
        _settings.scale = 3.0


def returns_a_copy(x):
    s = copy.deepcopy(_settings)
    return x + 1, s


def test_a_deep_copy_made_in_the_trace_is_returned():
    x = torch.randn(4)
    out, s = md.compile(returns_a_copy, backend="eager")(x)
    torch.testing.assert_close(out, x + 1)
    assert type(s) is _Settings and s is not _settings and s.sizes == [1, 2] and s.sizes is not _settings.sizes
    assert s.names == {"a": "b"} and s.scale == 3.0


def same_default_is_itself(x, _nil=[]):
    return x + 1 if _nil is _nil else x - 1


def test_a_list_is_itself():
    check(same_default_is_itself, torch.randn(3))


class _Renaming:
    """A config-like class whose lookups and stores go through a name map (PretrainedConfig's attribute_map)."""

    attribute_map = {"layers": "num_layers"}

    def __init__(self):
        self.num_layers = 2
        self.decoder_width = 3

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


_renaming = _Renaming()


def renames_on_a_copy(x):
    c = copy.deepcopy(_renaming)
    value = getattr(c, "decoder_width")
    delattr(c, "decoder_width")
    setattr(c, "width", value)
    c.layers = c.layers + 1  # through __setattr__: num_layers
    return x * c.width + c.num_layers + hasattr(c, "decoder_width")


def test_deepcopy_with_getattribute_and_setattr_overrides():
    check(renames_on_a_copy, torch.randn(4))
    assert _renaming.num_layers == 2 and _renaming.decoder_width == 3


class _Instantier(dict):
    """transformers' ``ClassInstantier`` (``ACT2FN``): ``d[key]`` builds the class it holds."""

    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


class _Doubler:
    def __init__(self):
        self.factor = 2


_ACTS = _Instantier({"double": _Doubler})


def picks_an_activation(x):
    return x * _ACTS["double"].factor + 1


def test_super_getitem_of_a_dict_subclass_that_overrides_getitem():
    x = torch.randn(3)
    check(picks_an_activation, x)
    compiled = md.compile(picks_an_activation, backend="eager")
    compiled(x)

    class _Tripler(_Doubler):
        def __init__(self):
            self.factor = 3

    dict.__setitem__(_ACTS, "double", _Tripler)  # the entry the trace read changed: recompile, not stale
    try:
        torch.testing.assert_close(compiled(x), x * 3 + 1)
    finally:
        dict.__setitem__(_ACTS, "double", _Doubler)


# -- a user nn.Module made and called in the trace (DeBERTa-v2's ACT2FN[name](x)) -----------------
# Note [A user module made in the trace]: torch inlines it as an UnspecializedNNModuleVariable


class _Gelu(torch.nn.Module):  # transformers' GELUActivation: a user __init__, a function as attribute
    def __init__(self, use_tanh: bool = False):
        super().__init__()
        self.approximate = "tanh" if use_tanh else "none"
        self.act = torch.nn.functional.gelu

    def forward(self, x):
        return self.act(x, approximate=self.approximate) if self.training else -x


def builds_a_module_and_calls_it(x):
    return _Gelu(use_tanh=True)(x * 2) + 1


def builds_a_module_then_breaks(x):
    act = _Gelu()
    print("a graph break")  # the module must be rebuilt for the code after the break
    y = act(x) + 1
    return y, isinstance(act, torch.nn.Module), act.training


def test_a_user_module_made_in_the_trace_is_inlined():
    x = torch.randn(4, 3)
    ours, theirs = check(builds_a_module_and_calls_it, x)
    assert ours.graph_count == theirs.graph_count == 1 and not ours.break_reasons, ours.break_reasons


def test_a_user_module_made_in_the_trace_survives_a_graph_break(capsys):  # capsys: the print
    x = torch.randn(4, 3)
    with md.events.record() as log:  # outputs as eager, graphs <= torch's (it counts an empty one)
        check(builds_a_module_then_breaks, x)
    breaks = [e.reason.split(" ")[0] for e in log if e.kind == "graph_break"]
    assert breaks and set(breaks) == {"print()"}, breaks


def reads_the_module_state(x):
    m = _Gelu()
    return x + len(m.__dict__), hasattr(m, "_parameters")


def test_the_untracked_state_of_a_user_module_made_in_the_trace_is_not_guessed():
    x = torch.randn(3)  # its __dict__ holds nn.Module's dicts too: a graph break, never a wrong answer
    out = md.compile(reads_the_module_state, backend="eager")(x)
    expected = reads_the_module_state(x)
    torch.testing.assert_close(out[0], expected[0])
    assert out[1] == expected[1]


def test_transformers_act2fn_made_in_the_trace():
    from transformers.activations import ACT2FN

    def pooler(x):
        return ACT2FN["gelu"](x).sum(-1)

    ours, theirs = check(pooler, torch.randn(2, 5))
    assert ours.graph_count == theirs.graph_count == 1 and not ours.break_reasons, ours.break_reasons


# -- calling an object made in the trace whose class defines __call__ -----------------------------


class _Affine:
    def __init__(self, k):
        self.k = k

    def __call__(self, x, *, shift=1.0):
        return x * self.k + shift


def calls_an_object_made_in_the_trace(x):
    f = _Affine(3.0)
    return f(x, shift=2.0).sin() + f(x)


def test_calling_an_object_made_in_the_trace_inlines_its_call():
    x = torch.randn(4)
    ours, theirs = check(calls_an_object_made_in_the_trace, x)
    assert ours.graph_count == theirs.graph_count == 1 and not ours.break_reasons, ours.break_reasons
    compiled = md.compile(calls_an_object_made_in_the_trace, backend="eager")
    compiled(x)
    original = _Affine.__call__
    _Affine.__call__ = lambda self, x, shift=1.0: x - self.k  # the class's __call__ the trace inlined changed
    try:
        torch.testing.assert_close(compiled(x), calls_an_object_made_in_the_trace(x))
    finally:
        _Affine.__call__ = original

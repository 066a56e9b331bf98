"""Tiny real models, built from configs with random weights (no downloads): the model zoo.

Place in the pipeline: none; these are inputs. ``tests/test_models.py``, the benchmark
(``python -m minidynamo.bench``) and chapter 14 compile them. Mirrors the spirit of
``torch/_dynamo``'s ``benchmarks/huggingface.py`` and ``benchmarks/timm_models.py``, which
build the same families (at full size) to measure torch.compile.

Each builder returns ``(model, args, kwargs)`` in eval mode, seeded, float32, on CPU.

Note [timm without torchvision]
    timm imports ``torchvision`` at import time (``FrozenBatchNorm2d``, transforms), but
    the torchvision wheel that pip pairs with the CPU torch here is a CUDA build whose
    C ops fail to load (``operator torchvision::nms does not exist``). None of the models
    below runs a torchvision op, so when the real one cannot be imported we install a
    stand-in package whose every name is a placeholder class. transformers then sees no
    torchvision at all (its availability check finds no spec) and skips its vision paths.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

import torch

__all__ = ["gpt2", "bert", "llama", "t5", "deberta_v2", "resnet10t", "vit_tiny", "BUILDERS"]

VOCAB, SEQ, BATCH = 128, 8, 2


class _PlaceholderMeta(type):
    def __getattr__(cls, name):  # InterpolationMode.NEAREST and the like, read at import time
        if name.startswith("__"):
            raise AttributeError(name)
        return _PlaceholderMeta(name, (_Placeholder,), {})


class _Placeholder(metaclass=_PlaceholderMeta):
    def __init__(self, *args, **kwargs):
        raise RuntimeError("torchvision is not usable here (see minidynamo/zoo.py, Note [timm without torchvision])")


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _PlaceholderMeta(name, (_Placeholder,), {})


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "torchvision" or fullname.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0"
        return module

    def exec_module(self, module):
        pass


def _without_broken_torchvision() -> None:
    """Make ``import timm`` work when torchvision cannot load (Note [timm without torchvision])."""
    if any(isinstance(f, _StubFinder) for f in sys.meta_path):
        return
    if "torchvision" in sys.modules and not isinstance(sys.modules["torchvision"], _StubModule):
        return  # a working torchvision is already imported
    try:
        import torchvision  # noqa: F401
        return
    except Exception:  # noqa: BLE001  (RuntimeError from its C ops, ImportError when absent)
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
    sys.modules["torchvision"] = None  # find_spec answers None: transformers caches "not available"
    try:
        from transformers.utils import import_utils

        import_utils.is_torchvision_available()  # an lru_cache: decided once, before the stand-in exists
    except ImportError:
        pass
    finally:
        del sys.modules["torchvision"]
    sys.meta_path.insert(0, _StubFinder())


def _quiet_transformers() -> None:
    import transformers

    transformers.logging.set_verbosity_error()


def _tokens(with_labels: bool = True):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)
    return ids


def gpt2(n_layer: int = 2):
    """transformers ``GPT2LMHeadModel``, hidden 64, 4 heads; called with ``labels`` (returns a loss)."""
    _without_broken_torchvision()
    _quiet_transformers()
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=n_layer, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=32)
    ids = _tokens()
    return GPT2LMHeadModel(cfg).eval(), (), {"input_ids": ids, "labels": ids}


def _sequence_classifier(config: str, model: str, n_layer: int):
    """A transformers ``<model>`` over ``<config>``: hidden 64, 4 heads, 3 labels, called with ``labels``."""
    _without_broken_torchvision()
    _quiet_transformers()
    import transformers

    torch.manual_seed(0)
    cfg = getattr(transformers, config)(num_hidden_layers=n_layer, hidden_size=64, num_attention_heads=4,
                                        intermediate_size=128, vocab_size=VOCAB, max_position_embeddings=32,
                                        num_labels=3)
    return getattr(transformers, model)(cfg).eval(), (), {"input_ids": _tokens(), "labels": torch.tensor([0, 2])}


def bert(n_layer: int = 2):
    """transformers ``BertForSequenceClassification``, hidden 64, 3 labels."""
    return _sequence_classifier("BertConfig", "BertForSequenceClassification", n_layer)


def llama(n_layer: int = 2):
    """transformers ``LlamaForCausalLM``, hidden 64, 4 query heads over 2 kv heads (grouped)."""
    _without_broken_torchvision()
    _quiet_transformers()
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(num_hidden_layers=n_layer, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=128, vocab_size=VOCAB, max_position_embeddings=32)
    ids = _tokens()
    return LlamaForCausalLM(cfg).eval(), (), {"input_ids": ids, "labels": ids}


def t5(n_layer: int = 2):
    """transformers ``T5ForConditionalGeneration``, d_model 64, 4 heads; called with ``labels`` (returns a loss)."""
    _without_broken_torchvision()
    _quiet_transformers()
    from transformers import T5Config, T5ForConditionalGeneration

    torch.manual_seed(0)
    cfg = T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=n_layer, num_heads=4,
                   decoder_start_token_id=0, pad_token_id=0)
    ids = _tokens()
    return T5ForConditionalGeneration(cfg).eval(), (), {"input_ids": ids, "labels": ids}


def deberta_v2(n_layer: int = 2):
    """transformers ``DebertaV2ForSequenceClassification``, hidden 64, 3 labels (its pooler builds ACT2FN[...])."""
    return _sequence_classifier("DebertaV2Config", "DebertaV2ForSequenceClassification", n_layer)


def timm_model(name: str, **kwargs) -> torch.nn.Module:
    """``timm.create_model(name, pretrained=False, **kwargs)``, seeded, random weights, in train mode
    (Note [timm without torchvision]); the inductor benchmark's resnet18 row."""
    _without_broken_torchvision()
    import timm

    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False, **kwargs)


def resnet10t():
    """timm ``resnet10t`` (BatchNorm), 10 classes, 32x32 images."""
    _without_broken_torchvision()
    import timm

    torch.manual_seed(0)
    model = timm.create_model("resnet10t", pretrained=False, num_classes=10)
    return model.eval(), (torch.randn(BATCH, 3, 32, 32),), {}


def vit_tiny():
    """timm ``vit_tiny_patch16_224`` at img_size=32, depth 2."""
    _without_broken_torchvision()
    import timm

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, depth=2, num_classes=10)
    return model.eval(), (torch.randn(BATCH, 3, 32, 32),), {}


BUILDERS = {"gpt2": gpt2, "bert": bert, "llama": llama, "t5": t5, "deberta_v2": deberta_v2, "resnet10t": resnet10t,
            "vit_tiny": vit_tiny}


# More families (issue: more models through md.compile, against torch.compile): tiny configs,
# one or two layers, hidden 64, random weights, dropout probabilities 0 so train mode is deterministic.
def _hf_tiny(config: str, model: str, **cfg):
    """A transformers ``<model>(<config>(**cfg))``, seeded, every ``*dropout*``/``*_pdrop`` probability 0."""
    _without_broken_torchvision()
    _quiet_transformers()
    import transformers

    torch.manual_seed(0)
    config_cls = getattr(transformers, config)
    probe = config_cls()
    drops = {k: 0.0 for k, v in vars(probe).items() if ("dropout" in k or k.endswith("_pdrop") or k.endswith("_prob"))
             and isinstance(v, float)}
    return getattr(transformers, model)(config_cls(**{**drops, **cfg}))


_ENCODER = dict(num_hidden_layers=1, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=VOCAB,
                max_position_embeddings=32, num_labels=3)


def roberta():
    """transformers ``RobertaForSequenceClassification``, hidden 64, one layer, 3 labels."""
    model = _hf_tiny("RobertaConfig", "RobertaForSequenceClassification", **_ENCODER)
    return model.eval(), (), {"input_ids": _tokens(), "labels": torch.tensor([0, 2])}


def albert():
    """transformers ``AlbertForSequenceClassification`` (embeddings 32 projected to hidden 64, shared layers)."""
    model = _hf_tiny("AlbertConfig", "AlbertForSequenceClassification", embedding_size=32, **_ENCODER)
    return model.eval(), (), {"input_ids": _tokens(), "labels": torch.tensor([0, 2])}


def bart():
    """transformers ``BartForConditionalGeneration`` (encoder-decoder), d_model 64, one layer each side, with ``labels``."""
    model = _hf_tiny("BartConfig", "BartForConditionalGeneration", d_model=64, encoder_layers=1, decoder_layers=1,
                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                     vocab_size=VOCAB, max_position_embeddings=32)
    ids = _tokens()
    return model.eval(), (), {"input_ids": ids, "labels": ids}


def mistral():
    """transformers ``MistralForCausalLM``, hidden 64, 4 query heads over 2 kv heads, one layer, with ``labels``."""
    model = _hf_tiny("MistralConfig", "MistralForCausalLM", num_hidden_layers=1, hidden_size=64, num_attention_heads=4,
                     num_key_value_heads=2, intermediate_size=128, vocab_size=VOCAB, max_position_embeddings=32)
    ids = _tokens()
    return model.eval(), (), {"input_ids": ids, "labels": ids}


def deit_tiny():
    """timm ``deit_tiny_patch16_224`` at img_size=32, depth 1, 10 classes."""
    model = timm_model("deit_tiny_patch16_224", img_size=32, depth=1, num_classes=10)
    g = torch.Generator().manual_seed(0)
    return model.eval(), (torch.randn(BATCH, 3, 32, 32, generator=g),), {}


BUILDERS.update({"roberta": roberta, "albert": albert, "bart": bart, "mistral": mistral, "deit_tiny": deit_tiny})

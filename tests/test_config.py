"""``minidynamo.config`` has torch._dynamo.config's names and defaults, and refuses unknown names as torch does."""

import pytest
import torch._dynamo.config as torch_config

import minidynamo as md

# ours differs from torch's on purpose (the module docstring of minidynamo/config.py says why)
OURS_ON_PURPOSE = {"suppress_errors": True}


@pytest.mark.parametrize("name", sorted(md.config.get_config_copy()))
def test_each_flag_has_torchs_name_and_default(name):
    assert hasattr(torch_config, name), f"torch._dynamo.config has no {name}"
    expected = OURS_ON_PURPOSE.get(name, getattr(torch_config, name))
    assert getattr(md.config, name) == expected


def test_patch_as_context_manager_and_decorator_restores():
    with md.config.patch(recompile_limit=2):
        assert md.config.recompile_limit == 2
        with md.config.patch("recompile_limit", 3):
            assert md.config.recompile_limit == 3
        assert md.config.recompile_limit == 2
    assert md.config.recompile_limit == 8

    @md.config.patch({"capture_scalar_outputs": True})
    def read():
        return md.config.capture_scalar_outputs

    assert read() is True and md.config.capture_scalar_outputs is False


@pytest.mark.parametrize("how", ["patch", "setattr", "getattr"])
def test_unknown_name_is_refused_like_torch(how):
    def attempt(config):
        if how == "patch":
            with config.patch(no_such_flag=1):
                pass
        elif how == "setattr":
            config.no_such_flag = 1
        else:
            config.no_such_flag

    with pytest.raises(AttributeError) as theirs:
        attempt(torch_config)
    with pytest.raises(AttributeError) as ours:
        attempt(md.config)
    assert str(ours.value) == str(theirs.value).replace("torch._dynamo.config", "minidynamo.config")


def test_a_deprecated_flag_reads_back_warns_once_and_does_nothing_like_torch():
    """torch 2.13: ``inline_inbuilt_nn_modules`` is deprecated (``Config(deprecated=True)``), always True in effect."""
    import warnings

    import torch

    from minidynamo._torch_private import dynamo_reset

    def attempt(config):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with config.patch(inline_inbuilt_nn_modules=False):
                inside = config.inline_inbuilt_nn_modules
            after = config.inline_inbuilt_nn_modules
        messages = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
        return inside, after, messages

    theirs, ours = attempt(torch_config), attempt(md.config)
    assert ours[:2] == theirs[:2] == (False, True)
    # torch warns once per process (``_deprecation_warned``): this test may not be the first to read it
    assert len(ours[2]) <= 1 and len(theirs[2]) <= 1
    if ours[2] and theirs[2]:
        assert ours[2][0] == theirs[2][0].replace("torch._dynamo.config", "minidynamo.config")
    # and it does nothing: two instances of a class share one entry either way
    for flag in (True, False):
        md.reset()
        dynamo_reset()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with md.config.patch(inline_inbuilt_nn_modules=flag):
                counts = []
                for _ in range(3):
                    m = md.compile(torch.nn.Linear(2, 2), backend="eager")
                    m(torch.ones(1, 2))
                    counts.append(len(m.cache.entries))
        assert counts == [1, 1, 1]
    md.reset()

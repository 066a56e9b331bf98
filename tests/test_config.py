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

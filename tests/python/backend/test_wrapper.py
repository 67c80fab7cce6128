"""kiln.compile / unwrap / recompile: the contract trainers rely on."""

import copy
import pickle

import pytest
import torch

import kiln
from models import Mlp, assert_close


def test_compile_returns_a_real_optimized_module_with_the_kwargs_as_given():
    model = Mlp()
    kwargs = {"options": {"strict": True}, "dynamic": False}
    compiled = kiln.compile(model, **kwargs)
    assert isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule)
    # the kwargs torch.compile got: the given ones and the backend
    assert compiled._compile_kwargs == {"backend": "kiln", **kwargs}
    assert compiled._compile_kwargs["options"] is not kwargs["options"]


def test_recorded_kwargs_reproduce_the_compile_with_plain_torch_compile():
    model = Mlp().eval()
    compiled = kiln.compile(model, options={"fusion": False})
    again = torch.compile(model, **compiled._compile_kwargs)
    wrapper = torch._dynamo.eval_frame.innermost_backend(again.dynamo_ctx.callback)
    assert wrapper.compiler_name == "kiln"


def test_unwrap_returns_the_identical_module_and_the_kwargs():
    model = Mlp()
    compiled = kiln.compile(model, mode="max-autotune")
    original, kwargs = kiln.unwrap(compiled)
    assert original is model
    assert kwargs == {"backend": "kiln", "mode": "max-autotune"}
    assert [p for p in original.parameters()] == [p for p in model.parameters()]


def test_unwrap_of_torch_compile_with_backend_kiln_recovers_options():
    model = Mlp()
    original, kwargs = kiln.unwrap(torch.compile(model, backend="kiln", options={"fusion": False}))
    assert original is model
    assert kwargs == {"backend": "kiln", "options": {"fusion": False}}


def test_unwrap_of_a_plain_module_says_it_is_not_compiled():
    model = Mlp()
    assert kiln.unwrap(model) == (model, None)


def test_recompile_with_the_same_kwargs_matches():
    model = Mlp().eval()
    compiled = kiln.compile(model, options={"fusion": False})
    module, kwargs = kiln.unwrap(compiled)
    again = kiln.recompile(module, kwargs)
    assert kiln.unwrap(again) == (model, kwargs)
    x = torch.randn(3, 32)
    with torch.no_grad():
        assert_close(again(x), model(x))


def test_kwargs_survive_deepcopy_and_pickle():
    given = {"options": {"strict": True, "max_specializations": 4}}
    kwargs = {"backend": "kiln", **given}
    compiled = kiln.compile(Mlp().eval(), **given)
    x = torch.randn(2, 32)
    for copied in (copy.deepcopy(compiled), pickle.loads(pickle.dumps(compiled))):
        assert isinstance(copied, torch._dynamo.eval_frame.OptimizedModule)
        assert copied._compile_kwargs == kwargs
        module, copied_kwargs = kiln.unwrap(copied)
        assert copied_kwargs == kwargs
        with torch.no_grad():
            assert_close(copied(x), module(x))


def test_disable_returns_the_model_unchanged():
    model = Mlp()
    assert kiln.compile(model, disable=True) is model


def test_attribute_reads_and_writes_reach_the_original():
    model = Mlp()
    compiled = kiln.compile(model)
    compiled.scale = 3
    assert model.scale == 3
    model.other = "x"
    assert compiled.other == "x"
    assert compiled.head is model.head


def test_state_dict_of_the_original_has_no_prefix():
    model = Mlp()
    original, _ = kiln.unwrap(kiln.compile(model))
    keys = list(original.state_dict())
    assert keys == list(model.state_dict()) and not any("_orig_mod" in k for k in keys)


def test_train_eval_toggling_does_not_recompile_every_time():
    model = Mlp()
    compiled = kiln.compile(model)
    x = torch.randn(2, 32)
    kiln.reset_stats()
    for _ in range(3):
        compiled.train()
        compiled(x)
        compiled.eval()
        with torch.no_grad():
            compiled(x)
    # one training graph pair (forward, backward-ready) and one inference graph, not six
    assert kiln.stats()["graphs"] <= 3


def test_bad_arguments_are_errors():
    with pytest.raises(kiln.KilnError, match="unknown argument"):
        kiln.compile(Mlp(), fullgraf=True)
    with pytest.raises(kiln.KilnError, match="backend='kiln'"):
        kiln.compile(Mlp(), backend="inductor")
    with pytest.raises(kiln.KilnError, match="unknown option 'speed'"):
        kiln.compile(Mlp(), options={"speed": 11})
    with pytest.raises(kiln.KilnError, match="must be a dict"):
        kiln.compile(Mlp(), options=["strict"])


def test_options_keys_are_the_cpp_keys():
    assert set(kiln.option_keys()) == {"mode", "target", "strict", "fusion",
                                       "max_specializations", "precision", "dump_dir"}

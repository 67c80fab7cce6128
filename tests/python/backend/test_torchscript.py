"""ScriptModules from Python: kiln.compile's C++ TorchScript path and the to_backend API."""

import copy
import json
import subprocess
import sys

import pytest
import torch

import kiln
from models import Mlp, assert_close


@pytest.fixture
def scripted():
    return torch.jit.script(Mlp().eval())


def test_compile_of_a_script_module_uses_the_torchscript_path(scripted):
    compiled = kiln.compile(scripted, options={"strict": True})
    assert isinstance(compiled, kiln.CompiledScriptModule)
    x = torch.randn(4, 32)
    assert_close(compiled(x), scripted(x))
    explained = json.loads(compiled.explain(x))
    assert explained["fused_kernels"] >= 1


def test_script_module_unwrap_and_recompile(scripted):
    kwargs = {"options": {"fusion": False}}
    compiled = kiln.compile(scripted, **kwargs)
    module, got = kiln.unwrap(compiled)
    assert module is scripted and got == {"backend": "kiln", **kwargs}
    again = kiln.recompile(module, got)
    x = torch.randn(2, 32)
    assert_close(again(x), scripted(x))
    copied = copy.deepcopy(compiled)
    assert copied._compile_kwargs == got
    assert_close(copied(x), scripted(x))


def test_script_module_attributes_reach_the_original(scripted):
    compiled = kiln.compile(scripted)
    assert compiled.head.weight is scripted.head.weight
    assert list(compiled.state_dict()) == list(scripted.state_dict())


def test_script_module_bad_input_is_a_clear_error(scripted):
    compiled = kiln.compile(scripted)
    with pytest.raises(Exception, match="Expected a value of type 'Tensor"):
        compiled("not a tensor")


def test_to_backend_runs_through_kiln_and_saves(tmp_path, scripted):
    lowered = torch._C._jit_to_backend("kiln", scripted, {"forward": {"strict": True}})
    x = torch.randn(3, 32)
    kiln.reset_stats()
    assert_close(lowered(x), scripted(x))
    assert kiln.stats()["specializations"] >= 1
    path = tmp_path / "lowered.pt"
    torch.jit.save(lowered, str(path))
    torch.save(x, tmp_path / "x.pt")
    torch.save(scripted(x), tmp_path / "expected.pt")
    code = (
        "import sys, torch, kiln\n"
        f"m = torch.jit.load({str(path)!r})\n"
        f"x = torch.load({str(tmp_path / 'x.pt')!r})\n"
        f"torch.testing.assert_close(m(x), torch.load({str(tmp_path / 'expected.pt')!r}))\n"
        "print(kiln.stats()['specializations'])\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.split()[-1]) >= 1


def test_to_backend_rejects_unknown_options(scripted):
    with pytest.raises(Exception, match="unknown option 'bogus'"):
        torch._C._jit_to_backend("kiln", scripted, {"forward": {"bogus": True}})


def test_to_backend_compiles_forward_only(scripted):
    with pytest.raises(Exception, match="'forward' only"):
        torch._C._jit_to_backend("kiln", scripted, {"other": {"strict": True}})


class _Indexing(torch.nn.Module):
    def forward(self, x, idx):
        picked = x.relu()[:, idx] * 2  # aten::index(x, [None, idx])
        return picked.index_put((idx,), torch.ones(4), accumulate=True).sigmoid()


def test_indexing_with_none_in_the_indices_runs_in_a_region():
    scripted = torch.jit.script(_Indexing())
    x, idx = torch.randn(4, 5), torch.tensor([3, 0, 3, 1])
    compiled = kiln.compile(scripted, options={"strict": True})
    assert torch.equal(compiled(x, idx), scripted(x, idx))
    where = {e["op"]: e["where"] for e in json.loads(compiled.explain(x, idx))["entries"]}
    assert where["aten::index.Tensor"] == "extern ATen", where
    assert where["aten::index_put"] == "extern ATen", where

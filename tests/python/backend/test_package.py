"""Packages (kiln.save / kiln.load, docs/packages.md): a model saved in one process runs in a
fresh one with zero code modules compiled, no graph passes run and bit-identical results; a package from another
CPU compiles with one warning; a corrupt or foreign file is refused; torch.compile'd models are
saved through tracing."""

import json

import pytest
import torch

import kiln
from child import run_child

_MODEL = """
import json, torch, kiln
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(16, 32)
        self.norm = torch.nn.LayerNorm(32)
    def forward(self, x):
        return torch.softmax(self.norm(self.linear(x)) * 2 + x.sum(), -1).tanh()
torch.manual_seed(0)
model = Model().eval()
inputs = [torch.randn(3, 16), torch.randn(5, 16)]
"""

_SAVE = _MODEL + """
compiled = kiln.compile(torch.jit.trace(model, (inputs[0],)))
outs = [compiled(x).flatten().tolist() for x in inputs]
kiln.save(compiled, {path!r})
torch.save((model.state_dict(), inputs), {path!r} + ".ref")
print(json.dumps(outs))
"""

_LOAD = _MODEL + """
state, inputs = torch.load({path!r} + ".ref")
model.load_state_dict(state)
kiln.reset_stats()
loaded = kiln.load({path!r})
compiled_at_load = loaded.num_specializations
outs = [loaded(x) for x in inputs]
for out, x in zip(outs, inputs):
    torch.testing.assert_close(out, model(x), atol=1e-5, rtol=1e-4)
s = kiln.stats()
print(json.dumps({{"outs": [o.flatten().tolist() for o in outs], "at_load": compiled_at_load,
                   "compiled": s["modules_compiled"], "loaded": s["modules_loaded"],
                   "graphs_loaded": s["graphs_loaded"],
                   "kernels": s["kernels"], "kwargs": kiln.unwrap(loaded)[1]}}))
"""


def _last_json(text: str):
    return json.loads(next(line for line in reversed(text.splitlines()) if line.startswith(("{", "["))))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("package") / "model.kiln")
    outs = _last_json(run_child(_SAVE.format(path=path), env={"KILN_CACHE": "0"}))
    return path, outs


def _cpu_feature_present() -> str | None:
    flags = open("/proc/cpuinfo").read().split()
    return next((f for f in ("avx2", "avx", "sse4_2") if f in flags), None)


def test_a_fresh_process_runs_a_package_without_generating_code(saved):
    path, outs = saved
    result = _last_json(run_child(_LOAD.format(path=path), env={"KILN_CACHE": "0"}))
    assert result["at_load"] == 2  # both saved signatures compiled by load itself
    assert result["kernels"] > 0 and result["loaded"] > 0, result
    assert result["compiled"] == 0, result  # no code generated: it all came from the package
    assert result["graphs_loaded"] == 2, result  # nor the graph passes run, per signature
    assert result["outs"] == outs  # bit for bit: the same code ran
    assert result["kwargs"]["options"]["mode"] == "default"


def test_a_package_from_another_cpu_compiles_with_one_warning(saved):
    path, outs = saved
    feature = _cpu_feature_present()
    if feature is None:
        pytest.skip("this CPU has none of avx2, avx, sse4.2 to leave out")
    out = run_child(_LOAD.format(path=path), stderr=True,
                    env={"KILN_CACHE": "0", "KILN_LOG": "warn",
                         "KILN_CPU_FEATURES": "-" + feature.replace("_", ".")})
    result = _last_json(out.split("kiln: warning")[0])
    assert out.count("does not fit here") == 1, out
    assert "CPU features" in out
    assert result["compiled"] > 0 and result["at_load"] == 2, result


def test_bad_files_are_refused_with_what_is_wrong(saved, tmp_path):
    path, _ = saved
    data = open(path, "rb").read()
    cases = {
        "not_a_package": (b"PK\x03\x04" + b"\0" * 64, "not a kiln package"),
        "truncated": (data[: len(data) // 2], "truncated or corrupt"),
        "flipped": (data[:100] + bytes([data[100] ^ 1]) + data[101:], "checksum"),
        # In the module's archive, read while the checksum runs beside it, and in the entries.
        **{f"flipped_at_{at}": (data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1:], "checksum")
           for at in (data.index(b"PK\x03\x04") + 200, len(data) // 2, len(data) - 20)},
        "other_version": (data[:8] + b"\x63\0\0\0" + data[12:], "package format 99"),
    }
    for name, (content, message) in cases.items():
        bad = tmp_path / name
        bad.write_bytes(content)
        with pytest.raises(kiln.KilnError, match=message):
            kiln.load(str(bad))
    with pytest.raises(kiln.KilnError, match="No such file"):
        kiln.load(str(tmp_path / "missing.kiln"))
    with pytest.raises(kiln.KilnError, match="cannot write kiln package"):
        kiln.save(kiln.load(path), str(tmp_path / "no" / "such" / "dir.kiln"))


def test_a_torch_compile_model_is_saved_by_tracing(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.SiLU()).eval()
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="kiln", options={"fusion": True})
    with pytest.raises(kiln.KilnError, match="example_inputs"):
        kiln.save(compiled, str(tmp_path / "m.kiln"))
    kiln.save(compiled, str(tmp_path / "m.kiln"), example_inputs=(x,))
    loaded = kiln.load(str(tmp_path / "m.kiln"))
    assert loaded.num_specializations == 1
    torch.testing.assert_close(loaded(x), model(x), atol=1e-5, rtol=1e-4)
    assert kiln.unwrap(loaded)[1]["options"]["fusion"] == "true"


def test_a_signature_compiled_under_no_grad_loads_as_one(tmp_path):
    # Grad mode is part of a signature: saved after calls under no_grad, a package compiles the
    # no_grad specialization at load, so the first no_grad call after it compiles nothing.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh()).eval()
    x = torch.randn(4, 8)
    with torch.no_grad():
        compiled = kiln.compile(torch.jit.trace(model, (x,)))
        compiled(x)
        kiln.save(compiled, str(tmp_path / "m.kiln"))
        loaded = kiln.load(str(tmp_path / "m.kiln"))
        assert loaded.num_specializations == 1
        torch.testing.assert_close(loaded(x), model(x), atol=1e-5, rtol=1e-4)
        assert loaded.num_specializations == 1
    loaded(x)  # grad mode on: another signature
    assert loaded.num_specializations == 2


def test_a_loaded_modules_original_is_read_at_first_use_and_kept_apart(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh()).eval()
    x = torch.randn(4, 8)
    kiln.save(kiln.compile(torch.jit.trace(model, (x,))), str(tmp_path / "m.kiln"), example_inputs=(x,))
    loaded = kiln.load(str(tmp_path / "m.kiln"))
    expected = model(x).detach()
    torch.testing.assert_close(loaded(x), expected, atol=1e-5, rtol=1e-4)
    assert "_orig_mod" not in vars(loaded)  # calls run without it
    original, kwargs = kiln.unwrap(loaded)
    assert isinstance(original, torch.jit.ScriptModule) and kwargs["backend"] == "kiln"
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(original.state_dict()[name], tensor, atol=0, rtol=0)
    with torch.no_grad():
        dict(original.named_parameters())["0.weight"].zero_()
    # The compiled module runs its own copy of the weights, as one from kiln.compile does.
    torch.testing.assert_close(loaded(x), expected, atol=1e-5, rtol=1e-4)

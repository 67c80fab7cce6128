"""ScriptModules from Python: kiln.compile's C++ TorchScript path and the to_backend API."""

import copy
import json
import os
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


@pytest.mark.parametrize("ahead", [False, True], ids=["compiled_at_load", "code_in_payload"])
def test_to_backend_runs_through_kiln_and_saves(tmp_path, scripted, ahead):
    x = torch.randn(3, 32)
    # From Python a spec's values must share one type (torch's dict conversion): example_inputs
    # goes alone.
    spec = {"example_inputs": (x,)} if ahead else {"strict": True}
    lowered = torch._C._jit_to_backend("kiln", scripted, {"forward": spec})
    kiln.reset_stats()
    assert_close(lowered(x), scripted(x))
    assert kiln.stats()["specializations"] >= 1
    path = tmp_path / "lowered.pt"
    torch.jit.save(lowered, str(path))
    torch.save(x, tmp_path / "x.pt")
    torch.save(scripted(x), tmp_path / "expected.pt")
    code = (
        "import json, sys, torch, kiln\n"
        f"m = torch.jit.load({str(path)!r})\n"
        f"x = torch.load({str(tmp_path / 'x.pt')!r})\n"
        f"torch.testing.assert_close(m(x), torch.load({str(tmp_path / 'expected.pt')!r}))\n"
        "print(json.dumps(kiln.stats()))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=300, env={**os.environ, "KILN_CACHE": "0"})
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout.splitlines()[-1])
    assert stats["specializations"] >= 1 and stats["kernels"] >= 1, stats
    if ahead:  # the payload carried the code: a fresh process without a disk cache compiles none
        assert stats["modules_compiled"] == 0 and stats["modules_loaded"] >= 1, stats
    else:
        assert stats["modules_compiled"] >= 1, stats


def test_to_backend_example_inputs_must_be_a_tuple(scripted):
    with pytest.raises(Exception, match="example_inputs must be a tuple or list"):
        torch._C._jit_to_backend("kiln", scripted, {"forward": {"example_inputs": 3}})


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


class _NoneForATensor(torch.nn.Module):
    # TorchScript types an unannotated `bias=None` as Tensor: called without it, the region that
    # adds it gets an undefined tensor, and the interpreter raises.
    def forward(self, x, bias=None):
        y = x.exp()
        return y if bias is None else y + bias


def test_none_where_the_graph_reads_a_tensor_is_the_models_error_not_kilns(capfd):
    scripted = torch.jit.script(_NoneForATensor())
    compiled = kiln.compile(scripted)
    x, bias = torch.randn(2, 4), torch.randn(4)
    assert_close(compiled(x, bias), scripted(x, bias))
    with pytest.raises(RuntimeError, match="got None"):
        scripted(x)
    with pytest.raises(kiln.KilnError, match="(?s)failed on these inputs.*got None"):
        compiled(x)
    assert "kiln bug" not in capfd.readouterr().err
    strict = kiln.compile(scripted, options={"strict": True})
    with pytest.raises(kiln.KilnError, match=r"input 1 is None \(an undefined tensor\)"):
        strict(x)
    assert_close(compiled(x, bias), scripted(x, bias))


class _Pieces(torch.nn.Module):
    def forward(self, x):
        a, b = x.relu().chunk(2, dim=1)  # prim::ConstantChunk when traced
        c, d, e = x.split([2, 3, 3], dim=1)
        h, i = x.split(4, dim=-1)
        f, g = x[:2].unbind(0)
        return a * b.sigmoid() + h - i, torch.cat([c, d, e.exp()], 1), f * g


@pytest.mark.parametrize("capture", ["script", "trace"])
def test_split_chunk_and_unbind_pieces_stay_inside_the_region(capture):
    """A split unpacked into its pieces becomes one slice per piece inside the region; as a list
    it used to stay in the interpreter and cut the graph (traced ShuffleNetV2: 13 chunks)."""
    x = torch.randn(4, 8)
    module = torch.jit.script(_Pieces()) if capture == "script" else torch.jit.trace(_Pieces(), x)
    compiled = kiln.compile(module, options={"strict": True})
    for got, want in zip(compiled(x), module(x)):
        assert_close(got, want)
    entries = json.loads(compiled.explain(x))["entries"]
    interpreted = [e["op"] for e in entries if e["where"] == "TorchScript interpreter"]
    assert interpreted == [], interpreted


class _TooFewChunks(torch.nn.Module):
    def forward(self, x):
        a, b, c = x.exp().chunk(3)
        return a + b + c


def test_a_chunk_that_cuts_fewer_pieces_than_unpacked_raises_torchscripts_error():
    # chunk(3) of 2 rows cuts 2 pieces, and the unpack of 3 fails: the region runs in the
    # interpreter, whose error kiln passes on (eager says "Expected chunk to return at least 3
    # outputs, but got only 2"; the frozen graph unpacks a list).
    scripted = torch.jit.script(_TooFewChunks())
    compiled = kiln.compile(scripted)
    with pytest.raises(RuntimeError, match="got only 2"):
        scripted(torch.randn(2, 4))
    with pytest.raises(kiln.KilnError,
                       match=r"(?s)failed on these inputs.*Expected 3 elements in a list but found 2"):
        compiled(torch.randn(2, 4))
    assert_close(compiled(torch.ones(3, 4)), scripted(torch.ones(3, 4)))


class _ChannelShuffle(torch.nn.Module):
    def forward(self, x):
        b, c, h, w = x.size()
        y = x.relu().view(b, 2, c // 2, h, w).transpose(1, 2).contiguous()
        return y.view(b, -1, h, w).sigmoid()


def test_a_traced_channel_shuffle_compiles_into_one_region():
    """Traced, the shuffle computes its view sizes from aten::size at run time; each signature
    fixes them, so they fold to constants and the views join the region (ShuffleNetV2)."""
    model = _ChannelShuffle()
    traced = torch.jit.trace(model, torch.randn(2, 8, 3, 3))
    compiled = kiln.compile(traced, options={"strict": True})
    for shape in [(2, 8, 3, 3), (1, 4, 5, 2)]:
        x = torch.randn(shape)
        assert_close(compiled(x), model(x))
        explained = json.loads(compiled.explain(x))
        assert explained["interpreter"] == 0, explained["entries"]
        assert explained["regions"] == 1


class _InPlaceBlocks(torch.nn.Module):
    """GhostNet's add into a slice of a fresh cat, and SKNet's relu_ whose result the next step
    splits: in place on memory only the graph holds, where TorchScript's RemoveTensorMutation
    leaves them; and one in place on the input, which the caller must see."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x, shortcut):
        y = torch.cat([self.conv(x), x * 2], 1)[:, :6]
        y += shortcut
        y = torch.relu_(y)
        a, b = y.split(3, 1)
        x.mul_(3)
        return torch.cat([self.conv(torch.cat([a, b[:, :1]], 1)), b], 1)


def test_in_place_ops_on_memory_the_graph_owns_join_the_region():
    model = _InPlaceBlocks().eval()
    inputs = (torch.randn(2, 4, 6, 6), torch.randn(2, 6, 6, 6))
    compiled = kiln.compile(torch.jit.trace(model, tuple(t.clone() for t in inputs)))
    with torch.no_grad():
        expected_x, got_x = inputs[0].clone(), inputs[0].clone()
        expected = model(expected_x, inputs[1])
        assert_close(compiled(got_x, inputs[1]), expected, atol=1e-5, rtol=1e-5)
        assert torch.equal(got_x, expected_x)  # the input's write, as eager made it
        entries = json.loads(compiled.explain(inputs[0].clone(), inputs[1]))["entries"]
    in_place = [e["op"] for e in entries if e["where"] == "TorchScript interpreter"]
    assert in_place == ["aten::mul_"], entries


class _InPlaceAddOfWiderDtype(torch.nn.Module):
    def forward(self, x, d):
        y = x * 2
        y += d  # in place the sum stays float32; a functional add would make it float64
        return torch.relu_(y), y.sum()


def test_an_in_place_add_keeps_its_dtype_where_the_functional_one_would_promote():
    model = _InPlaceAddOfWiderDtype()
    x, d = torch.randn(3, 4), torch.randn(3, 4, dtype=torch.float64)
    compiled = kiln.compile(torch.jit.trace(model, (x, d)))
    for got, want in zip(compiled(x, d), model(x, d)):
        assert got.dtype == want.dtype == torch.float32
        assert_close(got, want, atol=1e-6, rtol=1e-6)


class _SliceWrites(torch.nn.Module):
    """Writes into slices of fresh tensors: Swin's attention mask (zeros filled block by block),
    BART's shifted tokens (a copy into a slice, a fill of the first column), and a bias copy
    with a slice zeroed (Swin V2's qkv bias)."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(12))

    def forward(self, x, tokens):
        mask = x.new_zeros((x.shape[-2], x.shape[-1]))
        count = 0
        for h in ((0, -2), (-2, -1), (-1, None)):
            for w in ((0, -3), (-3, None)):
                mask[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        shifted = tokens.new_zeros(tokens.shape)
        shifted[:, 1:] = tokens[:, :-1].clone()
        shifted[:, 0] = 2
        bias = self.bias.clone()
        bias[4:8].zero_()
        return x + mask, shifted * 3, bias * 2


def test_writes_into_slices_of_fresh_tensors_join_the_region():
    model = _SliceWrites().eval()
    inputs = (torch.randn(2, 3, 5, 7), torch.randint(0, 100, (2, 6)))
    with torch.no_grad():
        compiled = kiln.compile(torch.jit.trace(model, inputs), options={"strict": True})
        for x, tokens in [inputs, (torch.randn(1, 2, 4, 6), torch.randint(0, 100, (3, 4)))]:
            for got, want in zip(compiled(x, tokens), model(x, tokens)):
                assert got.dtype == want.dtype
                assert torch.equal(got, want)
        explained = json.loads(compiled.explain(*inputs))
    interpreted = {e["op"] for e in explained["entries"] if e["where"] == "TorchScript interpreter"}
    assert interpreted <= {"prim::TupleConstruct"}, explained["entries"]  # the returned tuple
    assert explained["regions"] == 1


class _ScriptedColumnWrites(torch.nn.Module):
    """Scripted, `z[:, k] = 0.5` makes its number a tensor of z's dtype and device first."""

    def forward(self, x, y):
        z = torch.zeros_like(x)
        z[:, :2] = y[:, :2] + x[:, :2]
        z[:, 2] = 0.5
        z[:, 3:] = x[:, 3:]
        return z


def test_scripted_writes_into_slices_of_a_fresh_tensor_join_the_region():
    model = _ScriptedColumnWrites()
    compiled = kiln.compile(torch.jit.script(model), options={"strict": True})
    x, y = torch.randn(2, 5, 3), torch.randn(2, 5, 3)
    assert torch.equal(compiled(x, y), model(x, y))
    explained = json.loads(compiled.explain(x, y))
    assert explained["interpreter"] == 0, explained["entries"]
    assert explained["regions"] == 1


class _IndexedByConstants(torch.nn.Module):
    """Indexing by constant tensors (a buffer, a traced index): freezing folds each index list
    into one constant list (Falcon's `x[..., idx]`)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("order", torch.tensor([2, 0, 1]))

    def forward(self, x):
        return x[:, self.order] * 2 + x[:, :, torch.tensor(-1)].unsqueeze(-1)


def test_indexing_by_constant_tensors_joins_the_region():
    model = _IndexedByConstants()
    x = torch.randn(2, 3, 4)
    compiled = kiln.compile(torch.jit.trace(model, x), options={"strict": True})
    assert torch.equal(compiled(x), model(x))
    explained = json.loads(compiled.explain(x))
    assert explained["interpreter"] == 0, explained["entries"]
    assert explained["regions"] == 1


class _DenseBlock(torch.nn.Module):
    """DenseNet's block as torchvision writes it: a list of features that each layer
    concatenates and appends to, with an input check on the concatenation."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Conv2d(4 + 2 * i, 2, 3, padding=1)
                                          for i in range(3))

    def forward(self, x):
        features = [x]
        for layer in self.layers:
            joined = torch.cat(features, 1)
            if joined.dim() != 4:
                raise ValueError(f"expected 4D input (got {joined.dim()}D input)")
            features.append(torch.relu(layer(joined)))
        return torch.cat(features, 1)


def test_a_scripted_list_appended_between_reads_joins_the_region():
    model = _DenseBlock().eval()
    compiled = kiln.compile(torch.jit.script(model), options={"strict": True})
    with torch.no_grad():
        for shape in [(1, 4, 6, 6), (2, 4, 5, 3)]:
            x = torch.randn(shape)
            assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-5)
        explained = json.loads(compiled.explain(x))
    assert explained["interpreter"] == 0, explained["entries"]
    assert explained["regions"] == 1


def test_an_input_that_requires_grad_gets_its_gradient(scripted):
    """Generated kernels record no autograd history: a signature whose inputs require grad runs
    its ops through ATen, so the output has a grad_fn and the input its gradient."""
    compiled = kiln.compile(scripted)
    x = torch.randn(4, 32, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    out = compiled(x)
    assert out.requires_grad
    out.square().sum().backward()
    scripted(x_ref).square().sum().backward()
    assert_close(x.grad, x_ref.grad)
    with torch.no_grad():
        assert_close(compiled(x), scripted(x))


def test_dropout_is_gone_from_the_captured_graph():
    """kiln captures a module in eval mode, where dropout is the identity; an in-place dropout
    (traced EfficientNet's) used to stay in the interpreter between two regions."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Flatten(1),
                                torch.nn.Dropout(0.5, inplace=True),  # on a view: stays in place
                                torch.nn.Linear(8, 4)).eval()
    x = torch.randn(3, 2, 4)
    compiled = kiln.compile(torch.jit.trace(model, x), options={"strict": True})
    assert_close(compiled(x), model(x))
    explained = json.loads(compiled.explain(x))
    assert explained["interpreter"] == 0 and explained["regions"] == 1, explained["entries"]


class _MoreViews(torch.nn.Module):
    def forward(self, x, like):
        y = x.relu().swapaxes(0, 1).swapdims(1, 2)  # MaxViT's window partition, traced
        z = y.unflatten(0, (2, 2)).movedim([0, 1], [1, 0]).movedim(0, -1)
        return z.sigmoid() * 2, x.exp().view_as(like) + x.transpose(0, 2).relu().reshape_as(like)


def test_swapaxes_movedim_unflatten_view_as_and_reshape_as_join_the_region():
    x, like = torch.randn(3, 4, 5), torch.empty(60)
    scripted = torch.jit.script(_MoreViews())
    compiled = kiln.compile(scripted, options={"strict": True})
    for got, want in zip(compiled(x, like), scripted(x, like)):
        assert_close(got, want)
    explained = json.loads(compiled.explain(x, like))
    assert explained["interpreter"] == 0 and explained["regions"] == 1, explained["entries"]


class _Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, 2, c // 2).permute(2, 0, 3, 1, 4).unbind(0)
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v).transpose(1, 2)
        return y.reshape(y.size(0) * y.size(1), -1)  # sizes of a value attention computed


def test_sizes_after_attention_fold():
    """TorchScript lists scaled_dot_product_attention as random (it has a dropout_p); a meta run
    draws no random numbers, so the sizes after it fold too (timm's DeiT: 34 regions before)."""
    model = _Attention().eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        compiled = kiln.compile(torch.jit.trace(model, x), options={"strict": True})
        assert_close(compiled(x), model(x))
        explained = json.loads(compiled.explain(x))
    assert explained["interpreter"] == 0 and explained["regions"] == 1, explained["entries"]


class _Heads(torch.nn.Module):
    """Size arithmetic as tracing records it: aten::size -> prim::NumToTensor -> tensor ops ->
    aten::Int, for a view, a reshape and a slice of a position table."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(32, 32)
        self.pos = torch.nn.Parameter(torch.randn(1, 64, 32))

    def forward(self, x):
        batch, tokens, width = x.shape
        y = self.proj(x + self.pos[:, :tokens])
        y = y.view(batch, tokens, 4, width // 4).transpose(1, 2).softmax(-1)
        return y.reshape(batch * tokens, width)[: tokens + 1]


def test_a_traced_model_over_lengths_compiles_once_more_for_all_of_them():
    model = _Heads().eval()
    with torch.no_grad():
        traced = torch.jit.trace(model, torch.randn(2, 5, 32))
    compiled = kiln.compile(traced)
    kiln.reset_stats()
    for tokens in (5, 9, 2, 17, 40, 3, 9, 64):
        x = torch.randn(2, tokens, 32)
        with torch.no_grad():
            assert_close(compiled(x), model(x))
    # The first length on its own, the second as a shape class that every later length runs.
    assert compiled.num_specializations == 2
    stats = kiln.stats()
    assert stats["fallbacks"] == 0 and stats["shape_classes"] >= 1
    with torch.no_grad():  # as the calls ran: grad mode is part of the signature
        explained = json.loads(compiled.explain(torch.randn(2, 11, 32)))
    assert explained["interpreter"] == 0 and compiled.num_specializations == 2

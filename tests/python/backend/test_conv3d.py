"""3-D convolutions (video models): they run on kiln's own oneDNN primitive, NDHWC from the first
to the last, with their batch norms folded, their post-ops inside and ATen's values, on both entry
points; and in bf16 under precision="bf16"."""

import json
import re

import pytest
import torch

import kiln
from models import traced_after_checking_both_entry_points

pytestmark = pytest.mark.skipif(not hasattr(torch.ops.kiln, "onednn_conv3d"),
                                reason="kiln built without its own oneDNN")


class _VideoNet(torch.nn.Module):
    """What ResNet3D, MC3 and R(2+1)D are made of: a 3x7x7 stem over 3 channels, batch norms, a
    max pool, a 3x3x3 residual block over few values per channel (where ATen's own kernel is
    NCDHW), R(2+1)D's factored 1x3x3 and 3x1x1 convolutions, a strided grouped one with a SiLU,
    an average pool and a classifier."""

    def __init__(self, width=16):
        super().__init__()
        w = width
        self.stem = torch.nn.Conv3d(3, w, (3, 7, 7), stride=(1, 2, 2), padding=(1, 3, 3),
                                    bias=False)
        self.stem_bn = torch.nn.BatchNorm3d(w)
        self.block = torch.nn.Conv3d(w, w, 3, padding=1, bias=False)
        self.block_bn = torch.nn.BatchNorm3d(w)
        self.spatial = torch.nn.Conv3d(w, 2 * w, (1, 3, 3), padding=(0, 1, 1))
        self.temporal = torch.nn.Conv3d(2 * w, 2 * w, (3, 1, 1), padding=(1, 0, 0))
        self.down = torch.nn.Conv3d(2 * w, 2 * w, 3, stride=2, padding=1, groups=2)
        self.fc = torch.nn.Linear(2 * w, 10)
        for bn in (self.stem_bn, self.block_bn):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        F = torch.nn.functional
        y = F.max_pool3d(torch.relu(self.stem_bn(self.stem(x))), 3, 2, 1)
        y = torch.relu(self.block_bn(self.block(y)) + y)
        y = self.temporal(torch.relu(self.spatial(y)))
        y = F.silu(self.down(y))
        return self.fc(F.adaptive_avg_pool3d(y, 1).flatten(1))


# A channels-last (NDHWC) 5-D float value as the plan prints it: the channel dim's stride is 1.
_NDHWC = re.compile(r"(f32|bf16)\[\d+,\d+,\d+,\d+,\d+\]\{\d+,1,")


def _final_plan(model, x, tmp_path, options) -> str:
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend="kiln", options={"dump_dir": str(tmp_path), **options})(x)
    return sorted(tmp_path.glob("*plan_memory.kir"))[-1].read_text()


def test_video_convolutions_run_ndhwc_on_kilns_onednn_with_atens_values(tmp_path):
    torch.manual_seed(0)
    model = _VideoNet().eval()
    x = torch.randn(2, 3, 8, 32, 32)
    traced = traced_after_checking_both_entry_points(model, x, rtol=1e-5)
    ops = [entry["op"] for entry in json.loads(traced.explain(x))["entries"]]
    assert ops.count("kiln::onednn_conv3d") == 5 and "aten::_convolution" not in ops, ops
    final = _final_plan(model, x, tmp_path, {})
    convolutions = [line for line in final.splitlines() if "= kiln::onednn_conv3d(" in line]
    assert len(convolutions) == 5, final
    assert all(_NDHWC.search(line) for line in convolutions), convolutions
    for atens in ("convolution", "conv3d", "batch_norm", "mkldnn"):
        assert atens not in final.replace("kiln::onednn_conv3d", ""), final
    # The clip is converted inside the stem, and nothing goes back to NCDHW on the way.
    assert "memory_format=0" not in final and "memory_format=3" not in final, final
    pools = [line for line in final.splitlines() if "= aten::max_pool3d(" in line]
    assert len(pools) == 1 and _NDHWC.search(pools[0]), final


class _VolumeUNet(torch.nn.Module):
    """A 3-D U-Net's level (medical volumes): convolutions, a max pool, a trilinear and a nearest
    upsampling, a skip concatenation."""

    def __init__(self):
        super().__init__()
        self.enc = torch.nn.Conv3d(2, 8, 3, padding=1)
        self.mid = torch.nn.Conv3d(8, 8, 3, padding=1)
        self.dec = torch.nn.Conv3d(24, 4, 3, padding=1)

    def forward(self, x):
        F = torch.nn.functional
        skip = torch.relu(self.enc(x))
        y = torch.relu(self.mid(F.max_pool3d(skip, 2)))
        smooth = F.interpolate(y, scale_factor=2.0, mode="trilinear", align_corners=False)
        near = F.interpolate(y, scale_factor=2.0, mode="nearest")
        return self.dec(torch.cat([smooth, near, skip], 1))


def test_a_volume_unet_stays_ndhwc_through_its_upsamplings(tmp_path):
    torch.manual_seed(2)
    model = _VolumeUNet().eval()
    x = torch.randn(1, 2, 8, 16, 16)
    traced = traced_after_checking_both_entry_points(model, x, rtol=1e-5)
    entries = json.loads(traced.explain(x))["entries"]
    assert [e["op"] for e in entries].count("kiln::onednn_conv3d") == 3, entries
    assert json.loads(traced.explain(x))["channels_last_conversions"] <= 2, entries  # in, out
    final = _final_plan(model, x, tmp_path, {})
    # Nothing goes back to NCDHW before the last convolution (after it, the output's for the
    # caller).
    assert "memory_format=0" not in final.rsplit("kiln::onednn_conv3d(", 1)[0], final


@pytest.mark.skipif(not kiln._C.native_bf16(),
                    reason="this CPU has no native bf16 (AVX512-BF16 or AMX)")
def test_video_convolutions_multiply_in_bf16_under_precision_bf16(tmp_path):
    torch.manual_seed(1)
    model = _VideoNet(width=32).eval()
    x = torch.randn(1, 3, 8, 32, 32)
    with torch.no_grad():
        expected = model(x)
        torch._dynamo.reset()
        got = torch.compile(model, backend="kiln", options={"precision": "bf16"})(x)
    error = ((got.double() - expected.double()).norm() / expected.double().norm()).item()
    assert 1e-5 < error < 1e-2, error  # bf16's rounding, not float32's, and no more
    final = _final_plan(model, x, tmp_path, {"precision": "bf16"})
    bf16 = [line for line in final.splitlines()
            if "= kiln::onednn_conv3d(" in line and 'precision="bf16"' in line]
    assert len(bf16) == 5, final

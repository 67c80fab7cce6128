"""Pools and resampling in convolutional nets: max and average pools run on kiln's own oneDNN
primitives with ATen's values, and pools, upsampling and padding keep a feature map channels-last
between convolutions (assign_layout), on both entry points."""

import re

import pytest
import torch

import kiln
from models import assert_close

pytestmark = pytest.mark.skipif(not hasattr(torch.ops.kiln, "onednn_max_pool2d"),
                                reason="kiln built without its own oneDNN")


class _Pools(torch.nn.Module):
    """Max pools as networks write them: after a stem, with ceil_mode, dilated, over NCHW."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.conv = torch.nn.Conv2d(16, 16, 3, padding=1)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.stem(x)), 3, 2, 1)
        y = torch.nn.functional.max_pool2d(self.conv(y), 2, ceil_mode=True)
        z = torch.nn.functional.max_pool2d(x * 2, 3, 1, 1, dilation=2)
        return y, z


@pytest.mark.parametrize("nan", [False, True], ids=["finite", "with_nan"])
def test_max_pools_run_on_kilns_onednn_pool_with_atens_values(nan, tmp_path):
    model = _Pools().eval()
    x = torch.randn(2, 3, 15, 15)
    if nan:
        x[0, 1, 4, 4] = float("nan")
    with torch.no_grad():
        expected = model(x)
        torch._dynamo.reset()
        dumped = torch.compile(model, backend="kiln", options={"dump_dir": str(tmp_path)})
        for compiled in (dumped, kiln.compile(torch.jit.trace(model, (x,)))):
            # With a NaN: only the pool that reads the input directly (oneDNN's convolutions with
            # a relu post-op turn a NaN into 0 where ATen's keep it).
            for got, want in list(zip(compiled(x), expected))[1 if nan else 0:]:
                assert torch.equal(got.isnan(), want.isnan())
                assert_close(got.nan_to_num(), want.nan_to_num(), atol=1e-5, rtol=1e-4)
    final = sorted(tmp_path.glob("*plan_memory.kir"))[-1].read_text()
    assert final.count("kiln::onednn_max_pool2d(") == 3 and "aten::max_pool2d" not in final, final


class _AveragePools(torch.nn.Module):
    """Average pools as networks write them, between convolutions (which keep the layout
    channels-last): PoolFormer's token mixer, DenseNet's transition, Inception's branch pool,
    a ceil_mode window past the padding, and a divisor_override (ATen's alone)."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.conv = torch.nn.Conv2d(16, 16, 1)

    def forward(self, x):
        F = torch.nn.functional
        y = torch.relu(self.stem(x))
        y = F.avg_pool2d(y, 3, 1, 1, count_include_pad=False) - y
        y = F.avg_pool2d(self.conv(y), 2)
        a = F.avg_pool2d(y, 3, 1, 1)
        b = F.avg_pool2d(y, 3, 2, 1, ceil_mode=True)
        c = F.avg_pool2d(y, 2, divisor_override=3)
        return self.conv(a), b, c


# A channels-last 4-D float32 value as the plan prints it: the channel dim's stride is 1
# (f32[n,c,h,w]{s0,1,s2,s3}).
_CHANNELS_LAST = re.compile(r"f32\[\d+,\d+,\d+,\d+\]\{\d+,1,")


def _final_plan_checked_on_both_paths(model, x, tmp_path) -> str:
    """Runs `model` through torch.compile and the TorchScript path against eager (float32
    tolerances) and returns torch.compile's final plan."""
    with torch.no_grad():
        expected = model(x)
        torch._dynamo.reset()
        dumped = torch.compile(model, backend="kiln", options={"dump_dir": str(tmp_path)})
        for compiled in (dumped, kiln.compile(torch.jit.trace(model, (x,)))):
            assert_close(compiled(x), expected, atol=1e-5, rtol=1e-5)
    return sorted(tmp_path.glob("*plan_memory.kir"))[-1].read_text()


def test_average_pools_run_on_kilns_onednn_pool_channels_last(tmp_path):
    final = _final_plan_checked_on_both_paths(_AveragePools().eval(), torch.randn(2, 3, 14, 14),
                                              tmp_path)
    pools = [line for line in final.splitlines() if "= kiln::onednn_avg_pool2d(" in line]
    assert len(pools) == 4 and final.count("aten::avg_pool2d(") == 1, final
    assert all(_CHANNELS_LAST.search(line) for line in pools), pools


class _Upsampling(torch.nn.Module):
    """An FPN's or HRNet's upsampling between convolutions, nearest and bilinear, and a padding
    (TensorFlow's 'same' convolutions')."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.fuse = torch.nn.Conv2d(8, 8, 1)

    def forward(self, x):
        F = torch.nn.functional
        y = torch.relu(self.conv(x))
        near = F.interpolate(y, scale_factor=2.0, mode="nearest")
        smooth = F.interpolate(y, size=(16, 16), mode="bilinear", align_corners=False)
        return self.fuse(F.pad(near + smooth, (0, 1, 0, 1)))


def test_upsampling_and_padding_keep_the_feature_maps_channels_last(tmp_path):
    final = _final_plan_checked_on_both_paths(_Upsampling().eval(), torch.randn(2, 3, 16, 16),
                                              tmp_path)
    ops = ("= kiln::interpolate(", "= aten::constant_pad_nd(")
    resampled = [line for line in final.splitlines() if any(op in line for op in ops)]
    # Channels-last, with no copy back to NCHW before the last convolution (after it, the
    # output's for the caller).
    assert len(resampled) == 3, final
    assert all(_CHANNELS_LAST.search(line) for line in resampled), final
    assert "memory_format=0" not in final.rsplit("kiln::onednn_conv2d(", 1)[0], final


class _UpsampledPixel(torch.nn.Module):
    """A strided convolution down to a 1x1 map, upsampled and flattened for a classifier. On the
    CPU ATen's convolution returns that map channels-last and the upsampling follows it, where
    a meta run (the import's types) says contiguous: the `contiguous()` before the `view` is a
    copy eager makes, which kiln must make too."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 1, stride=4)
        self.head = torch.nn.Linear(32, 4)

    def forward(self, x):
        y = torch.nn.functional.interpolate(self.conv(x), scale_factor=2.0, mode="nearest")
        return self.head(y.contiguous().view(y.shape[0], 32))


def test_an_extern_output_in_another_layout_than_its_type_is_copied_into_it():
    model = _UpsampledPixel().eval().to(memory_format=torch.channels_last)
    x = torch.randn(3, 8, 3, 3).to(memory_format=torch.channels_last)
    strict = {"strict": True}  # a failed plan raises instead of running eagerly
    with torch.no_grad():
        expected = model(x)
        torch._dynamo.reset()
        for compiled in (torch.compile(model, backend="kiln", options=strict),
                         kiln.compile(torch.jit.script(model), options=strict)):
            assert_close(compiled(x), expected, atol=1e-5, rtol=1e-5)
    # The copy is a step of its own in a profile.
    report = kiln.profile(model, x, calls=1, peers=False)
    relayouts = [step for step in report.kiln["steps"] if step["name"].startswith("re-layout after")]
    assert [step["category"] for step in relayouts] == ["layout"], report.kiln["steps"]

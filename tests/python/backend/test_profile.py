"""kiln.profile: kiln's per-step times, the peers' per-layer times beside them, and how their
layers are classed and matched."""

import pytest
import torch

import kiln
from kiln import _profile


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        return self.fc(x.mean((2, 3)))


def test_profile_times_kiln_steps():
    model = ConvNet().eval()
    report = kiln.profile(model, torch.randn(2, 3, 32, 32), calls=3, peers=False)
    steps = report.kiln["steps"]
    assert steps and all(step["runs"] == 3 for step in steps)
    assert {"convolution", "gemm"} <= {step["category"] for step in steps}
    assert any(step["ops"] and "relu" in step["ops"] or "convolution_pointwise" in step["name"]
               or "onednn_conv2d" in step["name"] for step in steps)
    assert report.kiln["steps_ms"] <= report.kiln["call_ms"]
    assert "by category:" in str(report) and report.peers == {}


def test_profile_with_peers_matches_their_layers():
    report = kiln.profile(ConvNet().eval(), torch.randn(2, 3, 32, 32), calls=3)
    for peer in ("OpenVINO f32", "ONNX Runtime"):
        result = report.peers[peer]
        assert isinstance(result, dict), result
        assert result["layers"] and result["call_ms"] > 0
        assert sum(1 for x in result["layers"] if x["category"] == "convolution") == 2
    assert "(OpenVINO f32 2, ONNX Runtime 2 of kiln's 2 matched)" in report.text, report.text


def test_the_openvino_peer_runs_at_the_precision_asked():
    model, x = ConvNet().eval(), torch.randn(2, 3, 32, 32)
    report = kiln.profile(model, x, calls=2, peer_precision="default")
    assert "OpenVINO f32" not in report.peers
    result = report.peers["OpenVINO default"]
    assert isinstance(result, dict) and result["layers"], result
    assert "OpenVINO default" in report.text
    with pytest.raises(ValueError, match="peer_precision"):
        kiln.profile(model, x, calls=1, peer_precision="bf16")


def test_profile_of_a_function_runs_no_peers():
    compiled = torch.compile(ConvNet().eval(), backend="kiln")
    report = kiln.profile(lambda x: compiled(x), torch.randn(1, 3, 16, 16), calls=1)
    assert report.kiln["steps"]
    assert "not a module" in report.peers["peers"]


@pytest.mark.parametrize("kwargs", [{"calls": 0}, {"calls": 1.5}, {"warmup": 0}])
def test_bad_counts_are_refused(kwargs):
    with pytest.raises(ValueError, match="kiln.profile"):
        kiln.profile(ConvNet().eval(), torch.randn(1, 3, 8, 8), **kwargs)


def test_a_failed_call_closes_the_session():
    def broken(x):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        kiln.profile(broken, torch.randn(1), calls=1, peers=False)
    kiln._C.start_profiling()  # would raise if the failed profile had left its session open
    kiln._C.finish_profiling(1, 1.0)


@pytest.mark.parametrize("op, expected", [
    ("Convolution", "convolution"), ("GroupConvolution", "convolution"), ("Conv", "convolution"),
    ("Convert", "copy"), ("FullyConnected", "gemm"), ("MatMul", "gemm"), ("Gemm", "gemm"),
    ("ScaledDotProductAttention", "attention"), ("MultiHeadAttention", "attention"),
    ("Reorder", "layout"), ("ReorderOutput", "layout"), ("Softmax", "normalization"),
    ("MVN", "normalization"), ("GlobalAveragePool", "pooling"), ("Subgraph", "elementwise"),
    ("Relu", "elementwise"), ("Reshape", "view"), ("NonMaxSuppression", "other"),
])
def test_peer_ops_are_classed_like_kiln_steps(op, expected):
    assert _profile.category(op) == expected


def test_layers_run_in_another_order_still_match():
    def conv(i, o):
        return {"layer": {"category": "convolution", "input": i, "output": o, "name": ""}}

    a = [conv([1, 64, 56, 56], [1, 64, 56, 56]), conv([1, 64, 56, 56], [1, 128, 28, 28]),
         conv([1, 128, 28, 28], [1, 128, 28, 28]), conv([1, 128, 28, 28], [1, 256, 14, 14])]
    b = [a[0], a[2], a[1], a[3]]  # two independent layers the other way round
    assert _profile._match(a, b) == [(0, 0), (2, 1), (3, 3)]
    # Channels padded to ONNX Runtime's blocks of 16 still match.
    padded = [conv([1, 3, 224, 224], [1, 64, 112, 112])]
    assert _profile._match(padded, [conv([1, 16, 224, 224], [1, 64, 112, 112])]) == [(0, 0)]

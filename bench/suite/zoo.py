"""The model zoo: CPU, float32, random weights built from code or configs, nothing downloaded.

A Case builds (model, inputs) on demand. Inference cases are timed as model(*inputs); training
cases as one step: forward, a loss, backward and an SGD update.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch
from torch import nn


@dataclasses.dataclass
class Case:
    name: str
    build: Callable[[], tuple[nn.Module, tuple]]
    suites: tuple[str, ...]  # "quick" and/or "full"
    training: bool = False
    atol: float = 1e-4  # max abs diff against eager that counts as ok
    traceable: bool = True  # the TorchScript backends (kiln's C++ path, torch.jit) apply
    # A backend that computes in reduced precision (OpenVINO's default, bf16 where the CPU has
    # it) is judged by its norm-relative error, ||out - eager|| / ||eager||, against this.
    reduced_precision_rtol: float = 2e-2
    # Convolutions or matrix products: the cases where a precision option changes anything (the
    # bf16 geometric mean counts only these).
    multiplies: bool = True


class Chain(nn.Module):
    """Five elementwise ops over one tensor: mul, add, sigmoid, mul, sub."""

    def forward(self, x):
        return torch.sigmoid(x * 1.5 + 0.5) * x - 0.25


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def mlp(width=256, layers=3):
    mods = []
    for i in range(layers):
        mods.append(nn.Linear(width, width))
        if i + 1 < layers:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


def _vision(factory, batch):
    def build():
        import torchvision
        return getattr(torchvision.models, factory)(weights=None), (torch.randn(batch, 3, 224, 224),)
    return build


class FirstOutput(nn.Module):
    """Returns the first element of a transformers layer's tuple output."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        out = self.layer(x)
        return out[0] if isinstance(out, (tuple, list)) else out


def _standalone(config):
    """A layer's config as it is inside a loaded model: PreTrainedModel sets the attention
    implementation, a bare config leaves it None. With None, transformers' attention lookup logs a
    warning, and dynamo breaks every torch.compile graph there (3 breaks per layer) although the
    attention is the same function, eager_attention_forward, either way."""
    config._attn_implementation = "eager"
    return config


def _bert_layer(batch):
    def build():
        from transformers import BertConfig
        from transformers.models.bert.modeling_bert import BertLayer
        config = _standalone(BertConfig())  # BERT-base: hidden 768, 12 heads, intermediate 3072
        return FirstOutput(BertLayer(config)), (torch.randn(batch, 128, config.hidden_size),)
    return build


def _gpt2_block(batch):
    def build():
        from transformers import GPT2Config
        from transformers.models.gpt2.modeling_gpt2 import GPT2Block
        # GPT-2 small: hidden 768, 12 heads. No dropout, so that a training step's result can
        # be checked against eager's (inference never drops).
        config = _standalone(GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
        return FirstOutput(GPT2Block(config)), (torch.randn(batch, 128, config.n_embd),)
    return build


def _timm(name, batch):
    def build():
        import timm
        model = timm.create_model(name, pretrained=False)
        # timm zero-initializes some classifier heads (MLP-Mixer's): every output would be zero,
        # whatever the layers before computed, and the check against eager would prove nothing.
        with torch.no_grad():
            for parameter in model.parameters():
                if parameter.dim() >= 2 and not parameter.any():
                    nn.init.normal_(parameter, std=0.02)
        return model, (torch.randn(batch, 3, 224, 224),)
    return build


def _vit_tiny(batch):
    return _timm("vit_tiny_patch16_224", batch)


def _simple(module_factory, shape):
    return lambda: (module_factory(), (torch.randn(*shape),))


QUICK, FULL = ("quick", "full"), ("full",)

CASES = [
    Case("elementwise_chain_16M", _simple(Chain, (16 * 1024 * 1024,)), QUICK, atol=1e-5,
         multiplies=False),
    Case("softmax_4096x1024", _simple(Softmax, (4096, 1024)), QUICK, atol=1e-6,
         multiplies=False),
    Case("layer_norm_4096x1024", _simple(lambda: nn.LayerNorm(1024), (4096, 1024)), QUICK,
         atol=1e-4, multiplies=False),
    Case("mlp_b1", _simple(mlp, (1, 256)), QUICK),
    Case("mlp_b64", _simple(mlp, (64, 256)), QUICK),
    Case("resnet18_b1", _vision("resnet18", 1), QUICK, atol=1e-3),
    Case("bert_layer_s128", _bert_layer(1), QUICK, atol=1e-3),
    Case("train_mlp_b8", _simple(mlp, (8, 256)), QUICK, training=True),
    Case("train_resnet18_b8", _vision("resnet18", 8), QUICK, training=True, atol=1e-3),
    Case("mobilenet_v2_b1", _vision("mobilenet_v2", 1), FULL, atol=1e-3),
    Case("resnet50_b1", _vision("resnet50", 1), FULL, atol=1e-3),
    Case("gpt2_block_s128", _gpt2_block(1), FULL, atol=1e-3),
    Case("train_gpt2_block_s128", _gpt2_block(1), FULL, training=True, atol=1e-3),
    Case("vit_tiny_b1", _vit_tiny(1), FULL, atol=1e-3),
    Case("resnet18_b8", _vision("resnet18", 8), FULL, atol=1e-3),
    Case("mobilenet_v2_b8", _vision("mobilenet_v2", 8), FULL, atol=1e-3),
    Case("resnet50_b8", _vision("resnet50", 8), FULL, atol=1e-3),
    Case("bert_layer_s128_b8", _bert_layer(8), FULL, atol=1e-3),
    Case("gpt2_block_s128_b8", _gpt2_block(8), FULL, atol=1e-3),
    Case("vit_tiny_b8", _vit_tiny(8), FULL, atol=1e-3),
    # Depthwise convolutions with squeeze-and-excitation gates; grouped convolutions; large-kernel
    # depthwise convolutions with layer norms (ConvNeXt); an MLP mixer.
    Case("mobilenet_v3_large_b1", _vision("mobilenet_v3_large", 1), FULL, atol=1e-3),
    Case("efficientnet_b0_b1", _vision("efficientnet_b0", 1), FULL, atol=1e-3),
    Case("regnet_y_400mf_b1", _vision("regnet_y_400mf", 1), FULL, atol=1e-3),
    Case("convnext_tiny_b1", _vision("convnext_tiny", 1), FULL, atol=1e-3),
    Case("mixer_s16_b1", _timm("mixer_s16_224", 1), FULL, atol=1e-3),
    Case("efficientnet_b0_b8", _vision("efficientnet_b0", 8), FULL, atol=1e-3),
    Case("convnext_tiny_b8", _vision("convnext_tiny", 8), FULL, atol=1e-3),
]


def cases(suite: str) -> list[Case]:
    return [c for c in CASES if suite in c.suites]

"""What the worker scripts share: the model, the data, and writing results."""

import argparse
import json
import os
import pathlib

import torch

IN_FEATURES, OUT_FEATURES = 8, 4


class Net(torch.nn.Module):
    # A user-defined class, not nn.Sequential: with compile(DDP(net)) dynamo breaks the graph
    # at DDP's forward and Net.forward becomes a frame of its own; frames of torch.nn modules
    # are not compiled as top-level frames, so a Sequential would never reach kiln.
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(IN_FEATURES, 16)
        self.b = torch.nn.Linear(16, OUT_FEATURES)

    def forward(self, x):
        h = self.a(x)
        return self.b(torch.tanh(h) * torch.sigmoid(h))  # elementwise ops for kiln to fuse


def batches(rank: int, steps: int, batch: int = 4):
    """Each rank's own data: the gradients differ between ranks before the all-reduce."""
    g = torch.Generator().manual_seed(1000 + rank)
    return [(torch.randn(batch, IN_FEATURES, generator=g), torch.randn(batch, OUT_FEATURES, generator=g))
            for _ in range(steps)]


def parameters(module: torch.nn.Module) -> dict:
    return {name: p.detach().flatten().tolist() for name, p in module.named_parameters()}


def parse_args(extra=()):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--kwargs", default="{}", type=json.loads, help="compile kwargs, as JSON")
    for name, default in extra:
        parser.add_argument(name, default=default)
    return parser.parse_args()


def write(out: pathlib.Path, rank: int, **result) -> None:
    tmp = out / f".rank{rank}.json.tmp"
    tmp.write_text(json.dumps(result))
    os.replace(tmp, out / f"rank{rank}.json")  # complete or absent

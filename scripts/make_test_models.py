"""Writes the TorchScript test models (scripted and traced) into a directory.

The models are written at build time, never committed: `make test` and `make bench` call this.
Each model gets NAME.pt plus an entry in models.json with the inputs that `kiln run` and the
bench use (shapes as 1x3x32x32, dtype after a colon).
"""
import json
import os
import sys
from typing import List

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 128)
        self.fc3 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.gelu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return torch.log_softmax(self.fc3(x), dim=-1)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = F.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = torch.relu(self.bn2(self.conv2(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


class ControlFlow(nn.Module):
    """Control flow, a list and ints: the interpreter keeps these, kiln compiles around them."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x, steps: int):
        outs: List[torch.Tensor] = []
        h = torch.tanh(self.fc(x))
        for i in range(steps):
            if i % 2 == 0:
                h = torch.sigmoid(h) * 2.0 + 1.0
            else:
                h = h - h.mean(dim=-1, keepdim=True)
            outs.append(h)
        return torch.cat(outs, dim=1).sum(dim=0), len(outs)


class ElementwiseTuple(nn.Module):
    """All static tensor dataflow with two outputs, an extern op, and a cat."""

    def forward(self, x, y):
        a = torch.exp(x) + y * 2.0
        b = torch.where(a > 1.0, a, -a)
        c = torch.erfinv(torch.clamp(x, -0.9, 0.9))  # not in the op table: extern
        return torch.cat([b, c], dim=1), torch.softmax(b, dim=-1)


class DataDependent(nn.Module):
    """nonzero's output shape depends on the data: its region cannot get static types."""

    def forward(self, x):
        idx = torch.nonzero(x > 0)
        return idx.to(torch.float32).sum(dim=0) + 1.0


def build(out_dir):
    torch.manual_seed(0)
    models = {}

    def save(name, module, inputs, specs):
        module.save(os.path.join(out_dir, name + ".pt"))
        models[name] = {"inputs": specs}

    mlp = MLP().eval()
    save("mlp", torch.jit.script(mlp), None, ["8x64"])

    cnn = SmallCNN().eval()
    with torch.no_grad():  # non-trivial running statistics
        for bn in (cnn.bn1, cnn.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
    save("cnn_traced", torch.jit.trace(cnn, torch.randn(2, 3, 32, 32)), None, ["2x3x32x32"])

    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True,
                                       dropout=0.0).eval()
    save("transformer", torch.jit.script(layer), None, ["2x10x32"])

    save("control_flow", torch.jit.script(ControlFlow().eval()), None, ["4x16", "int=3"])
    save("elementwise", torch.jit.script(ElementwiseTuple()), None, ["16x32", "16x32"])

    save("data_dependent", torch.jit.script(DataDependent()), None, ["8x8"])

    with open(os.path.join(out_dir, "models.json"), "w") as f:
        json.dump(models, f, indent=2)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "build/models"
    os.makedirs(out, exist_ok=True)
    stamp = os.path.join(out, "models.json")
    if os.path.exists(stamp) and os.path.getmtime(stamp) >= os.path.getmtime(__file__):
        sys.exit(0)  # up to date
    build(out)
    print(f"wrote test models to {out}")

"""TorchScript models for the kernel benchmarks (bench/kernel_bench.cpp): an elementwise chain
and a copy of the same size, softmax, layer_norm and an MLP at batch 1 and 64; and for the Google
Benchmark microbenches (bench/micro, make bench-micro), which also use a row sum, a column sum
and a one-add graph. Written by code with random weights; nothing is downloaded."""
import json
import os
import sys

import torch
from torch import nn


class Chain(nn.Module):
    """Five elementwise ops: mul, add, sigmoid, mul, sub."""

    def forward(self, x):
        return torch.sigmoid(x * 1.5 + 0.5) * x - 0.25


class Copy(nn.Module):
    """A plain tensor copy: the bandwidth yardstick for Chain (both write a fresh tensor)."""

    def forward(self, x):
        return x.clone()


class RowSum(nn.Module):
    """A sum over each row (the last dim): one reduction pass, a small output."""

    def forward(self, x):
        return x.sum(dim=-1)


class ColumnSum(nn.Module):
    """A sum over dim 0 of a row-major tensor: each output is a column in memory (kiln vectorizes
    such reductions across rows)."""

    def forward(self, x):
        return x.sum(dim=0)


class Add(nn.Module):
    """One add of two inputs: on 8-element tensors, the executor's per-call overhead."""

    def forward(self, x, y):
        return x + y


class Softmax(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def mlp(width=256, layers=3):
    mods = []
    for i in range(layers):
        mods.append(nn.Linear(width, width))
        if i + 1 < layers:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods).eval()


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    cases = {
        "chain_16m": (Chain(), [16 * 1024 * 1024]),
        "copy_16m": (Copy(), [16 * 1024 * 1024]),
        "softmax_4096x1024": (Softmax(), [4096, 1024]),
        "layer_norm_4096x1024": (nn.LayerNorm(1024).eval(), [4096, 1024]),
        # The least memory traffic any softmax or layer_norm of that shape can move.
        "copy_4096x1024": (Copy(), [4096, 1024]),
        "mlp256_batch1": (mlp(), [1, 256]),
        "mlp256_batch64": (mlp(), [64, 256]),
    }
    # Only in bench/micro (its C++ names their input shapes). Not in index.json: kiln_kernel_bench
    # runs every case listed there with one input and counts 2x the input's bytes.
    micro_only = {"row_sum_4096x1024": RowSum(), "column_sum_4096x1024": ColumnSum(),
                  "add_8": Add()}
    index = {}
    for name, (module, shape) in cases.items():
        torch.jit.script(module).save(os.path.join(out_dir, name + ".pt"))
        index[name] = shape
    for name, module in micro_only.items():
        torch.jit.script(module).save(os.path.join(out_dir, name + ".pt"))
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f, indent=2)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/bench_models")

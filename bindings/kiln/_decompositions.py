"""The decompositions AOTAutograd applies before kiln sees a graph.

kiln asks for core ATen's table, so that composite ops reach it as the elementwise ops and
reductions it fuses, less the ops below. Each has one ATen kernel, and its decomposition in that
table is either index arithmetic around `aten.index` gathers or `index_put`s (the pads,
`im2col`, `roll`, `index_add`, `index_fill`), which kiln cannot fuse and would run op by op
through ATen, or, for the CPU's fused attention, two `bmm`s around a masked softmax. Kept
whole they run as one extern step: ATen's kernel, as in eager. Measured on a 2-core AVX-512
machine, torch.compile(backend="kiln"), decomposed against kept (eager in brackets), one process:

- `F.pad(x, 3, mode="reflect")`, [1, 64, 56, 56]: 471 us against ATen's kernel (51 us);
  `mode="replicate"` 738 us (63 us);
- `F.unfold(x, 3)` (`im2col`), same input: 4.5 ms (1.8 ms); `torch.roll`: 75 us (37 us);
- `index_add` of [8192, 256] into 1000 rows: 3.15 ms (an `index_put` that accumulates, summing
  in another order than eager: 4e-6 apart) against 0.23 ms (0.20-0.28 ms, equal to eager's);
  `index_fill` of 3 columns of [512, 64]: 44 us against 35 us (21 us);
- ViT-tiny at batch 1 (timm, `F.scaled_dot_product_attention`): 29.5 ms a call with the attention
  decomposed, 17.7 ms with `_scaled_dot_product_flash_attention_for_cpu` kept (eager 30.8 ms).

Backward ops are kept with their forward ones where the table has them (the pads'), so a
training graph calls ATen's backward kernel too.
"""

from __future__ import annotations

import functools
import inspect
from typing import Optional

import torch
import torch.nn.functional as F
import torch.utils._pytree as pytree
from torch._decomp import core_aten_decompositions

_aten = torch.ops.aten

KEPT_WHOLE = frozenset({
    _aten.reflection_pad1d, _aten.reflection_pad2d, _aten.reflection_pad3d,
    _aten.reflection_pad1d_backward, _aten.reflection_pad2d_backward,
    _aten.reflection_pad3d_backward,
    _aten.replication_pad1d, _aten.replication_pad2d, _aten.replication_pad3d,
    _aten.im2col, _aten.col2im,
    _aten.roll,
    _aten.index_add, _aten.index_fill,
    _aten._scaled_dot_product_flash_attention_for_cpu,
})


# Training-mode batch norm is a core ATen op, kept whole by core_aten_decompositions(); torch's
# own decomposition of it (var_mean, then x * rstd + shift, and the running statistics) gives
# kiln reductions and elementwise ops it fuses: the statistics and the normalization, with the
# relu after it, become one kernel (sibling reductions, docs/codegen-cpu.md). Measured on the
# 2-core development machine, training forward of BatchNorm2d(64) + ReLU on [8, 64, 56, 56],
# three processes each: 0.63-0.73 ms decomposed, 2.44-2.85 ms kept whole (eager 1.68-2.60 ms). Group norm the
# same way: its statistics one kernel, the normalization, affine and activation after it
# another (GroupNorm(32, 256) + SiLU on [2, 256, 64, 64], inference: 0.42-0.44 ms decomposed,
# 0.64-0.79 ms kept whole, eager 0.59-0.75 ms). In inference graphs group norm is kept whole
# instead, for kiln's own decomposition (the C++ pass decompose_group_norm), which takes it from
# per-channel statistics, a walk over x in any layout; torch's views x as [N, G, C/G, H*W],
# which after a channels-last convolution is a walk in 4-float runs (GroupNorm(32, 128) + SiLU
# on a channels-last [2, 128, 64, 64]: 0.27-0.28 ms with kiln's, 1.45-2.09 ms with torch's,
# eager 0.37-0.44 ms). CPU graphs only: on CUDA, where kiln's reduction kernels walk a row once
# per reduction, cuDNN's one kernel per norm is kept (not measured on a GPU).
DECOMPOSED_TOO = (_aten._native_batch_norm_legit_functional.default,
                  _aten._native_batch_norm_legit.no_stats,
                  _aten.native_group_norm.default)
# Of those, the ones an inference graph keeps (kiln decomposes them itself).
KEPT_FOR_INFERENCE = (_aten.native_group_norm.default,)


def _in_one_layout(decomposition):
    """native_batch_norm_backward's decomposition, declined (the op then stays whole: ATen's
    kernel) when the gradient and the input are laid out differently. torch's decomposition
    returns the gradient in grad_out's layout where ATen returns the input's, and AOTAutograd's
    backward then hands eager PyTorch wrong input gradients (measured: InstanceNorm2d before a
    convolution, channels-last, batch 1: off by up to 1.7 under kiln and Inductor alike, exact
    with the op kept)."""

    def decompose(grad_out, input, *args, **kwargs):
        if grad_out.stride() != input.stride():
            return NotImplemented
        return decomposition(grad_out, input, *args, **kwargs)

    return decompose


def decomposition_table(cpu: bool = True, inference: bool = False) -> dict:
    """core_aten_decompositions() without the ops in KEPT_WHOLE (every overload of each), with
    the ops in DECOMPOSED_TOO for a graph that runs on the CPU (less KEPT_FOR_INFERENCE for an
    inference graph). A copy of the one built for these arguments: building it (mostly
    core_aten_decompositions) took ~0.1 s of every graph's compile."""
    return dict(_table(cpu, inference))


@functools.lru_cache(maxsize=None)
def _table(cpu: bool, inference: bool) -> dict:
    from torch._decomp import decomposition_table as every_decomposition

    table = {op: fn for op, fn in core_aten_decompositions().items()
             if getattr(op, "overloadpacket", None) not in KEPT_WHOLE}
    if cpu:
        for op in DECOMPOSED_TOO:
            if not (inference and op in KEPT_FOR_INFERENCE):
                table[op] = every_decomposition[op]
    backward = _aten.native_batch_norm_backward.default
    if backward in table:
        table[backward] = _in_one_layout(table[backward])
    return table


def runs_on_cpu(example_inputs, target: str | None) -> bool:
    """Whether a graph with these example inputs compiles for the CPU: no CUDA target and no
    input on a CUDA device."""
    if target == "cuda":
        return False
    return not any(getattr(getattr(t, "device", None), "type", None) == "cuda"
                   for t in example_inputs)


# `F.interpolate` cannot be kept whole through the table: torch registers the upsampling ops'
# decompositions as Python kernels of their CompositeImplicitAutograd and Autograd keys, which
# AOTAutograd's tracing runs whatever the table says. Decomposed they are `aten.index` gathers:
# [1, 64, 56, 56] doubled, nearest 1.47 ms against ATen's 0.33 ms, bilinear 5.9 ms against
# 0.65 ms. So in inference graphs (grad mode off, which dynamo guards on) kiln hands AOTAutograd
# `kiln::interpolate`, an op of its own that calls `F.interpolate`, and AOTAutograd leaves it alone.
# Training graphs keep the decomposition: the op has no backward formula.
_UPSAMPLING_MODES = frozenset({"nearest", "nearest-exact", "linear", "bilinear", "bicubic",
                               "trilinear"})
_INTERPOLATE = inspect.signature(F.interpolate)


@torch.library.custom_op("kiln::interpolate", mutates_args=())
def interpolate(input: torch.Tensor, size: Optional[list[int]],
                scale_factor: Optional[list[float]], mode: str, align_corners: Optional[bool],
                recompute_scale_factor: Optional[bool], antialias: bool) -> torch.Tensor:
    """F.interpolate with sizes and scales given per spatial dimension (an upsampling mode)."""
    return F.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor,
                         antialias)


@interpolate.register_fake
def _interpolate_fake(input, size, scale_factor, mode, align_corners, recompute_scale_factor,
                      antialias):
    return F.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor,
                         antialias)


def _per_dim(value, dims: int, kind: type):
    if value is None:
        return None
    values = list(value) if isinstance(value, (list, tuple)) else [value] * dims
    return [kind(v) for v in values]


def keep_interpolate_whole(gm: torch.fx.GraphModule) -> int:
    """Replaces each upsampling `F.interpolate` call in a dynamo graph whose arguments are all
    known by a `kiln::interpolate` call (in place); returns how many it replaced."""
    replaced = 0
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is not F.interpolate:
            continue
        try:
            bound = _INTERPOLATE.bind(*node.args, **node.kwargs)
        except TypeError:
            continue
        bound.apply_defaults()
        args = bound.arguments
        example = args["input"].meta.get("example_value") if isinstance(
            args["input"], torch.fx.Node) else None
        others = [v for k, v in args.items() if k != "input"]
        if (not isinstance(example, torch.Tensor) or args["mode"] not in _UPSAMPLING_MODES
                or any(isinstance(v, torch.fx.Node) for v in pytree.tree_leaves(others))):
            continue
        dims = example.dim() - 2
        node.target = torch.ops.kiln.interpolate.default
        node.args = (args["input"], _per_dim(args["size"], dims, int),
                     _per_dim(args["scale_factor"], dims, float), args["mode"],
                     args["align_corners"], args["recompute_scale_factor"], args["antialias"])
        node.kwargs = {}
        replaced += 1
    if replaced:
        gm.recompile()
    return replaced

"""The decompositions AOTAutograd applies before kiln sees a graph.

kiln asks for core ATen's table, so that composite ops reach it as the elementwise ops and
reductions it fuses, less the ops below. Each has one ATen kernel, and its decomposition in that
table is either index arithmetic around `aten.index` gathers (the pads, `im2col`, `roll`), which
kiln cannot fuse and would run op by op through ATen, or, for the CPU's fused attention, two
`bmm`s around a masked softmax. Kept whole they run as one extern step: ATen's kernel, as in
eager. Measured on the 2-core AVX-512 machine of the README, torch.compile(backend="kiln"),
decomposed against kept (eager in brackets), one process:

- `F.pad(x, 3, mode="reflect")`, [1, 64, 56, 56]: 471 us against ATen's kernel (51 us);
  `mode="replicate"` 738 us (63 us);
- `F.unfold(x, 3)` (`im2col`), same input: 4.5 ms (1.8 ms); `torch.roll`: 75 us (37 us);
- ViT-tiny at batch 1 (timm, `F.scaled_dot_product_attention`): 29.5 ms a call with the attention
  decomposed, 17.7 ms with `_scaled_dot_product_flash_attention_for_cpu` kept (eager 30.8 ms).

Backward ops are kept with their forward ones where the table has them (the pads'), so a
training graph calls ATen's backward kernel too.
"""

from __future__ import annotations

import torch
from torch._decomp import core_aten_decompositions

_aten = torch.ops.aten

KEPT_WHOLE = frozenset({
    _aten.reflection_pad1d, _aten.reflection_pad2d, _aten.reflection_pad3d,
    _aten.reflection_pad1d_backward, _aten.reflection_pad2d_backward,
    _aten.reflection_pad3d_backward,
    _aten.replication_pad1d, _aten.replication_pad2d, _aten.replication_pad3d,
    _aten.im2col, _aten.col2im,
    _aten.roll,
    _aten._scaled_dot_product_flash_attention_for_cpu,
})


def decomposition_table() -> dict:
    """core_aten_decompositions() without the ops in KEPT_WHOLE (every overload of each)."""
    return {op: fn for op, fn in core_aten_decompositions().items()
            if getattr(op, "overloadpacket", None) not in KEPT_WHOLE}

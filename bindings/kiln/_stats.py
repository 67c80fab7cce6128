"""Counters of what kiln did in this process (kiln.stats())."""

from __future__ import annotations

import threading

from . import _C

_lock = threading.Lock()
_python = {"graphs": 0, "regions": 0, "eager_ops": 0, "graph_fallbacks": 0, "cuda_graphs": 0,
           "kiln_autograd_graphs": 0, "python_compile_seconds": 0.0, "aot_graphs_loaded": 0,
           "partitioned_graphs_loaded": 0, "aot_cache_seconds": 0.0}


def add(key: str, amount: float = 1) -> None:
    with _lock:
        _python[key] += amount


def stats() -> dict:
    """What kiln did so far in this process.

    graphs: FX graphs kiln's backend received (forward and backward count separately);
    regions: parts of them kiln compiles; eager_ops: ops left to eager PyTorch (kiln cannot
    compile them); graph_fallbacks: graphs that failed to compile and run eagerly;
    cuda_graphs: graphs captured as CUDA graphs (mode="reduce-overhead" on CUDA);
    kiln_autograd_graphs: training graphs whose forward and backward run from kiln's own
    autograd Function rather than AOTAutograd's runtime wrappers;
    python_compile_seconds: time kiln's torch.compile backend spent in Python on the graphs
    AOTAutograd handed it (partitioning, preparing FX regions; not dynamo's or AOTAutograd's
    own time, nor the C++ compile counted in compile_seconds);
    aot_graphs_loaded: inference graphs compiled from the disk cache's copy of what AOTAutograd
    made of them in an earlier process (AOTAutograd not called: kiln/_aot_cache.py);
    partitioned_graphs_loaded: those of them whose partitioning into kiln regions was read from
    that entry too (kiln/_partition_cache.py), not done again;
    aot_cache_seconds: time spent keying, reading and writing those graphs (the compile of a
    loaded graph is in python_compile_seconds);
    specializations: region compilations (one per input signature, both frontends);
    kernels: generated kernels in them; reused_kernels: distinct kernels among those that came
    from code compiled for an earlier specialization (the kernel cache), not compiled again;
    extern_steps: ops in them that call ATen;
    fallbacks: specializations that run without kiln; compile_seconds: time spent compiling;
    frozen_weights: parameters and buffers compiled into inference graphs as constants;
    unfrozen_regions: regions that compiled again with weights as inputs because one changed;
    disk_cache_hits / disk_cache_misses: disk-cache lookups (code modules and optimized graphs)
    that found a usable entry / did not (kiln.cache_info());
    modules_compiled / modules_loaded: CPU code modules LLVM compiled / loaded instead (from the
    disk cache or a package: kiln.load);
    graphs_loaded: region specializations whose optimized graph was loaded (disk cache or
    package) instead of made by the graph passes (not dynamo's `graphs`);
    shape_classes: of the specializations, those compiled once for every size of the input dims
    a new signature showed to vary; class_plans: plans made from them for new sizes (no compile);
    shared_constant_bytes: bytes of folded constants (folded and packed weights) that a compile
    took from an earlier one that folded the same bytes, instead of keeping a copy.
    """
    with _lock:
        result = dict(_python)
    result.update(_C.stats())
    return result


def reset_stats() -> None:
    """Sets every counter to zero."""
    with _lock:
        for key in _python:
            _python[key] = 0
    _C.reset_stats()

"""`python -m kiln.profile_peers MODEL.pt --input SPEC ... --kiln-profile FILE`: the peers' side of
`kiln profile --peers`. Loads the TorchScript model, profiles it under OpenVINO and ONNX Runtime
on random inputs of the given shapes, and prints kiln's profile (read from FILE, written by the
C++ tool) with theirs side by side; with --json, one JSON object instead."""

from __future__ import annotations

import argparse
import json

import torch

from ._profile import PEER_PRECISIONS, compare, profile_peers

_DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32, "bool": torch.bool,
}  # fmt: skip


def random_input(spec: str):
    """One `kiln` tool input spec (`1x3x224x224`, `8:int64`, `scalar`, `int=3`), made as the tool
    makes it."""
    if spec.startswith("int="):
        return int(spec[4:])
    shape, _, dtype_name = spec.partition(":")
    dtype = _DTYPES[dtype_name or "float32"]
    sizes = [] if shape == "scalar" else [int(d) for d in shape.split("x")]
    if dtype.is_floating_point:
        return torch.randn(sizes, dtype=dtype)
    return torch.randint(0, 2 if dtype == torch.bool else 10, sizes).to(dtype)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kiln.profile_peers")
    parser.add_argument("model")
    parser.add_argument("--kiln-profile", required=True)
    parser.add_argument("--input", action="append", default=[])
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--rows", type=int, default=25)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--peer-precision", choices=PEER_PRECISIONS, default="f32",
                        help="OpenVINO's precision: its f32 hint, or its default (bf16 where the "
                             "CPU has it)")
    args = parser.parse_args(argv)
    with open(args.kiln_profile) as f:
        kiln = json.load(f)
    torch.manual_seed(0)
    inputs = tuple(random_input(spec) for spec in args.input)
    model = torch.jit.load(args.model).eval()
    peers = profile_peers(model, inputs, args.iters, warmup=3, precision=args.peer_precision)
    if args.json:
        print(json.dumps({"kiln": kiln, "peers": peers}))
    else:
        print(compare(kiln, peers, args.rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

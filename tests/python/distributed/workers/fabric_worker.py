"""Lightning Fabric, 2 CPU processes (strategy="ddp", gloo): the user compiles, Fabric wraps the
module in DDP and compiles the DDP module again with the arguments it recorded.

    python fabric_worker.py --out DIR --kwargs '{...}' --compile kiln|torch

--compile kiln: kiln.compile(net, **kwargs); torch: torch.compile(net, backend="kiln", **kwargs).
Fabric's launcher starts rank 1 by running this script again (so: a script, not pytest). Each
rank writes rank<N>.json: the module structure Fabric built, the kwargs it compiled with, the
final parameters of an eager and of the compiled run, and kiln.stats().
"""

import copy

import lightning as L  # first: from here on torch.compile records its kwargs (Fabric reads them)
import torch
from torch._dynamo.eval_frame import OptimizedModule, innermost_backend
from torch.nn.parallel import DistributedDataParallel

import kiln
from worker_utils import Net, batches, parameters, parse_args, write

STEPS = 4


def train(fabric, model, data):
    module, optimizer = fabric.setup(model, torch.optim.SGD(model.parameters(), lr=0.1))
    losses = []
    for x, y in data:
        loss = torch.nn.functional.mse_loss(module(x), y)
        fabric.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return module, losses


def main():
    args = parse_args([("--compile", "kiln")])
    fabric = L.Fabric(accelerator="cpu", devices=2, strategy="ddp")
    fabric.launch()
    rank = fabric.global_rank
    torch.manual_seed(0)
    net = Net()
    eager_net = copy.deepcopy(net)
    data = batches(rank, STEPS)
    _, eager_losses = train(fabric, eager_net, data)

    if args.compile == "kiln":
        compiled = kiln.compile(net, **args.kwargs)
    else:
        compiled = torch.compile(net, backend="kiln", **copy.deepcopy(args.kwargs))
    try:
        module, kiln_losses = train(fabric, compiled, data)
    except Exception as error:  # the same on both ranks: report it instead of hanging the other
        write(args.out, rank, error=f"{type(error).__name__}: {error}"[:400])
        return

    forward = module._forward_module  # _FabricModule(OptimizedModule(DDP(net)))
    ddp = forward._orig_mod if isinstance(forward, OptimizedModule) else forward
    backend = innermost_backend(forward.dynamo_ctx.callback) if isinstance(forward, OptimizedModule) else None
    write(args.out, rank,
          structure=[type(forward).__name__, type(ddp).__name__],
          wraps_net=isinstance(ddp, DistributedDataParallel) and ddp.module is net,
          kwargs=getattr(forward, "_compile_kwargs", None),
          compiler=getattr(backend, "compiler_name", repr(backend)),
          eager=parameters(eager_net), kiln=parameters(net),
          eager_losses=eager_losses, kiln_losses=kiln_losses, stats=kiln.stats())


if __name__ == "__main__":
    main()

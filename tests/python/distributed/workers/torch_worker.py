"""Two gloo ranks train Net with SGD, eagerly and through kiln, wrapped in DDP or FSDP2.

    python torch_worker.py --out DIR --wrap ddp|fsdp --kwargs '{"options": {...}}'

The kiln run follows the trainer contract: kiln.compile(net) -> kiln.unwrap -> wrap ->
kiln.recompile(wrapped, kwargs). Each rank writes rank<N>.json: both runs' final parameters
(full, unsharded), the losses, what unwrap returned, and kiln.stats().
"""

import copy
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch._dynamo.eval_frame import OptimizedModule
from torch.nn.parallel import DistributedDataParallel

import kiln
from worker_utils import Net, batches, parameters, parse_args, write

STEPS, WORLD = 5, 2


def wrap(net, how, mesh):
    if how == "ddp":
        return DistributedDataParallel(net)
    from torch.distributed.fsdp import fully_shard
    fully_shard(net.a, mesh=mesh)
    fully_shard(net.b, mesh=mesh)
    return fully_shard(net, mesh=mesh)  # the same object, its class swapped


def train(model, params, data):
    opt = torch.optim.SGD(params, lr=0.1)
    losses = []
    for x, y in data:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def full_parameters(net, how):
    if how == "fsdp":  # DTensor shards: gather (a collective: every rank calls it)
        return {n: p.full_tensor().flatten().tolist() for n, p in net.named_parameters()}
    return parameters(net)


def main(rank, args):
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    mesh = None
    if args.wrap == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (WORLD,))
    torch.manual_seed(0)
    net = Net()
    eager_net = copy.deepcopy(net)
    data = batches(rank, STEPS)

    eager_losses = train(wrap(eager_net, args.wrap, mesh), eager_net.parameters(), data)

    compiled = kiln.compile(net, **args.kwargs)
    module, kwargs = kiln.unwrap(compiled)
    wrapped = wrap(module, args.wrap, mesh)
    model = kiln.recompile(wrapped, kwargs)
    kiln_losses = train(model, net.parameters(), data)

    write(args.out, rank,
          unwrap_is_net=module is net, unwrap_kwargs=kwargs,
          recompiled=type(model).__name__, recompiled_wraps=type(model._orig_mod).__name__
          if isinstance(model, OptimizedModule) else None,
          recompiled_is_wrapped=isinstance(model, OptimizedModule) and model._orig_mod is wrapped,
          eager=full_parameters(eager_net, args.wrap), kiln=full_parameters(net, args.wrap),
          eager_losses=eager_losses, kiln_losses=kiln_losses, stats=kiln.stats())
    dist.destroy_process_group()
    # The results are written. Leave without the interpreter's teardown: there, torch's gloo and
    # FSDP2 threads abort the process now and then ("terminate called without an active
    # exception"; 5 of 30 runs of an eager-only copy of this worker, no kiln involved).
    os._exit(0)


if __name__ == "__main__":
    args = parse_args([("--wrap", "ddp")])
    assert os.environ.get("MASTER_PORT"), "run through launch.py: it picks a free port"
    mp.spawn(main, args=(args,), nprocs=WORLD)

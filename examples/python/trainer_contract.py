"""The trainer contract: a compiled model keeps its original module and its compile arguments,
so a trainer can unwrap it, wrap the module with DDP, and compile again with the same arguments.
Here with one gloo process, so it runs anywhere.

    .venv/bin/python examples/python/trainer_contract.py
"""
import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import kiln

store = os.path.join(tempfile.mkdtemp(), "store")
dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
reference = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
reference.load_state_dict(model.state_dict())

compiled = kiln.compile(model, options={"fusion": True})   # torch.compile's keyword arguments
module, kwargs = kiln.unwrap(compiled)                      # module is model; kwargs as given
ddp = kiln.recompile(DistributedDataParallel(module), kwargs)

x, target = torch.randn(16, 32), torch.randn(16, 1)
for net in (ddp, reference):
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    loss = nn.functional.mse_loss(net(x), target)
    loss.backward()
    optimizer.step()

assert module is model and kwargs == {"backend": "kiln", "options": {"fusion": True}}
for mine, theirs in zip(model.parameters(), reference.parameters()):
    torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
dist.destroy_process_group()
print("one DDP step under kiln matches eager")

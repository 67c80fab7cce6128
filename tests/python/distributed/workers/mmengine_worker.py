"""MMEngine Runner, one CPU process: train a BaseModel eagerly, then with cfg.compile =
dict(backend="kiln", ...) (the Runner compiles model.train_step with torch.compile), from the
same initial parameters and data.

    python mmengine_worker.py --out DIR --kwargs '{"options": {...}}'

Writes rank0.json: both runs' final parameters, whether train_step was compiled, kiln.stats().
"""

import copy
import logging

import torch
import torch.nn.functional as F
from mmengine.model import BaseModel
from mmengine.runner import Runner

import kiln
from worker_utils import IN_FEATURES, OUT_FEATURES, Net, parameters, parse_args, write

ITERS = 4


class Model(BaseModel):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def forward(self, inputs, labels=None, mode="tensor"):
        out = self.net(inputs)
        return dict(loss=F.mse_loss(out, labels)) if mode == "loss" else out


class Samples(torch.utils.data.Dataset):
    def __init__(self, n=4 * ITERS):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(n, IN_FEATURES, generator=g)
        self.y = torch.randn(n, OUT_FEATURES, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return dict(inputs=self.x[i], labels=self.y[i])


def train(model, name, work_dir, compile_cfg):
    runner = Runner(
        model=model,
        work_dir=str(work_dir / name),
        experiment_name=name,  # Runner, MessageHub and Visualizer are global instances by name
        train_dataloader=torch.utils.data.DataLoader(Samples(), batch_size=4, shuffle=False),
        train_cfg=dict(by_epoch=False, max_iters=ITERS),
        optim_wrapper=dict(optimizer=dict(type="SGD", lr=0.1)),
        default_hooks=dict(checkpoint=None),           # no .pth files
        visualizer=dict(type="Visualizer", vis_backends=[], name=name),  # no vis_data json
        log_level="WARNING",
        env_cfg=dict(cudnn_benchmark=False, dist_cfg=dict(backend="gloo")),
        randomness=dict(seed=0),
        # Read from cfg only; backend must be a registered name (cfg is printed as Python).
        cfg=dict(compile=compile_cfg) if compile_cfg else dict(),
    )
    runner.train()
    return runner


def main():
    args = parse_args()
    torch.manual_seed(0)
    model = Model()
    eager_model = copy.deepcopy(model)
    eager = train(eager_model, "eager", args.out, None)
    runner = train(model, "kiln", args.out, dict(backend="kiln", **args.kwargs))
    step = runner.model.train_step
    write(args.out, 0, iters=[eager.iter, runner.iter],
          train_step_compiled=getattr(step, "_torchdynamo_orig_callable", None) is not None,
          eager=parameters(eager_model), kiln=parameters(model), stats=kiln.stats())


if __name__ == "__main__":
    logging.getLogger("mmengine").setLevel(logging.WARNING)
    main()

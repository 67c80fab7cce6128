"""Lightning Trainer, 2 CPU processes (gloo): an eager run with DDPStrategy, then the user's
kiln.compile(lit) trained with KilnDDPStrategy, from the same initial parameters and data.

    python trainer_worker.py --out DIR --kwargs '{...}'

The Trainer's launcher starts rank 1 by running this script again (so: a script, not pytest);
the second Trainer reuses the processes and the process group. Each rank writes rank<N>.json.
"""

import copy
import warnings

import lightning as L
import torch
from lightning.pytorch.strategies import DDPStrategy

import kiln
from kiln.integrations.lightning import KilnDDPStrategy
from worker_utils import IN_FEATURES, OUT_FEATURES, Net, parameters, parse_args, write

warnings.filterwarnings("ignore")
STEPS = 3


class Lit(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = Net()

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Inspect(L.Callback):
    """What the strategy built, seen at the first training batch (teardown unwraps it)."""

    def __init__(self):
        self.seen = {}

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if batch_idx == 0:
            model = trainer.strategy.model
            self.seen = {"model": type(model).__name__,
                         "ddp_compiled": getattr(model, "_compiled_call_impl", None) is not None,
                         "steps_compiled": pl_module._compiler_ctx is not None}


def fit(model, strategy, root, callbacks=(), steps=STEPS):
    # The DistributedSampler the Trainer adds gives each rank its own samples (no shuffling).
    g = torch.Generator().manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(8 * STEPS, IN_FEATURES, generator=g),
                                          torch.randn(8 * STEPS, OUT_FEATURES, generator=g))
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=False)
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy=strategy, max_steps=steps,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, default_root_dir=root,
                        callbacks=list(callbacks))
    trainer.fit(model, loader)
    return trainer


def main():
    args = parse_args()
    torch.manual_seed(0)
    lit = Lit()
    eager_lit = copy.deepcopy(lit)
    initial = parameters(lit)

    eager = fit(eager_lit, DDPStrategy(), args.out)

    inspect = Inspect()
    trainer = fit(kiln.compile(lit, **args.kwargs), KilnDDPStrategy(), args.out, [inspect])
    path = args.out / "kiln.ckpt"
    trainer.save_checkpoint(path)  # every rank calls it; rank 0 writes
    rank = trainer.global_rank
    keys = sorted(torch.load(path, weights_only=False)["state_dict"]) if rank == 0 else None
    stats = kiln.stats()

    # compile_kwargs given to the strategy win over the module's own.
    other = Inspect()
    given = {"options": {"fusion": False}}
    ctor = fit(kiln.compile(Lit(), options={"strict": False}), KilnDDPStrategy(compile_kwargs=given),
               args.out, [other], steps=1)

    write(args.out, rank, seen=inspect.seen, compile_kwargs=trainer.strategy.compile_kwargs,
          global_step=trainer.global_step, eager_global_step=eager.global_step,
          checkpoint_keys=keys, initial=initial, eager=parameters(eager_lit), kiln=parameters(lit),
          stats=stats, ctor_seen=other.seen, ctor_given=given,
          ctor_compile_kwargs=ctor.strategy.compile_kwargs,
          ctor_graphs=kiln.stats()["graphs"] - stats["graphs"])


if __name__ == "__main__":
    main()

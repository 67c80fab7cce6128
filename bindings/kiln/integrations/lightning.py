"""A Lightning Trainer strategy that compiles the DDP-wrapped module with kiln.

Lightning's DDPStrategy wraps a compiled LightningModule as DDP(module with compiled step
methods): DDP's pre- and post-forward (buffer broadcast, gradient-bucket setup) run outside the
compiled region, and dynamo cannot split graphs at DDP's buckets. KilnDDPStrategy compiles the
DDP module itself instead, with the arguments the user compiled with (what the upstream pull
request https://github.com/Lightning-AI/pytorch-lightning/pull/20269 asked for)::

    import kiln
    import lightning as L
    from kiln.integrations.lightning import KilnDDPStrategy

    model = kiln.compile(MyLightningModule(), options={"fusion": True})
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy=KilnDDPStrategy())
    trainer.fit(model, dataloader)

or, with an uncompiled module: ``KilnDDPStrategy(compile_kwargs={"options": {...}})``.
Checkpoints hold the LightningModule's own state_dict (no ``_orig_mod.`` keys).
"""

from __future__ import annotations

import copy

from lightning.pytorch.strategies import DDPStrategy
from lightning.pytorch.utilities.compile import to_uncompiled

from .._errors import KilnError
from .._wrapper import _check_kwargs


class KilnDDPStrategy(DDPStrategy):
    """DDPStrategy that compiles ``DistributedDataParallel(lightning_module)`` with kiln.

    The compile arguments are ``compile_kwargs`` if given, else the ``_compile_kwargs`` that
    ``kiln.compile`` (or torch.compile, once lightning is imported) left on the module; with
    neither, the model is trained uncompiled, as DDPStrategy would.
    """

    strategy_name = "kiln_ddp"

    def __init__(self, *args, compile_kwargs: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if compile_kwargs is not None:
            _check_kwargs(compile_kwargs)  # a bad key fails here, not in the spawned workers
        self._given_kwargs = copy.deepcopy(compile_kwargs)
        self.compile_kwargs = copy.deepcopy(compile_kwargs)

    def configure_ddp(self) -> None:
        module = self.lightning_module
        given = self._given_kwargs
        if given is None:  # per fit: the strategy may be reused with another module
            given = getattr(module, "_compile_kwargs", None)
        self.compile_kwargs = copy.deepcopy(given)
        if module._compiler_ctx is not None:
            if given is None:  # rather than train uncompiled without a word
                raise KilnError("the LightningModule was compiled, but with arguments unknown; "
                                "compile it with kiln.compile, or pass "
                                "KilnDDPStrategy(compile_kwargs=...)")
            # The Trainer compiled the step methods of the module (from_compiled); those
            # would run inside DDP as separate compiled regions: undo them, the DDP module
            # is compiled below instead.
            to_uncompiled(module)
        super().configure_ddp()  # self.model = DDP(module)
        if self.compile_kwargs is None:
            return
        _check_kwargs(self.compile_kwargs)  # backend, if given, must be kiln
        # In place, so self.model stays a DDP instance (Lightning tests isinstance(., DDP),
        # e.g. for no_sync during gradient accumulation). torch.compile may change the
        # options dict it gets: it gets a copy.
        kwargs = copy.deepcopy({k: v for k, v in self.compile_kwargs.items() if k != "backend"})
        self.model.compile(backend="kiln", **kwargs)

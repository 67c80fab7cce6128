"""kiln: a compiler backend for PyTorch.

    model = torch.compile(model, backend="kiln", options={"strict": True})
    model = kiln.compile(model, options={"fusion": False})     # the same, plus unwrap/recompile
    module, kwargs = kiln.unwrap(model)                        # for trainers: wrap, then
    model = kiln.recompile(ddp_wrapped, kwargs)                # compile again, same arguments
    kiln.save(model, "model.kiln", example_inputs=(x,))        # one file, its code included
    model = kiln.load("model.kiln")                            # runs without generating code
"""

from . import _C
from ._backend import backend
from ._cache import cache_info, clear_cache
from ._errors import KilnError
from ._options import keys as option_keys
from ._package import load, save
from ._profile import Profile, profile
from ._stats import reset_stats, stats
from ._wrapper import CompiledScriptModule, compile, recompile, unwrap

__all__ = [
    "CompiledScriptModule",
    "KilnError",
    "backend",
    "cache_info",
    "clear_cache",
    "compile",
    "load",
    "option_keys",
    "Profile",
    "profile",
    "recompile",
    "reset_stats",
    "save",
    "stats",
    "unwrap",
]
__version__ = "0.1.0"

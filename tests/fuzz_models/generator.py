"""Random nn.Modules, written as Python source from a seed.

A case is the source of a module class and of a function that makes its inputs, so a failing
seed is reproduced by the text alone (no generator needed). Four families share the writer:
2-D convolutional nets (the richest: groups, depthwise, stride, dilation, padding modes, norms,
pooling, squeeze-excitation gates, residuals, concatenations, interpolation, channels-last),
1-D/3-D convolutional nets, token models (embeddings, attention, layer norms, GELU MLPs) and
MLPs. Every layer keeps track of its output's shape, so each choice is valid by construction.
"""

import dataclasses
import random

from vocabulary import ACTIVATIONS, Tensor, Writer


@dataclasses.dataclass
class Case:
    seed: int
    family: str
    source: str  # defines Model and make_inputs()
    # A training step is meaningful: the module has parameters, no dropout (its random mask
    # differs between eager and compiled runs) and no layer whose backward crashes eager.
    trainable: bool


def _activation(w: Writer, rng: random.Random, x: Tensor) -> Tensor:
    return w.unary(ACTIVATIONS[rng.randrange(len(ACTIVATIONS))], x)


def _image_layer(w: Writer, rng: random.Random, x: Tensor, seen: list) -> Tensor:
    n, c, h, wd = x.shape
    pick = rng.random()
    if pick < 0.34:
        return _conv_block(w, rng, x)
    if pick < 0.44:
        return w.batch_norm(rng, x)
    if pick < 0.48:
        return w.group_norm(rng, x)
    if pick < 0.51:
        return w.instance_norm(rng, x)
    if pick < 0.63:
        return _activation(w, rng, x)
    if pick < 0.71:
        same = [s for s in seen if s.shape == x.shape and s.name != x.name]
        if same:
            return w.binary(rng.choice(["+", "+", "*", "-"]), x, rng.choice(same))
        return w.residual_block(rng, x) if rng.random() < 0.6 else w.parallel_branches(rng, x)
    if pick < 0.75:
        alike = [s for s in seen if s.shape[2:] == x.shape[2:] and s.shape[0] == n]
        return w.cat([x, rng.choice(alike)]) if alike else x
    if pick < 0.82 and min(h, wd) >= 2:
        return w.pool(rng, x)
    if pick < 0.87:
        return w.squeeze_excite(rng, x)
    if pick < 0.90 and h * wd <= 64:
        return w.interpolate(rng, x)
    if pick < 0.93:
        return w.dropout(x)
    if pick < 0.95:
        return w.cast_round_trip(x)
    return w.conv(rng, x)


def _conv_block(w: Writer, rng: random.Random, x: Tensor) -> Tensor:
    """A convolution, mostly followed by a batch norm and an activation, as real nets have them
    (and as kiln folds and fuses them)."""
    x = w.conv(rng, x)
    if rng.random() < 0.5:
        x = w.batch_norm(rng, x)
    if rng.random() < 0.6:
        x = _activation(w, rng, x)
    return x


def _conv_net(w: Writer, rng: random.Random, dims: int) -> Tensor:
    batch = rng.choice([1, 1, 2, 3])
    channels = rng.choice([3, 4, 8, 16])
    side = {1: [16, 32, 57], 2: [7, 8, 12, 16], 3: [4, 6]}[dims]
    size = [rng.choice(side)] * dims if rng.random() < 0.7 else [rng.choice(side) for _ in range(dims)]
    x = w.input([batch, channels, *size], channels_last=dims == 2 and rng.random() < 0.4)
    seen = [x]
    for _ in range(rng.randint(2, 9)):
        x = _image_layer(w, rng, x, seen) if dims == 2 else _any_dim_layer(w, rng, x)
        seen.append(x)
    if rng.random() < 0.6:
        x = w.head(rng, x)
    return x


def _any_dim_layer(w: Writer, rng: random.Random, x: Tensor) -> Tensor:
    pick = rng.random()
    if pick < 0.45:
        return _conv_block(w, rng, x)
    if pick < 0.6:
        return w.batch_norm(rng, x)
    if pick < 0.8:
        return _activation(w, rng, x)
    if pick < 0.9 and min(x.shape[2:]) >= 2:
        return w.pool(rng, x)
    return w.residual_block(rng, x)


def _token_model(w: Writer, rng: random.Random) -> Tensor:
    batch, length = rng.choice([1, 2, 4]), rng.choice([5, 8, 16])
    width = rng.choice([16, 32, 48])
    if rng.random() < 0.5:
        x = w.embedding(rng, w.token_input([batch, length], vocab=50), width)
    else:
        x = w.input([batch, length, width])
    for _ in range(rng.randint(1, 4)):
        pick = rng.random()
        if pick < 0.35:
            x = w.attention_block(rng, x)
        elif pick < 0.6:
            x = w.mlp_block(rng, x)
        elif pick < 0.75:
            x = w.layer_norm(rng, x)
        elif pick < 0.85:
            x = w.linear(rng, x, rng.choice([16, 32, 48]))
        elif pick < 0.92:
            x = w.softmax(rng, x)
        else:
            x = w.dropout(x)
    if rng.random() < 0.4:
        x = w.reduce(rng, x)
    return x


def _mlp(w: Writer, rng: random.Random) -> Tensor:
    x = w.input([rng.choice([1, 2, 8, 32]), rng.choice([8, 32, 64])])
    for _ in range(rng.randint(1, 5)):
        pick = rng.random()
        if pick < 0.45:
            x = w.linear(rng, x, rng.choice([8, 16, 32, 64]))
        elif pick < 0.7:
            x = _activation(w, rng, x)
        elif pick < 0.8 and x.shape[0] > 1:
            x = w.batch_norm(rng, x)
        elif pick < 0.9:
            x = w.layer_norm(rng, x)
        else:
            x = w.mlp_block(rng, x)
    return x


FAMILIES = ("conv2d", "conv2d", "conv2d", "conv1d", "conv3d", "tokens", "mlp")


def generate(seed: int) -> Case:
    rng = random.Random(seed)
    family = FAMILIES[rng.randrange(len(FAMILIES))]
    w = Writer(seed)
    if family.startswith("conv"):
        out = _conv_net(w, rng, int(family[4]))
    elif family == "tokens":
        out = _token_model(w, rng)
    else:
        out = _mlp(w, rng)
    trainable = w.has_parameters and not w.has_dropout and not w.eager_backward_crashes
    return Case(seed, family, w.source(out), trainable)

"""The layers the model fuzzer writes, each as source lines with its output's shape.

`Writer` accumulates a module's __init__ and forward lines. Every method takes the tensor(s) it
reads and returns the tensor it writes, choosing its random parameters so that the layer is
valid for its input (eager accepts it): the fuzzer compares kiln with eager, so an invalid layer
would only test the error path of both.
"""

import dataclasses
import math
import random

# Activations as expression templates. hardtanh with bounds other than relu6's, and clamps,
# are the post-ops oneDNN treats differently from relu.
ACTIVATIONS = (
    "F.relu({})",
    "F.relu6({})",
    "F.hardtanh({}, -0.5, 1.5)",
    "F.gelu({})",
    "F.gelu({}, approximate='tanh')",
    "F.silu({})",
    "F.hardswish({})",
    "F.hardsigmoid({})",
    "torch.sigmoid({})",
    "torch.tanh({})",
    "F.leaky_relu({}, 0.1)",
    "F.elu({})",
    "F.mish({})",
    "F.softplus({})",
    "torch.clamp({}, -1.0, 2.0)",
)


@dataclasses.dataclass
class Tensor:
    name: str
    shape: list


def _divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def _out_size(size: int, kernel: int, stride: int, padding: int, dilation: int = 1) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


class Writer:
    def __init__(self, seed: int):
        self.seed = seed
        self.init = []
        self.body = []
        self.inputs = []  # (name, expression making it)
        self.count = 0
        self.channels_last = False
        self.batch = 1  # of the inputs, as the case draws it
        self.sides = None  # an image input's height and width, as the case draws them
        self.has_parameters = False
        self.has_dropout = False
        # PyTorch 2.11's CPU backward of a 1x1 stride-2 convolution over a channels-last input
        # crashes eager itself (segfault or heap corruption): such cases skip the training step.
        self.eager_backward_crashes = False

    # ---- plumbing ---------------------------------------------------------------------------

    def _fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def _module(self, constructor: str) -> str:
        name = self._fresh("m")
        self.init.append(f"self.{name} = {constructor}")
        self.has_parameters = True
        return f"self.{name}"

    def _assign(self, expression: str, shape: list) -> Tensor:
        name = self._fresh("v")
        self.body.append(f"{name} = {expression}")
        return Tensor(name, list(shape))

    def _batched(self, shape: list) -> str:
        """`shape` as source, its first dim the batch make_inputs takes (every input has one)."""
        self.batch = shape[0]
        return "[" + ", ".join(["batch"] + [str(s) for s in shape[1:]]) + "]"

    def input(self, shape: list, channels_last: bool = False) -> Tensor:
        name = f"x{len(self.inputs)}"
        make = f"torch.randn({self._batched(shape)}, generator=g)"
        if len(shape) == 4 and self.sides is None:  # an image: make_inputs takes its sides too
            self.sides = list(shape[2:])
            make = f"torch.randn([batch, {shape[1]}, *sides], generator=g)"
        if channels_last:
            fmt = "torch.channels_last" if len(shape) == 4 else "torch.channels_last_3d"
            make += f".contiguous(memory_format={fmt})"
            self.channels_last = True
        self.inputs.append((name, make))
        return Tensor(name, list(shape))

    def token_input(self, shape: list, vocab: int) -> Tensor:
        name = f"x{len(self.inputs)}"
        self.inputs.append((name, f"torch.randint(0, {vocab}, {self._batched(shape)}, generator=g)"))
        return Tensor(name, list(shape) + [vocab])  # the vocabulary rides along as a last dim

    def source(self, out: Tensor) -> str:
        init = "\n".join("        " + line for line in self.init) or "        pass"
        body = "\n".join("        " + line for line in self.body)
        args = ", ".join(name for name, _ in self.inputs)
        makes = "".join(f"        {make},\n" for _, make in self.inputs)
        layout = ".to(memory_format=torch.channels_last)" if self.channels_last else ""
        sides = f", sides={tuple(self.sides)}" if self.sides else ""
        return (
            "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
            "class Model(nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n"
            f"{init}\n\n"
            f"    def forward(self, {args}):\n{body}\n        return {out.name}\n\n\n"
            f"def make_inputs(batch={self.batch}{sides}):\n"
            f"    g = torch.Generator().manual_seed({self.seed})\n"
            f"    return (\n{makes}    )\n\n\n"
            "def make_model():\n"
            f"    torch.manual_seed({self.seed})\n"
            f"    return Model(){layout}\n"
        )

    # ---- elementwise --------------------------------------------------------------------------

    def unary(self, template: str, x: Tensor) -> Tensor:
        return self._assign(template.format(x.name), x.shape)

    def binary(self, op: str, a: Tensor, b: Tensor) -> Tensor:
        return self._assign(f"{a.name} {op} {b.name}", a.shape)

    def dropout(self, x: Tensor) -> Tensor:
        self.has_dropout = True
        return self._assign(f"F.dropout({x.name}, p=0.25, training=self.training)", x.shape)

    def cast_round_trip(self, x: Tensor) -> Tensor:
        return self._assign(f"({x.name}.double() * 1.5 - 0.25).to({x.name}.dtype)", x.shape)

    def cat(self, parts: list) -> Tensor:
        shape = list(parts[0].shape)
        shape[1] = sum(p.shape[1] for p in parts)
        return self._assign(f"torch.cat([{', '.join(p.name for p in parts)}], dim=1)", shape)

    # ---- convolutions and pooling ---------------------------------------------------------------

    def conv(self, rng: random.Random, x: Tensor, out: int = 0, same: bool = False) -> Tensor:
        dims, c, sizes = len(x.shape) - 2, x.shape[1], x.shape[2:]
        kind = rng.choice(["dense", "dense", "depthwise", "grouped", "pointwise"])
        groups = 1
        if kind == "depthwise":
            groups = c
        elif kind == "grouped":
            groups = rng.choice([d for d in _divisors(c) if d not in (1, c)] or [1])
        if not out:
            out = groups * rng.choice([1, 2]) if kind == "depthwise" else rng.choice([4, 8, 12, 16, 24])
        out = max(groups, out // groups * groups)
        kernel = 1 if kind == "pointwise" else rng.choice([1, 3, 3, 5] if dims < 3 else [1, 3])
        stride = 1 if same else rng.choice([1, 1, 1, 2, 2, 4])
        dilation = rng.choice([1, 1, 2]) if kernel > 1 and not same else 1
        padding = dilation * (kernel // 2) if same or rng.random() < 0.7 else 0
        if any(_out_size(s, kernel, stride, padding, dilation) < 1 for s in sizes):
            kernel, stride, padding, dilation = 1, 1, 0, 1
        mode = "zeros"
        if padding and padding < min(sizes) and rng.random() < 0.2:
            mode = rng.choice(["reflect", "replicate", "circular"])
        padding_text = "'same'" if same and stride == 1 and rng.random() < 0.3 else str(padding)
        bias = rng.random() < 0.7
        if self.channels_last and kernel == 1 and stride > 1:
            self.eager_backward_crashes = True
        conv = self._module(
            f"nn.Conv{dims}d({c}, {out}, {kernel}, stride={stride}, padding={padding_text}, "
            f"dilation={dilation}, groups={groups}, bias={bias}, padding_mode='{mode}')"
        )
        shape = [x.shape[0], out] + [_out_size(s, kernel, stride, padding, dilation) for s in sizes]
        return self._assign(f"{conv}({x.name})", shape)

    def pool(self, rng: random.Random, x: Tensor) -> Tensor:
        dims, sizes = len(x.shape) - 2, x.shape[2:]
        kind = rng.choice(["max", "avg", "adaptive_avg", "adaptive_max"])
        if kind.startswith("adaptive"):
            target = [rng.choice([1, max(1, s // 2), s]) for s in sizes]
            fn = f"F.{kind}_pool{dims}d"
            return self._assign(f"{fn}({x.name}, {target})", x.shape[:2] + target)
        kernel = rng.choice([2, 3]) if min(sizes) >= 3 else 2
        stride = rng.choice([1, 2])
        padding = rng.choice([0, 1]) if kernel >= 2 else 0
        padding = min(padding, kernel // 2)
        shape = x.shape[:2] + [_out_size(s, kernel, stride, padding) for s in sizes]
        if kind == "max":
            expression = f"F.max_pool{dims}d({x.name}, {kernel}, {stride}, {padding})"
        else:
            include = rng.random() < 0.5
            expression = (
                f"F.avg_pool{dims}d({x.name}, {kernel}, {stride}, {padding}, "
                f"count_include_pad={include})"
            )
        return self._assign(expression, shape)

    def interpolate(self, rng: random.Random, x: Tensor) -> Tensor:
        shape = x.shape[:2] + [2 * s for s in x.shape[2:]]
        if rng.random() < 0.5:
            return self._assign(f"F.interpolate({x.name}, scale_factor=2.0, mode='nearest')", shape)
        corners = rng.random() < 0.5
        return self._assign(
            f"F.interpolate({x.name}, scale_factor=2.0, mode='bilinear', align_corners={corners})",
            shape,
        )

    # ---- normalizations -----------------------------------------------------------------------

    def batch_norm(self, rng: random.Random, x: Tensor) -> Tensor:
        c = x.shape[1]
        # Training-mode statistics need two values per channel; over a handful the normalized
        # values are nearly +-1 whatever the input, and a last-bit difference upstream (kiln's
        # sums in another order) comes out hundreds of times larger: no real net trains so.
        if x.shape[0] * math.prod(x.shape[2:]) < 8:
            return x
        dims = max(1, len(x.shape) - 2)
        norm = self._module(f"nn.BatchNorm{dims}d({c})")
        # Running statistics and affine parameters away from their identity defaults, as after
        # training, so that folding them into a convolution is visible.
        self.init.append("with torch.no_grad():")
        for field, low, high in [
            ("running_mean", -0.5, 0.5),
            ("running_var", 0.5, 2.0),
            ("weight", 0.5, 1.5),
            ("bias", -0.5, 0.5),
        ]:
            self.init.append(f"    {norm}.{field}.uniform_({low}, {high})")
        return self._assign(f"{norm}({x.name})", x.shape)

    def group_norm(self, rng: random.Random, x: Tensor) -> Tensor:
        c, pixels = x.shape[1], math.prod(x.shape[2:])
        # Training-mode statistics need two values per group.
        allowed = [g for g in _divisors(c) if c // g * pixels >= 2]
        if not allowed:
            return x
        groups = rng.choice(allowed)
        norm = self._module(f"nn.GroupNorm({groups}, {c})")
        return self._assign(f"{norm}({x.name})", x.shape)

    def instance_norm(self, rng: random.Random, x: Tensor) -> Tensor:
        if math.prod(x.shape[2:]) < 2:
            return x
        affine = rng.random() < 0.5
        norm = self._module(f"nn.InstanceNorm2d({x.shape[1]}, affine={affine})")
        return self._assign(f"{norm}({x.name})", x.shape)

    def layer_norm(self, rng: random.Random, x: Tensor) -> Tensor:
        affine = rng.random() < 0.7
        norm = self._module(f"nn.LayerNorm({x.shape[-1]}, elementwise_affine={affine})")
        return self._assign(f"{norm}({x.name})", x.shape)

    # ---- blocks ---------------------------------------------------------------------------------

    def residual_block(self, rng: random.Random, x: Tensor) -> Tensor:
        """conv (same shape) -> [batch norm] -> activation -> + x -> [activation]: a ResNet or
        MobileNet block, and the conv + norm + residual + post-op pattern oneDNN fuses."""
        y = self.conv(rng, x, out=x.shape[1], same=True)
        if y.shape != x.shape:
            return y
        if rng.random() < 0.6:
            y = self.batch_norm(rng, y)
        if rng.random() < 0.5:
            y = self.unary(rng.choice(ACTIVATIONS), y)
        elif rng.random() < 0.7:
            return self._in_place_residual(rng, y, x)
        elif rng.random() < 0.4:
            return self._slice_writes(rng, y, x)
        y = self.binary("+", y, x)
        if rng.random() < 0.7:
            y = self.unary(rng.choice(ACTIVATIONS), y)
        return y

    def _in_place_residual(self, rng: random.Random, y: Tensor, x: Tensor) -> Tensor:
        """`y += x` and an in-place relu, as timm's blocks write them, on y itself or on a slice
        of a fresh cat (GhostNet's): in place on memory only the model holds. y is a convolution's
        or batch norm's result, whose backward does not read it."""
        if rng.random() < 0.5:
            y = self._assign(f"torch.cat([{y.name}, {x.name}], 1)[:, :{x.shape[1]}]", x.shape)
        self.body.append(f"{y.name} += {x.name}")
        if rng.random() < 0.7:
            self.body.append(f"{y.name} = F.relu({y.name}, inplace=True)")
        return y

    def _slice_writes(self, rng: random.Random, y: Tensor, x: Tensor) -> Tensor:
        """The residual built in a fresh tensor a slice at a time, as `z[...] = v` writes a mask or
        a shifted sequence (Swin's, BART's): a copy into a channel slice, then a copy or a fill
        of the rest, or of one channel."""
        c = x.shape[1]
        k = rng.randint(1, c)
        z = self._assign(f"torch.zeros_like({x.name})", x.shape)
        self.body.append(f"{z.name}[:, :{k}] = {y.name}[:, :{k}] + {x.name}[:, :{k}]")
        if k < c and rng.random() < 0.5:
            self.body.append(f"{z.name}[:, {k}:] = {x.name}[:, {k}:]")
        elif k < c:
            self.body.append(f"{z.name}[:, {k}] = {rng.choice(['0.5', '-1.0'])}")
        return z

    def parallel_branches(self, rng: random.Random, x: Tensor) -> Tensor:
        """Two convolutions of x (of any kinds: a dense 3x3 beside a 1x1 or a depthwise one)
        summed, each maybe normalized: a RepVGG or Inception block, where convolutions that kiln
        runs in different precisions under bf16 meet in one add."""
        out = rng.choice([x.shape[1], 8, 16, 24])
        a = self.conv(rng, x, out=out, same=True)
        b = self.conv(rng, x, out=out, same=True)
        if a.shape != b.shape:
            return a
        if rng.random() < 0.5:
            a, b = self.batch_norm(rng, a), self.batch_norm(rng, b)
        y = self.binary("+", a, b)
        return self.unary(rng.choice(ACTIVATIONS), y) if rng.random() < 0.6 else y

    def squeeze_excite(self, rng: random.Random, x: Tensor) -> Tensor:
        c, dims = x.shape[1], len(x.shape) - 2
        reduced = max(1, c // rng.choice([2, 4]))
        squeeze = self._module(f"nn.Conv{dims}d({c}, {reduced}, 1)")
        excite = self._module(f"nn.Conv{dims}d({reduced}, {c}, 1)")
        axes = tuple(range(2, 2 + dims))
        gate = rng.choice(["torch.sigmoid", "F.hardsigmoid"])
        s = self._assign(f"{x.name}.mean({axes}, keepdim=True)", x.shape[:2] + [1] * dims)
        s = self._assign(f"F.relu({squeeze}({s.name}))", x.shape[:2] + [1] * dims)
        s = self._assign(f"{gate}({excite}({s.name}))", x.shape[:2] + [1] * dims)
        return self._assign(f"{x.name} * {s.name}", x.shape)

    def head(self, rng: random.Random, x: Tensor) -> Tensor:
        if math.prod(x.shape[1:]) > 512:
            dims = len(x.shape) - 2
            x = self._assign(f"F.adaptive_avg_pool{dims}d({x.name}, 1)", x.shape[:2] + [1] * dims)
        x = self._assign(f"torch.flatten({x.name}, 1)", [x.shape[0], math.prod(x.shape[1:])])
        return self.linear(rng, x, 10)

    def linear(self, rng: random.Random, x: Tensor, out: int) -> Tensor:
        bias = rng.random() < 0.8
        fc = self._module(f"nn.Linear({x.shape[-1]}, {out}, bias={bias})")
        y = self._assign(f"{fc}({x.name})", x.shape[:-1] + [out])
        return self.unary(rng.choice(ACTIVATIONS), y) if rng.random() < 0.5 else y

    def embedding(self, rng: random.Random, tokens: Tensor, width: int) -> Tensor:
        table = self._module(f"nn.Embedding({tokens.shape[-1]}, {width})")
        return self._assign(f"{table}({tokens.name})", tokens.shape[:-1] + [width])

    def mlp_block(self, rng: random.Random, x: Tensor) -> Tensor:
        """x + W2 gelu(W1 layer_norm(x)): a transformer's feed-forward block."""
        d = x.shape[-1]
        hidden = d * rng.choice([2, 4])
        norm = self._module(f"nn.LayerNorm({d})")
        up = self._module(f"nn.Linear({d}, {hidden})")
        down = self._module(f"nn.Linear({hidden}, {d})")
        y = self._assign(f"F.gelu({up}({norm}({x.name})))", x.shape[:-1] + [hidden])
        return self._assign(f"{x.name} + {down}({y.name})", x.shape)

    def attention_block(self, rng: random.Random, x: Tensor) -> Tensor:
        b, t, d = x.shape
        heads = rng.choice([h for h in (1, 2, 4) if d % h == 0])
        causal = rng.random() < 0.5
        style = rng.choice(["manual", "sdpa", "mha"])
        if style == "mha":
            mha = self._module(f"nn.MultiheadAttention({d}, {heads}, batch_first=True)")
            mask = ""
            if causal:
                self.init.append(
                    f"self.register_buffer('mask{self.count}', "
                    f"torch.triu(torch.ones({t}, {t}, dtype=torch.bool), 1))"
                )
                mask = f", attn_mask=self.mask{self.count}"
            a = self._assign(f"{mha}({x.name}, {x.name}, {x.name}, need_weights=False{mask})[0]", x.shape)
            return self._assign(f"{x.name} + {a.name}", x.shape)
        qkv = self._module(f"nn.Linear({d}, {3 * d})")
        proj = self._module(f"nn.Linear({d}, {d})")
        hd = d // heads
        q = self._assign(f"{qkv}({x.name}).view(-1, {t}, 3, {heads}, {hd}).permute(2, 0, 3, 1, 4)", [3, b, heads, t, hd])
        if style == "sdpa":
            o = self._assign(
                f"F.scaled_dot_product_attention({q.name}[0], {q.name}[1], {q.name}[2], "
                f"is_causal={causal})",
                [b, heads, t, hd],
            )
        else:
            s = self._assign(
                f"({q.name}[0] @ {q.name}[1].transpose(-2, -1)) * {1.0 / math.sqrt(hd)!r}", [b, heads, t, t]
            )
            if causal:
                s = self._assign(
                    f"{s.name}.masked_fill(torch.ones({t}, {t}, dtype=torch.bool, "
                    f"device={s.name}.device).triu(1), float('-inf'))",
                    s.shape,
                )
            p = self._assign(f"{s.name}.softmax(-1)", s.shape)
            o = self._assign(f"{p.name} @ {q.name}[2]", [b, heads, t, hd])
        merged = self._assign(f"{o.name}.transpose(1, 2).reshape(-1, {t}, {d})", [b, t, d])
        return self._assign(f"{x.name} + {proj}({merged.name})", x.shape)

    def softmax(self, rng: random.Random, x: Tensor) -> Tensor:
        fn = rng.choice(["softmax", "log_softmax"])
        return self._assign(f"F.{fn}({x.name}, dim=-1)", x.shape)

    def reduce(self, rng: random.Random, x: Tensor) -> Tensor:
        kind = rng.choice(["mean(1)", "sum(-1)", "amax(-1)", "var(1)"])
        dim = 1 if "(1)" in kind else len(x.shape) - 1
        return self._assign(f"{x.name}.{kind}", [s for i, s in enumerate(x.shape) if i != dim])

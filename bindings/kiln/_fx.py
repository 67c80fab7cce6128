"""FX graphs (core ATen, from AOTAutograd) into kiln.

The graph is split into regions of ops kiln can compile (CapabilityBasedPartitioner); each region
becomes a kiln._C.Region, which imports the region into kiln's graph IR per input signature,
fuses, generates code and runs the plan. Ops kiln cannot compile (in-place ops, ops returning
non-tensors, size arithmetic) stay in the FX graph and run eagerly between regions; a symbolic
size a region's op takes is given to kiln as an expression of the region's tensor sizes
(_sizes.py).

    %t = aten.permute(%w, [1, 0])            %r = kiln_region_0(%w, %b, %x)
    %y = aten.addmm(%b, %x, %t)      ==>     %s = aten.sym_size(%r, 0)
    %z = aten.relu(%y)                       ...
"""

from __future__ import annotations

import dataclasses
import operator
import threading
import warnings
from typing import Any, Callable

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase
from torch.utils._python_dispatch import _disable_current_modes

from . import _C, _sizes, _stats
from ._rebase_sizes import rebase_sizes
from ._errors import KilnError
from ._fuse import fuse_partitions

# dtypes kiln's graph IR holds.
_DTYPES = {
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
}
_REGION_PREFIX = "kiln_region_"


def qualified_name(op: torch._ops.OpOverload) -> str:
    """"aten::add.Tensor" for torch.ops.aten.add.Tensor (the name kiln's op table uses)."""
    schema = op._schema
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name


def _is_plain_tensor(value: Any) -> bool:
    """A strided tensor of a dtype kiln holds. Its sizes may be symbolic (dynamo's automatic
    dynamic shapes): a region is imported per concrete input signature at run time, so only an
    op that takes a size as a graph value (a SymInt node) has to stay eager."""
    return (
        isinstance(value, torch.Tensor)
        and value.layout == torch.strided
        and value.dtype in _DTYPES
    )


def _contains_node(value: Any) -> bool:
    if isinstance(value, torch.fx.Node):
        return True
    if isinstance(value, (list, tuple)):
        return any(_contains_node(v) for v in value)
    if isinstance(value, dict):
        return any(_contains_node(v) for v in value.values())
    return False


def _arguments(node: torch.fx.Node) -> list[tuple[Any, Any]] | None:
    """(formal, value) per schema argument; value is _MISSING where the default applies."""
    schema = node.target._schema
    formals = schema.arguments
    if len(node.args) > len(formals):
        return None
    result = []
    for i, formal in enumerate(formals):
        if i < len(node.args):
            result.append((formal, node.args[i]))
        elif formal.name in node.kwargs:
            result.append((formal, node.kwargs[formal.name]))
        else:
            result.append((formal, _MISSING))
    if set(node.kwargs) - {f.name for f in formals}:
        return None
    return result


_MISSING = object()


def _tensor_kind(formal) -> str:
    text = str(formal.type)
    if text == "Tensor":
        return "tensor"
    if text == "Optional[Tensor]":
        return "optional"
    if text == "List[Tensor]":
        return "list"
    if text == "List[Optional[Tensor]]":  # Tensor?[]: aten.index's and index_put's indices
        return "optional_list"
    return "other"


class KilnSupport(OperatorSupportBase):
    """Which FX nodes kiln compiles: ATen ops that mutate nothing, return tensors (or views kiln
    knows), and take graph values only as tensor arguments or as sizes that are expressions of
    their tensor arguments' sizes."""

    def __init__(self, gm: torch.fx.GraphModule):
        super().__init__()
        self._op_problems: dict[str, str | None] = {}
        self.size_inputs = _sizes.graph_symbols(gm, _is_plain_tensor)

    def op_problem(self, op: torch._ops.OpOverload) -> str | None:
        name = qualified_name(op)
        if name not in self._op_problems:
            self._op_problems[name] = _C.op_problem(name)
        return self._op_problems[name]

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return self.problem(node) is None

    def problem(self, node: torch.fx.Node) -> str | None:
        if node.op != "call_function":
            return "not an op call"
        if node.target is operator.getitem:
            producer = node.args[0]
            if isinstance(producer, torch.fx.Node) and self.problem(producer) is None:
                return None
            return "takes an output of an op kiln does not compile"
        if not isinstance(node.target, torch._ops.OpOverload):
            return f"{node.target} is not an ATen operator"
        if (problem := self.op_problem(node.target)) is not None:
            return problem
        val = node.meta.get("val")
        outputs = val if isinstance(val, (tuple, list)) else (val,)
        # A None output (convolution_backward's grad_bias for a conv without bias) that nothing
        # reads: kiln's IR keeps it as an unread value.
        read = {u.args[1] for u in node.users if u.target is operator.getitem}
        if not all(_is_plain_tensor(v) or (v is None and i not in read and outputs is val)
                   for i, v in enumerate(outputs)):
            return "has outputs that are not strided tensors of a dtype kiln holds"
        arguments = _arguments(node)
        if arguments is None:
            return "has arguments its schema does not name"
        for formal, value in arguments:
            kind = _tensor_kind(formal)
            if _sizes.is_size_argument(formal, value):
                tensors = [v.meta.get("val") for v in node.all_input_nodes]
                problem = _sizes.size_problem(formal, value, tensors, self.size_inputs)
                if problem is not None:
                    return problem
            elif isinstance(value, torch.fx.Node):
                if kind not in ("tensor", "optional") or not _is_plain_tensor(value.meta.get("val")):
                    return f"argument '{formal.name}' is a graph value that is not a tensor"
            elif kind == "list" and isinstance(value, (list, tuple)):
                if not all(isinstance(v, torch.fx.Node) and _is_plain_tensor(v.meta.get("val"))
                           for v in value):
                    return f"argument '{formal.name}' is a list that is not all tensors"
            elif kind == "optional_list" and isinstance(value, (list, tuple)):
                if not all(v is None or isinstance(v, torch.fx.Node)
                           and _is_plain_tensor(v.meta.get("val")) for v in value):
                    return f"argument '{formal.name}' is a list that is not tensors and Nones"
            elif _contains_node(value):
                return f"argument '{formal.name}' is built from graph values at run time"
            elif kind in ("tensor", "list"):
                if scalar_overload(node) is None:
                    return f"argument '{formal.name}' is a constant, and {node.target} has no Scalar overload"
        return None


def _schema_types(schema) -> list[str]:
    return [str(a.type) for a in schema.arguments]


def scalar_overload(node: torch.fx.Node) -> torch._ops.OpOverload | None:
    """For ``aten.mul.Tensor(x, 2.0)`` (a number where the schema has a Tensor, as core ATen
    graphs write it): the overload that takes a Scalar there (``aten.mul.Scalar``), or None."""
    op = node.target
    arguments = _arguments(node)
    if arguments is None:
        return None
    wanted = []
    for formal, value in arguments:
        is_number = ((isinstance(value, (bool, int, float)) or _sizes.is_symbolic(value))
                     and _tensor_kind(formal) == "tensor")
        wanted.append("number" if is_number else str(formal.type))
    packet = op.overloadpacket
    for name in packet.overloads():
        candidate = getattr(packet, name)
        if _schema_types(candidate._schema) == wanted and not candidate._schema.is_mutable:
            return candidate
    return None


def _encode(formal, value, refs: dict, locate: _sizes.Locate) -> tuple:
    if value is _MISSING:
        return ("default", None)
    if _sizes.is_size_argument(formal, value):
        if isinstance(value, (list, tuple)):
            return ("sizes", [_sizes.size_program(v, locate) for v in value])
        return ("size", _sizes.size_program(value, locate))
    if isinstance(value, torch.fx.Node):
        return ("ref", refs[value])
    if _tensor_kind(formal) in ("list", "optional_list"):
        return ("refs", [None if v is None else refs[v] for v in value])
    return ("const", value)


def tensor_placeholders(region: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """The region's inputs that kiln receives: all but the symbolic sizes."""
    return [n for n in region.graph.nodes if n.op == "placeholder" and not _sizes.is_symbolic(n)]


@dataclasses.dataclass
class ProgramText:
    """What builds a region's kiln._C.FxProgram, as plain data (op names, encoded arguments,
    output references): every program is built from it, and kiln/_partition_cache.py keeps it so
    that a warm start builds the program without the region's FX graph."""
    inputs: int
    calls: list = dataclasses.field(default_factory=list)  # (qualified op name, encoded args)
    outputs: list = dataclasses.field(default_factory=list)

    def build(self) -> _C.FxProgram:
        program = _C.FxProgram(self.inputs)
        for op, encoded in self.calls:
            program.call(op, encoded)
        program.set_outputs(self.outputs)
        return program


def build_program(region: torch.fx.GraphModule) -> tuple[_C.FxProgram, ProgramText]:
    """The region's ops as a kiln._C.FxProgram (its inputs are the region's tensor_placeholders;
    the symbolic sizes it reads become expressions of its tensors' sizes), and its ProgramText."""
    placeholders = tensor_placeholders(region)
    program = _C.FxProgram(len(placeholders))
    text = ProgramText(len(placeholders))
    refs: dict[torch.fx.Node, Any] = {n: i for i, n in enumerate(placeholders)}
    symbols: dict = {}  # symbol -> (ref, dim) of the first region value with that size

    def note_symbols(node: torch.fx.Node) -> None:
        val, ref = node.meta.get("val"), refs[node]
        for tensor, r in zip(val, ref) if isinstance(val, (list, tuple)) else [(val, ref)]:
            for symbol, dim in _sizes.tensor_symbols(tensor):
                symbols.setdefault(symbol, (r, dim))

    for node in placeholders:
        note_symbols(node)
    for node in region.graph.nodes:
        if node.op == "call_function" and node.target is operator.getitem:
            refs[node] = refs[node.args[0]][node.args[1]]
        elif node.op == "call_function":
            op = node.target
            if any(_tensor_kind(f) == "tensor" and isinstance(v, (bool, int, float))
                   for f, v in _arguments(node)):
                op = scalar_overload(node)
            formals = op._schema.arguments
            encoded = [_encode(f, v, refs, symbols.get)
                       for f, (_, v) in zip(formals, _arguments(node))]
            text.calls.append((qualified_name(op), encoded))
            outputs = program.call(qualified_name(op), encoded)
            refs[node] = outputs[0] if len(node.target._schema.returns) == 1 else outputs
            note_symbols(node)
        elif node.op == "output":
            result = node.args[0]
            values = result if isinstance(result, (tuple, list)) else [result]
            text.outputs = [refs[v] for v in values]
            program.set_outputs(text.outputs)
    return program, text


@dataclasses.dataclass
class RegionSource:
    """What a compiled region was made of: kiln/_partition_cache.py writes it."""
    text: ProgramText
    weights: list[int]  # positions of the region's tensor inputs kiln freezes
    module: Callable  # the region's FX module, which its eager fallback runs


class RegionCall:
    """Calls a kiln._C.Region in place of an FX region (a plain callable the FX graph calls, not a
    submodule: nn.Module's call machinery costs microseconds per call); returns what the region
    returned. The region's symbolic-size inputs (`sizes`: their positions) are not given to kiln,
    which evaluates them from tensor sizes, but its eager fallback (`run_eagerly`) needs them."""

    def __init__(self, region: _C.Region, returns_tuple: bool, name: str, sizes: list[int]):
        self.region = region
        self.returns_tuple = returns_tuple
        self.__name__ = name  # FX names the global it binds this object to after it
        self.sizes = frozenset(sizes)
        self.call_inputs = threading.local()  # this thread's call, for the fallback
        self.source: RegionSource | None = None

    def __call__(self, *inputs):
        if self.sizes:
            self.call_inputs.value = inputs
            try:
                outputs = self._run([v for i, v in enumerate(inputs) if i not in self.sizes])
            finally:
                self.call_inputs.value = None  # holds no tensor past the call
        else:
            outputs = self._run(inputs)
        return tuple(outputs) if self.returns_tuple else outputs[0]

    def _run(self, tensors):
        if torch._C._len_torch_dispatch_stack():
            # Dispatch modes (AOTAutograd's alias checker on a first call, a user's mode) would
            # see kiln's own meta runs and ATen calls, not the model's: kiln runs beneath them.
            with _disable_current_modes():
                return self.region.run(tensors)
        return self.region.run(tensors)

    def run_eagerly(self, region: torch.fx.GraphModule):
        """The fallback kiln calls (on this thread, within __call__) with the tensor inputs."""
        def run(*tensors):
            result = region(*(self.call_inputs.value if self.sizes else tensors))
            return list(result) if self.returns_tuple else [result]

        return run


def _numbers_as_scalars(gm: torch.fx.GraphModule) -> None:
    """sub/add/mul with a number first and a tensor second -> the Scalar overload, the number
    second. Core ATen writes sigmoid's backward as `aten.sub.Tensor(1, s)`; no overload takes a
    number first, so the node would run eagerly between two regions. A symbolic int counts as a
    number, first or second (`aten.add.Tensor(%positions, %s0)`, transformers' cache positions):
    as the Scalar argument it is a size, which regions take as an expression of their sizes.

        %d = aten.sub.Tensor(1, %s)    ==>   %d = aten.rsub.Scalar(%s, 1)
        %p = aten.mul.Tensor(2, %s)    ==>   %p = aten.mul.Scalar(%s, 2)   (add.Scalar: alpha 1)
        %q = aten.add.Tensor(%t, %s0)  ==>   %q = aten.add.Scalar(%t, %s0)
    """
    aten = torch.ops.aten

    def is_number(value) -> bool:
        return ((isinstance(value, (int, float)) and not isinstance(value, bool))
                or _sizes.is_symbolic(value))

    for node in gm.graph.nodes:
        if (node.op != "call_function" or len(node.args) != 2
                or not isinstance(node.args[0], torch.fx.Node) and not is_number(node.args[0])):
            continue
        first, second = node.args
        if is_number(second) and not is_number(first):
            if (isinstance(node.target, torch._ops.OpOverload) and _sizes.is_symbolic(second)
                    and (overload := scalar_overload(node)) is not None):
                node.target = overload
            continue
        if not is_number(first) or not isinstance(second, torch.fx.Node) or is_number(second):
            continue
        if node.target is aten.sub.Tensor:
            node.target = aten.rsub.Scalar  # rsub(t, n, alpha) = n - alpha * t
        elif node.target is aten.add.Tensor and node.kwargs.get("alpha", 1) == 1:
            node.target, node.kwargs = aten.add.Scalar, {}
        elif node.target is aten.mul.Tensor and not node.kwargs:
            node.target = aten.mul.Scalar
        else:
            continue
        node.args = (second, first)
    gm.recompile()


def _split_as_slices(gm: torch.fx.GraphModule) -> None:
    """split/split_with_sizes/unbind whose every user takes one piece -> one slice (select for
    unbind) per piece. They return a list of views, which a region cannot hold, so each cut
    its graph in two (ShuffleNet's channel split: 13 of them; GPT-2's fused QKV).

        %s = aten.split_with_sizes(%x, [58, 58], 1)        %a = aten.slice.Tensor(%x, 1, 0, 58)
        %a = getitem(%s, 0)                          ==>   %b = aten.slice.Tensor(%x, 1, 58, 116)
        %b = getitem(%s, 1)
    """
    aten = torch.ops.aten
    splits = (aten.split.Tensor, aten.split_with_sizes.default, aten.unbind.int)
    for node in list(gm.graph.nodes):
        pieces = node.meta.get("val")
        if (node.op != "call_function" or node.target not in splits
                or not isinstance(pieces, (list, tuple)) or not node.users
                or not all(u.op == "call_function" and u.target is operator.getitem
                           for u in node.users)):
            continue
        unbind = node.target is aten.unbind.int
        dim_position = 1 if unbind else 2  # (self, dim) or (self, split sizes, dim)
        dim = (node.args[dim_position] if len(node.args) > dim_position
               else node.kwargs.get("dim", 0))
        dim %= pieces[0].dim() + (1 if unbind else 0)
        lengths = [1 if unbind else piece.shape[dim] for piece in pieces]
        if not all(isinstance(n, int) for n in lengths):
            continue  # symbolic sizes
        starts = [sum(lengths[:i]) for i in range(len(lengths))]
        for user in list(node.users):
            i = user.args[1]
            with gm.graph.inserting_before(user):
                if unbind:
                    piece = gm.graph.call_function(aten.select.int, (node.args[0], dim, i))
                else:
                    piece = gm.graph.call_function(
                        aten.slice.Tensor, (node.args[0], dim, starts[i], starts[i] + lengths[i]))
            piece.meta = dict(user.meta)
            user.replace_all_uses_with(piece)
            gm.graph.erase_node(user)
        gm.graph.erase_node(node)
    gm.recompile()


def _read_by_getitem(gm: torch.fx.GraphModule, target):
    """The calls of `target` (an op with several outputs) that nothing reads but `getitem`s, each
    with those readers: the calls a rewrite may replace output by output."""
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target is target:
            users = list(node.users)
            if all(u.target is operator.getitem for u in users):
                yield node, users


def _use_layer_norm(gm: torch.fx.GraphModule) -> None:
    """native_layer_norm whose mean and rstd nothing reads (inference) -> layer_norm, the form
    kiln fuses (core ATen decomposes layer_norm into native_layer_norm).

        %n = native_layer_norm(%x, [8], %w, %b, 1e-5)
        %y = getitem(%n, 0)                                ==>   %y = layer_norm(%x, [8], %w, %b, 1e-5)
    """
    aten = torch.ops.aten
    for node, users in _read_by_getitem(gm, aten.native_layer_norm.default):
        if any(u.args[1] != 0 for u in users):
            continue
        with gm.graph.inserting_before(node):
            replacement = gm.graph.call_function(aten.layer_norm.default, tuple(node.args))
        replacement.meta["val"] = node.meta["val"][0]
        for user in users:
            user.replace_all_uses_with(replacement)
            gm.graph.erase_node(user)
        gm.graph.erase_node(node)


def _split_var_mean(gm: torch.fx.GraphModule) -> None:
    """var_mean -> var and mean, two reductions kiln fuses (ATen's var_mean has two outputs, and
    graph IR ops one).

        %vm = var_mean(%x, [1], correction=0)                %v = var(%x, [1], correction=0)
        %v = getitem(%vm, 0); %m = getitem(%vm, 1)   ==>     %m = mean(%x, [1])
    """
    aten = torch.ops.aten
    for node, users in _read_by_getitem(gm, aten.var_mean.correction):
        x, dims = node.args[0], node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keepdim = node.kwargs.get("keepdim", False)
        with gm.graph.inserting_before(node):
            var = gm.graph.call_function(aten.var.correction, (x, dims), {
                "correction": node.kwargs.get("correction"), "keepdim": keepdim})
            mean = gm.graph.call_function(aten.mean.dim, (x, dims, keepdim))
        var.meta["val"], mean.meta["val"] = node.meta["val"]
        for user in users:
            user.replace_all_uses_with(var if user.args[1] == 0 else mean)
            gm.graph.erase_node(user)
        gm.graph.erase_node(node)


def _same_size(a, b) -> bool:
    """Whether two sizes are the same without asking the shape environment (no new guards): equal
    ints, or symbolic sizes with the same expression."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, torch.SymInt) and isinstance(b, torch.SymInt):
        return a.node.expr == b.node.expr
    return False


def _linear_pieces(mm: torch.fx.Node):
    """(x2d, weight, bias) for ``addmm(bias, x2d, permute(weight, [1, 0]))`` or ``mm(x2d,
    t(weight))`` with a 2-D weight, else None; weight is None where the right-hand matrix is
    not such a transpose (GPT-2's Conv1D keeps its weight as [in, out]): the caller transposes
    it."""
    aten = torch.ops.aten
    if mm.kwargs:
        return None
    if mm.target is aten.addmm.default and len(mm.args) == 3:
        bias, x2d, transposed = mm.args
    elif mm.target is aten.mm.default and len(mm.args) == 2:
        bias, (x2d, transposed) = None, mm.args
    else:
        return None
    if not isinstance(transposed, torch.fx.Node) or not isinstance(x2d, torch.fx.Node):
        return None
    if transposed.target is aten.permute.default and list(transposed.args[1]) == [1, 0]:
        weight = transposed.args[0]
    elif transposed.target is aten.t.default:
        weight = transposed.args[0]
    else:
        weight = None
    if weight is not None and (not isinstance(weight, torch.fx.Node)
                               or weight.meta["val"].dim() != 2):
        weight = None
    if weight is None and transposed.meta["val"].dim() != 2:
        return None
    return x2d, weight, bias


def _fold_linear_views(gm: torch.fx.GraphModule) -> None:
    """A linear on an input of rank 3 or more, as core ATen writes it, -> ``linear``:

        %a = view(%x, [s0 * s1, 32])
        %y = addmm(%b, %a, permute(%w, [1, 0]))     ==>   %z = linear(%x, %w, %b)
        %z = view(%y, [s0, s1, 64])

    The views' sizes are graph values once dynamo makes the shapes symbolic, and an op taking a
    size as a graph value cannot join a region: every linear split the graph. ``linear`` takes
    no sizes, and kiln prepacks and fuses it as in a TorchScript graph."""
    aten = torch.ops.aten
    views = (aten.view.default, aten._unsafe_view.default)
    for out_view in list(gm.graph.nodes):
        if out_view.op != "call_function" or out_view.target not in views:
            continue
        mm = out_view.args[0]
        if not isinstance(mm, torch.fx.Node) or len(mm.users) != 1:
            continue
        pieces = _linear_pieces(mm)
        if pieces is None:
            continue
        x2d, weight, bias = pieces
        if x2d.op != "call_function" or x2d.target not in views:
            continue
        x = x2d.args[0]
        if not isinstance(x, torch.fx.Node):
            continue
        x_val, x2d_val, out_val = x.meta["val"], x2d.meta["val"], out_view.meta["val"]
        if x_val.dim() < 3 or x2d_val.dim() != 2 or x_val.dtype != out_val.dtype:
            continue
        # x2d is x with its leading dims flattened when its rows are x's last dim (the counts of
        # elements agree); the result must be x's leading dims and the linear's outputs.
        want = list(x_val.shape[:-1]) + [mm.meta["val"].shape[1]]
        if (not _same_size(x_val.shape[-1], x2d_val.shape[1]) or len(want) != out_val.dim()
                or not all(_same_size(a, b) for a, b in zip(want, out_val.shape))):
            continue
        right = mm.args[-1]
        with gm.graph.inserting_before(out_view):
            if weight is None:
                weight = gm.graph.call_function(aten.permute.default, (right, [1, 0]))
                weight.meta["val"] = right.meta["val"].permute(1, 0)
            linear = gm.graph.call_function(aten.linear.default, (x, weight, bias))
        linear.meta["val"] = out_val
        out_view.replace_all_uses_with(linear)
        for node in (out_view, mm, x2d, right):
            if not node.users:
                gm.graph.erase_node(node)


def compile_graph(gm: torch.fx.GraphModule, options: dict[str, str], name: str,
                  weights: frozenset[int] = frozenset()) -> torch.fx.GraphModule:
    """``gm`` with its compilable regions replaced by kiln regions (changes ``gm`` in place).
    ``weights``: indices of ``gm``'s inputs that are parameters and buffers kiln may freeze."""
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    weight_names = {placeholders[i] for i in weights if i < len(placeholders)}
    gm.graph.eliminate_dead_code()
    _split_var_mean(gm)
    _use_layer_norm(gm)  # addmm(b, x, permute(w)) -> linear is kiln's canonicalize pass (C++)
    _fold_linear_views(gm)  # ... and a linear on a 3-D input, through its views, here
    gm.graph.eliminate_dead_code()  # the size arithmetic those views alone read
    _numbers_as_scalars(gm)
    _split_as_slices(gm)
    rebase_sizes(gm, _is_plain_tensor)  # sizes read off the graph's values: from its inputs
    gm.graph.eliminate_dead_code()
    _sizes.add_size_carriers(gm, _is_plain_tensor)  # int inputs no tensor input has as a size
    support = KilnSupport(gm)
    partitioner = CapabilityBasedPartitioner(gm, support, allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    in_regions = {n for p in partitions for n in p.nodes}
    # Size arithmetic (sym_size, s0 * 4) and size carriers are not ops run eagerly.
    eager_ops = sum(1 for n in gm.graph.nodes if n.op == "call_function" and n not in in_regions
                    and n.target not in (operator.getitem, _sizes.size_carrier)
                    and not _sizes.is_symbolic(n))
    _stats.add("eager_ops", eager_ops)
    gm.meta["kiln_eager_ops"] = eager_ops  # what a cached partitioning counts again when read
    if not partitions:
        gm.graph.eliminate_dead_code()  # size carriers no region took
        gm.recompile()
        return gm
    gm = fuse_partitions(gm, partitions, _REGION_PREFIX)
    # By name: fusing the partitions copies the graph's nodes.
    by_name = {n.name: n for n in gm.graph.nodes}
    size_inputs = {symbol: by_name[n.name] for symbol, n in support.size_inputs.items()}
    strict = options.get("strict") == "true"
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or not node.target.startswith(_REGION_PREFIX):
            continue
        region = getattr(gm, node.target)
        _sizes.add_size_inputs(node, region, size_inputs)
        output = next(n for n in region.graph.nodes if n.op == "output")
        returns_tuple = isinstance(output.args[0], (tuple, list))
        try:
            program, text = build_program(region)
        except KilnError as error:
            if strict:
                raise
            warnings.warn(f"kiln: {name}/{node.target} runs eagerly: {error}", stacklevel=2)
            _stats.add("graph_fallbacks")
            continue
        placeholders = [n for n in region.graph.nodes if n.op == "placeholder"]
        sizes = [i for i, n in enumerate(placeholders) if _sizes.is_symbolic(n)]
        call = RegionCall(None, returns_tuple, node.target, sizes)
        tensor_args = [arg for i, arg in enumerate(node.args) if i not in call.sizes]
        # By name: fusing the partitions copies the graph's nodes. The graph's own tensor
        # constants (get_attr: a number written into a tensor, `m[:4] = 1.0`) freeze too.
        region_weights = [i for i, arg in enumerate(tensor_args)
                          if isinstance(arg, torch.fx.Node)
                          and (arg.op == "get_attr"
                               or (arg.op == "placeholder" and arg.name in weight_names))]
        symbolic_dims, derived_dims, stride_dims = _sizes.symbolic_dims(
            [n for i, n in enumerate(placeholders) if i not in call.sizes])
        call.region = _C.Region(program, options, f"{name}-{node.target}",
                                call.run_eagerly(region), region_weights, symbolic_dims,
                                derived_dims, stride_dims)
        call.source = RegionSource(text, region_weights, region)
        node.op, node.target = "call_function", call
        delattr(gm, node.target.__name__)
        _stats.add("regions")
    gm.graph.eliminate_dead_code()  # size carriers no region took
    gm.recompile()
    return gm

"""Symbolic sizes as region arguments.

Once dynamo makes a graph's shapes symbolic, ops such as ``view(x, [s0 * s1, 768])`` take sizes as
graph values (SymInt nodes) computed outside the op. A region is imported per concrete input
signature anyway, so such a size is encoded as an expression over dimensions of the region's own
tensors, which the importer evaluates on their concrete sizes; the SymInt nodes themselves never
reach kiln.

An expression is a postfix program of tokens ``(op, a, b)``:

    ("const", v, 0)      push v
    ("dim", ref, d)      push the size of dimension d of region value ref
    ("add" | "mul" | "floordiv" | "mod" | "max" | "min", 0, 0)
                         pop two, push the result (floordiv and mod round as Python's // and %)
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import sympy
import torch

# Formal types whose argument may be a symbolic size (``str(formal.type)``; SymInt prints as int,
# Scalar as number: arange's end).
SCALAR_TYPES = ("int", "Optional[int]", "number", "Optional[number]")
LIST_TYPES = ("List[int]", "Optional[List[int]]")

# sympy functions torch writes size expressions with, and the operation each is (floordiv and
# mod round as Python's // and % do).
_BINARY = {"FloorDiv": "floordiv", "PythonMod": "mod", "Mod": "mod"}  # by class name
_VARIADIC = {sympy.Add: "add", sympy.Mul: "mul", sympy.Max: "max", sympy.Min: "min"}


def operation(expr: sympy.Expr) -> tuple[str, list[sympy.Expr]] | None:
    """A compound size expression as (operation, operands), folded left to right: "add", "mul",
    "floordiv", "mod", "max" or "min" (an integer power is a product); None for anything else."""
    if isinstance(expr, sympy.Pow) and isinstance(expr.exp, sympy.Integer) and expr.exp >= 1:
        return "mul", [expr.base] * int(expr.exp)
    if type(expr).__name__ in _BINARY and len(expr.args) == 2:
        return _BINARY[type(expr).__name__], list(expr.args)
    if type(expr) in _VARIADIC:
        return _VARIADIC[type(expr)], list(expr.args)
    return None

Program = list[tuple[str, int, int]]
Locate = Callable[[sympy.Symbol], Optional[tuple[int, int]]]


def is_symbolic(value: Any) -> bool:
    """A graph value that is a size: an FX node whose example value is an int or SymInt."""
    return (isinstance(value, torch.fx.Node)
            and isinstance(value.meta.get("val"), (int, torch.SymInt))
            and not isinstance(value.meta.get("val"), bool))


def expression(value: torch.fx.Node) -> sympy.Expr:
    """The sympy expression of a symbolic node's value."""
    val = value.meta["val"]
    return sympy.Integer(val) if isinstance(val, int) else val.node.expr


def tensor_symbols(tensor: Any) -> list[tuple[sympy.Symbol, int]]:
    """(symbol, dim) for each dimension of an example tensor whose size is a plain symbol."""
    if not isinstance(tensor, torch.Tensor):
        return []
    found = []
    for dim, size in enumerate(tensor.shape):
        if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
            found.append((size.node.expr, dim))
    return found


Derived = list[tuple[int, int, Program]]
Strides = list[tuple[int, list[Program]]]


def symbolic_dims(placeholders: list[torch.fx.Node]) -> tuple[list[list[int]], Derived, Strides]:
    """Per placeholder, per dim of its example tensor: a number per symbol (dims of one symbol get
    the same), -1 for a static size, -2 for a size derived from symbols (s0 * s1, s0 + 1: a
    flattened batch, a cache one token longer); per derived dim (placeholder, dim, program); and
    per placeholder with symbolic strides (placeholder, a program per dim), which a class needs
    where its layout is not dense (q of a fused qkv projection: [b, n, 128] with strides
    [384 n, 384, 1]). A program's ("dim", n, 0) tokens read symbol n. All empty when a derived dim
    has a symbol no dim is, or an operation kiln does not evaluate: the region then waits for a
    second signature to see which dims move (backend/api/shape_classes.h)."""
    numbers: dict[sympy.Symbol, int] = {}
    for node in placeholders:
        for symbol, _ in tensor_symbols(node.meta.get("val")):
            numbers.setdefault(symbol, len(numbers))

    def located(expr: sympy.Expr) -> Program | None:
        return compile_expression(expr, lambda e: (numbers[e], 0) if e in numbers else None)

    # Sizes of symbols no dim is, by their value now: a frame after a graph break gets its own
    # symbols for each input (labels of [s38, s97] beside logits of [s3, s88, V]), so a
    # flattened label count s38 * s97 can only move with s3 * s88, whose value it has.
    located_by_value: dict[int, set[sympy.Expr]] = {}
    for node in placeholders:
        val = node.meta.get("val")
        for size in val.shape if isinstance(val, torch.Tensor) else []:
            if (isinstance(size, torch.SymInt) and size.node.hint is not None
                    and located(size.node.expr) is not None):
                located_by_value.setdefault(int(size.node.hint), set()).add(size.node.expr)

    def program_of(size: Any) -> Program | None:
        if not isinstance(size, torch.SymInt):
            return [("const", int(size), 0)]
        program = located(size.node.expr)
        if program is not None or size.node.hint is None:
            return program
        alike = [e for e in located_by_value.get(int(size.node.hint), ())
                 if len(e.free_symbols) == len(size.node.expr.free_symbols)]
        return located(alike[0]) if len(alike) == 1 else None

    dims: list[list[int]] = []
    derived: Derived = []
    strides: Strides = []
    for i, node in enumerate(placeholders):
        val = node.meta.get("val")
        row = []
        for d, size in enumerate(val.shape if isinstance(val, torch.Tensor) else []):
            if not isinstance(size, torch.SymInt) or size.node.expr.is_number:
                row.append(-1)
            elif isinstance(size.node.expr, sympy.Symbol):
                row.append(numbers[size.node.expr])
            else:
                program = program_of(size)
                if program is None:
                    return [], [], []
                derived.append((i, d, program))
                row.append(-2)
        dims.append(row)
        if isinstance(val, torch.Tensor) and any(isinstance(t, torch.SymInt) for t in val.stride()):
            programs = [program_of(t) for t in val.stride()]
            if all(p is not None for p in programs):
                strides.append((i, programs))
    return (dims, derived, strides) if numbers else ([], [], [])


def compile_expression(expr: sympy.Expr, locate: Locate) -> Program | None:
    """The postfix program of `expr`, its symbols found with `locate` (symbol -> (ref, dim)); None
    when a symbol cannot be located or the expression uses a function kiln does not evaluate."""
    program: Program = []

    def emit(e: sympy.Expr) -> bool:
        if isinstance(e, sympy.Integer):
            program.append(("const", int(e), 0))
            return True
        if isinstance(e, sympy.Symbol):
            where = locate(e)
            if where is None:
                return False
            program.append(("dim", where[0], where[1]))
            return True
        if (compound := operation(e)) is None:
            return False
        token, operands = compound
        if not emit(operands[0]):
            return False
        for operand in operands[1:]:
            if not emit(operand):
                return False
            program.append((token, 0, 0))
        return True

    return program if emit(expr) else None


def size_program(value: Any, locate: Locate) -> Program | None:
    """A size argument element (an int, or a symbolic node) as a program; None if it cannot be."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [("const", value, 0)]
    if is_symbolic(value):
        return compile_expression(expression(value), locate)
    return None


def is_size_argument(formal, value: Any) -> bool:
    """Whether `value` is a size argument holding at least one symbolic node."""
    kind = str(formal.type)
    if kind in SCALAR_TYPES:
        return is_symbolic(value)
    if kind in LIST_TYPES and isinstance(value, (list, tuple)):
        return any(is_symbolic(v) for v in value)
    return False


_CARRIED: dict[torch.device, torch.Tensor] = {}


def size_carrier(size: int, like: torch.Tensor) -> torch.Tensor:
    """A tensor of shape [size] on `like`'s device that holds one element (stride 0): given to a
    region as an input it never reads, it makes an int input of the graph part of the region's
    signature, as sizes of tensor inputs are."""
    if like.device not in _CARRIED:
        _CARRIED[like.device] = torch.zeros(1, device=like.device)
    return _CARRIED[like.device].expand(size)


def add_size_carriers(gm: torch.fx.GraphModule, usable: Callable[[Any], bool]) -> None:
    """A size_carrier node for each int input of the graph (a symbolic int argument of the
    model, `repeat(n, 1)`'s n) whose symbol no tensor input has as a size."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    tensors = [n for n in placeholders if usable(n.meta.get("val"))]
    carried = {symbol for n in tensors for symbol, _ in tensor_symbols(n.meta["val"])}
    fake_mode = next((getattr(n.meta["val"], "fake_mode", None) for n in tensors), None)
    if fake_mode is None:
        return
    like = tensors[0]
    last = placeholders[-1]
    for node in placeholders:
        val = node.meta.get("val")
        if (not isinstance(val, torch.SymInt) or not isinstance(val.node.expr, sympy.Symbol)
                or val.node.expr in carried):
            continue
        with gm.graph.inserting_after(last):
            last = gm.graph.call_function(size_carrier, (node, like))
        with fake_mode:  # (not size_carrier itself: it would keep a fake tensor for run time)
            last.meta["val"] = torch.zeros(1, device=like.meta["val"].device).expand(val)
        carried.add(val.node.expr)


def graph_symbols(gm: torch.fx.GraphModule,
                  usable: Callable[[Any], bool]) -> dict[sympy.Symbol, torch.fx.Node]:
    """Symbol -> a tensor input of the graph, or a size_carrier, with a dimension of that size
    (one a region can take: `usable` of its example value)."""
    found: dict[sympy.Symbol, torch.fx.Node] = {}
    for node in gm.graph.nodes:
        if ((node.op == "placeholder" or node.target is size_carrier)
                and usable(node.meta.get("val"))):
            for symbol, _ in tensor_symbols(node.meta.get("val")):
                found.setdefault(symbol, node)
    return found


def size_problem(formal, value: Any, tensor_args: list[Any], inputs: dict) -> str | None:
    """Why the symbolic size argument `value` cannot be given to kiln, or None. Its symbols must
    be sizes of the op's own tensor arguments (`tensor_args`: their example values), which are
    region values, or of the graph's tensor `inputs` (graph_symbols), which a region can take as
    inputs of its own (add_size_inputs)."""
    known = {symbol for tensor in tensor_args for symbol, _ in tensor_symbols(tensor)}
    known |= inputs.keys()
    items = value if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if size_program(item, lambda s: (0, 0) if s in known else None) is None:
            return (f"argument '{formal.name}' is a size computed at run time that is not an "
                    "expression of the sizes of its tensor arguments or of the graph's inputs")
    return None


def _size_symbols(node: torch.fx.Node) -> set[sympy.Symbol]:
    found = set()
    for value in [*node.args, *node.kwargs.values()]:
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if is_symbolic(item):
                found |= expression(item).free_symbols
    return found


def add_size_inputs(call: torch.fx.Node, region: torch.fx.GraphModule,
                    inputs: dict[sympy.Symbol, torch.fx.Node]) -> None:
    """Gives `region` (called by `call`) the graph inputs (`inputs`, graph_symbols) that carry the
    symbols its size arguments read and none of its tensor inputs has as a size: a region is
    compiled per signature of its tensor inputs, so every size it reads has to follow from them.
    (A symbol that only a value the region computes has as a size follows from them already.)"""
    placeholders = [n for n in region.graph.nodes if n.op == "placeholder"]
    own = {symbol for n in placeholders for symbol, _ in tensor_symbols(n.meta.get("val"))}
    needed = set().union(*(_size_symbols(n) for n in region.graph.nodes if n.op == "call_function"))
    sources = []
    for symbol in sorted(needed - own, key=str):
        source = inputs.get(symbol)
        if source is not None and source not in sources and source not in call.args:
            sources.append(source)
    if not sources:
        return
    last = placeholders[-1]
    for source in sources:
        with region.graph.inserting_after(last):
            last = region.graph.placeholder(source.name)
        last.meta["val"] = source.meta["val"]
    call.args = (*call.args, *sources)
    region.recompile()

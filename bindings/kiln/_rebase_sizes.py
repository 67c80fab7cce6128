"""FX rewrite: sizes an op takes, recomputed from the graph's inputs.

dynamo often reads a size off a value the graph computes (``sym_size(window_out, 0)`` in Swin's
window attention) where the graph's inputs already tell it (``64 * s0``). kiln compiles such an op
inside a region, with the size as an expression of the region's tensor sizes (_sizes.py), but the
partitioner still sees the FX edge: region A computes ``window_out``, the size is read off it
outside any region, and the region that takes the size must come after A, so it cannot be A. The
size nodes are rebuilt from the graph's inputs, which every region can follow:

    %w = kiln_region_0(...)            %n = operator.mul(64, %s0)      (s0: a graph input)
    %n = aten.sym_size.int(%w, 0)  =>  (one region over both, reading 64 * s0 as a size)
    %y = kiln_region_1(%w, %n)
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import sympy
import torch

from . import _sizes

# _sizes.operation's operations as FX-traceable functions of ints and SymInts.
_FUNCTIONS = {"add": operator.add, "mul": operator.mul, "floordiv": operator.floordiv,
              "mod": operator.mod, "max": torch.sym_max, "min": torch.sym_min}


class _Builder:
    """Builds FX nodes for sympy expressions over the symbols the graph's inputs carry, at the top
    of the graph, one node per distinct expression."""

    def __init__(self, gm: torch.fx.GraphModule, usable: Callable[[Any], bool]):
        self.graph = gm.graph
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        self.anchor = placeholders[-1] if placeholders else None
        self.sources: dict[sympy.Symbol, Any] = {}  # a node, or (tensor node, dim)
        for node in placeholders:
            val = node.meta.get("val")
            if isinstance(val, torch.SymInt) and isinstance(val.node.expr, sympy.Symbol):
                self.sources[val.node.expr] = node
            elif usable(val):
                for symbol, dim in _sizes.tensor_symbols(val):
                    self.sources.setdefault(symbol, (node, dim))
        self.built: dict[sympy.Expr, torch.fx.Node] = {}

    def _node(self, target, args: tuple, val) -> torch.fx.Node:
        with self.graph.inserting_after(self.anchor):
            node = self.graph.call_function(target, args)
        node.meta["val"] = val
        self.anchor = node
        return node

    def build(self, expr: sympy.Expr) -> Any:
        """An int, or a node whose value is `expr`; None where a symbol has no source or the
        expression uses a function this does not rebuild."""
        if isinstance(expr, sympy.Integer):
            return int(expr)
        if expr in self.built:
            return self.built[expr]
        node = None
        if isinstance(expr, sympy.Symbol):
            source = self.sources.get(expr)
            if isinstance(source, tuple):
                tensor, dim = source
                node = self._node(torch.ops.aten.sym_size.int, (tensor, dim),
                                  tensor.meta["val"].shape[dim])
            else:
                node = source
        else:
            if (compound := _sizes.operation(expr)) is None:
                return None
            name, operands = compound
            combine = _FUNCTIONS[name]
            parts = [self.build(e) for e in operands]
            if any(p is None for p in parts):
                return None
            node = parts[0]
            for part in parts[1:]:
                value = combine(_value(node), _value(part))
                node = self._node(combine, (node, part), value)
        if node is not None:
            self.built[expr] = node
        return node


def _value(part: Any) -> Any:
    return part.meta["val"] if isinstance(part, torch.fx.Node) else part


def _reads_only_inputs(node: torch.fx.Node, known: dict) -> bool:
    """Whether a size node is computed from the graph's inputs alone (a placeholder, sizes of
    placeholders, arithmetic on those): such a size needs no rebuilding."""
    if node not in known:
        if node.op == "placeholder":
            known[node] = True
        else:
            # A size read off a computed tensor does not: the tensor is not a size node.
            known[node] = _sizes.is_symbolic(node) and node.op == "call_function" and all(
                _reads_only_inputs(n, known) for n in node.all_input_nodes)
    return known[node]


def rebase_sizes(gm: torch.fx.GraphModule, usable: Callable[[Any], bool]) -> None:
    """Size arguments of ATen ops that the graph reads off its own values become nodes computed
    from its inputs (`usable`: the tensor inputs a region may take). The old size nodes are left
    for dead-code elimination."""
    builder = None
    known: dict[torch.fx.Node, bool] = {}
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if node.target is torch.ops.aten.sym_size.int:
            continue

        def rebased(value: Any) -> Any:
            nonlocal builder
            if not _sizes.is_symbolic(value) or _reads_only_inputs(value, known):
                return value
            builder = builder or _Builder(gm, usable)
            if builder.anchor is None:
                return value
            new = builder.build(_sizes.expression(value))
            return value if new is None else new

        args = tuple((type(a)(rebased(v) for v in a) if isinstance(a, (list, tuple))
                      else rebased(a)) for a in node.args)
        if args != node.args:
            node.args = args

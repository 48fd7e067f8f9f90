"""The DSL's graph builder: Python's side of graph/builder.h, emitting JSON IR version 1.

It keeps no op table of its own: the op list (names, inputs, outputs) comes from the engine's
registry, and every node's output types from the op's own shape rule, asked through the
extension module. Naming follows GraphBuilder exactly, so a model written here and the same
model written in C++ give the same IR:

- leaves (inputs, parameters) are named ``<scope>.<name>``;
- an op's first output is ``<scope>.<name or op>``, its other outputs
  ``<first>.<output name>``; a name in use gets ``.2``, ``.3`` appended;
- the node takes the first output's name, the current recompute group and phase "forward".
"""
from __future__ import annotations

import contextlib
import difflib
import json
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from surogate import _engine

Shape = Sequence[int]

_OPS: Optional[Dict[str, Dict[str, Any]]] = None


def registered_ops() -> Dict[str, Dict[str, Any]]:
    """The engine's ops by name: ``inputs``, ``outputs`` (names), ``variadic_inputs``,
    ``differentiable`` (docs/ops.md documents each)."""
    global _OPS
    if _OPS is None:
        _OPS = {op["name"]: op for op in _engine.ops()}
    return _OPS


class Tensor:
    """A tensor of the graph being built: its IR name, dtype (safetensors spelling) and shape."""

    __slots__ = ("graph", "name", "dtype", "shape", "role")

    def __init__(self, graph: "Graph", name: str, dtype: str, shape: Shape, role: str) -> None:
        self.graph = graph
        self.name = name
        self.dtype = dtype
        self.shape = tuple(shape)
        self.role = role

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, {self.dtype}{list(self.shape)}, {self.role})"


class _Ops:
    """``g.ops.<op>(*inputs, name="", **attrs)``: each registered op as a method."""

    def __init__(self, graph: "Graph") -> None:
        self._graph = graph

    def __getattr__(self, op: str):
        ops = registered_ops()
        if op not in ops:
            close = difflib.get_close_matches(op, ops, n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else "; see surogate.dsl.registered_ops()"
            raise AttributeError(f"the engine has no op '{op}'{hint}")

        def apply(*inputs: Tensor, name: str = "", **attrs: Any):
            return self._graph.op(op, list(inputs), attrs, name)

        apply.__name__ = op
        apply.__doc__ = f"{op}({', '.join(ops[op]['inputs'])}) -> {', '.join(ops[op]['outputs'])}"
        return apply

    def __dir__(self) -> List[str]:
        return sorted(registered_ops())


class Graph:
    """A forward graph under construction for micro-batches of ``batch`` x ``seq`` tokens."""

    def __init__(self, batch: int, seq: int, lmhead_chunks: int = 1) -> None:
        self.batch = batch
        self.seq = seq
        self.lmhead_chunks = lmhead_chunks
        self.ops = _Ops(self)
        self._tensors: List[Dict[str, Any]] = []
        self._by_name: Dict[str, Tensor] = {}
        self._nodes: List[Dict[str, Any]] = []
        self._inputs: List[str] = []
        self._parameters: List[str] = []
        self._outputs: List[str] = []
        self._scope = ""
        self._group = ""
        self.hf_names: Dict[str, str] = {}

    # ---- names, scopes, recompute groups -------------------------------------------------
    def scoped_name(self, name: str) -> str:
        if not self._scope:
            return name
        return self._scope if not name else f"{self._scope}.{name}"

    def _unique(self, base: str) -> str:
        if base not in self._by_name:
            return base
        suffix = 2
        while f"{base}.{suffix}" in self._by_name:
            suffix += 1
        return f"{base}.{suffix}"

    @contextlib.contextmanager
    def scope(self, name: str) -> Iterator[None]:
        """Names created inside are prefixed with ``name`` ("layers.3" + "q" -> "layers.3.q")."""
        previous, self._scope = self._scope, self.scoped_name(name)
        try:
            yield
        finally:
            self._scope = previous

    @contextlib.contextmanager
    def recompute(self, group: str) -> Iterator[None]:
        """Nodes created inside carry this recompute group (docs/architecture.md, "Recompute");
        nodes outside any group are checkpoints, kept for the backward."""
        previous, self._group = self._group, group
        try:
            yield
        finally:
            self._group = previous

    # ---- leaves ----------------------------------------------------------------------------
    def _leaf(self, name: str, dtype: str, shape: Shape, role: str, trainable: Optional[bool]) -> Tensor:
        full = self.scoped_name(name)
        if not full:
            raise ValueError(f"a graph {role} needs a name")
        if full in self._by_name:
            raise ValueError(f"the graph already has a tensor named '{full}'")
        if any(int(dim) <= 0 for dim in shape):
            raise ValueError(f"tensor '{full}' has shape {list(shape)}: every dimension must be positive")
        entry: Dict[str, Any] = {"name": full, "dtype": dtype, "shape": [int(dim) for dim in shape], "role": role}
        if role == "parameter":
            entry["trainable"] = bool(trainable)
        self._tensors.append(entry)
        tensor = Tensor(self, full, dtype, shape, role)
        self._by_name[full] = tensor
        (self._inputs if role == "input" else self._parameters).append(full)
        return tensor

    def input(self, name: str, dtype: str, shape: Shape) -> Tensor:
        """Batch data the engine writes per micro-batch (see docs/models.md for the five inputs)."""
        return self._leaf(name, dtype, shape, "input", None)

    def parameter(self, name: str, shape: Shape, *, hf: Optional[str] = None, dtype: str = "F32",
                  trainable: bool = True) -> Tensor:
        """A weight. ``hf``: its name in the Hugging Face checkpoint (the mapping the engine loads
        and saves by; checked against the engine's table for the architecture when emitted)."""
        tensor = self._leaf(name, dtype, shape, "parameter", trainable)
        if hf is not None:
            self.hf_names[tensor.name] = hf
        return tensor

    # ---- ops ---------------------------------------------------------------------------------
    def op(self, op: str, inputs: Sequence[Tensor], attrs: Optional[Dict[str, Any]] = None,
           name: str = "") -> Union[Tensor, Tuple[Tensor, ...]]:
        """Applies a registered op; returns its output (or a tuple when it has several)."""
        definition = registered_ops().get(op)
        if definition is None:
            getattr(self.ops, op)  # raises the AttributeError with suggestions
        attrs = dict(attrs or {})
        for tensor in inputs:
            if not isinstance(tensor, Tensor) or tensor.graph is not self:
                raise TypeError(f"op {op}: inputs must be tensors of this graph, got {tensor!r}")
        base = self._unique(self.scoped_name(name or op))
        where = f"node '{base}' (op {op})"
        types = _engine.infer(op, where, [[t.dtype, list(t.shape)] for t in inputs], attrs)
        outputs: List[Tensor] = []
        for index, (dtype, shape) in enumerate(types):
            output_name = base
            if index > 0:
                names = definition["outputs"]
                output_name = self._unique(f"{base}.{names[index] if index < len(names) else f'out{index}'}")
            tensor = Tensor(self, output_name, dtype, shape, "activation")
            self._tensors.append({"name": output_name, "dtype": dtype, "shape": list(shape), "role": "activation"})
            self._by_name[output_name] = tensor
            outputs.append(tensor)
        node: Dict[str, Any] = {"name": base, "op": op, "inputs": [t.name for t in inputs],
                                "outputs": [t.name for t in outputs], "attrs": attrs}
        if self._group:
            node["recompute_group"] = self._group
        self._nodes.append(node)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def output(self, tensor: Tensor) -> None:
        """Marks a graph output; the first one is the loss (a scalar F32)."""
        if tensor.name not in self._outputs:
            self._outputs.append(tensor.name)

    def tensor(self, name: str) -> Tensor:
        return self._by_name[name]

    def to_ir(self) -> Dict[str, Any]:
        """The graph as a JSON IR version 1 document (docs/architecture.md)."""
        return {"version": 1, "tensors": self._tensors, "nodes": self._nodes, "inputs": self._inputs,
                "parameters": self._parameters, "outputs": self._outputs}

    def to_json(self, indent: Optional[int] = 1) -> str:
        return json.dumps(self.to_ir(), indent=indent)

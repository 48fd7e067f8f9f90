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
import os
import sys
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from surogate.dsl._link import engine as _engine

_DSL_DIR = os.path.dirname(os.path.abspath(__file__))


def _caller() -> str:
    """Where the user's code is: ``file:line: `` of the innermost frame outside surogate.dsl, with
    the lines of that file that led to it (``file:41 (via lines 52, 60): ``: a helper's line, then
    the calls of the helper)."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        frames.append((frame.f_code.co_filename, frame.f_lineno))
        frame = frame.f_back
    return user_location(frames)


def user_location(frames) -> str:
    """``file:line (via lines ...): `` for (filename, line) pairs, innermost first; '' when none is
    outside surogate.dsl."""
    outside = [(name, line) for name, line in frames if os.path.dirname(os.path.abspath(name)) != _DSL_DIR]
    if not outside:
        return ""
    file, line = outside[0]
    via = []
    for name, caller_line in outside[1:]:
        if name != file:
            break
        via.append(str(caller_line))
    return f"{file}:{line}{' (via lines ' + ', '.join(via) + ')' if via else ''}: "


Shape = Sequence[int]

_OPS: Optional[Dict[str, Dict[str, Any]]] = None


def registered_ops() -> Dict[str, Dict[str, Any]]:
    """The engine's ops by name: ``inputs``, ``outputs`` (names), ``variadic_inputs``,
    ``differentiable`` (docs/ops.md documents each)."""
    global _OPS
    if _OPS is None:
        _OPS = {op["name"]: op for op in _engine.ops()}
    return _OPS


class DefinitionError(ValueError):
    """A model definition that does not fit its model folder or the engine: the message names the
    line of the definition's file (``where``, first), the weight or the op (``python -m surogate.dsl``
    exits 2)."""

    def __init__(self, text: str, where: str = "") -> None:
        super().__init__(where + text)
        self.text, self.where = text, where


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
        self.parameter_lines: Dict[str, str] = {}  # parameter -> "file:line: " of its declaration
        self._hf_owner: Dict[str, str] = {}         # checkpoint name -> the parameter declared as it
        # Checkpoint tensor -> shape (the model folder's safetensors headers); None: not checked.
        self.checkpoint: Optional[Dict[str, List[int]]] = None

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
        """A weight. ``hf``: its tensor's name in the model folder's checkpoint (the IR's
        ``checkpoint_names``: the engine loads it from and saves it back to that name, so a
        definition declares weights of any name and layout; a fused tensor is split in the graph).
        ``"{expert}"`` in ``hf`` stacks per-expert tensors along dimension 0. Either every parameter
        has one or none does (then the engine's built-in table names them, docs/models.md)."""
        tensor = self._leaf(name, dtype, shape, "parameter", trainable)
        self.parameter_lines[tensor.name] = _caller()
        if hf is not None:
            twin = self._hf_owner.setdefault(hf, tensor.name)
            if twin != tensor.name:
                raise DefinitionError(f"parameter '{tensor.name}' is declared as checkpoint tensor '{hf}', which "
                                      f"'{twin}' already is", self.parameter_lines[tensor.name])
            self.hf_names[tensor.name] = hf
            self._check_stored(tensor, hf)
        return tensor

    def _check_stored(self, tensor: Tensor, hf: str) -> None:
        """The checkpoint holds ``hf`` (each expert's tensor for "{expert}") with the declared shape."""
        if self.checkpoint is None:
            return
        shape = tuple(tensor.shape)
        pieces = [(hf.replace("{expert}", str(e)), shape[1:]) for e in range(shape[0])] if "{expert}" in hf \
            else [(hf, shape)]
        where = self.parameter_lines[tensor.name]
        for piece, piece_shape in pieces:
            if piece not in self.checkpoint:
                close = difflib.get_close_matches(piece, list(self.checkpoint), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise DefinitionError(f"parameter '{tensor.name}' is declared as checkpoint tensor '{piece}', which "
                                      f"the model folder does not hold{hint}", where)
            if tuple(self.checkpoint[piece]) != tuple(piece_shape):
                raise DefinitionError(f"parameter '{tensor.name}' is declared with shape {list(piece_shape)}, but "
                                      f"checkpoint tensor '{piece}' is {list(self.checkpoint[piece])}", where)

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
        """The graph as a JSON IR version 1 document (docs/architecture.md), with
        ``checkpoint_names`` (parameter -> checkpoint tensor) when the parameters declare them."""
        ir: Dict[str, Any] = {"version": 1, "tensors": self._tensors, "nodes": self._nodes, "inputs": self._inputs,
                              "parameters": self._parameters, "outputs": self._outputs}
        if self.hf_names:
            unnamed = [name for name in self._parameters if name not in self.hf_names]
            if unnamed:
                raise DefinitionError(f"parameter '{unnamed[0]}' has no checkpoint name (hf=...), but others do: "
                                      f"name every parameter's checkpoint tensor, or none",
                                      self.parameter_lines.get(unnamed[0], ""))
            ir["checkpoint_names"] = {name: self.hf_names[name] for name in self._parameters}
        return ir

    def to_json(self, indent: Optional[int] = 1) -> str:
        return json.dumps(self.to_ir(), indent=indent)

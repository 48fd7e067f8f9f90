"""Model definitions: a decorated Python function that writes a forward graph, and its emission
as JSON IR for a model folder and a micro-batch shape.

    from surogate import dsl

    @dsl.model
    def my_model(g: dsl.Graph, config: dsl.ModelConfig) -> None:
        ids = g.input("input_ids", "I32", [g.batch, g.seq])
        ...
        g.output(loss)

    ir = my_model.emit("path/to/model", batch=4, seq=256)   # a dict: JSON IR version 1
    my_model.save("model.json", "path/to/model", batch=4, seq=256)

The engine checks what it reads (graph/json_ir.h, then the model contract of
models/model_eval.h); emit() runs the same import on the result before returning it.
"""
from __future__ import annotations

import difflib
import importlib.util
import json
import os
import pathlib
import struct
import traceback
from typing import Any, Callable, Dict, List, Optional, Union

from surogate import UserError
from surogate.dsl._link import engine as _engine
from surogate.dsl.graph import DefinitionError, Graph, user_location


class ModelConfig:
    """What the engine reads from a model folder's config.json, resolved (io/model_config.h):
    ``vocab_size``, ``hidden_size``, ``intermediate_size``, ``num_hidden_layers``,
    ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``, ``rms_norm_eps``,
    ``tie_word_embeddings``, ``qkv_bias``, ``o_proj_bias``, ``mlp_bias``, ``qk_norm``, ``hidden_act``,
    ``sliding_window_per_layer`` (0 = full attention), ``rope_type``, ``model_type``, ``architecture``
    (config.json's class name), ``moe`` (None for dense models, else a dict: ``experts``,
    ``experts_per_token``, ``expert_intermediate_size``, ``normalize_top_k``,
    ``shared_expert_intermediate_size``, ``sparse_layers`` (per layer), ``output_router_logits``,
    ``router_aux_loss_coef``).

    Every other config.json key is an attribute too, as the file has it (``c.layer_norm_eps``,
    ``c.use_parallel_residual``, ``c.rope_parameters``...); :meth:`get` gives a default for keys
    the file may lack, and :attr:`json` is the whole file. The engine's resolved values win where
    both exist (``head_dim`` is always set, RoPE's ``partial_rotary_factor`` is in :meth:`rope`).
    """

    def __init__(self, model_dir: str) -> None:
        self.model_dir = model_dir
        self._facts: Dict[str, Any] = _engine.model_facts(model_dir)
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as file:
            self.json: Dict[str, Any] = json.load(file)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._facts:
            return self._facts[name]
        if name in self.json:
            return self.json[name]
        raise AttributeError(f"config has no '{name}' (config.json lacks it; the engine's values: "
                             f"{', '.join(sorted(self._facts))}); use c.get('{name}', default)")

    def get(self, name: str, default: Any = None) -> Any:
        """The engine's value or config.json's key ``name``, else ``default``."""
        try:
            return getattr(self, name)
        except AttributeError:
            return default

    def rope(self, seq: int) -> Dict[str, Any]:
        """The RoPE attributes of the rope ops (``inv_freq``, ``attention_scaling``) for sequences of
        ``seq`` tokens, computed by the engine from the config's RoPE settings (every variant, with
        ``partial_rotary_factor``: ``inv_freq`` has rotary_dim / 2 entries)."""
        return _engine.rope_attributes(self.model_dir, seq)

    def parameter_table(self) -> List[Dict[str, Any]]:
        """The engine's built-in parameters for this config (``name``, ``hf_name``, ``shape``, in
        order); a UserError for an architecture Surogate has no C++ for."""
        return _engine.parameter_table(self.model_dir)


Builder = Callable[[Graph, ModelConfig], None]


class ModelDefinition:
    """A model written with the DSL (see :func:`model`)."""

    def __init__(self, build: Builder, name: Optional[str] = None) -> None:
        self.build = build
        self.name = name or build.__name__
        self.__doc__ = build.__doc__

    def graph(self, model_dir: Union[str, "os.PathLike[str]"], batch: int = 1, seq: int = 128,
              lmhead_chunks: int = 1) -> Graph:
        """Runs the definition for a model folder's config.json and a micro-batch shape."""
        g = Graph(batch, seq, lmhead_chunks)
        config = ModelConfig(os.fspath(model_dir))
        if "quantization_config" not in config.json:  # quantized checkpoints hold their codes' side tensors too
            g.checkpoint = checkpoint_shapes(config.model_dir)
        try:
            self.build(g, config)
        except (ValueError, AttributeError, TypeError, KeyError, UserError) as error:
            if isinstance(error, DefinitionError):
                raise DefinitionError(f"{self.name}: {error.text}", error.where) from error
            raise DefinitionError(f"{self.name}: {_message(error)}", _where(error.__traceback__)) from error
        check_undeclared(g, config.model_dir, self.name)
        return g

    def emit(self, model_dir: Union[str, "os.PathLike[str]"], batch: int = 1, seq: int = 128,
             lmhead_chunks: int = 1) -> Dict[str, Any]:
        """The JSON IR (a dict), verified by the engine's importer."""
        ir = self.graph(model_dir, batch, seq, lmhead_chunks).to_ir()
        try:
            _engine.verify_ir(json.dumps(ir))
        except UserError as error:
            raise DefinitionError(f"{self.name}: {error}") from error
        return ir

    def save(self, path: Union[str, "os.PathLike[str]"], model_dir: Union[str, "os.PathLike[str]"], batch: int = 1,
             seq: int = 128, lmhead_chunks: int = 1) -> pathlib.Path:
        """Writes the JSON IR to ``path`` (for ``model_definition:`` in a YAML configuration)."""
        path = pathlib.Path(path)
        path.write_text(json.dumps(self.emit(model_dir, batch, seq, lmhead_chunks), indent=1) + "\n")
        return path

    def __call__(self, g: Graph, config: ModelConfig) -> None:
        self.build(g, config)

    def __repr__(self) -> str:
        return f"<surogate model definition {self.name!r}>"


def model(build: Optional[Builder] = None, *, name: Optional[str] = None):
    """Decorator: turns ``build(g, config)`` into a :class:`ModelDefinition`."""
    if build is None:
        return lambda function: ModelDefinition(function, name)
    return ModelDefinition(build, name)


def _message(error: BaseException) -> str:
    return str(error.args[0]) if isinstance(error, KeyError) and error.args else str(error)


def _where(trace) -> str:
    """The user's line where the error was raised (graph.user_location), or ''."""
    return user_location([(frame.filename, frame.lineno) for frame in reversed(traceback.extract_tb(trace))])


def check_undeclared(g: Graph, model_dir: str, model_name: str) -> None:
    """Every tensor of the checkpoint is declared by some ``g.parameter(..., hf=...)``, as the
    engine's loader will require (models/weight_io.h); each declared one was checked against the
    checkpoint when it was declared (Graph.parameter)."""
    if not g.hf_names or g.checkpoint is None:
        return
    declared = set()
    for name, hf in g.hf_names.items():
        shape = g.tensor(name).shape
        declared.update(hf.replace("{expert}", str(e)) for e in range(shape[0])) if "{expert}" in hf else declared.add(hf)
    extra = sorted(name for name in g.checkpoint if name not in declared and not name.endswith("rotary_emb.inv_freq"))
    if extra:
        raise DefinitionError(f"{model_name}: {model_dir} holds tensors the definition does not declare: "
                              f"{', '.join(extra[:5])}{' ...' if len(extra) > 5 else ''}; declare each with "
                              f"g.parameter(..., hf=NAME) (the engine loads every tensor of the checkpoint)")


def checkpoint_shapes(model_dir: str) -> Optional[Dict[str, List[int]]]:
    """Tensor name -> shape of a folder's checkpoint (the shards of model.safetensors.index.json,
    else model.safetensors, else every *.safetensors, as transformers picks them), read from the
    files' JSON headers; None when the folder has none."""
    folder = pathlib.Path(model_dir)
    index = folder / "model.safetensors.index.json"
    if index.is_file():  # the files transformers reads: the index's shards, else model.safetensors, else all
        files = [folder / shard for shard in sorted(set(json.loads(index.read_text())["weight_map"].values()))]
    elif (folder / "model.safetensors").is_file():
        files = [folder / "model.safetensors"]
    else:
        files = [f for f in sorted(folder.glob("*.safetensors")) if not f.name.startswith("adapter_")]
    if not files:
        return None
    shapes: Dict[str, List[int]] = {}
    for file in files:
        with open(file, "rb") as stream:
            size = struct.unpack("<Q", stream.read(8))[0]
            header = json.loads(stream.read(size))
        for name, entry in header.items():
            if name != "__metadata__" and not name.endswith("_scale_inv"):
                shapes[name] = entry["shape"]
    return shapes


def load_definition(definition: Union[ModelDefinition, str, "os.PathLike[str]"]) -> ModelDefinition:
    """A :class:`ModelDefinition` as is, or the one a ``.py`` file defines (``file.py`` holding
    exactly one, or ``file.py:name``)."""
    if isinstance(definition, ModelDefinition):
        return definition
    text = os.fspath(definition)
    path, _, wanted = text.partition(".py:")
    path = path + ".py" if wanted else text
    if not os.path.isfile(path):
        raise ValueError(f"model_definition '{text}': no such file")
    spec = importlib.util.spec_from_file_location(pathlib.Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = {value.name: value for value in vars(module).values() if isinstance(value, ModelDefinition)}
    if wanted:
        if wanted not in found:
            raise ValueError(f"model_definition '{text}': {path} defines no model '{wanted}' "
                             f"(it defines: {', '.join(found) or 'none'})")
        return found[wanted]
    if len(found) != 1:
        raise ValueError(f"model_definition '{text}': {path} defines {len(found)} models "
                         f"({', '.join(found) or 'none'}); name one as {path}:NAME")
    return next(iter(found.values()))

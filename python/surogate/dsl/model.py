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

import importlib.util
import json
import os
import pathlib
from typing import Any, Callable, Dict, List, Optional, Union

from surogate import _engine
from surogate.dsl.graph import Graph


class ModelConfig:
    """What the engine reads from a model folder's config.json, resolved (io/model_config.h):
    ``vocab_size``, ``hidden_size``, ``intermediate_size``, ``num_hidden_layers``,
    ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``, ``rms_norm_eps``,
    ``tie_word_embeddings``, ``qkv_bias``, ``o_proj_bias``, ``mlp_bias``, ``qk_norm``,
    ``sliding_window_per_layer`` (0 = full attention), ``rope_type``, ``model_type``, ``moe`` (None
    for dense models, else a dict: ``experts``, ``experts_per_token``, ``expert_intermediate_size``,
    ``normalize_top_k``, ``shared_expert_intermediate_size``, ``sparse_layers`` (per layer),
    ``output_router_logits``, ``router_aux_loss_coef``), ...
    """

    def __init__(self, model_dir: str) -> None:
        self.model_dir = model_dir
        self._facts: Dict[str, Any] = _engine.model_facts(model_dir)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._facts[name]
        except KeyError:
            raise AttributeError(f"config has no '{name}'; it has {', '.join(sorted(self._facts))}") from None

    def rope(self, seq: int) -> Dict[str, Any]:
        """The RoPE attributes of the rope ops (``inv_freq``, ``attention_scaling``) for sequences of
        ``seq`` tokens, computed by the engine from the config's RoPE settings (every variant)."""
        return _engine.rope_attributes(self.model_dir, seq)

    def parameter_table(self) -> List[Dict[str, Any]]:
        """The engine's parameters for this config: ``name``, ``hf_name``, ``shape``, in order."""
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
        self.build(g, config)
        _check_weight_names(g, config, self.name)
        return g

    def emit(self, model_dir: Union[str, "os.PathLike[str]"], batch: int = 1, seq: int = 128,
             lmhead_chunks: int = 1) -> Dict[str, Any]:
        """The JSON IR (a dict), verified by the engine's importer."""
        ir = self.graph(model_dir, batch, seq, lmhead_chunks).to_ir()
        _engine.verify_ir(json.dumps(ir))
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


def _check_weight_names(g: Graph, config: ModelConfig, model_name: str) -> None:
    """The engine loads and saves weights by its table for the architecture (models/model_spec.h):
    the names, shapes and declared HF names must be those."""
    table = {row["name"]: row for row in config.parameter_table()}
    declared = {name: g.tensor(name) for name in g.to_ir()["parameters"]}
    for name, tensor in declared.items():
        row = table.get(name)
        if row is None:
            raise ValueError(f"{model_name}: parameter '{name}' is not one the engine loads for a "
                             f"{config.model_type} config.json (docs/models.md lists the weight table)")
        if list(tensor.shape) != list(row["shape"]):
            raise ValueError(f"{model_name}: parameter '{name}' has shape {list(tensor.shape)}, config.json implies "
                             f"{row['shape']}")
        hf = g.hf_names.get(name)
        if hf is not None and hf != row["hf_name"]:
            raise ValueError(f"{model_name}: parameter '{name}' is declared as HF '{hf}', but the engine loads "
                             f"'{row['hf_name']}' for it")
    missing = [name for name in table if name not in declared]
    if missing:
        raise ValueError(f"{model_name}: the graph lacks parameters config.json implies: {', '.join(missing[:5])}")


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

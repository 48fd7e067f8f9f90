"""surogate.dsl: model architectures written in Python, emitted as the engine's JSON IR.

A model is a function decorated with :func:`model` that writes its forward graph with a
:class:`Graph`: inputs, parameters (with their Hugging Face names), ops from the engine's
registry (``g.ops.rmsnorm(x, w, eps=1e-6, name="ln1")``; the list comes from the engine, see
:func:`registered_ops`), naming scopes (``with g.scope("layers.0")``) and recompute groups
(``with g.recompute("ffn")``). :meth:`ModelDefinition.emit` turns it into JSON IR version 1
(docs/architecture.md) for a model folder and a micro-batch shape; the engine compiles,
differentiates and trains from it (the ``model_definition`` option, or ``surogate.train(...,
model_definition=my_model)``). PyTorch is not needed. See docs/models.md and docs/python.md.

:data:`decoder` is the built-in Llama-family and MoE decoder written this way (the MoE block in
:mod:`surogate.dsl.moe`).
"""
from surogate.dsl.graph import Graph, Tensor, registered_ops
from surogate.dsl.model import ModelConfig, ModelDefinition, load_definition, model
from surogate.dsl.decoder import decoder

__all__ = ["Graph", "Tensor", "ModelConfig", "ModelDefinition", "model", "load_definition", "registered_ops",
           "decoder"]

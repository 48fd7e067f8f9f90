"""surogate.load: a model (and a PEFT LoRA adapter) held by the engine, from Python.

The weights live in the engine's own memory: fp32 on the CPU backend, bf16 on the GPU with
``device="cuda"``. :meth:`Model.weights` hands them out without a copy through DLPack, as NumPy
arrays (CPU) or PyTorch tensors (CPU or GPU); writing into them, or :meth:`Model.set_weights`,
changes what the next :meth:`Model.loss` / :meth:`Model.logits` computes.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

import numpy as np

from surogate import _engine

TokenRows = Union[Sequence[int], Sequence[Sequence[int]], np.ndarray]
FRAMEWORKS = ("numpy", "torch", "dlpack")


def _rows(tokens: TokenRows, what: str) -> List[np.ndarray]:
    """One int32 array per row, from a 1-D sequence (one row) or rows of possibly different lengths."""
    if isinstance(tokens, np.ndarray):
        if tokens.ndim == 1:
            return [tokens.astype(np.int32)]
        if tokens.ndim == 2:
            return [row.astype(np.int32) for row in tokens]
        raise ValueError(f"{what}: expected 1 or 2 dimensions, got {tokens.ndim}")
    tokens = list(tokens)
    if tokens and not isinstance(tokens[0], (list, tuple, np.ndarray)):
        return [np.asarray(tokens, dtype=np.int32)]
    return [np.asarray(row, dtype=np.int32) for row in tokens]


class Model:
    """A model loaded by :func:`load`. Not thread-safe: one call at a time."""

    def __init__(self, session: "_engine.ModelSession", model_dir: str, adapter: Optional[str]) -> None:
        self._session = session
        self.model_dir = model_dir
        self.adapter = adapter
        self._names = session.names()

    @property
    def device(self) -> str:
        """"cuda" (bf16 weights on the GPU) or "cpu" (fp32 weights on the host)."""
        return "cuda" if self._session.on_gpu else "cpu"

    @property
    def batch_size(self) -> int:
        """Rows one call takes at most."""
        return self._session.batch

    @property
    def seq_len(self) -> int:
        """Tokens one row holds at most."""
        return self._session.sequence

    @property
    def vocab_size(self) -> int:
        return self._session.vocab_size

    def names(self, adapter: Optional[bool] = None) -> List[str]:
        """Weight names as the checkpoint spells them: HF names for the model
        (``model.layers.0.self_attn.q_proj.weight``), PEFT keys for the adapter
        (``base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight``). ``adapter``: only
        the adapter's (True) or only the model's (False)."""
        return [name for name, _, is_adapter in self._names if adapter is None or is_adapter == adapter]

    def _batch(self, input_ids: TokenRows, labels: Optional[TokenRows]):
        rows = _rows(input_ids, "input_ids")
        label_rows = rows if labels is None else _rows(labels, "labels")
        if len(label_rows) != len(rows):
            raise ValueError(f"labels has {len(label_rows)} rows but input_ids has {len(rows)}")
        width = max((len(row) for row in rows), default=0)
        ids = np.zeros((len(rows), max(width, 1)), dtype=np.int32)
        targets = np.full((len(rows), max(width, 1)), -100, dtype=np.int32)
        lengths = np.zeros(len(rows), dtype=np.int64)
        for index, (row, label_row) in enumerate(zip(rows, label_rows)):
            if len(label_row) != len(row):
                raise ValueError(f"row {index}: labels has {len(label_row)} entries but input_ids has {len(row)}")
            ids[index, :len(row)] = row
            targets[index, :len(row)] = label_row
            lengths[index] = len(row)
        return ids, targets, lengths, width

    def loss(self, input_ids: TokenRows, labels: Optional[TokenRows] = None) -> float:
        """Mean next-token cross-entropy (nats) over the scored tokens of a batch.

        ``input_ids``: one sequence or a list of rows (up to ``batch_size`` rows of up to
        ``seq_len`` tokens, lengths may differ). ``labels``: same shape, -100 = not scored; by
        default the input ids. Labels are shifted here (token t predicts label t + 1), as
        transformers does, so the result equals ``transformers``' ``loss`` for the same rows.
        """
        loss_sum, tokens = self.loss_sum(input_ids, labels)
        if tokens == 0:
            raise ValueError("no token is scored (every label is -100, or every row has one token)")
        return loss_sum / tokens

    def loss_sum(self, input_ids: TokenRows, labels: Optional[TokenRows] = None) -> "tuple[float, int]":
        """(summed cross-entropy, scored tokens) of a batch, as :meth:`loss` takes it."""
        ids, targets, lengths, _ = self._batch(input_ids, labels)
        loss_sum, tokens, _ = self._session.run(ids, targets, lengths, False)
        return float(loss_sum), int(tokens)

    def logits(self, input_ids: TokenRows) -> np.ndarray:
        """Float32 logits ``[rows, longest row, vocab_size]`` (positions past a row's end are padding)."""
        ids, targets, lengths, width = self._batch(input_ids, None)
        _, _, logits = self._session.run(ids, targets, lengths, True)
        return np.array(logits[:len(lengths), :width, :])

    def weight(self, name: str, framework: str = "numpy") -> Any:
        """One weight, without a copy where the framework can hold it:

        - ``"numpy"``: an ndarray sharing the engine's memory on the CPU backend; on the GPU a
          float32 host copy (NumPy has neither bf16 nor device memory);
        - ``"torch"``: a tensor sharing the engine's memory, on the CPU or the GPU (bf16);
        - ``"dlpack"``: the engine's own DLPack-capable array (``__dlpack__``) for any consumer.
        """
        if framework not in FRAMEWORKS:
            raise ValueError(f"framework '{framework}': use one of {', '.join(FRAMEWORKS)}")
        if framework == "numpy" and self._session.on_gpu:
            return self._session.read_float32(name)
        array = self._session.weight(name)
        if framework == "numpy":
            return np.from_dlpack(array)
        if framework == "torch":
            import torch  # optional dependency

            return torch.from_dlpack(array)
        return array

    def weights(self, framework: str = "numpy", adapter: Optional[bool] = None) -> Dict[str, Any]:
        """Every weight by checkpoint name (see :meth:`names`, :meth:`weight`)."""
        return {name: self.weight(name, framework) for name in self.names(adapter)}

    def lora_weights(self, framework: str = "numpy") -> Dict[str, Any]:
        """The adapter's lora_A / lora_B matrices by PEFT key (empty without an adapter)."""
        return self.weights(framework, adapter=True)

    def data_pointer(self, name: str) -> int:
        """The address of a weight in the engine's memory (host, or device with ``device="cuda"``)."""
        return int(self._session.address(name))

    def set_weight(self, name: str, values: Any) -> None:
        """Overwrites a weight from any array with ``__dlpack__`` (NumPy, PyTorch; float32, float64,
        float16 or bfloat16) with as many elements, converted to the engine's dtype. GPU tensors are
        copied on the GPU when the model is there and the dtype is its own (bf16)."""
        if not hasattr(values, "__dlpack__"):
            values = np.ascontiguousarray(values, dtype=np.float32)
        elif isinstance(values, np.ndarray):
            values = np.ascontiguousarray(values)
        elif hasattr(values, "is_contiguous") and not values.is_contiguous():
            values = values.contiguous()
        self._session.set_weight(name, values)

    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """:meth:`set_weight` for each entry."""
        for name, values in weights.items():
            self.set_weight(name, values)


def load(model_dir: Union[str, "os.PathLike[str]"], adapter: Optional[Union[str, "os.PathLike[str]"]] = None, *,
         device: str = "cpu", batch_size: int = 1, seq_len: int = 128,
         model_definition: Optional[Union[str, "os.PathLike[str]"]] = None) -> Model:
    """Loads a Hugging Face model folder (config.json + safetensors) into the engine.

    Args:
        model_dir: the model folder (a hub download, or a folder ``surogate sft`` wrote).
        adapter: a PEFT LoRA adapter folder (``adapter_config.json`` + ``adapter_model.safetensors``,
            as LoRA training writes it); its matrices stay separate weights (not merged).
        device: "cpu" (fp32, the reference) or "cuda" (bf16 on GPU 0, CUDA builds).
        batch_size, seq_len: the largest batch one call takes (the graph is compiled once for it;
            shorter rows and fewer rows are padded, never scored).
        model_definition: a JSON IR file of the model's graph for this batch_size x seq_len
            instead of the built-in one (see surogate.dsl).

    Raises:
        surogate.UserError: a problem with the folder, the adapter or the arguments.
    """
    session = _engine.ModelSession(os.fspath(model_dir), os.fspath(adapter) if adapter else "", device, batch_size,
                                   seq_len, os.fspath(model_definition) if model_definition else "")
    return Model(session, os.fspath(model_dir), os.fspath(adapter) if adapter else None)

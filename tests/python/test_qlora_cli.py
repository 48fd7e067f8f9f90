"""QLoRA with qlora_bnb through the CLI on the CPU backend.

* The NF4 base is what the model computes with: before training (adapters' B = 0) the QLoRA run's
  eval loss equals, exactly, the eval loss of a LoRA run on a model folder whose projections hold
  NF4-rounded weights (quantized and dequantized here in numpy, an independent implementation of
  bitsandbytes' rules: absmax per block of 64, code = how many NF4 midpoints x / absmax exceeds).
* With the defaults (double quantization on) a run trains, writes a PEFT adapter, and
  merge_adapter merges into the full-precision base of the model folder: W + (alpha / r) B A.
* qlora_bnb without lora is one clear error naming the option.
"""
import json
import re

import numpy as np
from safetensors.numpy import save_file

from conftest import make_quickstart_example, quickstart_sft_config, read_tensors, run_surogate

NF4_LEVELS = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
                       -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
                       0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
                       0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0], dtype=np.float32)
NF4_MIDPOINTS = np.array([-0.8480964004993439, -0.6106329262256622, -0.4599952697753906, -0.33967943489551544,
                          -0.23460740596055984, -0.13791173323988914, -0.045525018125772476, 0.03979014977812767,
                          0.1202552504837513, 0.2035212516784668, 0.2920137718319893, 0.3893125355243683,
                          0.5016634166240692, 0.6427869200706482, 0.8614784181118011], dtype=np.float32)
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def nf4_round_trip(weight, block=64):
    blocks = weight.astype(np.float32).reshape(-1, block)
    absmax = np.abs(blocks).max(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = blocks * (np.float32(1.0) / absmax)
    codes = (scaled[..., None] > NF4_MIDPOINTS).sum(axis=-1)
    return (NF4_LEVELS[codes] * absmax).astype(np.float32).reshape(weight.shape)


def config(path, model, out, ex, extra):
    return quickstart_sft_config(path, model, out, ex, extra)


def trained_base(surogate_bin, tmp_path, ex):
    """The quickstart model after two steps of full fine-tuning (tmp_path / "base"): projections that
    are neither zero nor the initialisation's."""
    base = tmp_path / "base"
    result = run_surogate(surogate_bin, "sft", config(tmp_path / "base.yaml", ex / "model", base, ex,
                                                      "lora: false\ninit_projections_to_zero: false\n"),
                          "--max_steps=2")
    assert result.returncode == 0, result.stderr + result.stdout
    return base


def first_eval_loss(out):
    for log in out.glob("log-*.jsonl"):
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record.get("type") == "eval" and record["step"] == 0:
                return record["eval_loss"]
    raise AssertionError(f"no eval record at step 0 under {out}")


def test_qlora_computes_with_the_nf4_base_and_merges_into_the_original(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    base = trained_base(surogate_bin, tmp_path, ex)

    lora = "lora: true\nlora_rank: 4\nlora_alpha: 8\nlora_dropout: 0.0\n"
    plain = tmp_path / "qlora-plain"
    result = run_surogate(surogate_bin, "sft", config(tmp_path / "qlora-plain.yaml", base, plain, ex,
                                                      lora + "qlora_bnb: true\nqlora_bnb_double_quant: false\n"))
    assert result.returncode == 0, result.stderr + result.stdout
    assert "QLoRA: 14 base weights stored in NF4 (block 64, double quantization off)" in result.stdout + result.stderr
    # Where the quantization ran and how long it took (overlapped with reading the next weight).
    assert re.search(r"base weights quantized on the host: 14 weights in \d+\.\d s on \d+ threads, overlapped with "
                     r"reading the next \(the reader waited \d+\.\d s\)", result.stdout + result.stderr), result.stdout

    # The same model with its projections rounded through NF4 here, trained as plain LoRA.
    rounded = tmp_path / "rounded"
    rounded.mkdir()
    for file in base.iterdir():
        if file.is_file() and file.suffix != ".safetensors":
            (rounded / file.name).write_bytes(file.read_bytes())
    weights = read_tensors(base / "model.safetensors")
    quantized = {name: nf4_round_trip(value) if name.split(".")[-2] in PROJECTIONS else value
                 for name, value in weights.items()}
    assert sum(not np.array_equal(quantized[k], weights[k]) for k in weights) == 14
    save_file(quantized, str(rounded / "model.safetensors"))
    reference = tmp_path / "lora-rounded"
    result = run_surogate(surogate_bin, "sft", config(tmp_path / "lora-rounded.yaml", rounded, reference, ex, lora))
    assert result.returncode == 0, result.stderr + result.stdout
    assert first_eval_loss(plain) == first_eval_loss(reference)
    # and not the loss of the full-precision base: the NF4 rounding is visible.
    full = tmp_path / "lora-full"
    result = run_surogate(surogate_bin, "sft", config(tmp_path / "lora-full.yaml", base, full, ex, lora))
    assert result.returncode == 0, result.stderr + result.stdout
    assert first_eval_loss(full) != first_eval_loss(plain)

    # Defaults (double quantization): trains, writes the adapter, merges into the original base.
    out = tmp_path / "qlora"
    result = run_surogate(surogate_bin, "sft", config(tmp_path / "qlora.yaml", base, out, ex,
                                                      lora + "qlora_bnb: true\nmerge_adapter: true\n"))
    assert result.returncode == 0, result.stderr + result.stdout
    assert "double quantization on" in result.stdout + result.stderr
    adapter = read_tensors(out / "adapter_model.safetensors")
    merged = read_tensors(out / "merged" / "model.safetensors")
    name = "model.layers.1.mlp.down_proj.weight"
    a = adapter[f"base_model.model.{name[:-7]}.lora_A.weight"].astype(np.float64)
    b = adapter[f"base_model.model.{name[:-7]}.lora_B.weight"].astype(np.float64)
    assert np.abs(b).max() > 0
    np.testing.assert_allclose(merged[name], weights[name] + 2.0 * b @ a, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(merged["model.embed_tokens.weight"], weights["model.embed_tokens.weight"])


def test_qlora_needs_lora(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    path = config(tmp_path / "bad.yaml", ex / "model", tmp_path / "bad", ex, "lora: false\nqlora_bnb: true\n")
    result = run_surogate(surogate_bin, "sft", path)
    assert result.returncode != 0
    assert "qlora_bnb" in result.stderr and "needs lora: true" in result.stderr

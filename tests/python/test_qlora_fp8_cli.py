"""QLoRA with qlora_fp8 through the CLI on the CPU backend (an exact emulation of the GPU's format).

* The FP8 base is what the model computes with: before training (adapters' B = 0) the QLoRA run's
  eval loss equals, exactly, the eval loss of a LoRA run on a model folder whose projections hold
  FP8-block-rounded weights, computed here by an independent numpy oracle: per 128 x 128 block (the
  k/v projections, 64 rows, are a ragged block) amax, scale = 448 / amax, E4M3 round to nearest
  even of w * scale (saturating at 448), value = code * (1 / scale), all in fp32.
* A checkpoint saved in FP8 with block scales (F8_E4M3 codes + weight_scale_inv, config.json's
  quantization_config as FP8 releases write it) loads: under qlora_fp8 with the same block size
  its codes and scales are taken as stored, and the loss equals the quantize-on-load run's; plain
  LoRA dequantizes it on load to the same weights; another qlora_block_size quantizes again.
* merge_adapter merges into the full-precision base of the model folder (of a pre-quantized
  checkpoint: its dequantized base), and the merged config.json has no quantization_config.
* Other quantization_config kinds stay one clear error.
"""
import json
import struct

import numpy as np
from safetensors.numpy import save_file

from conftest import make_quickstart_example, read_tensors, run_surogate
from test_qlora_cli import PROJECTIONS, config, first_eval_loss, trained_base

LORA = "lora: true\nlora_rank: 4\nlora_alpha: 8\nlora_dropout: 0.0\n"
FP8_CONFIG = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}


def e4m3_round(x):
    """float32 array -> the nearest E4M3 values (ties to even, saturating at +-448), as float64."""
    x = x.astype(np.float64)
    magnitude = np.abs(x)
    _, exponent = np.frexp(magnitude)                     # magnitude = m * 2^exponent, m in [0.5, 1)
    exponent = np.maximum(exponent - 1, -6)               # binade; below 2^-6 the subnormal spacing
    step = np.ldexp(1.0, exponent - 3)                    # 3 mantissa bits
    rounded = np.minimum(np.round(magnitude / step) * step, 448.0)  # np.round: half to even
    return np.copysign(rounded, x)


def e4m3_codes(values):
    """Exact E4M3 values (float64) -> their codes (uint8)."""
    magnitude = np.abs(values)
    _, exponent = np.frexp(magnitude)
    normal = magnitude >= 2.0 ** -6
    biased = np.where(normal, exponent - 1 + 7, 0)
    mantissa = np.where(normal, magnitude / np.ldexp(1.0, exponent - 1) * 8 - 8, magnitude / 2.0 ** -9)
    codes = (biased * 8 + mantissa).astype(np.uint8) | np.where(np.signbit(values), 0x80, 0).astype(np.uint8)
    return codes


def fp8_blocks(weight, block=128):
    """(codes uint8, scale_inv float32, dequantized float32) of a 2-D float32 weight."""
    rows, cols = weight.shape
    row_blocks, col_blocks = -(-rows // block), -(-cols // block)
    codes = np.zeros(weight.shape, np.uint8)
    scale_inv = np.zeros((row_blocks, col_blocks), np.float32)
    out = np.zeros(weight.shape, np.float32)
    for i in range(row_blocks):
        for j in range(col_blocks):
            w = weight[i * block:(i + 1) * block, j * block:(j + 1) * block].astype(np.float32)
            amax = np.abs(w).max()
            scale = np.float32(448.0) / amax if amax > 0 else np.float32(1.0)
            inverse = np.float32(1.0) / scale
            q = e4m3_round((w * scale).astype(np.float32))
            codes[i * block:(i + 1) * block, j * block:(j + 1) * block] = e4m3_codes(q)
            scale_inv[i, j] = inverse
            out[i * block:(i + 1) * block, j * block:(j + 1) * block] = (q.astype(np.float32) * inverse).astype(np.float32)
    return codes, scale_inv, out


def write_safetensors(path, tensors):
    """tensors: name -> (safetensors dtype, shape, bytes); numpy has no float8, so by hand."""
    header, offset, blobs = {}, 0, []
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def copy_folder(source, target, config_json=None):
    target.mkdir()
    for file in source.iterdir():
        if file.is_file() and file.suffix != ".safetensors":
            (target / file.name).write_bytes(file.read_bytes())
    if config_json is not None:
        (target / "config.json").write_text(json.dumps(config_json, indent=1))


def train(surogate_bin, tmp_path, name, model, ex, extra):
    out = tmp_path / name
    result = run_surogate(surogate_bin, "sft", config(tmp_path / f"{name}.yaml", model, out, ex, extra))
    assert result.returncode == 0, result.stderr + result.stdout
    return out, result.stdout + result.stderr


def test_qlora_fp8_computes_with_the_fp8_base_loads_fp8_checkpoints_and_merges(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    base = trained_base(surogate_bin, tmp_path, ex)
    weights = read_tensors(base / "model.safetensors")
    is_projection = {name: name.split(".")[-2] in PROJECTIONS for name in weights}

    # Quantized on load, block 128 (the default), merged into the original base.
    qlora, log = train(surogate_bin, tmp_path, "qlora", base, ex, LORA + "qlora_fp8: true\nmerge_adapter: true\n")
    assert "QLoRA: 14 base weights stored in FP8 E4M3 (blocks of 128x128)" in log, log

    # The same model with its projections rounded through FP8 blocks here, trained as plain LoRA.
    quantized = {name: fp8_blocks(value) for name, value in weights.items() if is_projection[name]}
    rounded = tmp_path / "rounded"
    copy_folder(base, rounded)
    save_file({name: quantized[name][2] if is_projection[name] else value for name, value in weights.items()},
              str(rounded / "model.safetensors"))
    assert sum(not np.array_equal(quantized[name][2], weights[name]) for name in quantized) == 14
    reference, _ = train(surogate_bin, tmp_path, "lora-rounded", rounded, ex, LORA)
    assert first_eval_loss(qlora) == first_eval_loss(reference)
    full, _ = train(surogate_bin, tmp_path, "lora-full", base, ex, LORA)
    assert first_eval_loss(full) != first_eval_loss(qlora)  # the FP8 rounding is visible

    adapter = read_tensors(qlora / "adapter_model.safetensors")
    merged = read_tensors(qlora / "merged" / "model.safetensors")
    name = "model.layers.1.mlp.down_proj.weight"
    a = adapter[f"base_model.model.{name[:-7]}.lora_A.weight"].astype(np.float64)
    b = adapter[f"base_model.model.{name[:-7]}.lora_B.weight"].astype(np.float64)
    assert np.abs(b).max() > 0
    np.testing.assert_allclose(merged[name], weights[name] + 2.0 * b @ a, rtol=0, atol=1e-6)

    # A checkpoint saved in FP8 blocks of 128 x 128, as FP8 releases ship them.
    prequantized = tmp_path / "fp8-checkpoint"
    model_config = json.loads((base / "config.json").read_text())
    copy_folder(base, prequantized, dict(model_config, quantization_config=FP8_CONFIG))
    tensors = {}
    for tensor, value in weights.items():
        if is_projection[tensor]:
            codes, scale_inv, _ = quantized[tensor]
            tensors[tensor] = ("F8_E4M3", codes.shape, codes.tobytes())
            tensors[tensor + "_scale_inv"] = ("F32", scale_inv.shape, scale_inv.tobytes())
        else:
            tensors[tensor] = ("F32", value.shape, value.astype(np.float32).tobytes())
    write_safetensors(prequantized / "model.safetensors", tensors)

    stored, log = train(surogate_bin, tmp_path, "qlora-stored", prequantized, ex,
                        LORA + "qlora_fp8: true\nmerge_adapter: true\n")
    assert "14 taken as stored from the FP8 checkpoint" in log, log
    assert "dequantized on load" not in log, log
    assert first_eval_loss(stored) == first_eval_loss(qlora)
    adapter = read_tensors(stored / "adapter_model.safetensors")
    merged = read_tensors(stored / "merged" / "model.safetensors")
    a = adapter[f"base_model.model.{name[:-7]}.lora_A.weight"].astype(np.float64)
    b = adapter[f"base_model.model.{name[:-7]}.lora_B.weight"].astype(np.float64)
    np.testing.assert_allclose(merged[name], quantized[name][2] + 2.0 * b @ a, rtol=0, atol=1e-6)
    assert "quantization_config" not in json.loads((stored / "merged" / "config.json").read_text())

    # Without qlora_fp8 the checkpoint is dequantized on load: the rounded weights, exactly.
    dequantized, log = train(surogate_bin, tmp_path, "lora-fp8-checkpoint", prequantized, ex, LORA)
    assert "14 weights dequantized on load" in log, log
    assert first_eval_loss(dequantized) == first_eval_loss(reference)
    # Another block size: dequantized, then quantized again in blocks of 64.
    _, log = train(surogate_bin, tmp_path, "qlora-64", prequantized, ex, LORA + "qlora_fp8: true\nqlora_block_size: 64\n")
    assert "qlora_block_size differs" in log and "blocks of 64x64" in log, log


def test_fp8_checkpoint_errors_name_the_key(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    model_config = json.loads((ex / "model" / "config.json").read_text())
    for quantization, expected in [
        ({"quant_method": "bitsandbytes", "load_in_8bit": True}, "quantization_config.load_in_8bit"),
        ({"quant_method": "fp8", "activation_scheme": "dynamic"}, "without weight_block_size"),
        (dict(FP8_CONFIG, activation_scheme="static"), "quantization_config.activation_scheme"),
        (dict(FP8_CONFIG, weight_block_size=[128]), "quantization_config.weight_block_size"),
    ]:
        model = tmp_path / f"model-{len(list(tmp_path.iterdir()))}"
        copy_folder(ex / "model", model, dict(model_config, quantization_config=quantization))
        path = config(tmp_path / "bad.yaml", model, tmp_path / "bad", ex, LORA + "qlora_fp8: true\n")
        result = run_surogate(surogate_bin, "sft", path)
        assert result.returncode != 0
        assert "config.json" in result.stderr and expected in result.stderr, result.stderr

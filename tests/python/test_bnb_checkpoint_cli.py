"""Checkpoints saved by bitsandbytes in 4 bits, through the CLI on the CPU backend.

The checkpoints are written here exactly in the layout transformers saves a bitsandbytes 4-bit
model in (config.json's quantization_config as BitsAndBytesConfig writes it; per quantized weight
the U8 codes [n/2, 1], .absmax, .quant_map, .nested_absmax, .nested_quant_map and the
.quant_state.bitsandbytes__<type> JSON), with NF4 codes computed by bitsandbytes' rules in numpy
(absmax per block of 64, code = how many NF4 midpoints x * (1 / absmax) exceeds: byte-identical to
quantize_4bit, which tests/quant/test_nf4.cpp checks against bitsandbytes itself).

* Pre-quantized loads equal quantize-on-load: qlora_bnb on the NF4 checkpoint takes its codes as
  stored (no bf16 detour) and trains the same adapter, bit for bit, as qlora_bnb quantizing the
  full-precision model on load — with double quantization off (absmax as stored) and on (the
  stored absmax double-quantized as quantize-on-load does).
* A double-quantized checkpoint is taken as stored too, and computes with what its state means:
  the first eval loss equals plain LoRA on a folder holding its numpy-dequantized weights.
* Everything else dequantizes on load to the same values: plain LoRA, qlora_bnb with another block
  size, a bitsandbytes FP4 checkpoint (its own quant_map); merge_adapter merges into the
  dequantized base and writes a config.json without quantization_config.
* A damaged checkpoint (a quant state missing) is one error naming the tensor.
"""
import json
import pathlib

import numpy as np
from safetensors.numpy import load_file, save_file

from conftest import make_quickstart_example, read_tensors, run_surogate
from test_qlora_cli import NF4_LEVELS, NF4_MIDPOINTS, PROJECTIONS, config, first_eval_loss, trained_base
from test_qlora_fp8_cli import copy_folder, train

REPO = pathlib.Path(__file__).resolve().parents[2]
LORA = "lora: true\nlora_rank: 4\nlora_alpha: 8\nlora_dropout: 0.0\n"
# bitsandbytes' FP4 code values (functional.get_4bit_type("fp4")): E2M1 in its own code order, / 12.
FP4_MAP = (np.array([0, 0.0625, 8, 12, 4, 6, 2, 3, -0.0, -0.0625, -8, -12, -4, -6, -2, -3]) / 12).astype(np.float32)


def dynamic_map():
    """bitsandbytes' 8-bit dynamic map, as bitsandbytes wrote it into the NF4 fixture."""
    from safetensors import safe_open
    with safe_open(str(REPO / "tests" / "fixtures" / "nf4" / "bnb_nf4.safetensors"), framework="numpy") as f:
        return f.get_tensor("dynamic_code")


def quantize(weight, quant_type, double_quant, block=64):
    """The bitsandbytes 4-bit state of a float32 weight: (tensors by suffix, dequantized float32)."""
    flat = weight.astype(np.float32).reshape(-1, block)
    absmax = np.abs(flat).max(axis=1).astype(np.float32)
    scaled = flat * (np.float32(1.0) / absmax)[:, None]
    if quant_type == "nf4":
        codes, table = (scaled[..., None] > NF4_MIDPOINTS).sum(axis=-1).astype(np.uint8), NF4_LEVELS
    else:
        codes = np.abs(scaled[..., None] - FP4_MAP).argmin(axis=-1).astype(np.uint8)
        table = FP4_MAP
    flat_codes = codes.reshape(-1)
    tensors = {"": (flat_codes[0::2] << 4 | flat_codes[1::2]).astype(np.uint8).reshape(-1, 1),
               ".quant_map": table.astype(np.float32)}
    state = {"quant_type": quant_type, "blocksize": block, "dtype": "bfloat16", "shape": list(weight.shape)}
    if double_quant:
        code_map = dynamic_map()
        offset = np.float32(absmax.mean(dtype=np.float32))
        centred = (absmax - offset).astype(np.float32)
        nested = np.abs(np.pad(centred, (0, -len(centred) % 256)).reshape(-1, 256)).max(axis=1).astype(np.float32)
        nested_codes = np.abs((centred / np.repeat(nested, 256)[:len(centred)])[:, None] - code_map).argmin(axis=-1)
        absmax = ((code_map[nested_codes] * np.repeat(nested, 256)[:len(centred)]).astype(np.float32) + offset)
        tensors.update({".absmax": nested_codes.astype(np.uint8), ".nested_absmax": nested,
                        ".nested_quant_map": code_map.astype(np.float32)})
        state.update({"nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": float(offset)})
    else:
        tensors[".absmax"] = absmax
    tensors[f".quant_state.bitsandbytes__{quant_type}"] = np.frombuffer(json.dumps(state).encode(), np.uint8)
    dequantized = (table[codes] * absmax.astype(np.float32)[:, None]).astype(np.float32).reshape(weight.shape)
    return tensors, dequantized


def bnb_checkpoint(base, target, quant_type, double_quant):
    """Writes the bitsandbytes 4-bit copy of the model folder `base`; returns its dequantized weights."""
    weights = read_tensors(base / "model.safetensors")
    model_config = json.loads((base / "config.json").read_text())
    model_config["quantization_config"] = {
        "quant_method": "bitsandbytes", "_load_in_4bit": True, "_load_in_8bit": False, "load_in_4bit": True,
        "load_in_8bit": False, "bnb_4bit_quant_type": quant_type, "bnb_4bit_use_double_quant": double_quant,
        "bnb_4bit_compute_dtype": "bfloat16", "bnb_4bit_quant_storage": "uint8", "llm_int8_skip_modules": None}
    copy_folder(base, target, model_config)
    tensors, dequantized = {}, {}
    for name, value in weights.items():
        if name.split(".")[-2] in PROJECTIONS:
            state, dequantized[name] = quantize(value, quant_type, double_quant)
            tensors.update({name + suffix: piece for suffix, piece in state.items()})
        else:
            tensors[name] = dequantized[name] = value
    save_file(tensors, str(target / "model.safetensors"))
    return dequantized


def rounded_folder(base, target, values):
    copy_folder(base, target)
    save_file(values, str(target / "model.safetensors"))
    return target


def same_adapter(first, second):
    ours = read_tensors(first / "adapter_model.safetensors")
    theirs = read_tensors(second / "adapter_model.safetensors")
    assert ours.keys() == theirs.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)


def test_bnb_4bit_checkpoints_load_as_stored_or_dequantized(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    base = trained_base(surogate_bin, tmp_path, ex)

    # NF4 without double quantization: the codes and absmax taken as stored equal quantize-on-load.
    plain = tmp_path / "bnb-nf4"
    plain_values = bnb_checkpoint(base, plain, "nf4", double_quant=False)
    for extra in ("qlora_bnb_double_quant: false\n", ""):
        tag = "dq-off" if extra else "dq-on"
        stored, log = train(surogate_bin, tmp_path, f"stored-{tag}", plain, ex, LORA + "qlora_bnb: true\n" + extra)
        assert "14 taken as stored from the bitsandbytes checkpoint" in log, log
        assert "dequantized on load" not in log, log
        on_load, _ = train(surogate_bin, tmp_path, f"on-load-{tag}", base, ex, LORA + "qlora_bnb: true\n" + extra)
        same_adapter(stored, on_load)

    # Plain LoRA dequantizes on load: the stored values exactly; merging writes full precision.
    lora, log = train(surogate_bin, tmp_path, "lora-bnb", plain, ex, LORA + "merge_adapter: true\n")
    assert "is saved in bitsandbytes 4-bit (nf4): 14 weights dequantized on load" in log, log
    reference, _ = train(surogate_bin, tmp_path, "lora-rounded", rounded_folder(base, tmp_path / "rounded", plain_values),
                         ex, LORA)
    assert first_eval_loss(lora) == first_eval_loss(reference)
    same_adapter(lora, reference)
    merged = read_tensors(lora / "merged" / "model.safetensors")
    adapter = read_tensors(lora / "adapter_model.safetensors")
    name = "model.layers.1.mlp.down_proj.weight"
    a = adapter[f"base_model.model.{name[:-7]}.lora_A.weight"].astype(np.float64)
    b = adapter[f"base_model.model.{name[:-7]}.lora_B.weight"].astype(np.float64)
    np.testing.assert_allclose(merged[name], plain_values[name] + 2.0 * b @ a, rtol=0, atol=1e-6)
    assert "quantization_config" not in json.loads((lora / "merged" / "config.json").read_text())

    # Double quantization: taken as stored, computing with what the state means.
    nested = tmp_path / "bnb-nf4-dq"
    nested_values = bnb_checkpoint(base, nested, "nf4", double_quant=True)
    stored, log = train(surogate_bin, tmp_path, "stored-nested", nested, ex, LORA + "qlora_bnb: true\n")
    assert "14 taken as stored from the bitsandbytes checkpoint" in log, log
    reference, _ = train(surogate_bin, tmp_path, "lora-nested", rounded_folder(base, tmp_path / "rounded-dq",
                                                                                nested_values), ex, LORA)
    _, log = train(surogate_bin, tmp_path, "lora-bnb-dq", nested, ex, LORA)
    assert first_eval_loss(tmp_path / "lora-bnb-dq") == first_eval_loss(reference)
    # Another block size: dequantized, quantized again.
    _, log = train(surogate_bin, tmp_path, "qlora-128", nested, ex, LORA + "qlora_bnb: true\nqlora_bnb_block_size: 128\n")
    assert "14 weights dequantized on load (qlora_bnb_block_size differs" in log, log
    assert "NF4 (block 128" in log, log

    # bitsandbytes' FP4: dequantized with its quant map.
    fp4 = tmp_path / "bnb-fp4"
    fp4_values = bnb_checkpoint(base, fp4, "fp4", double_quant=True)
    assert not np.array_equal(fp4_values[name], nested_values[name])
    loaded, log = train(surogate_bin, tmp_path, "lora-bnb-fp4", fp4, ex, LORA)
    assert "bitsandbytes 4-bit (fp4): 14 weights dequantized on load" in log, log
    reference, _ = train(surogate_bin, tmp_path, "lora-fp4-rounded", rounded_folder(base, tmp_path / "rounded-fp4",
                                                                                     fp4_values), ex, LORA)
    assert first_eval_loss(loaded) == first_eval_loss(reference)
    _, log = train(surogate_bin, tmp_path, "qlora-bnb-fp4", fp4, ex, LORA + "qlora_bnb: true\n")
    assert "(the plan's format differs: quantized again)" in log, log

    # A damaged checkpoint: a quant state missing.
    damaged = tmp_path / "damaged"
    bnb_checkpoint(base, damaged, "nf4", double_quant=False)
    tensors = load_file(str(damaged / "model.safetensors"))
    del tensors["model.layers.0.self_attn.q_proj.weight.quant_state.bitsandbytes__nf4"]
    save_file(tensors, str(damaged / "model.safetensors"))
    path = config(tmp_path / "bad.yaml", damaged, tmp_path / "bad", ex, LORA + "qlora_bnb: true\n")
    result = run_surogate(surogate_bin, "sft", path)
    assert result.returncode == 2, result.stderr
    assert "model.layers.0.self_attn.q_proj.weight.quant_state.bitsandbytes__nf4" in result.stderr, result.stderr
    assert "re-download" in result.stderr, result.stderr

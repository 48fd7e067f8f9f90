"""QLoRA with qlora_fp4 (NVFP4 base) through the CLI on the CPU backend.

* The NVFP4 base is what the model computes with, exactly: a QLoRA run trains the same adapter, bit
  for bit, as a plain LoRA run on a model folder whose projections hold NVFP4-rounded weights,
  rounded here by the independent numpy oracle (nvfp4_reference.py: E2M1 / E4M3 by nearest-value
  search, Four Over Six by the squared error per block) — with qlora_four_over_six on (the
  default) and off. The two rules round differently, and both differ from the full-precision base.
* merge_adapter merges into the full-precision base of the model folder: W + (alpha / r) B A.
* Errors: qlora_fp4 without lora, with another qlora_* mode, fp4_backend, and recipe: nvfp4.
"""
import numpy as np
from safetensors.numpy import save_file

import nvfp4_reference
from conftest import make_quickstart_example, read_tensors, run_surogate
from test_qlora_cli import PROJECTIONS, config, first_eval_loss, trained_base
from test_qlora_fp8_cli import copy_folder, train

LORA = "lora: true\nlora_rank: 4\nlora_alpha: 8\nlora_dropout: 0.0\n"


def test_qlora_fp4_trains_exactly_as_lora_on_the_nvfp4_rounded_model_and_merges(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    base = trained_base(surogate_bin, tmp_path, ex)
    weights = read_tensors(base / "model.safetensors")
    is_projection = {name: name.split(".")[-2] in PROJECTIONS for name in weights}

    losses = {}
    for four_over_six in (True, False):
        rule = "fos" if four_over_six else "six"
        extra = LORA + "qlora_fp4: true\nmerge_adapter: true\n" + ("" if four_over_six else "qlora_four_over_six: false\n")
        qlora, log = train(surogate_bin, tmp_path, f"qlora-{rule}", base, ex, extra)
        scales = "Four Over Six" if four_over_six else "6-based"
        assert f"QLoRA: 14 base weights stored in NVFP4 (E2M1, an E4M3 scale per 16 values and a tensor scale; " \
               f"{scales} block scales)" in log, log

        rounded_weights = {name: nvfp4_reference.round_trip(value, four_over_six) if is_projection[name] else value
                           for name, value in weights.items()}
        assert sum(not np.array_equal(rounded_weights[n], weights[n]) for n in weights) == 14
        rounded = tmp_path / f"rounded-{rule}"
        copy_folder(base, rounded)
        save_file(rounded_weights, str(rounded / "model.safetensors"))
        reference, _ = train(surogate_bin, tmp_path, f"lora-rounded-{rule}", rounded, ex, LORA)
        assert first_eval_loss(qlora) == first_eval_loss(reference)
        ours = read_tensors(qlora / "adapter_model.safetensors")
        theirs = read_tensors(reference / "adapter_model.safetensors")
        assert ours.keys() == theirs.keys()
        for name in ours:
            np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
        losses[rule] = first_eval_loss(qlora)

        merged = read_tensors(qlora / "merged" / "model.safetensors")
        name = "model.layers.1.mlp.down_proj.weight"
        a = ours[f"base_model.model.{name[:-7]}.lora_A.weight"].astype(np.float64)
        b = ours[f"base_model.model.{name[:-7]}.lora_B.weight"].astype(np.float64)
        assert np.abs(b).max() > 0
        np.testing.assert_allclose(merged[name], weights[name] + 2.0 * b @ a, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(merged["model.embed_tokens.weight"], weights["model.embed_tokens.weight"])

    full, _ = train(surogate_bin, tmp_path, "lora-full", base, ex, LORA)
    assert losses["fos"] != losses["six"]
    assert first_eval_loss(full) not in losses.values()  # the NVFP4 rounding is visible


def test_qlora_fp4_errors_name_the_option(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    cases = [
        ("lora: false\nqlora_fp4: true\n", "qlora_fp4", "needs lora: true"),
        (LORA + "qlora_fp4: true\nqlora_bnb: true\n", "qlora_bnb", "choose one of qlora_fp4"),
        (LORA + "qlora_fp4: true\nfp4_backend: cudnn\n", "fp4_backend", "only applies to recipe: nvfp4"),
        (LORA + "qlora_four_over_six: false\n", "qlora_four_over_six", "only applies to qlora_fp4"),
        (LORA + "recipe: nvfp4\n", "recipe", "Blackwell"),
    ]
    for index, (extra, key, message) in enumerate(cases):
        path = config(tmp_path / f"bad{index}.yaml", ex / "model", tmp_path / f"bad{index}", ex, extra)
        result = run_surogate(surogate_bin, "sft", path)
        assert result.returncode == 2, (extra, result.stderr)
        assert key in result.stderr and message in result.stderr, (extra, result.stderr)

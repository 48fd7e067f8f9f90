"""recipe: fp8_hybrid through the CLI on the CPU backend (its exact emulation of the recipe).

* A LoRA run with fp8_hybrid trains and tracks the fp32 LoRA run of the same model and data:
  per-step losses within 1 % of it (E4M3 carries 3 mantissa bits: each product's operands are off
  by up to 1/16, mostly averaging out), but not equal to it (the quantization is visible).
* The scaling state is part of the checkpoint: a run resumed from step 3 continues with exactly
  the losses of the uninterrupted run, and the checkpoint holds the amax history.
* skip_quant_first_layers / skip_quant_last_layers keep those layers' projections in the graph's
  dtype; gradient_dtype fp8_e4m3 quantizes the gradients in E4M3.
* Full fine-tuning and pt with fp8_hybrid (trained weights with an FP8 copy made once per
  optimizer step, weight gradients from E5M2 gradients) track the fp32 run of the same job: per-step
  losses within 1 % (measured 2026-11-25: at most 0.27 % for full fine-tuning and pt, 0.10 % for
  LoRA), not equal to it, and a run resumed from step 3 continues with exactly the uninterrupted
  losses.
* With qlora_bnb / qlora_fp8, the dequantized base is quantized to E4M3 for the products: the run
  tracks the same QLoRA run without the recipe within 1 %.
* gpus: 2 on CPU ranks with fp8_hybrid trains (the scaling state is shared; the exact comparison
  with one rank is tests/train/test_data_parallel.cpp's).
* What does not apply is one clear error naming the option.
"""
import json
import shutil

import numpy as np

from conftest import make_quickstart_example, quickstart_sft_config, read_tensors, run_surogate

LORA = "lora: true\nlora_rank: 4\nlora_alpha: 8\nlora_dropout: 0.0\n"


def config(path, model, out, ex, extra):
    return quickstart_sft_config(path, model, out, ex, extra, gradient_accumulation_steps=2, max_steps=6,
                                 eval_steps=3, save_steps=3)


def step_losses(out):
    losses = {}
    for log in out.glob("log-*.jsonl"):
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record.get("type") == "step":
                losses[record["step"]] = record["loss"]
    return losses


def check_resumes_exactly(surogate_bin, path, out, losses):
    """Resumes the 6-step run of `path` from its step-3 checkpoint: steps 4-6 equal `losses` bit for bit."""
    shutil.rmtree(out / "checkpoint-6")
    for log in out.glob("log-*.jsonl"):
        log.unlink()
    result = run_surogate(surogate_bin, "sft", path, "--resume_from_checkpoint=true")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "resumed from" in result.stdout, result.stdout
    resumed = step_losses(out)
    assert sorted(resumed) == [4, 5, 6]
    for step in resumed:
        assert resumed[step] == losses[step], (step, resumed[step], losses[step])


def test_fp8_lora_tracks_fp32_lora_and_resumes_exactly(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    reference = tmp_path / "fp32"
    result = run_surogate(surogate_bin, "sft", config(tmp_path / "fp32.yaml", ex / "model", reference, ex, LORA))
    assert result.returncode == 0, result.stderr + result.stdout

    out = tmp_path / "fp8"
    path = config(tmp_path / "fp8.yaml", ex / "model", out, ex, LORA + "recipe: fp8_hybrid\n")
    result = run_surogate(surogate_bin, "sft", path)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "fp8_hybrid: 14 projections in FP8 (E4M3 weights and inputs, E5M2 gradients; layers 0–1 of 2)" in \
        result.stdout, result.stdout
    fp8, fp32 = step_losses(out), step_losses(reference)
    assert sorted(fp8) == list(range(1, 7))
    for step in fp8:
        assert abs(fp8[step] - fp32[step]) <= 0.01 * fp32[step], (step, fp8[step], fp32[step])
    assert fp8 != fp32
    assert fp8[6] < fp8[1] - 0.2  # it learns

    state = read_tensors(out / "checkpoint-6" / "optimizer.safetensors")["fp8.scaling"]
    sites, width = state.shape
    assert sites == 2 * (4 + 7) and width == 2 + 1024  # 4 quantized inputs and 7 gradients per layer
    history = state[:, 2:]
    # Rolled after step 6: nothing pending, six steps recorded, the delayed amax their maximum. (The
    # example model starts with zero o_proj / down_proj, so the gradients reaching q/k/v and
    # gate/up of the first steps can be exactly zero: those sites record amax 0.)
    assert (state[:, 1] == 0).all() and (history[:, 6:] == 0).all()
    recorded = history[:, 0] > 0
    assert recorded.sum() >= sites // 2
    assert (history[recorded, :6] > 0).all()
    np.testing.assert_array_equal(state[:, 0], history.max(axis=1))

    (out / "adapter_model.safetensors").unlink()
    check_resumes_exactly(surogate_bin, path, out, fp8)


def test_skip_layers_and_e4m3_gradients(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "skip"
    extra = LORA + "recipe: fp8_hybrid\nskip_quant_first_layers: 1\ngradient_dtype: fp8_e4m3\nfp8_amax_history: 16\n"
    result = run_surogate(surogate_bin, "sft", config(tmp_path / "skip.yaml", ex / "model", out, ex, extra),
                          "--max_steps=2")
    assert result.returncode == 0, result.stderr + result.stdout
    assert ("fp8_hybrid: 7 projections in FP8 (E4M3 weights and inputs, E4M3 gradients; layers 1–1 of 2), "
            "delayed scaling over 16 steps at 11 sites") in result.stdout, result.stdout


def check_tracks(reference, candidate, tolerance):
    fp8, fp32 = step_losses(candidate), step_losses(reference)
    assert sorted(fp8) == sorted(fp32) and len(fp8) > 0
    for step in fp8:
        assert abs(fp8[step] - fp32[step]) <= tolerance * fp32[step], (step, fp8[step], fp32[step])
    assert fp8 != fp32
    return fp8


def test_fp8_full_fine_tuning_tracks_fp32_and_resumes_exactly(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    full = "lora: false\n"
    reference = tmp_path / "fp32"
    result = run_surogate(surogate_bin, "sft", config(tmp_path / "fp32.yaml", ex / "model", reference, ex, full))
    assert result.returncode == 0, result.stderr + result.stdout

    out = tmp_path / "fp8"
    path = config(tmp_path / "fp8.yaml", ex / "model", out, ex, full + "recipe: fp8_hybrid\n")
    result = run_surogate(surogate_bin, "sft", path)
    assert result.returncode == 0, result.stderr + result.stdout
    assert ("fp8_hybrid: 14 projections in FP8 (E4M3 copies of the trained weights made once per step, E4M3 "
            "inputs, E5M2 gradients; layers 0–1 of 2), delayed scaling over 1024 steps at 22 sites") in \
        result.stdout, result.stdout
    fp8 = check_tracks(reference, out, 0.01)
    assert fp8[6] < fp8[1] - 0.3  # it learns
    # The outputs hold the trained weights themselves (the FP8 copies are the plan's, never saved).
    weights = read_tensors(out / "model.safetensors")
    assert not any("fp8" in name or "scale_inv" in name for name in weights)
    assert "model.layers.0.self_attn.q_proj.weight" in weights
    assert "fp8.scaling" in read_tensors(out / "checkpoint-6" / "optimizer.safetensors")

    check_resumes_exactly(surogate_bin, path, out, fp8)


def test_fp8_pt_tracks_fp32(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    data = tmp_path / "text.jsonl"
    data.write_text("".join(json.dumps({"text": f"abc abc xyz {w}"}) + "\n" for w in ["ab", "cd", "ef"] * 50))
    runs = {}
    for name, extra in (("fp32", ""), ("fp8", "recipe: fp8_hybrid\n")):
        path = tmp_path / f"pt-{name}.yaml"
        path.write_text(f"model: {ex / 'model'}\noutput_dir: {tmp_path / name}\nsequence_len: 32\nlora: false\n"
                        f"optimizer: adamw\nlearning_rate: 3e-3\nper_device_train_batch_size: 2\nmax_steps: 5\n"
                        f"{extra}datasets:\n  - path: {data}\n    type: text\n")
        result = run_surogate(surogate_bin, "pt", path)
        assert result.returncode == 0, result.stderr + result.stdout
        runs[name] = tmp_path / name
    fp8 = check_tracks(runs["fp32"], runs["fp8"], 0.01)
    assert fp8[5] < fp8[1]


def test_fp8_with_qlora_tracks_qlora(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    for mode in ("qlora_bnb: true\n", "qlora_fp8: true\nqlora_block_size: 64\n"):
        reference, out = tmp_path / f"q-{mode[:9]}", tmp_path / f"q-fp8-{mode[:9]}"
        for target, extra in ((reference, ""), (out, "recipe: fp8_hybrid\n")):
            path = config(tmp_path / f"{target.name}.yaml", ex / "model", target, ex, LORA + mode + extra)
            result = run_surogate(surogate_bin, "sft", path, "--max_steps=4")
            assert result.returncode == 0, result.stderr + result.stdout
        assert "fp8_hybrid: 14 projections in FP8 (the dequantized base and the inputs in E4M3" in result.stdout
        check_tracks(reference, out, 0.01)


def test_fp8_on_two_cpu_ranks_trains(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "dp"
    path = config(tmp_path / "dp.yaml", ex / "model", out, ex, "lora: false\nrecipe: fp8_hybrid\ngpus: 2\n")
    result = run_surogate(surogate_bin, "sft", path, "--max_steps=3")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "2 data-parallel ranks" in result.stdout, result.stdout
    state = read_tensors(out / "checkpoint-3" / "optimizer.safetensors")["fp8.scaling"]
    assert (state[:, 0] > 0).sum() >= state.shape[0] // 2


def test_fp8_options_that_do_not_apply_are_errors(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    cases = [
        (LORA + "skip_quant_first_layers: 1\n", "skip_quant_first_layers", "only applies to recipe: fp8_hybrid"),
        (LORA + "fp8_amax_history: 8\n", "fp8_amax_history", "only applies to recipe: fp8_hybrid"),
        (LORA + "gradient_dtype: fp8_e5m2\n", "gradient_dtype", "set recipe: fp8_hybrid"),
        (LORA + "recipe: nvfp4\n", "recipe", "not implemented"),
    ]
    for index, (extra, key, message) in enumerate(cases):
        path = config(tmp_path / f"bad{index}.yaml", ex / "model", tmp_path / f"bad{index}", ex, extra)
        result = run_surogate(surogate_bin, "sft", path)
        assert result.returncode != 0, extra
        assert key in result.stderr and message in result.stderr, (extra, result.stderr)

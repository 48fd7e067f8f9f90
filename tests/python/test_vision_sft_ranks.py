"""Data parallelism on a Qwen2.5-VL folder (docs/vision.md, "Training"): `gpus: 2` on CPU ranks, on
the tiny random model of test_vision_sft.py and four image rows of different patch counts (so each
rank pads its own micro-batch's images up to the plan's count, the most patches of a row of the
whole training split, the same on every rank).

As tests/train/test_data_parallel.cpp checks for text models: 2 ranks with gradient accumulation 1
read the same micro-batches as one rank with accumulation 2 and normalise by the same loss tokens,
so the runs differ only by the order of fp32 additions. Stated tolerances (the text tests'):
per-step losses and gradient norms within 2e-4 relative, trained weights within 5e-5 absolute; the
tower, frozen, is the source's byte for byte. Cases: LoRA with dropout and evaluation (ZeRO-1; the
eval losses within 2e-4 too), full fine-tuning under ZeRO-2 and ZeRO-3, QLoRA (NF4) under ZeRO-3.

With 2 GPUs: the same comparison on the CUDA backend (LoRA; QLoRA under ZeRO-3), held to the GPU
data-parallel tolerance of tests/python/test_data_parallel_gpus_cli.py: the same bf16 gradients
summed in another fp32 order, every step within 0.01 nats, step 1 within 1e-5.
"""
import os

import json

import numpy as np
import pytest

from conftest import read_tensors, run_surogate

pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_vision_sft import CPU_ONLY, ROWS, VISION, model_folder  # noqa: E402,F401  (model_folder: the fixture)
from test_data_parallel_gpus_cli import visible_gpus  # noqa: E402
from test_vision_sft_quantized import sft  # noqa: E402

RELATIVE = 2e-4
WEIGHTS = 5e-5
# Four rows, one micro-batch each: 96 + 60 patches in the first two (test_vision_sft.py's), then
# other sizes, two images in the last.
RANK_ROWS = ROWS + [
    {"messages": [{"role": "user", "content": [{"type": "image", "image": str(VISION / "gray.jpg")},
                                               {"type": "text", "text": "Is it grey?"}]},
                  {"role": "assistant", "content": "Yes, mostly grey."}]},
    {"messages": [{"role": "user", "content": "<image><image>Compare them."},
                  {"role": "assistant", "content": "The first has alpha, the second a palette."}],
     "images": [str(VISION / "rgba.png"), str(VISION / "palette_trns.png")]},
]
STEPS = {"per_device_train_batch_size": "1", "max_steps": "4"}  # two epochs of two steps


def one_and_two_ranks(surogate_bin, model_folder, tmp_path, name, options, ranks_options=None):  # noqa: F811
    """The run on one rank with accumulation 2 and on two CPU ranks with accumulation 1 (and
    `ranks_options`)."""
    one, two = runs(surogate_bin, model_folder, tmp_path, name, options, ranks_options)
    for ours, theirs in zip(two[1], one[1], strict=True):
        assert ours["loss"] == pytest.approx(theirs["loss"], rel=RELATIVE)
        assert ours["grad_norm"] == pytest.approx(theirs["grad_norm"], rel=RELATIVE)
    assert len(one[1]) == 4 and one[1][-1]["loss"] < one[1][0]["loss"]
    return one, two


def runs(surogate_bin, model_folder, tmp_path, name, options, ranks_options=None, **env):  # noqa: F811
    """The two runs (`env`: the backend's environment, CPU only unless given)."""
    one = sft(surogate_bin, model_folder, tmp_path, f"{name}_1",
              {**STEPS, **options, "gradient_accumulation_steps": "2"}, rows=RANK_ROWS, **env)
    two = sft(surogate_bin, model_folder, tmp_path, f"{name}_2",
              {**STEPS, **options, **(ranks_options or {}), "gpus": "2", "gradient_accumulation_steps": "1"},
              rows=RANK_ROWS, **env)
    assert "gpus: 2 runs 2 data-parallel ranks" in two[3], two[3]
    return one, two


def largest_difference(one, two, file):
    ours, theirs = read_tensors(two[0] / file), read_tensors(one[0] / file)
    assert ours.keys() == theirs.keys()
    for name in theirs:
        if "visual" in name:
            np.testing.assert_array_equal(ours[name], theirs[name], err_msg=name)
    return max(float(np.abs(ours[name].astype(np.float64) - theirs[name]).max()) for name in theirs)


def test_two_ranks_lora_with_dropout_and_evaluation_match_one_rank(surogate_bin, model_folder, tmp_path):  # noqa: F811
    held_out = tmp_path / "held_out.jsonl"
    held_out.write_text("".join(json.dumps(row) + "\n" for row in reversed(RANK_ROWS)))
    options = {"lora_dropout": "0.05", "eval_steps": "2",
               "validation_datasets": f"\n  - path: {held_out}\n    type: conversation"}
    one, two = one_and_two_ranks(surogate_bin, model_folder, tmp_path, "lora", options)
    assert largest_difference(one, two, "adapter_model.safetensors") < WEIGHTS
    evals = [[record for record in run[2] if record.get("type") == "eval"] for run in (one, two)]
    assert len(evals[0]) == len(evals[1]) >= 2
    for ours, theirs in zip(evals[1], evals[0]):
        assert ours["eval_tokens"] == theirs["eval_tokens"]
        assert ours["eval_loss"] == pytest.approx(theirs["eval_loss"], rel=RELATIVE)


@pytest.mark.parametrize("zero_level", [2, 3])
def test_two_ranks_full_fine_tuning_match_one_rank(zero_level, surogate_bin, model_folder, tmp_path):  # noqa: F811
    one, two = one_and_two_ranks(surogate_bin, model_folder, tmp_path, f"full{zero_level}",
                                 {"lora": "false"}, {"zero_level": str(zero_level)})
    assert largest_difference(one, two, "model.safetensors") < WEIGHTS


def test_two_ranks_qlora_under_zero_three_match_one_rank(surogate_bin, model_folder, tmp_path):  # noqa: F811
    one, two = one_and_two_ranks(surogate_bin, model_folder, tmp_path, "qlora3",
                                 {"qlora_bnb": "true"}, {"zero_level": "3"})
    assert largest_difference(one, two, "adapter_model.safetensors") < WEIGHTS


@pytest.mark.skipif(visible_gpus() < 2, reason=f"needs 2 GPUs, {visible_gpus()} visible")
@pytest.mark.parametrize("options, ranks_options", [({}, {}), ({"qlora_bnb": "true"}, {"zero_level": "3"})])
def test_two_gpus_match_one_gpu(options, ranks_options, surogate_bin, model_folder, tmp_path):  # noqa: F811
    one, two = runs(surogate_bin, model_folder, tmp_path, "gpus", options, ranks_options, env=dict(os.environ))
    assert "CUDA" in two[3], two[3]
    assert abs(two[1][0]["loss"] - one[1][0]["loss"]) <= 1e-5
    for ours, theirs in zip(two[1], one[1], strict=True):
        assert ours["loss"] == pytest.approx(theirs["loss"], abs=0.01)


def test_dry_run_plans_each_rank_with_the_quantized_base(surogate_bin, model_folder, tmp_path):  # noqa: F811
    """`--dry-run` of a QLoRA run on 2 CPU ranks under ZeRO-3 plans the tower for the training rows'
    patches, as the run does, and passes without training."""
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in RANK_ROWS))
    config = tmp_path / "dry.yaml"
    config.write_text(f"model: {model_folder}\noutput_dir: {tmp_path / 'out'}\nsequence_len: 128\n"
                      "sample_packing: false\nvalidation_split_ratio: 0\nper_device_train_batch_size: 1\n"
                      "qlora_bnb: true\ngpus: 2\nzero_level: 3\n"
                      f"datasets:\n  - path: {data}\n    type: conversation\n")
    result = run_surogate(surogate_bin, "sft", config, "--dry-run", env=CPU_ONLY)
    assert result.returncode == 0, result.stderr
    assert "configuration is valid (dry run, nothing trained)" in result.stdout
    assert "# vision tower planned for" in result.stdout, result.stdout
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())

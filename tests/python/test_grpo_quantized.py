"""`surogate grpo` with a quantized base on the CPU backend: the rollouts read the base as the
trainer holds it (generate/kv_cache_plans.h's WeightForms: the decode graph rewritten as the
training graph was).

* QLoRA (qlora_bnb without double quantization, qlora_fp4, qlora_fp8): a run samples the very
  completions, and takes the very gradient (grad_norm, rel 1e-6: the same fp32 products), of a
  plain LoRA run on a model folder whose projections hold the format's rounded weights (rounded
  here by the independent numpy oracles of the QLoRA tests), and not those of the full-precision
  base (the rounding is visible).
* recipe fp8_hybrid with LoRA (the frozen base exists only in FP8) and with full fine-tuning (the
  FP8 copies rewritten after every step): the toy task learns, the rollouts reading the FP8 weights.
* On a machine with a GPU (where the CLI trains on the CUDA backend, in bf16) the comparisons above
  are skipped; instead each format and the recipe run two steps on the GPU, the rollouts reading
  the quantized base on the device (the lead's GPU check).
"""
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import save_file

import nvfp4_reference
from conftest import REPO_ROOT, gpu_visible, read_tensors, run_surogate
from test_grpo_cli import SEVENS, grpo_config, records
from test_qlora_cli import PROJECTIONS, nf4_round_trip
from test_qlora_fp8_cli import copy_folder, fp8_blocks

FORMATS = {
    "qlora_bnb": ("qlora_bnb: true\nqlora_bnb_double_quant: false\n", nf4_round_trip),
    "qlora_fp4": ("qlora_fp4: true\n", lambda weight: nvfp4_reference.round_trip(weight, True)),
    "qlora_fp8": ("qlora_fp8: true\n", lambda weight: fp8_blocks(weight)[2]),
}
LORA = "true\nlora_rank: 4\nlora_alpha: 8\nlora_dropout: 0.0"


@pytest.fixture(scope="module")
def trained(tmp_path_factory, surogate_bin):
    """The grpo example's model after two steps of full fine-tuning (projections neither zero nor
    random-initialised), and the example folder."""
    folder = tmp_path_factory.mktemp("grpo_quantized")
    subprocess.run([sys.executable, str(REPO_ROOT / "examples/grpo/make_example.py"), str(folder)], check=True,
                   capture_output=True)
    (folder / "rewards.py").write_text(SEVENS)
    base = folder / "base"
    config = grpo_config(folder / "base.yaml", folder, base, ["rewards.py:sevens"])
    result = run_surogate(surogate_bin, "grpo", config, "--max_steps=2")
    assert result.returncode == 0, result.stdout + result.stderr
    return folder, base


def grpo_run(surogate_bin, folder, name, model, extra, lora=LORA, steps=2, *overrides):
    out = folder / name
    text = grpo_config(folder / f"{name}.yaml", folder, out, ["rewards.py:sevens"], extra, lora=lora).read_text()
    (folder / f"{name}.yaml").write_text(text.replace(f"model: {folder}/model", f"model: {model}"))
    result = run_surogate(surogate_bin, "grpo", folder / f"{name}.yaml", f"--max_steps={steps}",
                          "--grpo.log_completions=true", "--grpo.num_completions_to_print=16", *overrides)
    assert result.returncode == 0, result.stdout + result.stderr
    return records(out, "step"), [c["completion_ids"] for c in records(out, "completion")]


ON_CPU = pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: the CLI trains in bf16 on it (test_*_on_a_gpu)")


@ON_CPU
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_qlora_rollouts_read_the_quantized_base(surogate_bin, trained, fmt):
    folder, base = trained
    extra, round_trip = FORMATS[fmt]
    steps, completions = grpo_run(surogate_bin, folder, fmt, base, extra)
    assert len(steps) == 2 and len(completions) == 32

    weights = read_tensors(base / "model.safetensors")
    rounded_weights = {name: round_trip(value) if name.split(".")[-2] in PROJECTIONS else value
                       for name, value in weights.items()}
    assert sum(not np.array_equal(rounded_weights[n], weights[n]) for n in weights) == 14
    rounded = folder / f"rounded-{fmt}"
    copy_folder(base, rounded)
    save_file(rounded_weights, str(rounded / "model.safetensors"))
    reference_steps, reference_completions = grpo_run(surogate_bin, folder, f"lora-rounded-{fmt}", rounded, "")
    assert completions == reference_completions
    for ours, theirs in zip(steps, reference_steps):
        assert ours["reward"] == theirs["reward"]
        assert ours["grad_norm"] == pytest.approx(theirs["grad_norm"], rel=1e-6)

    plain_steps, plain_completions = grpo_run(surogate_bin, folder, f"lora-plain-{fmt}", base, "")
    assert plain_completions != completions or \
        any(p["grad_norm"] != pytest.approx(s["grad_norm"], rel=1e-6) for p, s in zip(plain_steps, steps))


@ON_CPU
@pytest.mark.parametrize("lora,temperature", [("false", "1.0"), (LORA, "0.7")], ids=["full", "lora"])
def test_fp8_hybrid_rollouts_learn_the_toy_task(surogate_bin, trained, lora, temperature):
    folder, _ = trained
    name = "fp8-full" if lora == "false" else "fp8-lora"
    steps, _ = grpo_run(surogate_bin, folder, name, folder / "model", "recipe: fp8_hybrid\n", lora, 30,
                        f"--grpo.temperature={temperature}")
    rewards = [step["reward"] for step in steps]
    assert len(rewards) == 30
    assert sum(rewards[:2]) / 2 < 0.2, rewards  # chance: one token in 17
    assert sum(rewards[-3:]) / 3 > 0.6, rewards


@pytest.mark.skipif(not gpu_visible(), reason="needs a GPU (the CUDA backend's quantized rollouts)")
@pytest.mark.parametrize("extra,lora", [(FORMATS["qlora_bnb"][0], LORA), ("qlora_bnb: true\n", LORA),
                                        (FORMATS["qlora_fp4"][0], LORA), (FORMATS["qlora_fp8"][0], LORA),
                                        ("recipe: fp8_hybrid\n", LORA), ("recipe: fp8_hybrid\n", "false")],
                         ids=["nf4", "nf4-double-quant", "nvfp4", "fp8-blocks", "fp8-hybrid-lora", "fp8-hybrid-full"])
def test_quantized_rollouts_run_on_a_gpu(surogate_bin, trained, extra, lora):
    folder, base = trained
    name = "gpu-" + extra.split(":")[0] + ("-lora" if lora == LORA else "-full") + str(len(extra))
    steps, completions = grpo_run(surogate_bin, folder, name, base, extra, lora)
    assert len(steps) == 2 and len(completions) == 32
    assert all(np.isfinite(step["grad_norm"]) and step["grad_norm"] > 0 for step in steps), steps
    assert all(1 <= len(ids) <= 4 for ids in completions)


@ON_CPU
def test_the_kl_reference_of_a_qlora_run_is_its_quantized_base(surogate_bin, trained):
    """beta > 0 with QLoRA: the reference is the base as the trainer holds it (NF4), without the
    adapter. At step 1 the adapter is zero, so the policy is that very base and the KL is 0 (up to
    the two code paths' float sums); a reference read unquantized would be an NF4 rounding away."""
    folder, base = trained
    steps, _ = grpo_run(surogate_bin, folder, "qlora-kl", base, FORMATS["qlora_bnb"][0], LORA, 2,
                        "--grpo.beta=0.04")
    assert len(steps) == 2
    assert abs(steps[0]["kl"]) < 1e-6, steps[0]
    assert steps[1]["kl"] > 1e-6, steps[1]

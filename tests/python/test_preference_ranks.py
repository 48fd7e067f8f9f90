"""`surogate dpo` on data-parallel ranks (docs/preference-tuning.md, "Several GPUs").

On the CPU backend (rank threads joined by gloo; CUDA hidden so that `gpus: N` means CPU ranks), the
quickstart's tiny model trains LoRA adapters on the reversal pairs of examples/preference: 2 and 4
ranks (ZeRO-1, and ZeRO-2 / ZeRO-3 on 2) with gradient accumulation 2 / 1 against one rank with
accumulation 4, the same global batch of 8 pairs a step in the same order. Every step's loss,
grad_norm and TRL metrics (rewards/*, logps/*, logits/*) and every evaluation record equal the one
rank's within 2e-4 relative (the tolerance of test_data_parallel_cli.py's sft runs: the order of the
fp32 additions only), with an absolute floor of 1e-6 for the values that are 0 up to rounding at
the first step (the rewards: the policy is the reference there). The per-pair reference
log-probabilities, computed by every rank over its own pairs, are those of one rank to the same
tolerance, so the stored file does not depend on the number of ranks. ORPO's NLL term is the mean
over every rank's chosen tokens, so orpo is held to the same.

With two GPUs visible the same comparison runs on the CUDA backend (NCCL) at
test_data_parallel_gpus_cli.py's bf16 tolerance: step 1 within 1e-5 relative, every step within
0.01 nats.
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, make_quickstart_example, run_surogate
from test_data_parallel_gpus_cli import visible_gpus

CPU_ONLY = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
RELATIVE, FLOOR = 2e-4, 1e-6
METRICS = ["loss", "grad_norm", "rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracies",
           "logps/chosen", "logps/rejected", "logits/chosen", "logits/rejected"]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    """The quickstart model and 48 training / 16 held-out reversal pairs."""
    folder = tmp_path_factory.mktemp("preference_ranks")
    ex = make_quickstart_example(folder)
    subprocess.run([sys.executable, str(REPO_ROOT / "examples/preference/make_pairs.py"), str(folder / "all")],
                   check=True, capture_output=True)
    for split, count in (("train", 48), ("valid", 16)):
        rows = (folder / "all" / f"{split}.jsonl").read_text().splitlines()[:count]
        (folder / f"{split}.jsonl").write_text("\n".join(rows) + "\n")
    return ex / "model", folder


def write_config(path, model, folder, loss_type):
    path.write_text(f"""model: {model}
sequence_len: 64
max_length: 16
use_chat_template: false
lora: true
lora_rank: 4
lora_alpha: 8
lora_dropout: 0
optimizer: adamw
learning_rate: 1e-2
per_device_train_batch_size: 2
max_steps: 4
eval_steps: 2
save_steps: 1000
datasets:
  - path: {folder / 'train.jsonl'}
    type: preference
validation_datasets:
  - path: {folder / 'valid.jsonl'}
    type: preference
loss:
  type: {loss_type}
""")
    return path


def run(surogate_bin, config, out, env, *overrides):
    result = run_surogate(surogate_bin, "dpo", config, f"--output_dir={out}", f"--log_file={out}/log.jsonl",
                          *overrides, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    records = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return result.stdout, records


def close(a, b):
    return abs(a - b) <= RELATIVE * abs(a) + FLOOR


def assert_same_records(one, other, label):
    steps_one = [r for r in one if r["type"] == "step"]
    steps_other = [r for r in other if r["type"] == "step"]
    assert len(steps_one) == len(steps_other) == 4, label
    for a, b in zip(steps_one, steps_other):
        for name in METRICS:
            assert close(a[name], b[name]), (label, a["step"], name, a[name], b[name])
    evals_one = [r for r in one if r["type"] == "eval"]
    evals_other = [r for r in other if r["type"] == "eval"]
    assert len(evals_one) == len(evals_other) >= 2, label
    for a, b in zip(evals_one, evals_other):
        assert a["eval_pairs"] == b["eval_pairs"] == 16, label
        for name in [n for n in a if n.startswith("eval_") and n != "eval_pairs"]:
            assert close(a[name], b[name]), (label, name, a[name], b[name])


@pytest.mark.parametrize("loss_type", ["dpo", "orpo"])
def test_data_parallel_ranks_give_one_ranks_steps_and_evaluations(surogate_bin, pairs, tmp_path, loss_type):
    model, folder = pairs
    config = write_config(tmp_path / "dpo.yaml", model, folder, loss_type)
    _, one = run(surogate_bin, config, tmp_path / "one", CPU_ONLY, "--gradient_accumulation_steps=4")
    runs = {"2 ranks": ("--gpus=2", "--gradient_accumulation_steps=2"),
            "4 ranks": ("--gpus=4", "--gradient_accumulation_steps=1"),
            "2 ranks ZeRO-2": ("--gpus=2", "--gradient_accumulation_steps=2", "--zero_level=2"),
            "2 ranks ZeRO-3": ("--gpus=2", "--gradient_accumulation_steps=2", "--zero_level=3")}
    for index, (label, overrides) in enumerate(runs.items()):
        out = tmp_path / f"ranks{index}"
        stdout, records = run(surogate_bin, config, out, CPU_ONLY, *overrides)
        assert f"gpus: {overrides[0][-1]} runs {overrides[0][-1]} data-parallel ranks" in stdout, stdout
        config_record = next(r for r in records if r["type"] == "config")
        assert config_record["data_parallel_ranks"] == int(overrides[0][-1]), label
        assert_same_records(one, records, f"{loss_type}, {label}")
        assert (out / "adapter_model.safetensors").exists(), label
        if loss_type == "dpo":  # the reference pass ran on every rank, over its own pairs
            stored = json.loads((out / "tokenized" / "reference_logps.json").read_text())
            single = json.loads((tmp_path / "one" / "tokenized" / "reference_logps.json").read_text())
            for split in ("train", "eval"):
                assert len(stored[split]) == len(single[split]) == 2 * {"train": 48, "eval": 16}[split]
                assert all(close(a, b) for a, b in zip(single[split], stored[split])), (label, split)


def test_sequence_parallelism_is_refused_naming_it(surogate_bin, pairs, tmp_path):
    model, folder = pairs
    config = write_config(tmp_path / "dpo.yaml", model, folder, "dpo")
    result = run_surogate(surogate_bin, "dpo", config, f"--output_dir={tmp_path / 'out'}", "--gpus=2",
                          "--sequence_parallel_size=2", env=CPU_ONLY)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "sequence_parallel_size: 2 is not run by `surogate dpo`" in result.stderr, result.stderr


@pytest.mark.skipif(visible_gpus() < 2, reason=f"needs 2 GPUs, {visible_gpus()} visible")
def test_two_gpus_track_one_gpu_with_twice_the_accumulation(surogate_bin, pairs, tmp_path):
    model, folder = pairs
    config = write_config(tmp_path / "dpo.yaml", model, folder, "dpo")
    _, one = run(surogate_bin, config, tmp_path / "one", os.environ, "--gradient_accumulation_steps=4")
    for zero in ("1", "3"):
        _, two = run(surogate_bin, config, tmp_path / f"two{zero}", os.environ, "--gpus=2",
                     "--gradient_accumulation_steps=2", f"--zero_level={zero}")
        losses_one = [r["loss"] for r in one if r["type"] == "step"]
        losses_two = [r["loss"] for r in two if r["type"] == "step"]
        assert len(losses_one) == len(losses_two) == 4
        assert losses_two[0] == pytest.approx(losses_one[0], rel=1e-5), (zero, losses_one, losses_two)
        assert all(abs(a - b) <= 0.01 for a, b in zip(losses_one, losses_two)), (zero, losses_one, losses_two)
        evals_one = [r["eval_loss"] for r in one if r["type"] == "eval"]
        evals_two = [r["eval_loss"] for r in two if r["type"] == "eval"]
        assert len(evals_one) == len(evals_two) >= 2
        assert all(abs(a - b) <= 0.01 for a, b in zip(evals_one, evals_two)), (zero, evals_one, evals_two)

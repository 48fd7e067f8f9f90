"""`surogate dpo` over several processes started with the launcher variables (RANK, WORLD_SIZE, ...,
as torchrun sets them) on CPU ranks (docs/preference-tuning.md, "Several GPUs"; CUDA hidden).

Each process runs its ranks' micro-batches; the window's pair and chosen-token counts, every
micro-batch's policy log-probabilities (the step's TRL metrics, the evaluation's, and the reference
pass's table) reach every process in window order (train/objective/process_window_rows.h). So two
processes of one rank each give exactly what one process with `gpus: 2` rank threads gives, bit for
bit on the CPU backend: every step and evaluation record (loss, grad_norm, rewards/*, logps/*,
logits/*), the stored reference log-probabilities and the final adapter, for dpo (with its
reference pass) and orpo (its NLL term over every rank's chosen tokens), LoRA and full fine-tuning.
"""
import json
import os

import numpy as np
import pytest

from conftest import gpu_visible, read_tensors, run_surogate
from test_grpo_processes import launch_command
from test_preference_ranks import pairs, write_config  # noqa: F401

pytestmark = pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: these are the CPU ranks' tests")

CPU_ONLY = {"CUDA_VISIBLE_DEVICES": ""}
FIELDS = ["step", "loss", "grad_norm", "tokens", "loss_tokens", "rewards/chosen", "rewards/rejected",
          "rewards/margins", "rewards/accuracies", "logps/chosen", "logps/rejected", "logits/chosen",
          "logits/rejected", "eval_loss", "eval_rewards/accuracies", "eval_rewards/margins", "eval_logps/chosen"]


def records(out):
    return [{key: r.get(key) for key in FIELDS} for r in map(json.loads, (out / "log.jsonl").read_text().splitlines())
            if r["type"] in ("step", "eval")]


@pytest.mark.parametrize("loss_type,lora,zero_level", [("dpo", True, 1), ("orpo", True, 2), ("dpo", False, 1),
                                                       ("dpo", True, 3)],
                         ids=["dpo-lora", "orpo-lora-zero2", "dpo-full", "dpo-lora-zero3"])
def test_two_processes_equal_two_rank_threads(surogate_bin, pairs, tmp_path, loss_type, lora, zero_level):
    model, folder = pairs
    config = write_config(tmp_path / "dpo.yaml", model, folder, loss_type)
    if not lora:
        config.write_text(config.read_text().replace("lora: true", "lora: false"))
    outs = {name: tmp_path / name for name in ("threads", "processes")}
    common = ("--gradient_accumulation_steps=2", f"--zero_level={zero_level}")
    threads = run_surogate(surogate_bin, "dpo", config, "--gpus=2", f"--output_dir={outs['threads']}",
                           f"--log_file={outs['threads']}/log.jsonl", *common,
                           env={**os.environ, **CPU_ONLY})
    assert threads.returncode == 0, threads.stdout + threads.stderr
    results = launch_command(surogate_bin, "dpo", config, 2, f"--output_dir={outs['processes']}",
                             f"--log_file={outs['processes']}/log.jsonl", *common)
    for code, stdout, stderr in results:
        assert code == 0, stderr + stdout
    assert "2 data-parallel ranks (2 processes × 1 rank)" in results[0][1], results[0][1]
    one, two = records(outs["threads"]), records(outs["processes"])
    assert len([r for r in one if r["loss"] is not None]) >= 4
    assert two == one
    if loss_type == "dpo":
        reference = "tokenized/reference_logps.json"
        assert json.loads((outs["processes"] / reference).read_text()) == \
            json.loads((outs["threads"] / reference).read_text())
    output = "adapter_model.safetensors" if lora else "model.safetensors"
    a, b = read_tensors(outs["threads"] / output), read_tensors(outs["processes"] / output)
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), name


def test_a_resumed_run_of_two_processes_is_exact(surogate_bin, pairs, tmp_path):
    """Killed after step 3 and resumed from checkpoint-2 (the reference log-probabilities read back
    from the file): steps 3 and 4 and the final evaluation as the uninterrupted run's."""
    import shutil
    model, folder = pairs
    config = write_config(tmp_path / "dpo.yaml", model, folder, "dpo")
    common = ("--gradient_accumulation_steps=2", "--save_steps=1")

    def launch(out, *extra, env=None):
        return launch_command(surogate_bin, "dpo", config, 2, f"--output_dir={out}", f"--log_file={out}/log.jsonl",
                              *common, *extra, env=env)

    for code, stdout, stderr in launch(tmp_path / "whole"):
        assert code == 0, stderr + stdout
    cut = tmp_path / "cut"
    assert any(code != 0 for code, _, _ in launch(cut, env={"SUROGATE_TEST_FAULTS": "crash_after_step=3"}))
    (cut / "log.jsonl").unlink()  # only the resumed run's records
    for checkpoint in sorted(cut.glob("checkpoint-[34]*")):
        shutil.rmtree(checkpoint)
    for code, stdout, stderr in launch(cut, "--resume_from_checkpoint=true"):
        assert code == 0, stderr + stdout
    expected = [r for r in records(tmp_path / "whole") if r["step"] > 2]
    assert [r["step"] for r in expected if r["loss"] is not None] == [3, 4]
    assert records(cut) == expected

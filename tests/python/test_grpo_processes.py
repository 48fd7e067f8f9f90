"""`surogate grpo` over several processes started with the launcher variables (RANK, WORLD_SIZE, ...,
as torchrun sets them) on CPU ranks (docs/grpo.md "Several GPUs"; CUDA hidden).

Each process samples its own ranks' share of the step's prompts (the seeds one process with every
rank gives them), then every process gets every process's completions
(train/objective/grpo_process_rollouts.h) and computes the same rewards, advantages and loss
weights over the whole step, keeping its own ranks' micro-batches. So two processes of one rank
each run exactly the step of one process with `gpus: 2` rank threads, bit for bit on the CPU
backend: the same completions in the same order, rewards, losses, grad norms, records and final
weights (the gloo collectives and the host sums run in the same fixed order, as for
`surogate sft`: tests/python/test_distributed_processes.py), for LoRA and full fine-tuning, ZeRO-1
and ZeRO-2, dapo and grpo with scale_rewards batch. A run killed after step 2 and resumed on two
processes trains steps 3 and 4 as the uninterrupted one. The KL term and num_iterations > 1 are
refused over several processes with their message.
"""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import gpu_visible, read_tensors, run_surogate
from test_distributed_processes import free_port, launcher_env
from test_grpo_cli import SEVENS, example, grpo_config  # noqa: F401

pytestmark = pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: these are the CPU ranks' tests")

CPU_ONLY = {"CUDA_VISIBLE_DEVICES": ""}
LORA = "true\nlora_rank: 4\nlora_alpha: 8\nlora_dropout: 0.0"


def write(folder, example, lora):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rewards.py").write_text(SEVENS)
    return grpo_config(folder / "grpo.yaml", example, folder / "out", ["rewards.py:sevens", "length_penalty:2"],
                       lora=lora)


def launch_command(binary, command, config, size, *overrides, env=None):
    """The processes of one run of `surogate COMMAND`, started as torchrun would on one machine, CUDA
    hidden; (exit code, stdout, stderr) of each."""
    port = free_port()
    processes = [subprocess.Popen([str(binary), command, str(config), *overrides],
                                  env=launcher_env(rank, size, port, **CPU_ONLY, **(env or {})),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(size)]
    results = []
    for process in processes:
        stdout, stderr = process.communicate(timeout=600)
        results.append((process.returncode, stdout, stderr))
    return results


def launch(binary, config, size, *overrides, env=None):
    return launch_command(binary, "grpo", config, size, *overrides, env=env)


def log(out):
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]


def kind(records, name, fields):
    return [{key: r.get(key) for key in fields} for r in records if r["type"] == name]


STEP = ["step", "loss", "grad_norm", "tokens", "loss_tokens", "reward", "reward_std", "frac_reward_zero_std",
        "completions/mean_length", "completions/max_length", "num_tokens", "generated_tokens", "epoch"]
COMPLETION = ["step", "prompt_ids", "completion_ids", "completion", "reward", "advantage"]

CASES = {
    "full-zero1-dapo": ("false", ("--zero_level=1",)),
    "lora-zero2-dapo": (LORA, ("--zero_level=2",)),
    "full-zero1-grpo-batch-std": ("false", ("--zero_level=1", "--grpo.loss_type=grpo", "--grpo.scale_rewards=batch")),
}


@pytest.mark.parametrize("case", CASES)
def test_two_processes_equal_two_rank_threads(surogate_bin, example, tmp_path, case):
    lora, extra = CASES[case]
    common = ("--max_steps=3", "--gradient_accumulation_steps=1", "--grpo.log_completions=true",
              "--grpo.num_completions_to_print=16", *extra)
    threads = write(tmp_path / "threads", example, lora)
    result = run_surogate(surogate_bin, "grpo", threads, "--gpus=2", *common, env={**os.environ, **CPU_ONLY})
    assert result.returncode == 0, result.stdout + result.stderr
    processes = write(tmp_path / "processes", example, lora)
    (code0, stdout0, stderr0), (code1, stdout1, stderr1) = launch(surogate_bin, processes, 2, *common)
    assert code0 == 0 and code1 == 0, stderr0 + stdout0 + stderr1 + stdout1
    assert "2 data-parallel ranks (2 processes × 1 rank)" in stdout0, stdout0
    assert stdout1 == "", stdout1  # the other process prints nothing
    one, two = log(tmp_path / "threads" / "out"), log(tmp_path / "processes" / "out")
    assert len(kind(one, "step", STEP)) == 3
    assert kind(two, "step", STEP) == kind(one, "step", STEP)
    assert len(kind(one, "completion", COMPLETION)) == 48  # every completion of the three steps
    assert kind(two, "completion", COMPLETION) == kind(one, "completion", COMPLETION)
    output = "adapter_model.safetensors" if lora != "false" else "model.safetensors"
    a, b = read_tensors(tmp_path / "threads" / "out" / output), read_tensors(tmp_path / "processes" / "out" / output)
    assert a.keys() == b.keys()
    for name in a:
        assert np.array_equal(a[name], b[name]), name


def test_a_resumed_run_of_two_processes_is_exact(surogate_bin, example, tmp_path):
    common = ("--max_steps=4", "--save_steps=1", "--gradient_accumulation_steps=1")
    whole = write(tmp_path / "whole", example, "false")
    for code, stdout, stderr in launch(surogate_bin, whole, 2, *common):
        assert code == 0, stderr + stdout
    expected = kind(log(tmp_path / "whole" / "out"), "step", STEP)
    cut = write(tmp_path / "cut", example, "false")
    crashed = launch(surogate_bin, cut, 2, *common, env={"SUROGATE_TEST_FAULTS": "crash_after_step=3"})
    assert any(code != 0 for code, _, _ in crashed)
    out = tmp_path / "cut" / "out"
    (out / "log.jsonl").unlink()  # only the resumed run's records
    for checkpoint in sorted(out.glob("checkpoint-[34]*")):  # resume from step 2
        shutil.rmtree(checkpoint)
    for code, stdout, stderr in launch(surogate_bin, cut, 2, *common, "--resume_from_checkpoint=true"):
        assert code == 0, stderr + stdout
    got = kind(log(out), "step", STEP)
    assert [r["step"] for r in got] == [3, 4]
    assert got == expected[2:]


def test_the_kl_term_over_processes_is_refused(surogate_bin, example, tmp_path):
    config = write(tmp_path, example, LORA)
    for option, name in (("--grpo.beta=0.04", "grpo.beta"), ("--grpo.num_iterations=2", "grpo.num_iterations")):
        (code0, stdout0, stderr0), (code1, _, _) = launch(surogate_bin, config, 2, option)
        assert code0 == 2 and code1 != 0, stderr0 + stdout0
        assert f"option '{name}' is not run by `surogate grpo` over several processes" in stderr0, stderr0

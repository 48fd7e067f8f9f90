"""`surogate grpo --gpus=2` on the CPU backend: two data-parallel ranks (threads of one process joined by
gloo; CUDA hidden so that `gpus: N` means CPU ranks), docs/grpo.md "Several GPUs".

Each rank samples its share of the step's prompts with its own rollout model over its own replica's
weights, with the seeds one rank gives the same completions (rl/group_sampling.h), so two ranks with
per_device_train_batch_size 8 and accumulation 1 sample the very 16 completions one rank with
accumulation 2 samples, in the same micro-batches. Against that one-rank run:
- the 16 completions (every one logged) are the same, in the same order, and so are the rewards;
- step 1's loss and grad_norm (and with beta, kl) equal the one rank's at rel 1e-5 (the order of the
  fp32 gradient sums only), for dapo (its normaliser: the tokens of both ranks), bnpo and grpo with
  scale_rewards batch (the std of both ranks' rewards), and with num_iterations 2 / beta 0.04 under
  LoRA (the old log-probabilities, the reference on each rank); step 2 within 2e-4
  (test_data_parallel_cli.py's tolerance: the weights differ by the additions' order);
- a toy task learns on two ranks; a two-rank run killed between two iterations resumes exactly;
- ZeRO-3 and pipeline parallelism are refused with their messages.
"""
import os
import shutil

import pytest

from conftest import gpu_visible, run_surogate
from test_grpo_cli import SEVENS, example, grpo_config, records  # noqa: F401

pytestmark = pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: gpus: 2 means two GPUs here")

CPU_ONLY = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
LORA = "true\nlora_rank: 4\nlora_alpha: 8\nlora_dropout: 0.0"
ITERATIONS = ("--grpo.num_iterations=2", "--grpo.beta=0.04", "--learning_rate=5e-2")


def run(surogate_bin, example, folder, ranks, *extra, lora="false", env=None):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rewards.py").write_text(SEVENS)
    out = folder / "out"
    config = grpo_config(folder / "grpo.yaml", example, out, ["rewards.py:sevens"], lora=lora)
    accumulation = 2 // ranks
    result = run_surogate(surogate_bin, "grpo", config, f"--gpus={ranks}",
                          f"--gradient_accumulation_steps={accumulation}", "--grpo.log_completions=true",
                          "--grpo.num_completions_to_print=16", *extra, env=env or CPU_ONLY)
    return result, out


CASES = {
    "dapo": ((), "false"),
    "bnpo": (("--grpo.loss_type=bnpo",), "false"),
    "grpo-batch-std": (("--grpo.loss_type=grpo", "--grpo.scale_rewards=batch"), "false"),
    "iterations-kl-lora": (ITERATIONS, LORA),
}


@pytest.mark.parametrize("case", CASES)
def test_two_ranks_train_the_one_rank_step(surogate_bin, example, tmp_path, case):
    extra, lora = CASES[case]
    runs = {}
    for ranks in (1, 2):
        result, out = run(surogate_bin, example, tmp_path / f"r{ranks}", ranks, "--max_steps=2", *extra, lora=lora)
        assert result.returncode == 0, result.stdout + result.stderr
        runs[ranks] = out
    assert "2 data-parallel ranks" in result.stdout, result.stdout
    one, two = (records(runs[r], "step") for r in (1, 2))
    shown_one, shown_two = (records(runs[r], "completion") for r in (1, 2))
    assert len(one) == len(two) == 2
    assert len(shown_one) >= 16 and len(shown_two) >= 16
    for a, b in zip(shown_one[:16], shown_two[:16]):  # step 1: the very completions, in order
        assert (a["prompt_ids"], a["completion_ids"], a["reward"]) == (b["prompt_ids"], b["completion_ids"], b["reward"])
        assert a["advantage"] == pytest.approx(b["advantage"], rel=1e-12, abs=1e-12)
    names = ["loss", "grad_norm"] + (["kl"] if case.startswith("iterations") else [])
    for name in names:
        assert two[0][name] == pytest.approx(one[0][name], rel=1e-5, abs=1e-9), (name, two[0][name], one[0][name])
        assert two[1][name] == pytest.approx(one[1][name], rel=2e-4, abs=1e-7), (name, two[1][name], one[1][name])
    for name in ("reward", "reward_std", "frac_reward_zero_std", "completions/mean_length", "num_tokens"):
        assert two[0][name] == one[0][name], name
    assert one[0]["grad_norm"] > 0


def test_a_toy_task_learns_on_two_ranks(surogate_bin, example, tmp_path):
    result, out = run(surogate_bin, example, tmp_path, 2, "--max_steps=30")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 data-parallel ranks" in result.stdout, result.stdout
    rewards = [step["reward"] for step in records(out, "step")]
    assert len(rewards) == 30
    assert sum(rewards[:2]) / 2 < 0.2, rewards  # chance: one token in 17
    assert sum(rewards[-3:]) / 3 > 0.6, rewards


def test_resume_of_two_ranks_between_two_iterations_is_exact(surogate_bin, example, tmp_path):
    """The rollout seeds of both ranks and the buffered generation (num_iterations 2) are in the checkpoint."""
    args = ("--save_steps=1", "--max_steps=4", *ITERATIONS)
    result, whole = run(surogate_bin, example, tmp_path / "whole", 2, *args, lora=LORA)
    assert result.returncode == 0, result.stdout + result.stderr
    expected = {s["step"]: (s["loss"], s["kl"], s["grad_norm"], s["reward"]) for s in records(whole, "step")}
    faults = {**CPU_ONLY, "SUROGATE_TEST_FAULTS": "crash_after_step=3"}
    result, cut = run(surogate_bin, example, tmp_path / "cut", 2, *args, lora=LORA, env=faults)
    assert result.returncode != 0
    (cut / "log.jsonl").unlink()  # only the resumed run's records
    for checkpoint in sorted(cut.glob("checkpoint-[234]*")):  # resume from step 1: between two iterations
        shutil.rmtree(checkpoint)
    result, _ = run(surogate_bin, example, tmp_path / "cut", 2, *args, "--resume_from_checkpoint=true", lora=LORA)
    assert result.returncode == 0, result.stdout + result.stderr
    got = {s["step"]: (s["loss"], s["kl"], s["grad_norm"], s["reward"]) for s in records(cut, "step")}
    assert sorted(got) == [2, 3, 4]
    for step in (2, 3, 4):  # step 2 replays the buffered generation, step 3 samples anew
        assert got[step] == expected[step], (step, got[step], expected[step])


@pytest.mark.parametrize("extra, phrase", [
    (("--zero_level=3",), "option 'zero_level' shards the weights over the ranks (ZeRO-3)"),
    (("--pipeline_parallel_size=2",), "pipeline_parallel_size: 2 is not run by `surogate grpo`"),
])
def test_what_two_ranks_do_not_run_is_refused(surogate_bin, example, tmp_path, extra, phrase):
    result, _ = run(surogate_bin, example, tmp_path, 2, "--max_steps=1", *extra)
    assert result.returncode == 2, result.stdout + result.stderr
    assert phrase in result.stderr, result.stderr

"""bench/run_grpo_job.sh end to end on the CPU (GRPO_DEVICE=cpu): `surogate grpo` and TRL's
GRPOTrainer + PEFT (bench/peers/trl_grpo_bench.py) on a tiny random Qwen3 with the real Qwen3
tokenizer (bench/models.py's qwen3-tiny), 2 steps of 4 prompts × 4 generations of 8 tokens.
Checks the records the GPU run reads: one per side with completions/s, the step time and its
split, every completion at max_completion_length on both sides (the folder's unreachable EOS,
transformers' min_new_tokens), and the ratio line. Skipped without TRL."""
import json
import os
import subprocess

import pytest

from conftest import REPO_ROOT


def test_the_grpo_bench_runs_both_sides_on_the_cpu(surogate_bin, tmp_path):
    for module in ("torch", "transformers", "peft", "trl", "datasets"):
        pytest.importorskip(module)
    env = dict(os.environ, GRPO_DEVICE="cpu", SUROGATE_BIN=str(surogate_bin), GRPO_RUNS="qwen3-tiny:lora",
               GRPO_STEPS="2", GRPO_WARMUP="1", GRPO_GENERATIONS="4", GRPO_COMPLETION="8", GRPO_MICRO="4",
               GRPO_ACCUM="4", OUT=str(tmp_path / "out"), GRPO_WORK=str(tmp_path / "work"), CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(["bash", str(REPO_ROOT / "bench/run_grpo_job.sh")], env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    [ours] = [json.loads(line) for line in (tmp_path / "out/grpo.jsonl").read_text().splitlines()]
    [peer] = [json.loads(line) for line in (tmp_path / "out/peers.jsonl").read_text().splitlines()]
    assert "error" not in ours and "error" not in peer, (ours, peer)
    assert ours["engine"] == "surogate grpo" and peer["engine"] == "trl-grpo+peft"
    for record in (ours, peer):
        assert record["completions_per_step"] == 16 and record["timed_steps"] == 1
        assert record["completions_mean_length"] == 8.0  # no early EOS on either side
        assert record["completions_per_s"] == pytest.approx(16 / record["step_s"], rel=1e-3)
        assert 0 < record["generation_s"] < record["step_s"] and record["training_s"] > 0
        assert record["reward_s"] >= 0 and len(record["losses"]) == 2
    # Surogate's generated tokens are the completions' (16 × 8 per step).
    assert ours["completion_tokens_per_s"] == pytest.approx(16 * 8 / ours["step_s"], rel=1e-3)
    ratios = [json.loads(line) for line in result.stdout.splitlines() if line.startswith('{"model"')]
    assert len(ratios) == 1 and ratios[0]["model"] == "qwen3-tiny"
    assert ratios[0]["completions_per_s_ratio"] == pytest.approx(ours["completions_per_s"] / peer["completions_per_s"])
    assert "| qwen3-tiny | lora |" in result.stdout

"""`surogate grpo`'s evaluation on the CPU (docs/grpo.md#evaluation), on the tiny random model of
examples/grpo/make_example.py: num_generations completions of every validation prompt sampled
from the current weights at step 0, every eval_steps and at the end, their metrics under TRL's
eval_* names. Checked against a recomputation from the logged completions (log_completions with
every completion): the Python reward re-run on their texts, the built-in length penalty, TRL's
group advantages and loss (ratio 1, the whole validation set as one batch); the training steps
are those of a run without validation data (evaluation draws no training seed); the split."""
import json
import math
import statistics

import pytest

from conftest import run_surogate
from test_grpo_cli import SEVENS, example, grpo_config, records  # noqa: F401 (example: the fixture)

EVAL_KEYS = {"eval_reward", "eval_reward_std", "eval_frac_reward_zero_std", "eval_rewards/sevens/mean",
             "eval_rewards/sevens/std", "eval_rewards/length_penalty/mean", "eval_rewards/length_penalty/std",
             "eval_completions/mean_length", "eval_completions/min_length", "eval_completions/max_length",
             "eval_completions/clipped_ratio", "eval_completions/mean_terminated_length",
             "eval_clip_ratio/low_mean", "eval_clip_ratio/high_mean", "eval_clip_ratio/region_mean", "eval_loss",
             "eval_prompts", "eval_runtime", "step", "final", "type", "time"}


def sevens(text):
    return sum(ch == "7" for ch in text) / max(len(text), 1)


def recompute(completions, generations, loss_type):
    """TRL's eval metrics of one batch holding every completion (in the logged order: group by group)."""
    functions = [[sevens(c["completion"]) for c in completions],
                 [-max(len(c["completion_ids"]) - 2, 0) / 2 for c in completions]]  # length_penalty:2
    rewards = [a + b for a, b in zip(*functions)]
    advantages, zero_std = [], 0
    for g in range(0, len(rewards), generations):
        group = rewards[g:g + generations]
        mean, std = statistics.mean(group), statistics.stdev(group)
        advantages += [(r - mean) / (std + 1e-4) for r in group]
        zero_std += generations * math.isclose(std, 0.0, abs_tol=1e-8)
    lengths = [len(c["completion_ids"]) for c in completions]  # an EOS ends the completion and is kept
    stopped = [n for n, c in zip(lengths, completions) if c["finish_reason"] == "stop"]
    weighted = sum(-a * n for a, n in zip(advantages, lengths))
    loss = {"dapo": weighted / max(sum(lengths), 1), "bnpo": weighted / max(sum(lengths), 1),
            "grpo": statistics.mean(-a for a in advantages), "dr_grpo": weighted / (len(lengths) * 4)}[loss_type]
    return {"eval_reward": statistics.mean(rewards), "eval_reward_std": statistics.stdev(rewards),
            "eval_rewards/sevens/mean": statistics.mean(functions[0]),
            "eval_rewards/sevens/std": statistics.stdev(functions[0]),
            "eval_rewards/length_penalty/mean": statistics.mean(functions[1]),
            "eval_rewards/length_penalty/std": statistics.stdev(functions[1]),
            "eval_frac_reward_zero_std": zero_std / len(rewards),
            "eval_completions/mean_length": statistics.mean(lengths), "eval_completions/min_length": min(lengths),
            "eval_completions/max_length": max(lengths),
            "eval_completions/clipped_ratio": 1 - len(stopped) / len(lengths),
            "eval_completions/mean_terminated_length": statistics.mean(stopped) if stopped else 0.0,
            "eval_loss": loss}, advantages


def write_validation(path, example, prompts):
    rows = [json.loads(line) for line in (example / "prompts.jsonl").read_text().splitlines()[-prompts:]]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "dr_grpo"])
def test_the_eval_records_are_trls_metrics_of_the_logged_completions(surogate_bin, example, tmp_path, loss_type):
    (tmp_path / "rewards.py").write_text(SEVENS)
    valid = write_validation(tmp_path / "valid.jsonl", example, 3)
    out = tmp_path / "out"
    config = grpo_config(tmp_path / "grpo.yaml", example, out, ["rewards.py:sevens", "length_penalty:2"],
                         extra=f"eval_steps: 2\nvalidation_datasets:\n  - path: {valid}\n    type: prompt\n")
    result = run_surogate(surogate_bin, "grpo", config, f"--grpo.loss_type={loss_type}", "--grpo.log_completions=true",
                          "--grpo.num_completions_to_print=16")
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout + result.stderr
    assert "eval @ step 0: reward " in output and "final eval reward" in output and "token accuracy" not in output
    evals = records(out, "eval")
    assert [(e["step"], e["final"]) for e in evals] == [(0, False), (2, False), (4, True)]
    shown = [c for c in records(out, "completion") if c.get("eval")]
    assert len(shown) == 3 * 12  # 3 prompts × 4 generations per evaluation, every one logged
    for index, record in enumerate(evals):
        assert set(record) == EVAL_KEYS, set(record) ^ EVAL_KEYS
        assert record["eval_prompts"] == 3
        completions = shown[12 * index:12 * index + 12]
        assert [c["prompt"] for c in completions[::4]] == [json.loads(line)["prompt"]
                                                           for line in valid.read_text().splitlines()]
        expected, advantages = recompute(completions, 4, loss_type)
        for key, value in expected.items():
            assert record[key] == pytest.approx(value, rel=1e-9, abs=1e-12), (key, record[key], value)
        assert [c["advantage"] for c in completions] == pytest.approx(advantages, rel=1e-9, abs=1e-12)
        assert record["eval_clip_ratio/region_mean"] == 0.0


def test_evaluation_leaves_the_training_steps_alone(surogate_bin, example, tmp_path):
    """The same steps with and without validation data: evaluation samples with its own seeds."""
    (tmp_path / "rewards.py").write_text(SEVENS)
    valid = write_validation(tmp_path / "valid.jsonl", example, 2)
    steps = {}
    for name, extra in (("plain", ""), ("eval", f"eval_steps: 1\nvalidation_datasets:\n  - path: {valid}\n    type: prompt\n")):
        out = tmp_path / name
        config = grpo_config(tmp_path / f"{name}.yaml", example, out, ["rewards.py:sevens"], extra=extra)
        result = run_surogate(surogate_bin, "grpo", config)
        assert result.returncode == 0, result.stdout + result.stderr
        steps[name] = [(s["loss"], s["reward"], s["grad_norm"]) for s in records(out, "step")]
        assert len(records(out, "eval")) == (5 if name == "eval" else 0)
    assert steps["eval"] == steps["plain"]


def test_validation_split_ratio_holds_out_prompts_only_when_set(surogate_bin, example, tmp_path):
    (tmp_path / "rewards.py").write_text(SEVENS)
    lines = (example / "prompts.jsonl").read_text().splitlines()[:40]
    (tmp_path / "forty.jsonl").write_text("\n".join(lines) + "\n")
    for extra, held_out in (("", 0), ("validation_split_ratio: 0.1\n", 4)):
        out = tmp_path / f"out{held_out}"
        config = grpo_config(tmp_path / "grpo.yaml", example, out, ["rewards.py:sevens"], extra=extra)
        config.write_text(config.read_text().replace(f"{example}/prompts.jsonl", str(tmp_path / "forty.jsonl")))
        result = run_surogate(surogate_bin, "grpo", config, "--max_steps=1")
        assert result.returncode == 0, result.stdout + result.stderr
        evals = records(out, "eval")
        if held_out:
            assert f"prompts: {40 - held_out} rows, {held_out} for evaluation" in result.stdout + result.stderr
            assert [e["eval_prompts"] for e in evals] == [held_out, held_out]  # step 0 and the end
        else:
            assert "prompts: 40 rows" in result.stdout + result.stderr and evals == []


def test_a_validation_dataset_of_another_type_is_refused(surogate_bin, example, tmp_path):
    (tmp_path / "rewards.py").write_text(SEVENS)
    (tmp_path / "valid.jsonl").write_text('{"text": "12+3=15"}\n')
    config = grpo_config(tmp_path / "grpo.yaml", example, tmp_path / "out", ["rewards.py:sevens"],
                         extra=f"validation_datasets:\n  - path: {tmp_path / 'valid.jsonl'}\n    type: text\n")
    result = run_surogate(surogate_bin, "grpo", config)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "option 'validation_datasets' must all be type: prompt for `surogate grpo`" in result.stderr, result.stderr

"""`surogate grpo` end to end on the CPU backend (docs/grpo.md), on the tiny random model of
examples/grpo/make_example.py (a character tokenizer of digits, "+", "=", " " and the specials):

- the step's loss is TRL's GRPOTrainer._compute_loss on the very completions and advantages the
  step logged (log_completions with every completion), summed over the step's micro-batches;
- a toy task learns: a Python reward for answering with the digit 7 rises from chance to > 0.6;
- a reward function that raises stops the run with exit 2 naming the function and the row;
- resume is exact: a run killed after step 3 and resumed from its step-2 checkpoint logs the same
  losses and rewards for steps 3 and 4 as an uninterrupted run (the sampling seeds are in the
  checkpoint).
"""
import json
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, run_surogate

SEVENS = '''
def sevens(prompts, completions, completion_ids, **kwargs):
    return [sum(ch == "7" for ch in c) / max(len(c), 1) for c in completions]
'''

RAISES = '''
def picky(prompts, completions, answer, **kwargs):
    if any(int(a) % 2 for a in answer):
        raise ValueError("this row is not welcome")
    return [0.0 for c in completions]
'''


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    folder = tmp_path_factory.mktemp("grpo_example")
    subprocess.run([sys.executable, str(REPO_ROOT / "examples/grpo/make_example.py"), str(folder)], check=True,
                   capture_output=True)
    return folder


def grpo_config(path, example, out, rewards, extra="", lora="false"):
    path.write_text(f"""model: {example}/model
output_dir: {out}
log_file: {out}/log.jsonl
lora: {lora}
use_chat_template: false
datasets:
  - path: {example}/prompts.jsonl
    type: prompt
grpo:
  num_generations: 4
  max_prompt_length: 8
  max_completion_length: 4
  reward_functions: {json.dumps(rewards)}
optimizer: adamw
learning_rate: 1e-2
weight_decay: 0.0
lr_scheduler_type: linear
warmup_steps: 0
per_device_train_batch_size: 8
gradient_accumulation_steps: 2
max_steps: 4
{extra}""")
    return path


def records(out, kind):
    return [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()
            if json.loads(line).get("type") == kind]


def completion_tensors(torch, completions):
    """TRL's completion_ids (right-padded with <pad> = 0), completion_mask (up to and including the
    first </s> = 2) and advantages of the logged completions."""
    ids = [c["completion_ids"] for c in completions]
    longest = max(len(i) for i in ids)
    padded = torch.tensor([i + [0] * (longest - len(i)) for i in ids])
    mask = torch.tensor([[1] * len(i) + [0] * (longest - len(i)) for i in ids])
    for row, i in enumerate(ids):
        if 2 in i:
            mask[row, i.index(2) + 1:] = 0
    return padded, mask, torch.tensor([c["advantage"] for c in completions], dtype=torch.float32)


def completion_logits(torch, model, completions, longest):
    """Each logged completion's logits under `model` (transformers), scored by the positions before
    its tokens, right-padded to `longest` tokens: [completions, longest, vocab]."""
    rows = []
    for c in completions:
        sequence = torch.tensor([c["prompt_ids"] + c["completion_ids"]])
        logits = model(sequence).logits[0, len(c["prompt_ids"]) - 1:-1]
        rows.append(torch.nn.functional.pad(logits, (0, 0, 0, longest - logits.shape[0])))
    return torch.stack(rows)


def test_the_steps_loss_is_trls_on_its_completions(surogate_bin, example, tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl")
    from test_grpo_trl import trl_compute_loss

    (tmp_path / "rewards.py").write_text(SEVENS)
    for loss_type in ("dapo", "grpo", "bnpo", "dr_grpo"):
        out = tmp_path / loss_type
        config = grpo_config(tmp_path / f"{loss_type}.yaml", example, out, ["rewards.py:sevens", "length_penalty:2"])
        result = run_surogate(surogate_bin, "grpo", config, f"--grpo.loss_type={loss_type}", "--max_steps=2",
                              "--grpo.log_completions=true", "--grpo.num_completions_to_print=16")
        assert result.returncode == 0, result.stdout + result.stderr
        steps, shown = records(out, "step"), records(out, "completion")
        assert len(steps) == 2 and len(shown) == 32, (len(steps), len(shown))
        for step, completions in zip(steps, (shown[:16], shown[16:])):
            padded, mask, advantages = completion_tensors(torch, completions)
            longest = padded.shape[1]
            options = {"temperature": 1.0, "beta": 0.0, "loss_type": loss_type, "epsilon": 0.2,
                       "epsilon_high": 0.2, "delta": None, "accumulation_steps": 2, "max_completion_length": 4}
            total = 0.0
            for micro in range(2):
                rows = slice(8 * micro, 8 * micro + 8)
                logits = torch.randn(8, longest, 17)  # the ratio is 1: the loss does not depend on them
                loss, metrics = trl_compute_loss(logits, padded[rows], mask[rows], advantages[rows], None, None, options)
                if loss_type == "dapo":
                    # The stand-in (steps_per_generation 1) divides by the micro-batch's tokens ×
                    # accumulation; a real run (steps_per_generation = gradient_accumulation_steps,
                    # num_items_in_batch = the generation batch's tokens) by the step's tokens.
                    loss = loss * mask[rows].sum().clamp(min=1) * 2 / mask.sum().clamp(min=1)
                total += loss.item()
                assert metrics["clip_ratio/region_mean"] == 0.0
            assert step["loss"] == pytest.approx(total, rel=1e-5, abs=1e-7), (loss_type, step["loss"], total)
            assert step["clip_ratio/region_mean"] == 0.0
            # A group's prompt is computed once: the others copy all of it but its last token.
            prompts = sum(len(c["prompt_ids"]) for c in completions)
            assert step["prompt_tokens"] + step["shared_prompt_tokens"] == prompts, (step, prompts)
            assert 0 < step["shared_prompt_tokens"] < prompts, step


@pytest.mark.parametrize("loss_type,temperature", [("grpo", 1.0), ("dapo", 0.7), ("bnpo", 1.3)])
def test_the_steps_gradient_is_trls(surogate_bin, example, tmp_path, loss_type, temperature):
    """The step's gradient norm equals that of TRL's loss on the same completions, the logits from
    transformers' Llama with the weights the step started from (one step of another run, saved)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("trl")
    from test_grpo_trl import trl_compute_loss

    (tmp_path / "rewards.py").write_text(SEVENS)
    start = tmp_path / "start"
    config = grpo_config(tmp_path / "start.yaml", example, start, ["rewards.py:sevens"])
    assert run_surogate(surogate_bin, "grpo", config, "--max_steps=1").returncode == 0
    out = tmp_path / "out"
    config = grpo_config(tmp_path / "grpo.yaml", example, out, ["rewards.py:sevens"]).read_text().replace(f"model: {example}/model", f"model: {start}")
    (tmp_path / "grpo.yaml").write_text(config)
    result = run_surogate(surogate_bin, "grpo", tmp_path / "grpo.yaml", "--max_steps=1", f"--grpo.loss_type={loss_type}",
                          f"--grpo.temperature={temperature}", "--grpo.log_completions=true",
                          "--grpo.num_completions_to_print=16")
    assert result.returncode == 0, result.stdout + result.stderr
    step, shown = records(out, "step")[0], records(out, "completion")
    assert len(shown) == 16
    model = transformers.AutoModelForCausalLM.from_pretrained(start, dtype=torch.float32)
    # transformers' Llama embeds with padding_idx = pad_token_id: no gradient reaches the pad
    # token's row from its uses as an input. A random model samples <pad> (id 0) inside
    # completions; Surogate's embedding (as torch's without padding_idx) gives that row its gradient.
    model.model.embed_tokens.padding_idx = None
    padded, mask, advantages = completion_tensors(torch, shown)
    longest = padded.shape[1]
    rows = []
    for c in shown:  # each completion's logits, scored by the positions before its tokens
        sequence = torch.tensor([c["prompt_ids"] + c["completion_ids"]])
        logits = model(sequence).logits[0, len(c["prompt_ids"]) - 1:-1]
        rows.append(torch.nn.functional.pad(logits, (0, 0, 0, longest - logits.shape[0])))
    logits = torch.stack(rows)
    options = {"temperature": temperature, "beta": 0.0, "loss_type": loss_type, "epsilon": 0.2, "epsilon_high": 0.2,
               "delta": None, "accumulation_steps": 2, "max_completion_length": 4}
    total = 0
    for micro in range(2):
        part = slice(8 * micro, 8 * micro + 8)
        loss, _ = trl_compute_loss(logits[part], padded[part], mask[part], advantages[part], None, None, options)
        if loss_type == "dapo":  # as in test_the_steps_loss_is_trls_on_its_completions
            loss = loss * mask[part].sum().clamp(min=1) * 2 / mask.sum().clamp(min=1)
        total = total + loss
    total.backward()
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters() if p.grad is not None)).item()
    assert norm > 0
    assert step["grad_norm"] == pytest.approx(norm, rel=1e-5), (step["grad_norm"], norm)
    assert step["loss"] == pytest.approx(total.item(), rel=1e-5, abs=1e-7)


@pytest.mark.parametrize("lora,temperature", [("false", "1.0"), ("true\nlora_rank: 4", "0.7")], ids=["full", "lora"])
def test_a_toy_task_learns(surogate_bin, example, tmp_path, lora, temperature):
    """Full fine-tuning, and LoRA on the random base sampling at 0.7 (the rollouts read the adapter
    live: the reward measured on them rises)."""
    (tmp_path / "rewards.py").write_text(SEVENS)
    out = tmp_path / "out"
    config = grpo_config(tmp_path / "grpo.yaml", example, out, ["rewards.py:sevens"], lora=lora)
    result = run_surogate(surogate_bin, "grpo", config, "--max_steps=30", f"--grpo.temperature={temperature}")
    assert result.returncode == 0, result.stdout + result.stderr
    rewards = [step["reward"] for step in records(out, "step")]
    assert len(rewards) == 30
    assert sum(rewards[:2]) / 2 < 0.2, rewards  # chance: one token in 17
    assert sum(rewards[-3:]) / 3 > 0.6, rewards
    report = next(out.glob("report-*.html")).read_text()
    assert "Surogate grpo run" in report and 'data-series="mean reward"' in report
    step = records(out, "step")[-1]
    for name in ("reward_std", "rewards/sevens/mean", "rewards/sevens/std", "frac_reward_zero_std",
                 "completions/mean_length", "completions/min_length", "completions/max_length",
                 "clip_ratio/region_mean", "generation_seconds", "training_seconds"):
        assert name in step, name


def test_rows_are_as_long_as_the_longest_prompt_not_the_bound(surogate_bin, example, tmp_path):
    """max_prompt_length far above the data's prompts: the rows are planned for the longest prompt
    (said once at start-up), and the run is the one with max_prompt_length set to that length: the
    same completions, the same losses."""
    (tmp_path / "rewards.py").write_text(SEVENS)

    def run(bound):
        out = tmp_path / f"out-{bound}"
        config = grpo_config(tmp_path / f"grpo-{bound}.yaml", example, out, ["rewards.py:sevens"])
        result = run_surogate(surogate_bin, "grpo", config, "--max_steps=2", "--grpo.log_completions=true",
                              "--grpo.num_completions_to_print=16", f"--grpo.max_prompt_length={bound}")
        assert result.returncode == 0, result.stdout + result.stderr
        return result.stdout + result.stderr, records(out, "step"), records(out, "completion")

    text, steps, shown = run(64)
    longest = max(len(c["prompt_ids"]) for c in shown)
    assert (f"the longest has {longest} tokens; rows of {longest} + grpo.max_completion_length 4 tokens "
            f"(grpo.max_prompt_length 64 bounds them)") in text, text
    exact_text, exact_steps, exact_shown = run(longest)
    assert "the longest has" not in exact_text, exact_text
    assert [c["completion_ids"] for c in shown] == [c["completion_ids"] for c in exact_shown]
    for step, exact in zip(steps, exact_steps):
        assert step["loss"] == pytest.approx(exact["loss"], rel=1e-5, abs=1e-7), (step, exact)


def test_a_raising_reward_function_stops_the_run_naming_it_and_the_row(surogate_bin, example, tmp_path):
    (tmp_path / "rewards.py").write_text(RAISES)
    out = tmp_path / "out"
    config = grpo_config(tmp_path / "grpo.yaml", example, out, ["rewards.py:picky"])
    result = run_surogate(surogate_bin, "grpo", config)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "rewards.py:picky" in result.stderr and "raised on row " in result.stderr, result.stderr
    assert "this row is not welcome" in result.stderr and "prompts.jsonl:" in result.stderr, result.stderr


def test_resume_is_exact(surogate_bin, example, tmp_path):
    (tmp_path / "rewards.py").write_text(SEVENS)
    whole = tmp_path / "whole"
    config = grpo_config(tmp_path / "whole.yaml", example, whole, ["rewards.py:sevens"], "save_steps: 2\n")
    assert run_surogate(surogate_bin, "grpo", config).returncode == 0
    expected = {s["step"]: (s["loss"], s["reward"]) for s in records(whole, "step")}

    cut = tmp_path / "cut"
    config = grpo_config(tmp_path / "cut.yaml", example, cut, ["rewards.py:sevens"], "save_steps: 2\n")
    import os
    env = dict(os.environ, SUROGATE_TEST_FAULTS="crash_after_step=3")
    killed = run_surogate(surogate_bin, "grpo", config, env=env)
    assert killed.returncode != 0
    resumed = run_surogate(surogate_bin, "grpo", config, "--resume_from_checkpoint=true")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    got = {s["step"]: (s["loss"], s["reward"]) for s in records(cut, "step")}
    assert sorted(got) == [1, 2, 3, 4]
    for step in (3, 4):
        assert got[step] == expected[step], (step, got[step], expected[step])

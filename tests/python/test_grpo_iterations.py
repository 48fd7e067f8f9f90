"""`surogate grpo` with the importance ratio and the KL term (num_iterations 2, beta 0.04; docs/grpo.md
"The step", src/train/objective/grpo_iterations.h) on the CPU backend, against TRL's formulas.

LoRA on the tiny random model of examples/grpo/make_example.py (after one full step, saved: a folder
with weights) (lora_dropout 0: TRL's old
log-probabilities under dropout are not reproducible). Step 1 samples 16 completions (all logged);
step 2 trains on the same ones again. Their loss, `kl`, `clip_ratio/*` and gradient norm equal
TRL's GRPOTrainer._compute_loss on those completions with
- logp: the logits of transformers' Llama + PEFT with the adapter of the run's checkpoint-1 (the
  weights step 2 starts from),
- old_logp: the policy at generation time, the adapter's B still 0: the base's logits,
- ref_logp: the base (PEFT's adapter disabled): the same base logits,
at rel 1e-5. A run killed after step 1 and resumed trains step 2 exactly as the uninterrupted run
(the buffered generation is checkpoint state). Full fine-tuning with beta > 0: test_grpo_full_reference.py.
"""
import os
import shutil

import pytest

from conftest import run_surogate
from test_grpo_cli import SEVENS, completion_logits, completion_tensors, example, grpo_config, records  # noqa: F401

LORA = "true\nlora_rank: 4\nlora_alpha: 8\nlora_dropout: 0.0"
ITERATIONS = ("--grpo.num_iterations=2", "--grpo.beta=0.04", "--learning_rate=5e-2")


@pytest.fixture(scope="module")
def base(surogate_bin, example, tmp_path_factory):
    """A model folder with weights (the example's model is random, made at load): one full step's output."""
    folder = tmp_path_factory.mktemp("grpo_base")
    (folder / "rewards.py").write_text(SEVENS)
    config = grpo_config(folder / "base.yaml", example, folder / "model", ["rewards.py:sevens"])
    assert run_surogate(surogate_bin, "grpo", config, "--max_steps=1").returncode == 0
    return folder / "model"


def run_iterations(surogate_bin, example, base, folder, *extra, env=None):
    (folder.parent / "rewards.py").write_text(SEVENS)
    config = grpo_config(folder.parent / f"{folder.name}.yaml", example, folder, ["rewards.py:sevens"], lora=LORA)
    config.write_text(config.read_text().replace(f"model: {example}/model", f"model: {base}"))
    return run_surogate(surogate_bin, "grpo", config, *ITERATIONS, "--grpo.log_completions=true",
                        "--grpo.num_completions_to_print=16", *extra, env=env)


def trl_step(logits, padded, mask, advantages, old, ref, options):
    """TRL's loss (summed), kl and clip_ratio/* (means) of a step of two micro-batches of 8
    completions (test_grpo_trl.py's trl_compute_loss)."""
    from test_grpo_trl import trl_compute_loss
    total, kl, clipped = 0, 0.0, {"low_mean": 0.0, "high_mean": 0.0, "region_mean": 0.0}
    for micro in range(2):
        part = slice(8 * micro, 8 * micro + 8)
        loss, metrics = trl_compute_loss(logits[part], padded[part], mask[part], advantages[part],
                                         None if old is None else old[part], ref[part], options)
        if options["loss_type"] == "dapo":  # as in test_grpo_cli.py: TRL's num_items_in_batch is the step's tokens
            loss = loss * mask[part].sum().clamp(min=1) * 2 / mask.sum().clamp(min=1)
        total = total + loss
        kl += metrics["kl"] / 2
        for name in clipped:
            clipped[name] += metrics[f"clip_ratio/{name}"] / 2
    return total, kl, clipped


@pytest.mark.parametrize("loss_type", ["grpo", "dapo"])
def test_the_second_iteration_and_its_kl_are_trls(surogate_bin, example, base, tmp_path, loss_type):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    pytest.importorskip("trl")

    out = tmp_path / "out"
    result = run_iterations(surogate_bin, example, base, out, f"--grpo.loss_type={loss_type}", "--max_steps=2",
                            "--save_steps=1")
    assert result.returncode == 0, result.stdout + result.stderr
    steps, shown = records(out, "step"), records(out, "completion")
    assert len(steps) == 2 and len(shown) == 16, (len(steps), len(shown))  # step 2 generates nothing
    assert steps[1]["reward"] == steps[0]["reward"] and steps[1]["generation_seconds"] == 0.0

    padded, mask, advantages = completion_tensors(torch, shown)
    longest = padded.shape[1]

    def logits_of(model):
        return completion_logits(torch, model, shown, longest)

    options = {"temperature": 1.0, "beta": 0.04, "loss_type": loss_type, "epsilon": 0.2, "epsilon_high": 0.2,
               "delta": None, "accumulation_steps": 2, "max_completion_length": 4}
    from trl.trainer.utils import selective_log_softmax
    model = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    with torch.no_grad():
        base_logits = logits_of(model)
        base_logps = selective_log_softmax(base_logits, padded)  # old (B = 0 at generation) and reference
    # The adapter step 2 starts from: checkpoint-1's matrices (engine names) in the run's PEFT folder.
    from safetensors.torch import load_file
    policy = peft.PeftModel.from_pretrained(model, out, is_trainable=True)
    saved = load_file(out / "checkpoint-1" / "model.safetensors")
    adapter = {"base_model.model.model." + key.replace(".attn.", ".self_attn."): value for key, value in saved.items()}
    assert len(adapter) == 28 and all(".lora_" in key for key in adapter)
    loaded = peft.set_peft_model_state_dict(policy, adapter)
    assert not loaded.unexpected_keys, loaded.unexpected_keys
    logits = logits_of(policy)
    for step, old in ((steps[0], None), (steps[1], base_logps)):
        policy.zero_grad()
        current = logits if old is not None else base_logits  # step 1: the policy is the base
        total, kl, clipped = trl_step(current, padded, mask, advantages, old, base_logps, options)
        assert step["loss"] == pytest.approx(total.item(), rel=1e-5, abs=1e-7), (step["loss"], total.item())
        assert step["kl"] == pytest.approx(kl, rel=1e-5, abs=1e-9), (step["kl"], kl)
        for name, value in clipped.items():
            assert step[f"clip_ratio/{name}"] == pytest.approx(value, rel=1e-5, abs=1e-9), name
    assert steps[1]["kl"] > 1e-4  # the adapter moved: a KL worth comparing
    total.backward()
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in policy.parameters() if p.grad is not None)).item()
    assert norm > 0
    assert steps[1]["grad_norm"] == pytest.approx(norm, rel=1e-5), (steps[1]["grad_norm"], norm)


def test_resume_between_two_iterations_is_exact(surogate_bin, example, base, tmp_path):
    whole = tmp_path / "whole"
    assert run_iterations(surogate_bin, example, base, whole, "--save_steps=1", "--max_steps=3").returncode == 0
    expected = {s["step"]: (s["loss"], s["kl"], s["grad_norm"]) for s in records(whole, "step")}
    cut = tmp_path / "cut"
    env = dict(os.environ, SUROGATE_TEST_FAULTS="crash_after_step=2")
    assert run_iterations(surogate_bin, example, base, cut, "--save_steps=1", "--max_steps=3", env=env).returncode != 0
    (cut / "log.jsonl").unlink()  # only the resumed run's records
    for checkpoint in sorted(cut.glob("checkpoint-[23]*")):  # resume from step 1: between the two iterations
        shutil.rmtree(checkpoint)
    resumed = run_iterations(surogate_bin, example, base, cut, "--save_steps=1", "--max_steps=3",
                             "--resume_from_checkpoint=true")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    got = {s["step"]: (s["loss"], s["kl"], s["grad_norm"]) for s in records(cut, "step")}
    assert sorted(got) == [2, 3]
    for step in (2, 3):
        assert got[step] == expected[step], (step, got[step], expected[step])


@pytest.mark.parametrize("lora,extra", [("true\nlora_rank: 4", ("--grpo.beta=0.04", "--grpo.temperature=0.7")),
                                        ("false", ())],
                         ids=["lora-dropout-kl", "full"])
def test_a_toy_task_learns_with_two_iterations(surogate_bin, example, tmp_path, lora, extra):
    """LoRA with its default dropout (0.05: the step's own masks in the log-prob pass) and the KL
    term, and full fine-tuning (the trainable head's gradient through the per-token graph)."""
    (tmp_path / "rewards.py").write_text(SEVENS)
    out = tmp_path / "out"
    config = grpo_config(tmp_path / "grpo.yaml", example, out, ["rewards.py:sevens"], lora=lora)
    result = run_surogate(surogate_bin, "grpo", config, "--max_steps=50", "--grpo.num_iterations=2", *extra)
    assert result.returncode == 0, result.stdout + result.stderr
    steps = records(out, "step")
    assert len(steps) == 50
    assert all(steps[i]["reward"] == steps[i + 1]["reward"] for i in range(0, 50, 2))  # each generation twice
    assert ("kl" in steps[-1]) == bool(extra)
    assert any(step["clip_ratio/region_mean"] > 0 for step in steps[1::2])  # the second iterations clip
    rewards = [step["reward"] for step in steps]
    assert sum(rewards[:2]) / 2 < 0.2, rewards  # chance: one token in 17
    assert sum(rewards[-4:]) / 4 > 0.6, rewards

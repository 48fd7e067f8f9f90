"""`surogate grpo` with the KL term under full fine-tuning (beta 0.04, lora: false; docs/grpo.md "The
step"): the reference is a frozen copy of the starting weights (TRL's ref_model), loaded again from
the model folder on each rank (train/objective/grpo_objective.cpp), never the weights being trained.

On the CPU backend, the model folder with weights of test_grpo_iterations.py (one full step's
output of the example's tiny random Llama):
- with num_iterations 2, step 2 trains the weights step 1 wrote on step 1's completions again. Its
  loss, `kl`, `clip_ratio/*` and gradient norm equal TRL's GRPOTrainer._compute_loss with logp from
  transformers' Llama holding checkpoint-1's weights, and old_logp = ref_logp from the starting
  folder, at rel 1e-5 (a reference that read the live weights would give kl 0 there);
- a run killed after step 2 and resumed from checkpoint-1 logs steps 2 and 3 (new completions
  each, so each scored by the reference loaded after the resume) exactly as the uninterrupted run:
  the reference after a resume is the starting model, not the checkpoint's weights;
- a model initialised from scratch (no safetensors in its folder) is refused with exit 2 naming
  grpo.beta: there are no starting weights to read again;
- `--dry-run` counts the copy (every parameter, bf16 on a GPU) and its KV cache, and a
  GPU too small for it names `grpo.beta: 0` among the options that make it fit.
"""
import os
import re
import shutil

import pytest

from conftest import run_surogate
from test_grpo_cli import SEVENS, completion_logits, completion_tensors, example, grpo_config, records  # noqa: F401
from test_grpo_iterations import base, trl_step  # noqa: F401
from test_grpo_memory import categories, write_grpo_job
from test_memory_prediction import QWEN3_1_7B, gib

KL = ("--grpo.beta=0.04", "--learning_rate=5e-2")


def run_full(surogate_bin, example, base, folder, *extra, env=None):
    (folder.parent / "rewards.py").write_text(SEVENS)
    config = grpo_config(folder.parent / f"{folder.name}.yaml", example, folder, ["rewards.py:sevens"])
    config.write_text(config.read_text().replace(f"model: {example}/model", f"model: {base}"))
    return run_surogate(surogate_bin, "grpo", config, *KL, *extra, env=env)


def qwen3_parameters(c, vocab):
    hidden, heads, kv, dim = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    attention = hidden * heads * dim * 2 + hidden * kv * dim * 2 + 2 * dim  # q, o, k, v, q_norm, k_norm
    layer = attention + 3 * hidden * c["intermediate_size"] + 2 * hidden  # the MLP, two norms
    return vocab * hidden + c["num_hidden_layers"] * layer + hidden  # tied embeddings, the final norm


def hf_name(engine):
    """The Llama engine name of a checkpoint tensor as transformers names it (models/model_spec.cpp)."""
    if engine == "lm_head.weight":
        return engine
    name = {"embed.weight": "embed_tokens.weight", "final_norm.weight": "norm.weight"}.get(engine, engine)
    name = name.replace(".ln1.", ".input_layernorm.").replace(".ln2.", ".post_attention_layernorm.")
    return "model." + name.replace(".attn.", ".self_attn.")


@pytest.mark.parametrize("loss_type", ["grpo", "dapo"])
def test_the_kl_to_the_starting_weights_is_trls(surogate_bin, example, base, tmp_path, loss_type):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("trl")
    from safetensors.torch import load_file
    from trl.trainer.utils import selective_log_softmax

    out = tmp_path / "out"
    result = run_full(surogate_bin, example, base, out, "--grpo.num_iterations=2", f"--grpo.loss_type={loss_type}",
                      "--max_steps=2", "--save_steps=1", "--grpo.log_completions=true",
                      "--grpo.num_completions_to_print=16")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the KL reference is a frozen copy of the starting weights" in result.stdout, result.stdout
    steps, shown = records(out, "step"), records(out, "completion")
    assert len(steps) == 2 and len(shown) == 16, (len(steps), len(shown))  # step 2 generates nothing
    padded, mask, advantages = completion_tensors(torch, shown)
    longest = padded.shape[1]

    def logits_of(model):
        return completion_logits(torch, model, shown, longest)

    starting = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    with torch.no_grad():
        base_logps = selective_log_softmax(logits_of(starting), padded)  # old (step 1's policy) and reference
    policy = transformers.AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    saved = {hf_name(key): value for key, value in load_file(out / "checkpoint-1" / "model.safetensors").items()}
    loaded = policy.load_state_dict(saved, strict=False)  # every weight trains; the LM head is the tied embedding
    assert not loaded.unexpected_keys and set(loaded.missing_keys) <= {"lm_head.weight"}, loaded
    assert policy.lm_head.weight.data_ptr() == policy.model.embed_tokens.weight.data_ptr()
    policy.model.embed_tokens.padding_idx = None  # the pad row's gradient too, as test_grpo_cli.py says why
    logits = logits_of(policy)
    options = {"temperature": 1.0, "beta": 0.04, "loss_type": loss_type, "epsilon": 0.2, "epsilon_high": 0.2,
               "delta": None, "accumulation_steps": 2, "max_completion_length": 4}
    total, kl, clipped = trl_step(logits, padded, mask, advantages, base_logps, base_logps, options)
    step = steps[1]
    assert kl > 1e-4  # the weights moved from the starting ones: a KL worth comparing
    assert step["loss"] == pytest.approx(total.item(), rel=1e-5, abs=1e-7), (step["loss"], total.item())
    assert step["kl"] == pytest.approx(kl, rel=1e-5, abs=1e-9), (step["kl"], kl)
    for name, value in clipped.items():
        assert step[f"clip_ratio/{name}"] == pytest.approx(value, rel=1e-5, abs=1e-9), name
    assert steps[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # step 1: the policy is the starting model
    total.backward()
    norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in policy.parameters() if p.grad is not None)).item()
    assert step["grad_norm"] == pytest.approx(norm, rel=1e-5), (step["grad_norm"], norm)


def test_resume_keeps_the_starting_weights_as_the_reference(surogate_bin, example, base, tmp_path):
    whole = tmp_path / "whole"
    assert run_full(surogate_bin, example, base, whole, "--save_steps=1", "--max_steps=3").returncode == 0
    expected = {s["step"]: (s["loss"], s["kl"], s["grad_norm"], s["reward"]) for s in records(whole, "step")}
    assert all(expected[step][1] > 0 for step in (2, 3)), expected
    cut = tmp_path / "cut"
    env = dict(os.environ, SUROGATE_TEST_FAULTS="crash_after_step=2")
    assert run_full(surogate_bin, example, base, cut, "--save_steps=1", "--max_steps=3", env=env).returncode != 0
    (cut / "log.jsonl").unlink()  # only the resumed run's records
    for checkpoint in sorted(cut.glob("checkpoint-[23]*")):  # resume from step 1
        shutil.rmtree(checkpoint)
    resumed = run_full(surogate_bin, example, base, cut, "--save_steps=1", "--max_steps=3",
                       "--resume_from_checkpoint=true")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    got = {s["step"]: (s["loss"], s["kl"], s["grad_norm"], s["reward"]) for s in records(cut, "step")}
    assert sorted(got) == [2, 3]
    for step in (2, 3):
        assert got[step] == expected[step], (step, got[step], expected[step])


def test_the_dry_run_counts_the_frozen_copy(surogate_bin, tmp_path):
    job = write_grpo_job(tmp_path, 256, lora=False)
    plain = run_surogate(surogate_bin, "grpo", job, "--dry-run", "--gpu-memory", "141GiB")
    kl = run_surogate(surogate_bin, "grpo", job, "--dry-run", "--gpu-memory", "141GiB", "--grpo.beta=0.04")
    assert plain.returncode == 0 and kl.returncode == 0, plain.stderr + kl.stderr
    assert "KL reference" not in plain.stdout
    out = kl.stdout
    # Qwen3-1.7B's parameters (tied embeddings: 1,720,574,976) in bf16.
    weights = gib(out, "KL reference: starting weights (grpo.beta)")
    assert abs(weights - 2 * qwen3_parameters(QWEN3_1_7B, 151936) / 2**30) < 0.01, out
    # Its own KV cache: the rollout model's shape.
    assert gib(out, "KL reference: KV cache and activations") >= gib(out, "rollout KV cache (16 × 768 tokens)"), out
    # Both in the peak (each category shown to 0.01 GiB or 0.1 MiB).
    assert abs(sum(categories(out).values()) - gib(out, "predicted peak")) < 0.05, out
    # A GPU that holds the run without the copy (1 GiB kept free), not with it at any recompute
    # (one completion per micro-batch: little to recompute): beta is the lever named.
    small_job = write_grpo_job(tmp_path, 256, batch=1, lora=False)
    plain = run_surogate(surogate_bin, "grpo", small_job, "--dry-run", "--gpu-memory", "141GiB")
    tight = f"{gib(plain.stdout, 'predicted peak') + 1.3:.2f}GiB"
    fits = run_surogate(surogate_bin, "grpo", small_job, "--dry-run", "--gpu-memory", tight)
    assert re.search(r"predicted peak .*: fits", fits.stdout), fits.stdout
    small = run_surogate(surogate_bin, "grpo", small_job, "--dry-run", "--gpu-memory", tight, "--grpo.beta=0.04")
    assert small.returncode == 0, small.stderr
    assert "does NOT fit" in small.stdout, small.stdout
    assert re.search(r"#   - grpo\.beta: 0 ", small.stdout), small.stdout


def test_a_model_initialised_from_scratch_has_no_starting_weights_to_read(surogate_bin, example, tmp_path):
    (tmp_path / "rewards.py").write_text(SEVENS)
    config = grpo_config(tmp_path / "grpo.yaml", example, tmp_path / "out", ["rewards.py:sevens"])
    result = run_surogate(surogate_bin, "grpo", config, "--grpo.beta=0.04", "--max_steps=1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "option 'grpo.beta' is 0.04: under full fine-tuning the KL reference is the starting model" in result.stderr
    assert "has no safetensors" in result.stderr, result.stderr

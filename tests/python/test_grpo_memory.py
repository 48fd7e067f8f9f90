"""`surogate grpo --dry-run` plans the rollout model with training (train/objective/grpo_rollout_model.h):
the KV cache of the completions generated at once — per_device_train_batch_size ×
gradient_accumulation_steps, at most 64 or grpo.generation_batch_size — each of max_prompt_length + max_completion_length
tokens, K and V for every layer, KV head and head dimension in the graph's dtype, and the decode
plans' activations, both in the predicted peak; a run whose KV cache does not fit is told which
options shrink it. A Qwen3-1.7B shape (config only: a dry run loads no weights), the CUDA backend's
plan for a GPU of a given size (--gpu-memory), compiled on the CPU."""
import json
import re

from conftest import run_surogate
from test_memory_prediction import QWEN3_1_7B, gib
from tiny_model import write_model


def write_grpo_job(tmp_path, max_completion_length, batch=4, accumulation=4, lora=True, extra=""):
    model = write_model(tmp_path / "model", vocab_size=151936)
    config = json.loads((model / "config.json").read_text())
    config.update(QWEN3_1_7B)
    (model / "config.json").write_text(json.dumps(config))
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps({"prompt": "abc def ", "answer": "a"}) + "\n" for _ in range(8)))
    job = tmp_path / f"grpo-{max_completion_length}.yaml"
    job.write_text(f"""model: {model}
output_dir: {tmp_path / 'out'}
lora: {'true' if lora else 'false'}
use_chat_template: false
per_device_train_batch_size: {batch}
gradient_accumulation_steps: {accumulation}
datasets:
  - path: {data}
    type: prompt
grpo:
  num_generations: 4
  max_prompt_length: 512
  max_completion_length: {max_completion_length}
  reward_functions: [exact_match]
{extra}""")
    return job


def kv_cache_bytes(slots, tokens, dtype_bytes=2):
    # K and V × layers × slots × tokens × KV heads × head_dim (Qwen3-1.7B: 28, 8, 128), bf16 on a GPU.
    return 2 * QWEN3_1_7B["num_hidden_layers"] * slots * tokens * QWEN3_1_7B["num_key_value_heads"] * \
        QWEN3_1_7B["head_dim"] * dtype_bytes


def categories(output):
    """Every '#   name  size' line of the prediction above the peak, in GiB."""
    head = output.split("predicted peak")[0]
    found = {}
    for name, value, unit in re.findall(r"#   (.+?)\s+([0-9.]+) (GiB|MiB)\n", head):
        found[name.strip()] = float(value) / (1024 if unit == "MiB" else 1)
    return found


def test_the_rollout_kv_cache_is_the_formula_and_in_the_peak(surogate_bin, tmp_path):
    result = run_surogate(surogate_bin, "grpo", write_grpo_job(tmp_path, 256), "--dry-run", "--gpu-memory", "80GiB")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # 4 × 4 = 16 completions at once, 512 + 256 = 768 tokens each: 1.3125 GiB.
    cache = gib(out, "rollout KV cache (16 × 768 tokens)")
    assert abs(cache - kv_cache_bytes(16, 768) / 2**30) < 0.005, out
    assert 0 < gib(out, "rollout decode and prefill activations") < cache, out
    assert "rollouts: a KV cache of 16 completions at once" in out
    assert "grpo.max_prompt_length 512 + grpo.max_completion_length 256" in out
    assert "28 layers × 8 KV heads × 128 × bf16" in out
    # The categories sum to the peak (each shown to 0.01 GiB or 0.1 MiB).
    peak = gib(out, "predicted peak")
    assert abs(sum(categories(out).values()) - peak) < 0.05, out
    assert re.search(r"predicted peak\s+[0-9.]+ GiB of 80.0+ GiB offered .*: fits", out), out
    assert "the rollout KV cache shrinks" not in out  # only when it does not fit
    assert "evaluation" not in out.split("predicted peak")[0]  # surogate grpo splits no prompts off: no evaluator


def test_the_slots_stop_at_64_completions(surogate_bin, tmp_path):
    out = run_surogate(surogate_bin, "grpo", write_grpo_job(tmp_path, 128, batch=16, accumulation=8), "--dry-run",
                       "--gpu-memory", "80GiB").stdout
    cache = gib(out, "rollout KV cache (64 × 640 tokens)")
    assert abs(cache - kv_cache_bytes(64, 640) / 2**30) < 0.005, out
    # 128 completions at once fit 80 GiB beside the same training plan: said, with that peak.
    hint = re.search(r"# grpo.generation_batch_size: 128 also fits \(the step's 128 completions in 1 wave of "
                     r"rollouts instead of 2; predicted peak ([0-9.]+) GiB\)", out)
    assert hint, out
    set_128 = run_surogate(surogate_bin, "grpo", write_grpo_job(tmp_path, 128, batch=16, accumulation=8,
                                                               extra="  generation_batch_size: 128\n"),
                           "--dry-run", "--gpu-memory", "80GiB").stdout
    assert abs(float(hint[1]) - gib(set_128, "predicted peak")) < 0.01, set_128
    assert "also fits" not in set_128  # set: no hint
    # Where it would not fit (the 64-slot run barely does), no hint.
    tight = run_surogate(surogate_bin, "grpo", write_grpo_job(tmp_path, 128, batch=16, accumulation=8), "--dry-run",
                         "--gpu-memory", f"{gib(out, 'predicted peak') + 1.2:.2f}GiB").stdout
    assert ": fits" in tight and "also fits" not in tight, tight


def test_generation_batch_size_sets_the_slots(surogate_bin, tmp_path):
    # 16 × 8 = 128 completions a step: all at once with generation_batch_size 128 (one wave), 32
    # with 32 (four waves); the cache and the line follow.
    for size in (128, 32):
        job = write_grpo_job(tmp_path, 128, batch=16, accumulation=8, extra=f"  generation_batch_size: {size}\n")
        result = run_surogate(surogate_bin, "grpo", job, "--dry-run", "--gpu-memory", "80GiB")
        assert result.returncode == 0, result.stderr
        out = result.stdout
        cache = gib(out, f"rollout KV cache ({size} × 640 tokens)")
        assert abs(cache - kv_cache_bytes(size, 640) / 2**30) < 0.005, out
        assert f"a KV cache of {size} completions at once" in out
        assert f"at most {size}, grpo.generation_batch_size)" in out
    job = write_grpo_job(tmp_path, 128, extra="  generation_batch_size: 0\n")
    refused = run_surogate(surogate_bin, "grpo", job, "--dry-run", "--gpu-memory", "80GiB")
    assert refused.returncode == 2
    assert "grpo.generation_batch_size" in refused.stderr and "must be at least 1" in refused.stderr


def test_a_kv_cache_that_does_not_fit_names_its_levers(surogate_bin, tmp_path):
    # 16 completions of 512 + 16384 tokens: a 28.9 GiB cache, more than the 24 GiB GPU.
    long = run_surogate(surogate_bin, "grpo", write_grpo_job(tmp_path, 16384), "--dry-run", "--gpu-memory", "24GiB")
    assert long.returncode == 0, long.stderr
    out = long.stdout
    assert abs(gib(out, "rollout KV cache (16 × 16896 tokens)") - kv_cache_bytes(16, 16896) / 2**30) < 0.005, out
    assert "does NOT fit" in out
    assert "the rollout KV cache shrinks with grpo.max_completion_length" in out
    assert "per_device_train_batch_size" in out.split("the rollout KV cache shrinks")[1].splitlines()[0]
    # The same run with 256-token completions fits, and is not told.
    short = run_surogate(surogate_bin, "grpo", write_grpo_job(tmp_path, 256), "--dry-run", "--gpu-memory", "24GiB")
    assert short.returncode == 0, short.stderr
    assert re.search(r"predicted peak .*: fits", short.stdout), short.stdout
    assert "the rollout KV cache shrinks" not in short.stdout


def test_other_dry_runs_have_no_rollout(surogate_bin, tmp_path):
    from test_memory_prediction import write_job
    out = run_surogate(surogate_bin, "pt", write_job(tmp_path, lora=True), "--dry-run", "--gpu-memory", "80GiB").stdout
    assert "rollout" not in out


def test_a_quantized_base_keeps_the_cache_and_shrinks_the_weights(surogate_bin, tmp_path):
    job = write_grpo_job(tmp_path, 256)
    bf16 = run_surogate(surogate_bin, "grpo", job, "--dry-run", "--gpu-memory", "80GiB").stdout
    qlora_job = tmp_path / "qlora.yaml"
    qlora_job.write_text(job.read_text() + "qlora_bnb: true\n")
    qlora = run_surogate(surogate_bin, "grpo", qlora_job, "--dry-run", "--gpu-memory", "80GiB")
    assert qlora.returncode == 0, qlora.stderr
    name = "rollout KV cache (16 × 768 tokens)"
    assert gib(qlora.stdout, name) == gib(bf16, name)
    assert gib(qlora.stdout, "weights") < 0.5 * gib(bf16, "weights")

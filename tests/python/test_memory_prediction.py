"""`surogate sft|pt --dry-run` predicts the memory of the run before anything is loaded
(train/memory_prediction.h): by category, the predicted peak against what the device offers
(--gpu-memory for a GPU of that size), and when it does not fit, the options that would make it
fit, each checked on the plan itself. Runs on a machine without a GPU (the prediction is the
CUDA backend's plan, compiled on the CPU)."""
import json
import re

import pytest

from conftest import gpu_visible, run_surogate
from tiny_model import write_model

# A Qwen3-1.7B-shaped model (config only: a dry run loads no weights) with the tiny character
# tokenizer, so no hub and no large files are needed.
QWEN3_1_7B = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 2048,
    "intermediate_size": 6144, "num_hidden_layers": 28, "num_attention_heads": 16,
    "num_key_value_heads": 8, "head_dim": 128, "tie_word_embeddings": True, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "max_position_embeddings": 40960, "hidden_act": "silu",
    "attention_bias": False, "torch_dtype": "bfloat16",
}


def write_job(tmp_path, lora, optimizer="adamw"):
    model = write_model(tmp_path / "model", vocab_size=151936)
    config = json.loads((model / "config.json").read_text())
    config.update(QWEN3_1_7B)
    (model / "config.json").write_text(json.dumps(config))
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"text": "abc def ghi " * 20}) + "\n" for _ in range(8)))
    job = tmp_path / "job.yaml"
    job.write_text(f"model: {model}\noutput_dir: {tmp_path / 'out'}\nsequence_len: 2048\n"
                   f"lora: {'true' if lora else 'false'}\noptimizer: {optimizer}\n"
                   f"datasets:\n  - path: {data}\n    type: text\n")
    return job


def gib(output, category):
    match = re.search(rf"#   {re.escape(category)}\s+([0-9.]+) (GiB|MiB)", output)
    assert match, f"no '{category}' line in:\n{output}"
    return float(match.group(1)) / (1024 if match.group(2) == "MiB" else 1)


def test_full_fine_tuning_that_does_not_fit_names_the_options_that_would(surogate_bin, tmp_path):
    result = run_surogate(surogate_bin, "pt", write_job(tmp_path, lora=False), "--dry-run", "--gpu-memory", "24GiB")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "predicted memory on a GPU of 24.00 GiB" in out
    assert "does NOT fit" in out
    # adamw: two fp32 moments per trainable weight, fp32 masters: one; bf16 weights: half of that.
    assert abs(gib(out, "optimizer state") - 2 * gib(out, "master weights (trainable)")) < 0.02
    assert abs(gib(out, "master weights (trainable)") - 2 * gib(out, "weights")) < 0.02
    # The recompute choice already recomputes all it may before suggesting anything else.
    assert "everything the recompute_* options enable" in out
    assert "- lora: true" in out
    # Each other lever alone still leaves ~30 GiB (checked on the plan, not listed blindly).
    assert "- master_dtype: bf16" not in out and "- optimizer: adamw_8bit" not in out


def test_lora_on_a_large_gpu_fits_without_recompute(surogate_bin, tmp_path):
    result = run_surogate(surogate_bin, "pt", write_job(tmp_path, lora=True), "--dry-run", "--gpu-memory", "80GiB")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert re.search(r"predicted peak\s+[0-9.]+ GiB of 80.0+ GiB offered .*: fits", out), out
    assert "recompute: none needed" in out
    # LoRA: the trainable state is the adapters' (tens of MiB), the frozen weights are bf16.
    assert gib(out, "master weights (trainable)") < 0.1
    assert gib(out, "weights") > 3.0
    total = sum(gib(out, c) for c in ["weights", "master weights (trainable)", "optimizer state",
                                      "gradients (one micro-batch)", "gradient accumulators",
                                      "activations (planned arena)", "batch", "LM-head workspace",
                                      "evaluation (outside the training's memory)", "CUDA context and libraries"])
    assert abs(total - gib(out, "predicted peak")) < 0.05


def test_a_smaller_gpu_makes_the_plan_recompute(surogate_bin, tmp_path):
    job = write_job(tmp_path, lora=True)
    roomy = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "80GiB").stdout
    # (13.5 GiB fits everything: the evaluator runs in the training's memory.)
    tight = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "13GiB").stdout
    assert "recompute: none needed" not in tight, tight
    assert gib(tight, "activations (planned arena)") < gib(roomy, "activations (planned arena)")
    assert ": fits" in tight


def test_gpu_memory_needs_dry_run_and_a_size(surogate_bin, tmp_path):
    job = write_job(tmp_path, lora=True)
    result = run_surogate(surogate_bin, "pt", job, "--gpu-memory", "80GiB")
    assert result.returncode == 2 and "needs --dry-run" in result.stderr
    result = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "lots")
    assert result.returncode == 2 and "--gpu-memory 'lots'" in result.stderr


def test_a_run_that_cannot_fit_stops_before_loading_anything(surogate_bin, tmp_path):
    # Full fine-tuning of a Qwen3-32B shape needs ~570 GiB: more than any host or GPU this runs on.
    job = write_job(tmp_path, lora=False)
    model = tmp_path / "model" / "config.json"
    config = json.loads(model.read_text())
    config.update({"hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64,
                   "num_attention_heads": 64, "num_key_value_heads": 8, "tie_word_embeddings": False})
    model.write_text(json.dumps(config))
    result = run_surogate(surogate_bin, "pt", job)
    assert result.returncode == 2, result.stderr
    assert "the run does not fit" in result.stderr and "nothing was loaded" in result.stderr
    assert "does NOT fit" in result.stderr and "predicted peak" in result.stderr
    assert "internal error" not in result.stderr
    assert not list((tmp_path / "out").glob("checkpoint-*"))


def test_qlora_predicts_the_nf4_base_and_is_suggested_when_bf16_lora_does_not_fit(surogate_bin, tmp_path):
    job = write_job(tmp_path, lora=True)
    lora = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "80GiB")
    assert lora.returncode == 0, lora.stderr
    qlora_job = tmp_path / "qlora.yaml"
    qlora_job.write_text(job.read_text() + "qlora_bnb: true\n")
    qlora = run_surogate(surogate_bin, "pt", qlora_job, "--dry-run", "--gpu-memory", "80GiB")
    assert qlora.returncode == 0, qlora.stderr
    # NF4 with double quantization: 4.127 bits per projection weight instead of 16; the embeddings,
    # LM head and norms stay bf16, so the whole is between a quarter and a half of the bf16 weights.
    ratio = gib(qlora.stdout, "weights") / gib(lora.stdout, "weights")
    assert 0.25 < ratio < 0.5, (gib(qlora.stdout, "weights"), gib(lora.stdout, "weights"))
    # A GPU smaller than the bf16 weights alone: no recompute can fit bf16 LoRA, and the dry run
    # names QLoRA as a way to fit.
    size = gib(lora.stdout, "weights") + 1.5
    small = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", f"{size:.2f}GiB")
    assert small.returncode == 0, small.stderr
    assert "qlora_bnb: true (the frozen base in NF4" in small.stdout, small.stdout


def test_qlora_fp8_predicts_the_fp8_base_and_is_not_suggested_without_a_known_sm89_gpu(surogate_bin, tmp_path):
    job = write_job(tmp_path, lora=True)
    lora = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "80GiB")
    assert lora.returncode == 0, lora.stderr
    fp8_job = tmp_path / "qlora-fp8.yaml"
    fp8_job.write_text(job.read_text() + "qlora_fp8: true\n")
    fp8 = run_surogate(surogate_bin, "pt", fp8_job, "--dry-run", "--gpu-memory", "80GiB")
    assert fp8.returncode == 0, fp8.stderr
    # The projections (1.41 G weights) in one byte each plus one fp32 scale per 128 x 128 block
    # instead of two bytes: the weights shrink by 1.41 G bytes less their scales (~0.3 MiB); the
    # embeddings and norms stay bf16.
    projections = 28 * (2048 * 2048 * 2 + 1024 * 2048 * 2 + 3 * 6144 * 2048)
    saved = projections - projections * 4 / (128 * 128)
    assert abs((gib(lora.stdout, "weights") - gib(fp8.stdout, "weights")) - saved / 2**30) < 0.01
    # A GPU smaller than the bf16 weights: qlora_bnb is offered; qlora_fp8 needs SM89+, which a GPU
    # given only by its size (--gpu-memory) is not known to have.
    size = gib(lora.stdout, "weights") + 1.5
    small = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", f"{size:.2f}GiB")
    assert small.returncode == 0, small.stderr
    assert "qlora_bnb: true (the frozen base in NF4" in small.stdout, small.stdout
    assert "- qlora_fp8: true" not in small.stdout, small.stdout


def test_qlora_fp4_predicts_the_nvfp4_base_and_is_suggested_on_any_gpu(surogate_bin, tmp_path):
    job = write_job(tmp_path, lora=True)
    lora = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "80GiB")
    assert lora.returncode == 0, lora.stderr
    fp4_job = tmp_path / "qlora-fp4.yaml"
    fp4_job.write_text(job.read_text() + "qlora_fp4: true\n")
    fp4 = run_surogate(surogate_bin, "pt", fp4_job, "--dry-run", "--gpu-memory", "80GiB")
    assert fp4.returncode == 0, fp4.stderr
    # The projections (1.41 G weights) in half a byte each plus one E4M3 byte per 16 (and one fp32
    # tensor scale each) instead of two bytes: 1.4375 bytes saved per projection weight.
    projections = 28 * (2048 * 2048 * 2 + 1024 * 2048 * 2 + 3 * 6144 * 2048)
    saved = projections * 2 - projections / 2 - projections / 16 - 28 * 7 * 4
    assert abs((gib(lora.stdout, "weights") - gib(fp4.stdout, "weights")) - saved / 2**30) < 0.01
    # A GPU half a GiB short of bf16 LoRA with every recompute on: qlora_fp4 alone (1.9 GiB saved) is
    # offered, whatever the GPU (it dequantizes to bf16, no FP4 tensor cores needed).
    small = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory",
                         f"{gib(lora.stdout, 'weights') + 1.5:.2f}GiB")
    assert small.returncode == 0, small.stderr
    assert "recompute: everything" in small.stdout, small.stdout  # the literal plan, or only block inputs kept
    size = gib(small.stdout, "predicted peak") + 0.5  # 1 GiB is kept free
    short = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", f"{size:.2f}GiB")
    assert short.returncode == 0, short.stderr
    assert "does NOT fit" in short.stdout, short.stdout
    assert "#   - qlora_fp4: true (the frozen base in NVFP4, about 0.28 of its bf16 size, on any GPU)\n" in short.stdout, \
        short.stdout


def test_data_parallel_gpus_are_predicted_per_gpu_with_the_optimizer_state_sharded(surogate_bin, tmp_path):
    # Full fine-tuning of the 1.7B shape on 1, 2 and 4 GPUs of 80 GiB: each GPU holds the whole
    # model, masters, gradients and accumulators, and its ZeRO-1 shard of the optimizer state
    # (whole tensors: the tied 151936 × 2048 embedding alone is ~18 % of the parameters, so a
    # shard is at most an even share plus that).
    job = write_job(tmp_path, lora=False)
    outputs = {}
    for count in (1, 2, 4):
        result = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "80GiB", f"--gpus={count}")
        assert result.returncode == 0, result.stderr
        outputs[count] = result.stdout
    one = outputs[1]
    assert "per GPU" not in one
    for count in (2, 4):
        out = outputs[count]
        assert f"per GPU, each of {count} GPUs; GPU 0 also holds the evaluation" in out, out
        for category in ["weights", "master weights (trainable)", "gradient accumulators"]:
            assert gib(out, category) == gib(one, category), category
        share = gib(out, "optimizer state") / gib(one, "optimizer state")
        assert 1 / count - 0.01 <= share <= 1 / count + 0.2, share
        assert gib(out, "predicted peak") < gib(one, "predicted peak")
    # ZeRO-2 reduces every micro-batch's gradients, so a GPU accumulates its shard only: about
    # half of them on 2 GPUs (whole tensors, as the optimizer shard), plus two buckets of 32 MiB.
    result = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "80GiB", "--gpus=2", "--zero_level=2")
    assert result.returncode == 0, result.stderr
    assert "ZeRO-2 reduce-scatters every micro-batch's gradients" in result.stdout
    share = gib(result.stdout, "gradient accumulators") / gib(one, "gradient accumulators")
    assert 1 / 2 - 0.01 <= share <= 1 / 2 + 0.2, share
    saved = gib(outputs[2], "gradient accumulators") - gib(result.stdout, "gradient accumulators")
    assert abs(gib(outputs[2], "predicted peak") - gib(result.stdout, "predicted peak") - saved) < 0.02


def test_a_run_without_validation_data_predicts_no_evaluator(surogate_bin, tmp_path):
    # validation_split_ratio: 0 and no validation_datasets: the trainer makes no evaluator, so the
    # prediction holds none of its memory (at long context it was the largest category on GPU 0,
    # and the plan recomputed to make room for it). Sequence parallelism over 4 GPUs, 64k tokens.
    job = write_job(tmp_path, lora=True)
    text = job.read_text().replace("sequence_len: 2048", "sequence_len: 65536")
    job.write_text(text)
    args = ["--dry-run", "--gpu-memory", "80GiB", "--gpus=4", "--sequence_parallel_size=4"]
    held_out = run_surogate(surogate_bin, "pt", job, *args)
    assert held_out.returncode == 0, held_out.stderr
    evaluation = gib(held_out.stdout, "evaluation (outside the training's memory)")
    assert evaluation > 1.0  # the whole 64k sequence's forward on GPU 0, LM head included
    none = run_surogate(surogate_bin, "pt", job, *args, "--validation_split_ratio=0")
    assert none.returncode == 0, none.stderr
    assert "evaluation (its arena" not in none.stdout
    assert "per GPU, each of 4 GPUs." in none.stdout and "holds the evaluation" not in none.stdout
    # The sequence group's NCCL all-to-all buffers (measured, train/device/memory_budget.h); data
    # parallelism alone has none.
    assert gib(none.stdout, "NCCL buffers (the sequence group's all-to-alls)") == 3.0
    data_parallel = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "80GiB", "--gpus=4",
                                 "--validation_split_ratio=0")
    assert data_parallel.returncode == 0, data_parallel.stderr
    assert "NCCL buffers" not in data_parallel.stdout
    # The rest is planned as before or keeps more activations with the room it gets.
    # Both fill the device, so the peaks are alike; what is not the plan's arena is smaller by the
    # evaluator's memory exactly.
    assert gib(none.stdout, "activations (planned arena)") >= gib(held_out.stdout, "activations (planned arena)")
    rest = {name: gib(out.stdout, "predicted peak") - gib(out.stdout, "activations (planned arena)")
            for name, out in (("held_out", held_out), ("none", none))}
    assert abs(rest["none"] - (rest["held_out"] - evaluation)) < 0.05, (rest, evaluation)
    # Where only the evaluator's room is missing, the prediction names the ratio as the lever: a GPU
    # 2.5 GiB above the run's most frugal plan without the evaluator (the plan on 80 GiB fills
    # the room it has, keeping whole layers).
    frugal = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpus=4", "--sequence_parallel_size=4",
                          "--gpu-memory", "20GiB", "--recompute_block=true", "--validation_split_ratio=0")
    tight = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpus=4", "--sequence_parallel_size=4", "--gpu-memory",
                         f"{gib(frugal.stdout, 'predicted peak') + 2.5:.2f}GiB", "--recompute_block=true")
    assert "does NOT fit" in tight.stdout, tight.stdout
    assert "- validation_split_ratio: 0 (no held-out evaluation" in tight.stdout, tight.stdout
    # Naming validation data brings the evaluator back with a ratio of 0.
    data = tmp_path / "train.jsonl"
    job.write_text(text + f"validation_datasets:\n  - path: {data}\n    type: text\n")
    named = run_surogate(surogate_bin, "pt", job, *args, "--validation_split_ratio=0")
    assert named.returncode == 0, named.stderr
    assert gib(named.stdout, "evaluation (outside the training's memory)") == evaluation


def test_zero_three_predicts_each_gpu_with_its_shard_of_the_weights(surogate_bin, tmp_path):
    # Full fine-tuning of the 1.7B shape on 4 GPUs: under ZeRO-3 a GPU keeps its shard of the bf16
    # weights and of the fp32 masters (whole tensors: an even share plus at most the tied
    # embedding), beside gather buffers of about the embedding plus a layer; its gradient
    # accumulators shrink to its shard as under ZeRO-2 (the per-micro-batch gradient region stays
    # whole), so the peak falls by what the weights, masters and accumulators save.
    job = write_job(tmp_path, lora=False)
    outputs = {}
    for zero in ("1", "3"):
        result = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "80GiB", "--gpus=4", f"--zero_level={zero}")
        assert result.returncode == 0, result.stderr
        outputs[zero] = result.stdout
    one, three = outputs["1"], outputs["3"]
    assert "ZeRO-3 keeps the largest shard of the weights" in three
    weights = gib(one, "weights")
    assert 1 / 4 - 0.01 <= gib(three, "weights (this rank's shard)") / weights <= 1 / 4 + 0.2
    assert 1 / 4 - 0.01 <= gib(three, "master weights (trainable)") / gib(one, "master weights (trainable)") <= 1 / 4 + 0.2
    assert 0 < gib(three, "gathered weights (per-layer buffers)") < 0.3 * weights
    assert gib(one, "gathered weights (per-layer buffers)") == 0
    assert 1 / 4 - 0.01 <= gib(three, "gradient accumulators") / gib(one, "gradient accumulators") <= 1 / 4 + 0.2
    for category in ["optimizer state", "gradients (one micro-batch)", "activations (planned arena)"]:
        assert gib(three, category) == gib(one, category), category
    assert gib(three, "predicted peak") < gib(one, "predicted peak") - 0.5 * weights
    # On a GPU too small for ZeRO-1, zero_level: 3 is named among the options that make it fit,
    # and master_dtype: bf16 (one GPU's only) is not.
    result = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "24GiB", "--gpus=4")
    assert "does NOT fit" in result.stdout and "- zero_level: 3" in result.stdout, result.stdout
    assert "- master_dtype: bf16" not in result.stdout
    # A little short of ZeRO-1, zero_level: 2's smaller accumulators are enough, and named.
    result = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "26GiB", "--gpus=4")
    assert "does NOT fit" in result.stdout, result.stdout
    assert "- zero_level: 2 (each data-parallel rank accumulates only its shard of the gradients)" in result.stdout


def test_offloading_moves_masters_and_optimizer_state_to_host_memory(surogate_bin, tmp_path):
    job = write_job(tmp_path, lora=False)
    plain = run_surogate(surogate_bin, "pt", job, "--dry-run", "--gpu-memory", "80GiB").stdout
    offloaded_job = tmp_path / "offloaded.yaml"
    offloaded_job.write_text(job.read_text() + "offload_master: true\noffload_optimizer: true\n")
    result = run_surogate(surogate_bin, "pt", offloaded_job, "--dry-run", "--gpu-memory", "80GiB")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert gib(out, "master weights (trainable)") == 0 and gib(out, "optimizer state") == 0, out
    # The pinned host memory is what left the GPU: fp32 masters and adamw's two fp32 moments.
    moved = gib(plain, "master weights (trainable)") + gib(plain, "optimizer state")
    assert abs(gib(out, "pinned host memory") - moved) < 0.02, out
    # Two staging slots, each the largest chunk: the tied 151936 x 2048 embedding (311 M values)
    # with its master (4 bytes) and adamw state (8 bytes) per value, ~3.5 GiB a slot.
    staging = gib(out, "offload staging (two GPU slots)")
    assert 2 * 3.4 < staging < 2 * 3.6, out
    assert abs((gib(plain, "predicted peak") - gib(out, "predicted peak")) - (moved - staging)) < 0.05
    # Gradients too: the accumulators leave as well.
    offloaded_job.write_text(offloaded_job.read_text() + "offload_grads: true\n")
    out = run_surogate(surogate_bin, "pt", offloaded_job, "--dry-run", "--gpu-memory", "80GiB").stdout
    assert gib(out, "gradient accumulators") == 0
    assert abs(gib(out, "pinned host memory") - moved - gib(plain, "gradient accumulators")) < 0.02


def test_offloading_is_offered_when_full_fine_tuning_does_not_fit(surogate_bin, tmp_path):
    # 1.7B full fine-tuning with adamw_8bit needs ~25.9 GiB (+ 1 GiB kept free): each offload alone
    # makes it fit in 26.
    out = run_surogate(surogate_bin, "pt", write_job(tmp_path, lora=False, optimizer="adamw_8bit"), "--dry-run",
                       "--gpu-memory", "26GiB").stdout
    assert "does NOT fit" in out, out
    for lever in ["offload_optimizer: true", "offload_master: true", "offload_grads: true"]:
        assert f"#   - {lever}" in out, out


def test_the_cpu_backend_refuses_offloading_by_name(surogate_bin, tmp_path):
    job = write_job(tmp_path, lora=True)
    job.write_text(job.read_text().replace("sequence_len: 2048", "sequence_len: 64") + "offload_optimizer: true\n")
    result = run_surogate(surogate_bin, "pt", job)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "offload_optimizer" in result.stderr and "CUDA backend only" in result.stderr, result.stderr


def residual_job(tmp_path, offload):
    """LoRA on the 1.7B shape with long micro-batches (8 x 4096 tokens), where the residual stream's
    checkpoints (2 per layer, 128 MiB each in bf16) are most of the activations under recompute."""
    job = write_job(tmp_path, lora=True)
    job.write_text(job.read_text().replace("sequence_len: 2048", "sequence_len: 4096") +
                   "per_device_train_batch_size: 8\nlmhead_chunks: 8\n" +
                   ("offload_residual: true\n" if offload else ""))
    return job


def test_offload_residual_moves_the_residual_stream_to_host_memory(surogate_bin, tmp_path):
    # 8 GiB: neither run fits, so both recompute everything (the literal plan) and compare alike
    # (where one fits, what is left keeps attention's outputs in some layers: compiler/recompute_choice.h).
    plain = run_surogate(surogate_bin, "pt", residual_job(tmp_path, False), "--dry-run", "--gpu-memory", "8GiB").stdout
    result = run_surogate(surogate_bin, "pt", residual_job(tmp_path, True), "--dry-run", "--gpu-memory", "8GiB")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "everything the recompute_* options enable" in plain and "everything the recompute_* options enable" in out
    # Every layer but the top one sends its two checkpoints (the embeddings count as layer 0's
    # input): 27 x 2 x 8 x 4096 x 2048 bf16 values.
    moved = 27 * 2 * 8 * 4096 * 2048 * 2 / 2**30
    assert abs(gib(out, "pinned host memory") - moved) < 0.01, out
    assert "(not on the GPU: offload_residual)" in out
    # They leave the arena, which keeps only the few in flight (a copy's source stays allocated
    # for about a layer, a fetch lands a layer ahead): at most 4 checkpoints, 0.5 GiB.
    drop = gib(plain, "activations (planned arena)") - gib(out, "activations (planned arena)")
    assert moved - 0.5 <= drop <= moved, (drop, moved)
    assert abs((gib(plain, "predicted peak") - gib(out, "predicted peak")) - drop) < 0.05
    for category in ["weights", "optimizer state", "LM-head workspace", "evaluation (outside the training's memory)"]:
        assert gib(out, category) == gib(plain, category), category


def test_offload_residual_is_offered_when_the_activations_do_not_fit(surogate_bin, tmp_path):
    # 12 GiB: recomputing everything still needs ~14.4 GiB; without the checkpoints ~10.2 GiB.
    out = run_surogate(surogate_bin, "pt", residual_job(tmp_path, False), "--dry-run", "--gpu-memory", "12GiB").stdout
    assert "does NOT fit" in out, out
    assert "#   - offload_residual: true" in out, out
    out = run_surogate(surogate_bin, "pt", residual_job(tmp_path, True), "--dry-run", "--gpu-memory", "12GiB").stdout
    assert re.search(r"predicted peak .*: fits", out), out


@pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: the dry run predicts the CUDA backend here")
def test_offload_residual_on_the_cpu_backend_keeps_the_host_region_in_the_activations(surogate_bin, tmp_path):
    # No GPU here: the CPU backend runs the same plan, its host region being the same memory.
    job = write_job(tmp_path, lora=True)
    job.write_text(job.read_text().replace("sequence_len: 2048", "sequence_len: 256") + "offload_residual: true\n")
    result = run_surogate(surogate_bin, "pt", job, "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "CPU backend" in result.stdout and "pinned host memory" not in result.stdout, result.stdout


def test_zero_three_shares_out_the_quantized_base_unless_persistent_quants_keep_it(surogate_bin, tmp_path):
    # QLoRA (NF4) of the 1.7B shape on 4 GPUs under ZeRO-3: by default a GPU keeps a quarter of the
    # quantized base (whole pieces placed by bytes) and gathers a layer's bytes; persistent_quants
    # keeps all of it on every GPU; offload_quants all of it in pinned host memory, none on the GPU.
    job = write_job(tmp_path, lora=True)
    outputs = {}
    for mode, lines in {"sharded": "", "persistent": "persistent_quants: true\n",
                        "offloaded": "persistent_quants: true\noffload_quants: true\n"}.items():
        mode_job = tmp_path / f"{mode}.yaml"
        mode_job.write_text(job.read_text() + "qlora_bnb: true\n" + lines)
        result = run_surogate(surogate_bin, "pt", mode_job, "--dry-run", "--gpu-memory", "80GiB", "--gpus=4",
                              "--zero_level=3")
        assert result.returncode == 0, result.stderr
        outputs[mode] = result.stdout
    whole = gib(outputs["persistent"], "quantized base (persistent_quants: whole)")
    share = gib(outputs["sharded"], "quantized base (this rank's share)")
    assert whole > 0.5, outputs["persistent"]
    assert 1 / 4 - 0.01 <= share / whole <= 1 / 4 + 0.02, (share, whole)
    assert gib(outputs["offloaded"], "quantized base (offload_quants: on the host)") == 0
    pinned = gib(outputs["offloaded"], "pinned host memory")
    assert whole - 0.01 <= pinned <= whole * 1.02, (pinned, whole)
    assert "offload_quants" in outputs["offloaded"]
    # One image per process, which its four GPUs read: not "per GPU".
    pinned_line = next(line for line in outputs["offloaded"].splitlines() if "pinned host memory" in line)
    assert "once per process" in pinned_line and "per GPU" not in pinned_line, pinned_line
    peaks = {mode: gib(out, "predicted peak") for mode, out in outputs.items()}
    assert peaks["offloaded"] < peaks["sharded"] < peaks["persistent"], peaks
    assert peaks["persistent"] - peaks["sharded"] > 0.5 * (whole - share), peaks


def test_offload_quants_on_one_gpu_moves_the_quantized_base_to_the_host(surogate_bin, tmp_path):
    job = write_job(tmp_path, lora=True)
    offloaded = tmp_path / "offloaded.yaml"
    offloaded.write_text(job.read_text() + "qlora_bnb: true\nzero_level: 3\npersistent_quants: true\n"
                         "offload_quants: true\n")
    result = run_surogate(surogate_bin, "pt", offloaded, "--dry-run", "--gpu-memory", "80GiB")
    assert result.returncode == 0, result.stderr
    assert gib(result.stdout, "quantized base (offload_quants: on the host)") == 0
    assert gib(result.stdout, "pinned host memory") > 0.5

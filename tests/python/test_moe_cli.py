"""Mixture-of-experts models through the CLI on the CPU: `surogate sft` with LoRA on attention and
experts, and full fine-tuning, on the tiny HF fixtures (Qwen3-MoE, Qwen2-MoE, Mixtral written by
transformers; scripts/make_hf_fixtures.py) with the quickstart example's character tokenizer and
data. Checked against numpy: the PEFT adapter has one lora_A / lora_B per expert under PEFT's
per-expert keys, the merged and the fully fine-tuned models keep the checkpoint's per-expert
names and shapes (transformers 4.x and 5.x both load them), the merge is W + (alpha / r)·B·A per
expert, and the JSONL log carries the router load-balancing loss of every step."""
import json
import math
import shutil

import numpy as np

from conftest import REPO_ROOT, make_quickstart_example, quickstart_sft_config, read_tensors, run_surogate

FIXTURES = REPO_ROOT / "tests" / "fixtures"


def moe_model(tmp_path, fixture, ex):
    """The fixture's config and weights with the quickstart tokenizer (35 ids < the fixture's 96)."""
    model = tmp_path / fixture
    model.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(FIXTURES / fixture / name, model / name)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(ex / "model" / name, model / name)
    return model


def step_records(out):
    logs = list(out.glob("log-*.jsonl"))
    assert len(logs) == 1
    records = [json.loads(line) for line in logs[0].read_text().splitlines()]
    return [r for r in records if r["type"] == "step"]


def test_lora_on_attention_and_experts_writes_per_expert_peft_keys(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    model = moe_model(tmp_path, "qwen3_moe_topk", ex)
    out = tmp_path / "lora"
    config = quickstart_sft_config(tmp_path / "lora.yaml", model, out, ex,
                                   "lora: true\nlora_rank: 4\nlora_alpha: 8\nlora_dropout: 0.0\n"
                                   "lora_target_modules: [all-linear]\nmerge_adapter: true\n",
                                   gradient_accumulation_steps=2)
    result = run_surogate(surogate_bin, "sft", config)
    assert result.returncode == 0, result.stderr + result.stdout

    base_config = json.loads((model / "config.json").read_text())
    experts, hidden, width = base_config["num_local_experts"], base_config["hidden_size"], base_config["moe_intermediate_size"]
    adapter = read_tensors(out / "adapter_model.safetensors")
    for layer in (0, 2):  # the sparse layers (mlp_only_layers: [1])
        for expert in range(experts):
            p = f"base_model.model.model.layers.{layer}.mlp.experts.{expert}."
            assert adapter[p + "gate_proj.lora_A.weight"].shape == (4, hidden)
            assert adapter[p + "gate_proj.lora_B.weight"].shape == (width, 4)
            assert adapter[p + "down_proj.lora_A.weight"].shape == (4, width)
            assert adapter[p + "down_proj.lora_B.weight"].shape == (hidden, 4)
        assert f"base_model.model.model.layers.{layer}.mlp.gate.lora_A.weight" not in adapter  # the router is not all-linear
    assert "base_model.model.model.layers.1.mlp.gate_proj.lora_A.weight" in adapter  # the dense layer's MLP
    assert "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight" in adapter
    adapter_config = json.loads((out / "adapter_config.json").read_text())
    assert adapter_config["target_modules"] == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

    # Trained experts moved away from zero (B starts at zero), and the merge is per expert.
    assert any(np.abs(v).max() > 0 for k, v in adapter.items() if "experts" in k and "lora_B" in k)
    base = read_tensors(model / "model.safetensors")
    merged = read_tensors(out / "merged" / "model.safetensors")
    assert merged.keys() == base.keys()
    for expert in range(experts):
        name = f"model.layers.2.mlp.experts.{expert}.up_proj.weight"
        a = adapter[f"base_model.model.{name[:-7]}.lora_A.weight"].astype(np.float64)
        b = adapter[f"base_model.model.{name[:-7]}.lora_B.weight"].astype(np.float64)
        np.testing.assert_allclose(merged[name], base[name] + 2.0 * b @ a, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(merged["model.layers.0.mlp.gate.weight"], base["model.layers.0.mlp.gate.weight"])

    # The router loss is logged per step (config.json has output_router_logits), near top_k for a
    # balanced router (transformers' scale: E · Σ f_e · P_e = k when uniform).
    steps = step_records(out)
    assert len(steps) == 3
    for record in steps:
        assert math.isfinite(record["loss"]) and 0.5 < record["router_aux_loss"] < 4.0, record

    # `surogate eval --adapter` reads the per-expert adapter back (what `merge` does too).
    result = run_surogate(surogate_bin, "merge", "--model", model, "--adapter", out, "--output", tmp_path / "merged2")
    assert result.returncode == 0, result.stderr + result.stdout
    merged2 = read_tensors(tmp_path / "merged2" / "model.safetensors")
    assert all(np.array_equal(merged2[k], merged[k]) for k in merged)


def test_full_fine_tuning_keeps_the_checkpoint_layout(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    for fixture in ("mixtral_topk", "qwen2_moe_shared"):
        model = moe_model(tmp_path, fixture, ex)
        out = tmp_path / f"full_{fixture}"
        config = quickstart_sft_config(tmp_path / f"{fixture}.yaml", model, out, ex, "lora: false\n",
                                       learning_rate="1e-3")
        result = run_surogate(surogate_bin, "sft", config)
        assert result.returncode == 0, result.stderr + result.stdout
        base = read_tensors(model / "model.safetensors")
        trained = read_tensors(out / "model.safetensors")
        assert {k: v.shape for k, v in trained.items()} == {k: v.shape for k, v in base.items()}
        # Every expert of every MoE layer moved (each got tokens in 3 steps of 4 rows; AdamW's first
        # step moves each weight by about the learning rate).
        experts = [k for k in base if ".experts." in k]
        assert experts
        for name in experts:
            assert np.abs(trained[name] - base[name]).max() > 1e-4, f"{name} was not trained"
        saved = json.loads((out / "config.json").read_text())
        source = json.loads((model / "config.json").read_text())
        for key in ("num_experts", "num_local_experts", "num_experts_per_tok", "moe_intermediate_size",
                    "shared_expert_intermediate_size", "decoder_sparse_step", "router_aux_loss_coef"):
            assert saved.get(key) == source.get(key), key
        assert all(math.isfinite(r["loss"]) and "router_aux_loss" in r for r in step_records(out))


def test_lora_on_a_router_module_name_the_model_lacks_is_one_clear_error(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    model = moe_model(tmp_path, "mixtral_topk", ex)
    config = quickstart_sft_config(tmp_path / "bad.yaml", model, tmp_path / "bad", ex,
                                   "lora: true\nlora_target_modules: [q_proj, gate_proj]\n")
    result = run_surogate(surogate_bin, "sft", config)
    assert result.returncode == 2, result.stderr + result.stdout
    assert "gate_proj" in result.stderr and "w1" in result.stderr, result.stderr

"""examples/dsl/phi3.py (docs/models.md): Phi-3, an architecture the engine has no C++ for, whose
checkpoint fuses the projections (``qkv_proj``, ``gate_up_proj``), written in Python alone and exact
against transformers' Phi3ForCausalLM.

- A tiny random Phi-3 (GQA, half of each head rotated, random norms) saved by transformers loads
  with the definition's graph and weight table; its fp32 CPU loss equals transformers' within
  relative 1e-5 (and the same weights with q / k / v taken in another order are further away).
- It trains from Python (surogate.train with model_definition: the .py file) on the CPU; the folder
  it writes keeps the fused tensors under their names and transformers loads it, with the engine's
  loss on it. LoRA on the fused projections (qkv_proj, gate_up_proj) trains and writes PEFT's keys;
  `surogate merge --model_definition` merges it as PEFT does.
"""
import json

import pytest

from conftest import REPO_ROOT, make_quickstart_example, run_surogate
from dsl_parity import ROWS, SEQ, both_losses, engine_loss, save_with_tokenizer, train_from_python
from test_dsl_olmo2 import transformers_loss
from test_python_api import held_out_rows

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

PHI3 = REPO_ROOT / "examples" / "dsl" / "phi3.py"
RELATIVE_TOLERANCE = 1e-5


def make_phi3(ex, folder):
    vocab_size = json.loads((ex / "model" / "config.json").read_text())["vocab_size"]
    torch.manual_seed(0)
    config = transformers.Phi3Config(vocab_size=vocab_size, hidden_size=64, intermediate_size=128,
                                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                     partial_rotary_factor=0.5, max_position_embeddings=SEQ, initializer_range=0.1,
                                     bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model = transformers.Phi3ForCausalLM(config).float().eval()
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if name.endswith("norm.weight"):
                tensor.uniform_(0.5, 1.5)
    return save_with_tokenizer(model, ex, folder)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    ex = make_quickstart_example(tmp_path_factory.mktemp("phi3"))
    return ex, make_phi3(ex, ex / "phi3")


def test_the_dsl_phi3_equals_transformers(surogate_package, example, tmp_path):
    ex, folder = example
    rows, labels = held_out_rows(ex, ROWS)
    loss, reference, reference_model = both_losses(surogate_package.module, PHI3, transformers.Phi3ForCausalLM, folder,
                                                   tmp_path, rows, labels)
    assert loss == pytest.approx(reference, rel=RELATIVE_TOLERANCE)
    swapped = transformers.Phi3ForCausalLM(reference_model.config)
    state = reference_model.state_dict()
    for name in [n for n in state if n.endswith("qkv_proj.weight")]:
        q, k, v = state[name].split([64, 32, 32])
        state[name] = torch.cat([q, v, k])  # k and v exchanged
    swapped.load_state_dict(state)
    assert transformers_loss(swapped.float().eval(), rows, labels) != pytest.approx(reference, rel=1e-3)


def test_phi3_trains_from_python_and_transformers_loads_the_result(surogate_package, example, tmp_path):
    surogate = surogate_package.module
    ex, folder = example
    out = tmp_path / "trained"
    train_from_python(surogate, ex, folder, out, PHI3, 12)
    rows, labels = held_out_rows(ex, ROWS)
    trained = transformers.Phi3ForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    assert "model.layers.0.mlp.gate_up_proj.weight" in trained.state_dict()
    reference = transformers_loss(trained, rows, labels)
    assert engine_loss(surogate, PHI3, out, tmp_path, rows, labels) == pytest.approx(reference, rel=RELATIVE_TOLERANCE)


def test_lora_adapts_the_fused_projections(surogate_package, example, tmp_path):
    surogate = surogate_package.module
    ex, folder = example
    out = tmp_path / "lora"
    train_from_python(surogate, ex, folder, out, PHI3, 12, lora=True, lora_rank=4, lora_alpha=8,
                      learning_rate=1e-2, lora_target_modules=["qkv_proj", "gate_up_proj"])
    adapter = json.loads((out / "adapter_config.json").read_text())
    assert sorted(adapter["target_modules"]) == ["gate_up_proj", "qkv_proj"]
    from safetensors import safe_open
    with safe_open(str(out / "adapter_model.safetensors"), framework="numpy") as weights:
        keys = set(weights.keys())
    assert "base_model.model.model.layers.0.self_attn.qkv_proj.lora_A.weight" in keys
    assert "base_model.model.model.layers.1.mlp.gate_up_proj.lora_B.weight" in keys
    # `surogate merge` with the definition's weight table; transformers loads the merged folder, and
    # PEFT's own merge of the adapter into the base model computes the same loss.
    merged = tmp_path / "merged"
    result = run_surogate(surogate_package.cli, "merge", "--model", folder, "--adapter", out, "--output", merged,
                          "--model_definition", out / "model_definition.json")
    assert result.returncode == 0, result.stderr
    rows, labels = held_out_rows(ex, ROWS)
    merged_loss = transformers_loss(transformers.Phi3ForCausalLM.from_pretrained(merged, dtype=torch.float32).eval(),
                                    rows, labels)
    peft = pytest.importorskip("peft")
    base = transformers.Phi3ForCausalLM.from_pretrained(folder, dtype=torch.float32)
    adapted = peft.PeftModel.from_pretrained(base, out).merge_and_unload().float().eval()
    assert merged_loss == pytest.approx(transformers_loss(adapted, rows, labels), rel=RELATIVE_TOLERANCE)


def test_the_cli_trains_and_generates_with_the_python_file(surogate_bin, example, tmp_path):
    """`model_definition: phi3.py` in the YAML: `surogate sft` compiles the file itself (no JSON IR
    step) and trains a LoRA adapter (the quick start's default), transformers loads base + adapter,
    and `surogate generate --model_definition phi3.py --adapter` continues prompts as transformers'
    greedy generate does."""
    from conftest import quickstart_sft_config
    from test_generate_cli import clear_prompts, generate_file

    ex, folder = example
    out = tmp_path / "cli"
    config = quickstart_sft_config(tmp_path / "phi3.yaml", folder, out, ex, max_steps=12, model_definition=PHI3)
    result = run_surogate(surogate_bin, "sft", config)
    assert result.returncode == 0, result.stderr
    steps = [json.loads(line) for line in next(out.glob("log-*.jsonl")).read_text().splitlines()]
    losses = [record["loss"] for record in steps if record["type"] == "step"]
    assert len(losses) == 12 and losses[-1] < 0.9 * losses[0], losses
    assert (out / "adapter_model.safetensors").exists()
    trained = transformers.Phi3ForCausalLM.from_pretrained(out, dtype=torch.float32).eval()  # base + adapter (PEFT)
    cases = clear_prompts(trained, trained.config.vocab_size, count=2, new_tokens=6)
    rows = generate_file(surogate_bin, tmp_path, folder, [{"input_ids": p} for p, _ in cases], "--model_definition", PHI3,
                         "--adapter", out, "--max_new_tokens", 6, "--temperature", 0)
    assert [row["completion_ids"] for row in rows] == [completion for _, completion in cases]


def test_a_broken_python_definition_names_its_line(surogate_bin, example, tmp_path):
    ex, folder = example
    broken = tmp_path / "broken_phi3.py"
    source = PHI3.read_text()
    assert "g.ops.swiglu_fused(" in source
    broken.write_text(source.replace("g.ops.swiglu_fused(", "g.ops.swiglu_fusedd("))
    line = 1 + source[:source.index("g.ops.swiglu_fused(")].count("\n")
    from conftest import quickstart_sft_config
    config = quickstart_sft_config(tmp_path / "broken.yaml", folder, tmp_path / "out", ex, model_definition=broken)
    result = run_surogate(surogate_bin, "sft", config)
    assert result.returncode == 2, result.stderr
    assert f"broken_phi3.py:{line}" in result.stderr and "swiglu_fusedd" in result.stderr, result.stderr
    assert "model_definition" in result.stderr  # which option of the YAML


def test_surogate_eval_takes_the_python_file(surogate_bin, example, tmp_path):
    ex, folder = example
    rows, labels = held_out_rows(ex, ROWS)
    data = tmp_path / "held_out.jsonl"
    data.write_text("".join(json.dumps({"input_ids": r, "labels": l}) + "\n" for r, l in zip(rows, labels)))
    result = run_surogate(surogate_bin, "eval", "--model", folder, "--data", data, "--model_definition", PHI3,
                          "--batch-size", 2)
    assert result.returncode == 0, result.stderr
    loss = json.loads(result.stdout.strip().splitlines()[-1])["loss"]
    reference = transformers_loss(transformers.Phi3ForCausalLM.from_pretrained(folder, dtype=torch.float32).eval(),
                                  rows, labels)
    assert loss == pytest.approx(reference, rel=RELATIVE_TOLERANCE)

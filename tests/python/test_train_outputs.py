"""`surogate sft` / `surogate pt` / `surogate merge` end to end on CPU, read back with the PyPI
`safetensors` package: full fine-tuning writes a Hugging Face model folder (names, shapes, dtype,
config.json equal to the base model's), LoRA writes a PEFT adapter (PEFT key names and
adapter_config.json) and, with merge_adapter or `surogate merge`, the merged model; the JSONL log
has every step, the HTML report is self-contained, and killing a run at any moment leaves a
checkpoint the next run resumes from."""
import json
import pathlib
import signal
import subprocess
import time

import numpy as np

from safetensors import safe_open

from tiny_model import weight_shapes
from conftest import make_quickstart_example, read_tensors, run_surogate


def test_sft_writes_a_hf_model_folder_log_and_report(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "out"
    config = tmp_path / "config.yaml"
    config.write_text(f"""model: {ex / 'model'}
output_dir: {out}
sequence_len: 64
lora: false
use_chat_template: false
optimizer: adamw
learning_rate: 3e-3
per_device_train_batch_size: 4
gradient_accumulation_steps: 1
max_steps: 8
eval_steps: 4
save_steps: 4
datasets:
  - path: {ex / 'train.jsonl'}
    type: instruction
    instruction_field: instruction
    output_field: output
    prompt_format: "reverse: {{instruction}} = {{output}}"
""")
    result = run_surogate(surogate_bin, "sft", config)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "training summary" in result.stdout
    assert "step 8/8" in result.stdout  # not a terminal: one plain line per step

    base = json.loads((ex / "model/config.json").read_text())
    saved = json.loads((out / "config.json").read_text())
    assert {k: saved.get(k) for k in base} == base  # config.json round-trips
    assert (out / "tokenizer.json").read_text() == (ex / "model/tokenizer.json").read_text()
    assert json.loads((out / "generation_config.json").read_text())["eos_token_id"] == base["eos_token_id"]

    with safe_open(str(out / "model.safetensors"), framework="numpy") as f:
        shapes = {name: list(f.get_slice(name).get_shape()) for name in f.keys()}
        assert all(str(f.get_tensor(name).dtype) == "float32" for name in f.keys())
    assert shapes == weight_shapes(base)

    logs = list(out.glob("log-config-*.jsonl"))
    assert len(logs) == 1
    records = [json.loads(line) for line in logs[0].read_text().splitlines()]
    steps = [r for r in records if r["type"] == "step"]
    assert [r["step"] for r in steps] == list(range(1, 9))
    assert all({"loss", "lr", "grad_norm", "tokens_per_second"} <= r.keys() for r in steps)
    assert any(r["type"] == "eval" for r in records)
    assert records[-1]["type"] == "summary"

    report = (out / "report-config.html").read_text()
    assert report.count("<svg") == 3 and "<script" not in report and "http://" not in report.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-8"]


def test_pt_trains_on_text(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    data = tmp_path / "text.jsonl"
    data.write_text("".join(json.dumps({"text": f"abc abc xyz {w}"}) + "\n" for w in ["ab", "cd", "ef"] * 50))
    config = tmp_path / "pt.yaml"
    config.write_text(f"model: {ex / 'model'}\noutput_dir: {tmp_path / 'pt'}\nsequence_len: 32\nlora: false\n"
                      f"optimizer: adamw\nper_device_train_batch_size: 2\nmax_steps: 3\n"
                      f"datasets:\n  - path: {data}\n    type: text\n")
    result = run_surogate(surogate_bin, "pt", config)
    assert result.returncode == 0, result.stderr + result.stdout
    assert (tmp_path / "pt" / "model.safetensors").exists()


def sft_config(path, model, out, extra=""):
    ex = path.parent / "ex"
    path.write_text(f"""model: {model}
output_dir: {out}
sequence_len: 64
use_chat_template: false
optimizer: adamw
learning_rate: 1e-2
per_device_train_batch_size: 4
max_steps: 4
save_steps: 2
datasets:
  - path: {ex / 'train.jsonl'}
    type: instruction
    instruction_field: instruction
    output_field: output
    prompt_format: "reverse: {{instruction}} = {{output}}"
{extra}""")
    return path


def test_lora_writes_a_peft_adapter_merge_adapter_and_surogate_merge_agree(surogate_bin, tmp_path):
    ex = make_quickstart_example(tmp_path)
    # A base with weights: two steps of full fine-tuning from scratch.
    base = tmp_path / "base"
    result = run_surogate(surogate_bin, "sft", sft_config(tmp_path / "base.yaml", ex / "model", base,
                                                           "lora: false\ninit_projections_to_zero: false\n"),
                          "--max_steps=2")
    assert result.returncode == 0, result.stderr + result.stdout

    out = tmp_path / "lora"
    config = sft_config(tmp_path / "lora.yaml", base, out,
                        "lora: true\nlora_rank: 4\nlora_alpha: 8\nlora_dropout: 0.1\n"
                        "lora_target_modules: [q_proj, v_proj, down_proj]\nmerge_adapter: true\n")
    result = run_surogate(surogate_bin, "sft", config)
    assert result.returncode == 0, result.stderr + result.stdout

    model_config = json.loads((ex / "model/config.json").read_text())
    hidden, inter, kv = model_config["hidden_size"], model_config["intermediate_size"], 2 * model_config["head_dim"]
    adapter = read_tensors(out / "adapter_model.safetensors")
    expected = {}
    for layer in range(model_config["num_hidden_layers"]):
        p = f"base_model.model.model.layers.{layer}."
        expected.update({p + "self_attn.q_proj.lora_A.weight": (4, hidden), p + "self_attn.q_proj.lora_B.weight": (hidden, 4),
                         p + "self_attn.v_proj.lora_A.weight": (4, hidden), p + "self_attn.v_proj.lora_B.weight": (kv, 4),
                         p + "mlp.down_proj.lora_A.weight": (4, inter), p + "mlp.down_proj.lora_B.weight": (hidden, 4)})
    assert {k: v.shape for k, v in adapter.items()} == expected
    assert all(v.dtype == np.float32 for v in adapter.values())
    assert any(np.abs(v).max() > 0 for k, v in adapter.items() if "lora_B" in k)  # trained away from zero

    adapter_config = json.loads((out / "adapter_config.json").read_text())
    assert adapter_config["peft_type"] == "LORA" and adapter_config["task_type"] == "CAUSAL_LM"
    assert adapter_config["r"] == 4 and adapter_config["lora_alpha"] == 8 and adapter_config["lora_dropout"] == 0.1
    assert adapter_config["target_modules"] == ["q_proj", "v_proj", "down_proj"]
    assert adapter_config["base_model_name_or_path"] == str(base)
    assert not (out / "model.safetensors").exists()

    # merge_adapter: the merged folder is a full HF model: W + 2 · B · A for adapted projections.
    base_weights = read_tensors(base / "model.safetensors")
    merged = read_tensors(out / "merged" / "model.safetensors")
    assert merged.keys() == base_weights.keys()
    name = "model.layers.1.self_attn.v_proj.weight"
    a = adapter[f"base_model.model.{name[:-7]}.lora_A.weight"].astype(np.float64)
    b = adapter[f"base_model.model.{name[:-7]}.lora_B.weight"].astype(np.float64)
    np.testing.assert_allclose(merged[name], base_weights[name] + 2.0 * b @ a, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(merged["model.layers.0.self_attn.k_proj.weight"],
                                  base_weights["model.layers.0.self_attn.k_proj.weight"])
    assert json.loads((out / "merged" / "config.json").read_text())["hidden_size"] == hidden

    # `surogate merge` gives the same model as merge_adapter.
    result = run_surogate(surogate_bin, "merge", "--model", base, "--adapter", out, "--output", tmp_path / "merged2")
    assert result.returncode == 0, result.stderr + result.stdout
    merged2 = read_tensors(tmp_path / "merged2" / "model.safetensors")
    assert all(np.array_equal(merged2[k], merged[k]) for k in merged)
    assert (tmp_path / "merged2" / "tokenizer.json").exists()

    # A mismatched pair is one clear error: the adapter against a model with another width.
    other = tmp_path / "other"
    other.mkdir()
    other_config = dict(model_config, hidden_size=64, head_dim=16)
    (other / "config.json").write_text(json.dumps(other_config))
    result = run_surogate(surogate_bin, "merge", "--model", other, "--adapter", out, "--output", tmp_path / "bad")
    assert result.returncode == 2
    assert "adapter_model.safetensors" in result.stderr and "expected" in result.stderr, result.stderr


def test_killing_a_run_at_any_moment_leaves_a_resumable_checkpoint(surogate_bin, tmp_path):
    """SIGKILL at several moments of a run that saves every step (so most kills land in or near a
    save); each time the resumed run starts from a complete checkpoint and finishes."""
    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "killed"
    config = sft_config(tmp_path / "kill.yaml", ex / "model", out,
                        "lora: false\nsave_total_limit: 2\nresume_from_checkpoint: true\n")
    def complete_steps():
        # checkpoint-<step> only: `.partial` (being written) and `.deleting` (being removed) are not
        return sorted(int(p.name.split("-")[1]) for p in out.glob("checkpoint-*") if p.name.split("-")[1].isdigit())

    # Each run resumes from the previous one's latest checkpoint; once it has written a new one, it
    # is killed a little later: while training the next step, or in the middle of the next save.
    for delay in (0.0, 0.02, 0.05, 0.11, 0.23):
        before = complete_steps()
        process = subprocess.Popen([str(surogate_bin), "sft", str(config), "--max_steps=24", "--save_steps=1"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while complete_steps() == before and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert complete_steps(), "a killed run left no complete checkpoint"
    result = run_surogate(surogate_bin, "sft", config, "--max_steps=24", "--save_steps=1")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "resumed from" in result.stdout, result.stdout
    assert (out / "model.safetensors").exists()
    complete = sorted(p.name for p in out.glob("checkpoint-*"))
    assert complete == ["checkpoint-23", "checkpoint-24"], complete


def test_trained_model_folder_matches_an_independent_numpy_llama(surogate_bin, tmp_path):
    """The full fine-tuning output, read with `safetensors` and run by an independent numpy Llama
    (tests/python/numpy_llama.py, float64), gives `surogate eval`'s loss: names, layouts and RoPE
    convention of the written folder are what a Hugging Face loader expects."""
    import numpy_llama

    ex = make_quickstart_example(tmp_path)
    out = tmp_path / "full"
    result = run_surogate(surogate_bin, "sft", sft_config(tmp_path / "full.yaml", ex / "model", out,
                                                           "lora: false\ninit_projections_to_zero: false\n"))
    assert result.returncode == 0, result.stderr + result.stdout
    config, weights, vocab = numpy_llama.load_model(out)
    rows = []
    for line in (ex / "valid.jsonl").read_text().splitlines()[:16]:
        row = json.loads(line)
        prompt = [vocab["<s>"]] + [vocab[c] for c in f"reverse: {row['instruction']} = "]
        answer = [vocab[c] for c in row["output"]] + [vocab["</s>"]]
        rows.append({"input_ids": prompt + answer, "labels": [-100] * len(prompt) + answer})
    data = tmp_path / "eval.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    total, tokens = 0.0, 0
    for row in rows:
        logits = numpy_llama.logits_of(config, weights, np.array(row["input_ids"]))
        logits = logits - logits.max(-1, keepdims=True)
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        for i, target in enumerate(row["labels"][1:]):
            if target != -100:
                total -= log_probs[i, target]
                tokens += 1
    result = run_surogate(surogate_bin, "eval", "--model", out, "--data", data)
    assert result.returncode == 0, result.stderr
    ours = json.loads(result.stdout.strip().splitlines()[-1])
    assert ours["tokens"] == tokens
    # fp32 engine vs float64 numpy: measured difference ~3e-8 nats.
    assert abs(ours["loss"] - total / tokens) < 1e-5, (ours["loss"], total / tokens)

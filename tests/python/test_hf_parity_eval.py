"""`surogate eval` against transformers: the fixtures' data.jsonl losses were computed by
transformers (scripts/make_hf_fixtures.py, every sequence run alone, fp32 on the CPU); eval packs
the same sequences into rows with per-document masking and must reproduce the token-weighted
mean to a relative error of 1e-5. Also: `surogate ir` → `surogate eval --ir` round trip and the
errors for malformed or mismatched IR, text rows tokenized by the data pipeline, and the clear
errors for what eval does not do yet."""
import json
import math
import pathlib
import re
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from conftest import REPO_ROOT, run_surogate

FIXTURES = REPO_ROOT / "tests" / "fixtures"
# Every fixture with eval data (scripts/make_hf_fixtures.py writes data.jsonl for each).
EVAL_FIXTURES = sorted(path.name for path in FIXTURES.iterdir() if (path / "data.jsonl").exists())
assert len(EVAL_FIXTURES) >= 3, f"fixtures with data.jsonl missing under {FIXTURES}"


def expected_eval(name):
    expected = load_file(str(FIXTURES / name / "expected.safetensors"))
    loss_sum = float(expected["eval_loss_sum"][0])
    tokens = int(expected["eval_tokens"][0])
    return loss_sum / tokens, tokens


@pytest.mark.parametrize("name", EVAL_FIXTURES)
@pytest.mark.parametrize("batch_size,seq_len", [(1, 16), (2, 32)])
def test_eval_matches_transformers(surogate_bin, name, batch_size, seq_len):
    folder = FIXTURES / name
    result = run_surogate(surogate_bin, "eval", "--model", folder, "--data", folder / "data.jsonl",
                          "--batch-size", batch_size, "--seq-len", seq_len)
    assert result.returncode == 0, result.stderr
    line = json.loads(result.stdout.strip().splitlines()[-1])
    loss, tokens = expected_eval(name)
    assert line["tokens"] == tokens
    assert abs(line["loss"] - loss) <= 1e-5 * abs(loss)
    assert abs(line["perplexity"] - math.exp(loss)) <= 1e-4 * math.exp(loss)


def eval_line(surogate_bin, *args):
    result = run_surogate(surogate_bin, "eval", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_eval_refuses_what_is_not_wired(surogate_bin, tmp_path):
    folder = FIXTURES / "llama_gqa_llama3"
    data = folder / "data.jsonl"
    adapter = run_surogate(surogate_bin, "eval", "--model", folder, "--data", data, "--device", "cuda",
                           "--adapter", tmp_path)
    assert adapter.returncode == 2 and "--device cuda with --adapter" in adapter.stderr
    ir = run_surogate(surogate_bin, "eval", "--model", folder, "--data", data, "--device", "cuda", "--ir", tmp_path / "g.json")
    assert ir.returncode == 2 and "--device cuda with --ir" in ir.stderr


def test_adapter_is_merged_before_evaluating(surogate_bin, tmp_path):
    """Base + PEFT adapter must score like a model whose weights were merged here, in numpy (float64)."""
    base = FIXTURES / "llama_gqa_llama3"
    data = base / "data.jsonl"
    weights = load_file(str(base / "model.safetensors"))
    rng = np.random.default_rng(7)
    rank, alpha = 4, 8.0
    adapter_tensors, merged = {}, dict(weights)
    for layer in range(2):
        for group, module in (("self_attn", "q_proj"), ("mlp", "down_proj")):
            name = f"model.layers.{layer}.{group}.{module}.weight"
            out_features, in_features = weights[name].shape
            a = (0.3 * rng.standard_normal((rank, in_features))).astype(np.float32)
            b = (0.3 * rng.standard_normal((out_features, rank))).astype(np.float32)
            key = f"base_model.model.model.layers.{layer}.{group}.{module}"
            adapter_tensors[key + ".lora_A.weight"] = a
            adapter_tensors[key + ".lora_B.weight"] = b
            delta = (alpha / rank) * (b.astype(np.float64) @ a.astype(np.float64))
            merged[name] = (weights[name].astype(np.float64) + delta).astype(np.float32)
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps(
        {"peft_type": "LORA", "r": rank, "lora_alpha": alpha, "target_modules": ["q_proj", "down_proj"]}))
    save_file(adapter_tensors, str(adapter / "adapter_model.safetensors"))
    merged_model = tmp_path / "merged"
    shutil.copytree(base, merged_model)
    save_file(merged, str(merged_model / "model.safetensors"), metadata={"format": "pt"})

    with_adapter = eval_line(surogate_bin, "--model", base, "--data", data, "--adapter", adapter)
    reference = eval_line(surogate_bin, "--model", merged_model, "--data", data)
    plain = eval_line(surogate_bin, "--model", base, "--data", data)
    assert with_adapter["tokens"] == reference["tokens"] == plain["tokens"]
    assert abs(with_adapter["loss"] - reference["loss"]) <= 1e-6 * abs(reference["loss"])
    assert abs(with_adapter["loss"] - plain["loss"]) > 1e-2, "the adapter must change the loss"

    # An adapter whose config does not match its tensors: the tensor, the shapes, nothing evaluated.
    (adapter / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 2, "lora_alpha": alpha}))
    wrong = run_surogate(surogate_bin, "eval", "--model", base, "--data", data, "--adapter", adapter)
    assert wrong.returncode == 2 and wrong.stdout == ""
    assert "adapter_model.safetensors" in wrong.stderr
    assert re.search(r"lora_[AB]\.weight' has shape \[\d+, \d+\], expected \[\d+, \d+\] \(r = 2 from adapter_config", wrong.stderr)
    missing = run_surogate(surogate_bin, "eval", "--model", base, "--data", data, "--adapter", tmp_path / "nothing")
    assert missing.returncode == 2 and "--adapter" in missing.stderr and "not a folder" in missing.stderr


def test_ir_prints_the_forward_graph_and_eval_runs_it(surogate_bin, tmp_path):
    folder = FIXTURES / "qwen3_qknorm"
    printed = run_surogate(surogate_bin, "ir", folder, "--batch", 2, "--seq", 16)
    assert printed.returncode == 0, printed.stderr
    document = json.loads(printed.stdout)
    assert document["version"] == 1
    assert document["inputs"] == ["input_ids", "position_ids", "document_ids", "targets", "loss_scale"]
    assert "layers.1.attn.q_norm.weight" in document["parameters"]
    # Qwen3: the residual adds live in the fused norms, q/k norm + RoPE is one node (no rope tables).
    assert {node["op"] for node in document["nodes"]} >= {"embedding", "rmsnorm", "fused_residual_rmsnorm",
                                                          "fused_rmsnorm_rope", "attention", "lm_head_loss"}

    ir_file = tmp_path / "qwen3.json"
    written = run_surogate(surogate_bin, "ir", folder, "--batch", 2, "--seq", 16, "--output", ir_file)
    assert written.returncode == 0, written.stderr
    assert json.loads(ir_file.read_text()) == document
    # The data of another fixture (same vocabulary); the IR's [2, 16] is eval's default shape.
    data = FIXTURES / "llama_gqa_llama3" / "data.jsonl"
    built = eval_line(surogate_bin, "--model", folder, "--data", data, "--batch-size", 2, "--seq-len", 16)
    through_ir = eval_line(surogate_bin, "--model", folder, "--data", data, "--ir", ir_file)
    assert through_ir == built
    assert built["tokens"] == expected_eval("llama_gqa_llama3")[1]


def test_malformed_or_mismatched_ir_is_a_clear_error(surogate_bin, tmp_path):
    folder = FIXTURES / "qwen3_qknorm"
    data = FIXTURES / "llama_gqa_llama3" / "data.jsonl"
    ir_file = tmp_path / "graph.json"
    assert run_surogate(surogate_bin, "ir", folder, "--seq", 16, "--output", ir_file).returncode == 0
    document = json.loads(ir_file.read_text())

    broken = tmp_path / "broken.json"
    broken.write_text(ir_file.read_text()[:-40])
    result = run_surogate(surogate_bin, "eval", "--model", folder, "--data", data, "--ir", broken)
    assert result.returncode == 2 and "broken.json" in result.stderr and "not valid JSON" in result.stderr

    dangling = json.loads(json.dumps(document))
    dangling["nodes"][3]["inputs"][0] = "layers.9.missing"
    edited = tmp_path / "dangling.json"
    edited.write_text(json.dumps(dangling))
    result = run_surogate(surogate_bin, "eval", "--model", folder, "--data", data, "--ir", edited)
    assert result.returncode == 2, result.stderr
    assert "dangling.json" in result.stderr and "'layers.9.missing', which is not in \"tensors\"" in result.stderr

    unknown = json.loads(json.dumps(document))
    unknown["nodes"][3]["op"] = "no_such_op"
    edited = tmp_path / "unknown_op.json"
    edited.write_text(json.dumps(unknown))
    result = run_surogate(surogate_bin, "eval", "--model", folder, "--data", data, "--ir", edited)
    assert result.returncode == 2 and "unknown_op.json" in result.stderr and "no_such_op" in result.stderr

    # A valid graph of another model: config.json implies parameters it lacks.
    other = tmp_path / "llama.json"
    assert run_surogate(surogate_bin, "ir", FIXTURES / "llama_gqa_llama3", "--seq", 16, "--output", other).returncode == 0
    result = run_surogate(surogate_bin, "eval", "--model", folder, "--data", data, "--ir", other)
    assert result.returncode == 2 and "llama.json: the graph has no parameter 'layers.0.attn.q_norm.weight'" in result.stderr

    # The graph's shape against an explicit --seq-len.
    result = run_surogate(surogate_bin, "eval", "--model", folder, "--data", data, "--ir", ir_file, "--seq-len", 32)
    assert result.returncode == 2 and "input 'input_ids' is" in result.stderr and "--seq-len" in result.stderr


def char_tokenizer(characters):
    """A character-level tokenizer.json (ids 0-3 special), small enough for the fixtures' vocabulary."""
    special = ["<pad>", "<s>", "</s>", "<unk>"]
    vocab = {token: index for index, token in enumerate(special)}
    for character in characters:
        vocab.setdefault(character, len(vocab))
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in special]
    bos = {"SpecialToken": {"id": "<s>", "type_id": 0}}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None, "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Fuse"},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    config = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}
    return tokenizer, config, vocab


def test_text_rows_go_through_the_data_pipeline(surogate_bin, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(FIXTURES / "llama_bias_untied", folder)
    tokenizer, tokenizer_config, vocab = char_tokenizer("abcdefghij ")
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    text = "abc defg hij"
    rows = tmp_path / "text.jsonl"
    rows.write_text(json.dumps({"text": text}) + "\n")
    # What the text formatter makes of it: <s> (post-processor), the characters, </s> appended.
    ids = tmp_path / "ids.jsonl"
    ids.write_text(json.dumps({"input_ids": [1] + [vocab[c] for c in text] + [2]}) + "\n")
    from_text = eval_line(surogate_bin, "--model", folder, "--data", rows)
    from_ids = eval_line(surogate_bin, "--model", folder, "--data", ids)
    assert from_text == from_ids
    assert from_text["tokens"] == len(text) + 1

    # Without a tokenizer in the model folder: the line and what to do.
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps({"input_ids": [5, 6, 7]}) + "\n" + json.dumps({"text": "hello"}) + "\n")
    result = run_surogate(surogate_bin, "eval", "--model", FIXTURES / "llama_bias_untied", "--data", bare)
    assert result.returncode == 2
    assert "bare.jsonl:2" in result.stderr and "tokenizer.json" in result.stderr and "input_ids" in result.stderr

"""`surogate export` (docs/formats.md, "GGUF") read back with llama.cpp's own gguf-py: tensor names,
shapes and types as convert_hf_to_gguf.py / llama-quantize write them, values against the HF
weights (f16 exact; bf16, q8_0, q5_0 bit for bit against gguf-py's quantizers; the k-quants within
their formats' error), metadata and tokenizer keys, a merged LoRA adapter, and the refusals."""
import json

import gguf
import gguf.utility
import numpy as np
import pytest
from gguf.quants import dequantize, quantize

from conftest import run_surogate
from tiny_model import TOKENIZER_CONFIG, char_tokenizer
from gguf_models import ADDED, CHAT_TEMPLATE, MERGES, byte_alphabet, make_config, write_lora_adapter, write_model

T = gguf.GGMLQuantizationType
LLAMA_LAYOUT = {"llama", "mistral", "mixtral"}
GGUF_ARCH = {"llama": "llama", "mistral": "llama", "mixtral": "llama", "qwen2": "qwen2", "qwen3": "qwen3",
             "qwen2_moe": "qwen2moe", "qwen3_moe": "qwen3moe"}
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias": "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight", "mlp.gate.weight": "ffn_gate_inp.weight",
    "block_sparse_moe.gate.weight": "ffn_gate_inp.weight",
    "mlp.shared_expert.gate_proj.weight": "ffn_gate_shexp.weight", "mlp.shared_expert.up_proj.weight": "ffn_up_shexp.weight",
    "mlp.shared_expert.down_proj.weight": "ffn_down_shexp.weight", "mlp.shared_expert_gate.weight": "ffn_gate_inp_shexp.weight",
}
EXPERT_NAMES = {"gate_proj": "ffn_gate_exps", "w1": "ffn_gate_exps", "up_proj": "ffn_up_exps", "w3": "ffn_up_exps",
                "down_proj": "ffn_down_exps", "w2": "ffn_down_exps"}


def permute(weights, heads):
    """convert_hf_to_gguf.py's LlamaModel.permute: HF's half-split rotary rows → interleaved pairs."""
    return weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def expected_tensors(kind, config, weights):
    """GGUF name → float32 array (HF shape) of what the file must hold, derived from the HF weights."""
    expected, experts = {}, {}
    for name, values in weights.items():
        if name == "model.embed_tokens.weight":
            expected["token_embd.weight"] = values
        elif name == "model.norm.weight":
            expected["output_norm.weight"] = values
        elif name == "lm_head.weight":
            expected["output.weight"] = values
        else:
            parts = name.split(".")
            layer, rest = int(parts[2]), ".".join(parts[3:])
            if ".experts." in name:
                expert, projection = int(parts[-3]), parts[-2]
                experts.setdefault(f"blk.{layer}.{EXPERT_NAMES[projection]}.weight", {})[expert] = values
                continue
            if kind in LLAMA_LAYOUT and rest.startswith("self_attn.q_proj"):
                values = permute(values, config["num_attention_heads"])
            if kind in LLAMA_LAYOUT and rest.startswith("self_attn.k_proj"):
                values = permute(values, config["num_key_value_heads"])
            expected[f"blk.{layer}.{LAYER_NAMES[rest]}"] = values
    for name, by_expert in experts.items():
        expected[name] = np.stack([by_expert[e] for e in sorted(by_expert)])
    return expected


def converter_type(name, values, outtype):
    if values.ndim <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight") or "ffn_gate_inp" in name:
        return T.F32
    if outtype == "q8_0":
        return T.Q8_0 if values.shape[-1] % 32 == 0 else T.F16
    return {"f16": T.F16, "bf16": T.BF16}[outtype]


def use_more_bits(layer, layers):
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def q4_k_m_type(name, values, layers, experts, has_output):
    """llama-quantize's Q4_K_M choice (llama_tensor_get_type), written out independently."""
    dims = [d for d in values.shape]
    while len(dims) > 1 and dims[0] == 1:  # ggml ignores trailing (numpy leading) 1s
        dims.pop(0)
    if len(dims) < 2 or not name.endswith("weight") or "_norm.weight" in name or "ffn_gate_inp.weight" in name:
        return T.F32
    row = values.shape[-1]
    layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
    chosen = T.Q4_K
    if name == "output.weight" or (not has_output and name == "token_embd.weight"):
        chosen = T.Q8_0 if row % 256 else T.Q6_K
    elif "attn_v.weight" in name:
        chosen = T.Q8_0 if experts == 8 else (T.Q6_K if use_more_bits(layer, layers) else T.Q4_K)
    elif "attn_k.weight" in name and experts == 8:
        chosen = T.Q8_0
    elif "attn_output.weight" in name and experts == 8:
        chosen = T.Q5_K
    elif "ffn_down" in name and use_more_bits(layer, layers):
        chosen = T.Q6_K
    block = 256 if chosen in (T.Q4_K, T.Q5_K, T.Q6_K) else 32
    if row % block:
        chosen = {T.Q4_K: T.Q5_0, T.Q5_K: T.Q5_1, T.Q6_K: T.Q8_0}.get(chosen, chosen)
        if row % 32:
            chosen = T.F16
    return chosen


def export(surogate_bin, model, output, outtype, *extra):
    result = run_surogate(surogate_bin, "export", "--model", model, "--output", output, "--type", outtype, *extra)
    assert result.returncode == 0, result.stderr
    return gguf.GGUFReader(str(output))


def fields(reader):
    return {name: field.contents() for name, field in reader.fields.items() if not name.startswith("GGUF.")}


def tensor_values(tensor):
    """The tensor's values as float32 in numpy (HF) order."""
    if tensor.tensor_type in (T.F32, T.F16):
        return np.asarray(tensor.data, dtype=np.float32)
    return dequantize(np.asarray(tensor.data), tensor.tensor_type).astype(np.float32)


# (kind, config overrides): the seven architectures, with the features the export has to carry.
MODELS = {
    "llama": ("llama", dict(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                          "high_freq_factor": 4.0, "original_max_position_embeddings": 32})),
    "mistral": ("mistral", dict(tie_word_embeddings=True)),
    "qwen2": ("qwen2", dict(tie_word_embeddings=True, rope_scaling={"type": "yarn", "factor": 4.0,
                                                                     "original_max_position_embeddings": 32})),
    "qwen3": ("qwen3", dict()),
    "qwen2_moe": ("qwen2_moe", dict()),
    "qwen3_moe": ("qwen3_moe", dict()),
    "mixtral": ("mixtral", dict()),
}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("outtype", ["f16", "bf16", "q8_0"])
def test_converter_types_names_shapes_and_values(surogate_bin, tmp_path, name, outtype):
    kind, overrides = MODELS[name]
    config = make_config(kind, **overrides)
    model, weights = write_model(tmp_path / "model", config)
    reader = export(surogate_bin, model, tmp_path / "out.gguf", outtype)
    expected = expected_tensors(kind, config, weights)
    tensors = {t.name: t for t in reader.tensors}
    if name == "llama":  # llama3 RoPE: the frequency divisors come first
        assert reader.tensors[0].name == "rope_freqs.weight"
        factors = np.asarray(tensors.pop("rope_freqs.weight").data)
        assert factors.shape == (config["head_dim"] // 2,) and factors[0] == 1.0 and factors[-1] == 8.0
    assert sorted(tensors) == sorted(expected)
    for tensor_name, values in expected.items():
        tensor = tensors[tensor_name]
        wanted = converter_type(tensor_name, values, outtype)
        assert tensor.tensor_type == wanted, tensor_name
        assert list(tensor.shape) == list(reversed(values.shape)), tensor_name
        raw = np.asarray(tensor.data).tobytes()
        if wanted == T.F32:
            assert raw == values.astype(np.float32).tobytes(), tensor_name
        elif wanted == T.F16:
            assert raw == values.astype(np.float16).tobytes(), tensor_name
        else:  # BF16 and Q8_0: gguf-py's ports of ggml's reference quantizers, bit for bit
            assert raw == quantize(values, wanted).tobytes(), tensor_name


def test_metadata_and_byte_level_tokenizer(surogate_bin, tmp_path):
    config = make_config("qwen3", layers=3)
    model, _ = write_model(tmp_path / "model", config)
    values = fields(export(surogate_bin, model, tmp_path / "out.gguf", "f16"))
    assert values["general.architecture"] == "qwen3"
    assert values["general.file_type"] == 1
    assert values["general.quantization_version"] == 2
    assert values["qwen3.block_count"] == 3
    assert values["qwen3.context_length"] == 128
    assert values["qwen3.embedding_length"] == 64
    assert values["qwen3.feed_forward_length"] == 128
    assert values["qwen3.attention.head_count"] == 4
    assert values["qwen3.attention.head_count_kv"] == 2
    assert values["qwen3.attention.key_length"] == 16 and values["qwen3.attention.value_length"] == 16
    assert values["qwen3.rope.freq_base"] == pytest.approx(10000.0)
    assert values["qwen3.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-5)
    assert values["tokenizer.ggml.model"] == "gpt2"
    assert values["tokenizer.ggml.pre"] == "qwen2"
    tokens, types = values["tokenizer.ggml.tokens"], values["tokenizer.ggml.token_type"]
    assert len(tokens) == len(types) == config["vocab_size"]
    alphabet = byte_alphabet()
    assert tokens[:256] == alphabet and tokens[256] == "Ġt" and tokens[258] == "Ġthe"
    assert tokens[260:264] == ADDED and tokens[264] == "[PAD264]" and tokens[-1] == "[PAD271]"
    assert list(types[255:266]) == [1] * 5 + [3, 3, 3, 4, 5, 5]  # normal, control, user-defined, unused
    assert values["tokenizer.ggml.merges"] == [" ".join(m) for m in MERGES]
    assert values["tokenizer.ggml.eos_token_id"] == 262
    assert values["tokenizer.ggml.padding_token_id"] == 260
    assert "tokenizer.ggml.bos_token_id" not in values
    assert values["tokenizer.ggml.add_bos_token"] is False or values["tokenizer.ggml.add_bos_token"] == 0
    assert values["tokenizer.chat_template"] == CHAT_TEMPLATE
    assert values["tokenizer.ggml.add_eos_token"] is False  # a ByteLevel post-processor adds nothing
    assert values["general.size_label"] == "146K"  # gguf-py's rounding of 145 952 parameters


def test_size_label_counts_one_expert(surogate_bin, tmp_path):
    model, _ = write_model(tmp_path / "model", make_config("mixtral"))
    reader = export(surogate_bin, model, tmp_path / "out.gguf", "f16")
    total = sum(int(t.n_elements) for t in reader.tensors)
    experts = sum(int(t.n_elements) for t in reader.tensors if "_exps." in t.name)
    one_expert = total - experts + experts // 8
    assert fields(reader)["general.size_label"] == gguf.utility.size_label(total, total - experts, one_expert - (total - experts), 8)


def test_moe_metadata(surogate_bin, tmp_path):
    for kind in ("qwen2_moe", "mixtral"):
        config = make_config(kind)
        model, _ = write_model(tmp_path / kind, config)
        values = fields(export(surogate_bin, model, tmp_path / f"{kind}.gguf", "f16"))
        arch = GGUF_ARCH[kind]
        assert values["general.architecture"] == arch
        assert values[f"{arch}.expert_count"] == (4 if kind == "qwen2_moe" else 8)
        assert values[f"{arch}.expert_used_count"] == 2
        if kind == "qwen2_moe":
            assert values["qwen2moe.expert_feed_forward_length"] == 64
            assert values["qwen2moe.expert_shared_feed_forward_length"] == 128
        else:
            assert values["llama.vocab_size"] == 272 and values["llama.rope.dimension_count"] == 16


def test_rope_scaling_keys(surogate_bin, tmp_path):
    kind, overrides = MODELS["qwen2"]
    model, _ = write_model(tmp_path / "model", make_config(kind, **overrides))
    values = fields(export(surogate_bin, model, tmp_path / "out.gguf", "f16"))
    assert values["qwen2.rope.scaling.type"] == "yarn"
    assert values["qwen2.rope.scaling.factor"] == pytest.approx(4.0)
    assert values["qwen2.rope.scaling.original_context_length"] == 32


@pytest.mark.parametrize("name", ["llama", "qwen2_moe", "mixtral"])
def test_q4_k_m_mix_and_values(surogate_bin, tmp_path, name):
    # Rows of 256 so the k-quants apply (and of 64 / 128 elsewhere: the fallbacks); 8 layers.
    kind, overrides = MODELS[name]
    config = make_config(kind, hidden=256, intermediate=512, layers=8, heads=4, kv_heads=2, **overrides)
    if kind == "qwen2_moe":
        config.update(moe_intermediate_size=96, shared_expert_intermediate_size=256)
    model, weights = write_model(tmp_path / "model", config)
    reader = export(surogate_bin, model, tmp_path / "out.gguf", "q4_k_m")
    assert fields(reader)["general.file_type"] == 15
    expected = expected_tensors(kind, config, weights)
    tensors = {t.name: t for t in reader.tensors}
    experts = config.get("num_experts", config.get("num_local_experts", 0))
    has_output = "output.weight" in expected
    seen = set()
    for tensor_name, values in expected.items():
        tensor = tensors[tensor_name]
        wanted = q4_k_m_type(tensor_name, values, config["num_hidden_layers"], experts, has_output)
        assert tensor.tensor_type == wanted, tensor_name
        seen.add(wanted)
        if wanted in (T.F32, T.F16, T.Q8_0, T.Q5_0):
            # llama-quantize quantizes the values of an f16 file: the weights rounded to f16 first.
            reference = values.astype(np.float32) if wanted == T.F32 else (
                values.astype(np.float16) if wanted == T.F16 else quantize(values.astype(np.float16).astype(np.float32), wanted))
            assert np.asarray(tensor.data).tobytes() == reference.tobytes(), tensor_name
        else:
            # Relative RMS error on Gaussian weights: the bounds of tests/gguf/test_quantize.cpp
            # (15 % above ggml's reference quantizers: Q4_K 0.072, Q5_K 0.036, Q6_K 0.018).
            bound = {T.Q4_K: 0.083, T.Q5_K: 0.0415, T.Q6_K: 0.0205}[wanted]
            decoded = tensor_values(tensor).reshape(values.shape)
            error = np.sqrt(np.mean((decoded - values) ** 2) / np.mean(values ** 2))
            assert error < bound, (tensor_name, error)
    if name == "llama":
        assert {T.Q4_K, T.Q6_K, T.F32} <= seen
    if name == "mixtral":  # 8 experts: attn_v / attn_k Q8_0, attn_output Q5_K
        assert {T.Q8_0, T.Q5_K} <= seen
    if name == "qwen2_moe":  # expert rows of 96: Q5_0 / Q8_0 fallbacks
        assert {T.Q5_0, T.Q8_0} <= seen


def test_adapter_is_merged_before_export(surogate_bin, tmp_path):
    config = make_config("llama")
    model, weights = write_model(tmp_path / "model", config)
    merged = write_lora_adapter(tmp_path / "adapter", config, weights)
    reader = export(surogate_bin, model, tmp_path / "out.gguf", "f16", "--adapter", tmp_path / "adapter")
    tensors = {t.name: t for t in reader.tensors}
    for tensor_name, values in expected_tensors("llama", config, merged).items():
        assert np.asarray(tensors[tensor_name].data).tobytes() == values.astype(np.float16).tobytes() or \
            converter_type(tensor_name, values, "f16") == T.F32, tensor_name
    changed = expected_tensors("llama", config, merged)["blk.1.attn_v.weight"]
    assert not np.array_equal(changed, expected_tensors("llama", config, weights)["blk.1.attn_v.weight"])


def test_sentencepiece_tokenizer(surogate_bin, tmp_path, tokenizers_dir):
    tokenizer = json.loads((tokenizers_dir / "llama2" / "tokenizer.json").read_text())
    tokenizer_config = json.loads((tokenizers_dir / "llama2" / "tokenizer_config.json").read_text())
    config = make_config("llama", vocab_size=32000, hidden=32, intermediate=64, layers=1, heads=2, kv_heads=1,
                         bos_token_id=1, eos_token_id=2, pad_token_id=None)
    model, _ = write_model(tmp_path / "model", config, tokenizer, tokenizer_config)
    values = fields(export(surogate_bin, model, tmp_path / "out.gguf", "f16"))
    tokens, types, scores = values["tokenizer.ggml.tokens"], values["tokenizer.ggml.token_type"], values["tokenizer.ggml.scores"]
    assert values["tokenizer.ggml.model"] == "llama" and values["tokenizer.ggml.pre"] == "default"
    assert len(tokens) == len(types) == len(scores) == 32000
    assert tokens[:3] == ["<unk>", "<s>", "</s>"] and list(types[:3]) == [3, 3, 3]
    assert tokens[3] == "<0x00>" and types[3] == 6 and tokens[13] == "<0x0A>"
    vocab = tokenizer["model"]["vocab"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tokenizer["model"]["merges"]]
    first = vocab[merges[0].replace(" ", "")]
    assert types[first] == 1 and scores[first] == 0.0 and scores[vocab[merges[1].replace(" ", "")]] == -1.0
    assert values["tokenizer.ggml.bos_token_id"] == 1 and values["tokenizer.ggml.eos_token_id"] == 2
    assert values["tokenizer.ggml.unknown_token_id"] == 0
    assert values["tokenizer.ggml.add_bos_token"] and not values["tokenizer.ggml.add_eos_token"]


@pytest.mark.parametrize("name, pre", [("llama3", "llama-bpe"), ("qwen3", "qwen2")])
def test_real_byte_level_tokenizers_name_their_pre_tokenizer(surogate_bin, tmp_path, tokenizers_dir, name, pre):
    tokenizer = json.loads((tokenizers_dir / name / "tokenizer.json").read_text())
    tokenizer_config = json.loads((tokenizers_dir / name / "tokenizer_config.json").read_text())
    size = max([*tokenizer["model"]["vocab"].values(), *(t["id"] for t in tokenizer["added_tokens"])]) + 1
    config = make_config("qwen2" if name == "qwen3" else "llama", vocab_size=size, hidden=16, intermediate=32,
                         layers=1, heads=2, kv_heads=1, tie_word_embeddings=True, eos_token_id=None, pad_token_id=None)
    model, _ = write_model(tmp_path / "model", config, tokenizer, tokenizer_config)
    values = fields(export(surogate_bin, model, tmp_path / "out.gguf", "bf16"))
    assert values["tokenizer.ggml.pre"] == pre
    assert len(values["tokenizer.ggml.tokens"]) == size
    assert values["tokenizer.chat_template"] == tokenizer_config["chat_template"]
    eos = next(t["id"] for t in tokenizer["added_tokens"] if t["content"] == tokenizer_config["eos_token"])
    assert values["tokenizer.ggml.eos_token_id"] == eos


def expect_refusal(surogate_bin, tmp_path, model, outtype, *needles):
    result = run_surogate(surogate_bin, "export", "--model", model, "--output", tmp_path / "x.gguf", "--type", outtype)
    assert result.returncode == 2, result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr
    assert not (tmp_path / "x.gguf").exists()


def test_refusals_exit_2_naming_the_problem(surogate_bin, tmp_path):
    model, _ = write_model(tmp_path / "model", make_config("qwen3"))
    expect_refusal(surogate_bin, tmp_path, model, "q4_0", "--type q4_0", "q4_k_m")
    expect_refusal(surogate_bin, tmp_path, tmp_path / "nowhere", "f16", "--model", "nowhere")
    result = run_surogate(surogate_bin, "export", "--model", model, "--adapter", tmp_path / "no_adapter",
                          "--output", tmp_path / "x.gguf", "--type", "f16")
    assert result.returncode == 2 and "--adapter" in result.stderr and "no_adapter" in result.stderr, result.stderr
    no_weights, _ = write_model(tmp_path / "no_weights", make_config("qwen3"))
    (no_weights / "model.safetensors").unlink()
    expect_refusal(surogate_bin, tmp_path, no_weights, "f16", "no_weights")
    no_config, _ = write_model(tmp_path / "no_config", make_config("qwen3"))
    (no_config / "config.json").unlink()
    expect_refusal(surogate_bin, tmp_path, no_config, "f16", "config.json")
    dense_layer, _ = write_model(tmp_path / "dense", make_config("qwen3_moe", mlp_only_layers=[1]))
    expect_refusal(surogate_bin, tmp_path, dense_layer, "f16", "layer 1", "dense")
    dynamic, _ = write_model(tmp_path / "dynamic", make_config("llama", rope_scaling={"type": "dynamic", "factor": 2.0}))
    expect_refusal(surogate_bin, tmp_path, dynamic, "f16", "dynamic RoPE")
    no_tokenizer, _ = write_model(tmp_path / "no_tokenizer", make_config("llama"))
    (no_tokenizer / "tokenizer.json").unlink()
    expect_refusal(surogate_bin, tmp_path, no_tokenizer, "f16", "tokenizer.json", "missing")
    biased, _ = write_model(tmp_path / "biased", make_config("qwen3", attention_bias=True))
    expect_refusal(surogate_bin, tmp_path, biased, "f16", "attention_bias")
    odd, _ = write_model(tmp_path / "odd", make_config("qwen3"))
    tokenizer = json.loads((odd / "tokenizer.json").read_text())
    tokenizer["post_processor"] = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": 5}}, {"Sequence": {}}]}
    (odd / "tokenizer.json").write_text(json.dumps(tokenizer))
    expect_refusal(surogate_bin, tmp_path, odd, "f16", "unexpected type")
    characters, _ = write_model(tmp_path / "characters", make_config("llama", vocab_size=34), char_tokenizer(),
                                dict(TOKENIZER_CONFIG))  # the quick start's character tokenizer
    expect_refusal(surogate_bin, tmp_path, characters, "f16", "neither byte-level", "SentencePiece-style")
    unnormalised, _ = write_model(tmp_path / "unnormalised", make_config("qwen3_moe", norm_topk_prob=False))
    expect_refusal(surogate_bin, tmp_path, unnormalised, "f16", "norm_topk_prob")


def test_sliding_window_is_exported_with_a_note(surogate_bin, tmp_path):
    model, _ = write_model(tmp_path / "model", make_config("mistral", sliding_window=32))
    result = run_surogate(surogate_bin, "export", "--model", model, "--output", tmp_path / "out.gguf", "--type", "f16")
    assert result.returncode == 0, result.stderr
    assert "sliding_window (32) is not written" in result.stderr
    assert not any("sliding" in key for key in fields(gguf.GGUFReader(str(tmp_path / "out.gguf"))))

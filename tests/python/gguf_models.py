"""Tiny random Hugging Face checkpoints for the GGUF export tests (numpy + safetensors only):
config.json, model.safetensors (HF names, one tensor per expert), a byte-level BPE tokenizer.json
with Qwen2's split regex, tokenizer_config.json with a chat template, and optionally a PEFT LoRA
adapter. The HF weights are returned too, so a test compares the file against them."""
import json
import pathlib

import numpy as np
from safetensors.numpy import save_file

QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
MERGES = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["i", "n"]]
ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool>"]


def byte_alphabet():
    """GPT-2's bytes → printable characters map, in byte order."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    mapping, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            mapping[byte] = chr(byte)
        else:
            mapping[byte] = chr(256 + extra)
            extra += 1
    return [mapping[b] for b in range(256)]


def byte_level_tokenizer():
    """256 byte tokens, 4 merges, then ADDED (the first three special, "<tool>" not): 264 ids."""
    vocab = {token: index for index, token in enumerate(byte_alphabet())}
    for left, right in MERGES:
        vocab[left + right] = len(vocab)
    added = [{"id": len(vocab) + i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": text != "<tool>"} for i, text in enumerate(ADDED)]
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_SPLIT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": MERGES},
    }
    config = {"add_bos_token": False, "bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
              "unk_token": None, "chat_template": CHAT_TEMPLATE, "tokenizer_class": "Qwen2Tokenizer"}
    return tokenizer, config


ARCHITECTURES = {
    "llama": ("LlamaForCausalLM", "llama"), "mistral": ("MistralForCausalLM", "mistral"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"), "qwen3": ("Qwen3ForCausalLM", "qwen3"),
    "qwen2_moe": ("Qwen2MoeForCausalLM", "qwen2_moe"), "qwen3_moe": ("Qwen3MoeForCausalLM", "qwen3_moe"),
    "mixtral": ("MixtralForCausalLM", "mixtral"),
}


def make_config(kind, vocab_size=272, hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2, **extra):
    architecture, model_type = ARCHITECTURES[kind]
    config = {"architectures": [architecture], "model_type": model_type, "vocab_size": vocab_size,
              "hidden_size": hidden, "intermediate_size": intermediate, "num_hidden_layers": layers,
              "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": hidden // heads,
              "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
              "tie_word_embeddings": False, "hidden_act": "silu", "torch_dtype": "float32",
              "bos_token_id": None, "eos_token_id": 262, "pad_token_id": 260}
    if kind in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
        config["use_sliding_window"] = False
    if kind == "mistral":
        config["sliding_window"] = None
    if kind in ("qwen2_moe", "qwen3_moe"):
        config.update(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=intermediate // 2,
                      decoder_sparse_step=1, mlp_only_layers=[], norm_topk_prob=kind == "qwen3_moe")
    if kind == "qwen2_moe":
        config["shared_expert_intermediate_size"] = intermediate
    if kind == "mixtral":
        config.update(num_local_experts=8, num_experts_per_tok=2, sliding_window=None)
    config.update(extra)
    return config


def hf_weights(config, seed=0):
    """name → float32 array for every tensor the checkpoint of `config` holds."""
    rng = np.random.default_rng(seed)
    hidden, inter = config["hidden_size"], config["intermediate_size"]
    head_dim, heads, kv = config["head_dim"], config["num_attention_heads"], config["num_key_value_heads"]
    model_type = config["model_type"]
    weights = {}

    def add(name, *shape, norm=False):
        values = rng.standard_normal(shape).astype(np.float32)
        weights[name] = (1.0 + 0.1 * values) if norm else values / np.sqrt(shape[-1]).astype(np.float32)

    add("model.embed_tokens.weight", config["vocab_size"], hidden)
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        add(p + "input_layernorm.weight", hidden, norm=True)
        add(p + "post_attention_layernorm.weight", hidden, norm=True)
        add(p + "self_attn.q_proj.weight", heads * head_dim, hidden)
        add(p + "self_attn.k_proj.weight", kv * head_dim, hidden)
        add(p + "self_attn.v_proj.weight", kv * head_dim, hidden)
        add(p + "self_attn.o_proj.weight", hidden, heads * head_dim)
        if model_type in ("qwen2", "qwen2_moe"):
            for proj, rows in (("q", heads * head_dim), ("k", kv * head_dim), ("v", kv * head_dim)):
                add(p + f"self_attn.{proj}_proj.bias", rows)
        if model_type in ("qwen3", "qwen3_moe"):
            add(p + "self_attn.q_norm.weight", head_dim, norm=True)
            add(p + "self_attn.k_norm.weight", head_dim, norm=True)
        if model_type in ("qwen2_moe", "qwen3_moe"):
            experts, expert_inter = config["num_experts"], config["moe_intermediate_size"]
            add(p + "mlp.gate.weight", experts, hidden)
            for e in range(experts):
                add(p + f"mlp.experts.{e}.gate_proj.weight", expert_inter, hidden)
                add(p + f"mlp.experts.{e}.up_proj.weight", expert_inter, hidden)
                add(p + f"mlp.experts.{e}.down_proj.weight", hidden, expert_inter)
            if model_type == "qwen2_moe":
                shared = config["shared_expert_intermediate_size"]
                add(p + "mlp.shared_expert.gate_proj.weight", shared, hidden)
                add(p + "mlp.shared_expert.up_proj.weight", shared, hidden)
                add(p + "mlp.shared_expert.down_proj.weight", hidden, shared)
                add(p + "mlp.shared_expert_gate.weight", 1, hidden)
        elif model_type == "mixtral":
            add(p + "block_sparse_moe.gate.weight", config["num_local_experts"], hidden)
            for e in range(config["num_local_experts"]):
                add(p + f"block_sparse_moe.experts.{e}.w1.weight", inter, hidden)
                add(p + f"block_sparse_moe.experts.{e}.w3.weight", inter, hidden)
                add(p + f"block_sparse_moe.experts.{e}.w2.weight", hidden, inter)
        else:
            add(p + "mlp.gate_proj.weight", inter, hidden)
            add(p + "mlp.up_proj.weight", inter, hidden)
            add(p + "mlp.down_proj.weight", hidden, inter)
    add("model.norm.weight", hidden, norm=True)
    if not config["tie_word_embeddings"]:
        add("lm_head.weight", config["vocab_size"], hidden)
    return weights


def write_model(folder, config, tokenizer=None, tokenizer_config=None, seed=0):
    """A model folder; returns (folder, HF weights). The tokenizer defaults to byte_level_tokenizer()."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if tokenizer is None:
        tokenizer, tokenizer_config = byte_level_tokenizer()
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    if tokenizer_config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    weights = hf_weights(config, seed)
    save_file(weights, str(folder / "model.safetensors"))
    return folder, weights


def write_lora_adapter(folder, config, weights, rank=4, alpha=8, seed=1):
    """A PEFT adapter on q_proj and v_proj of every layer; returns the merged HF weights."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tensors, merged = {}, dict(weights)
    for layer in range(config["num_hidden_layers"]):
        for proj in ("q_proj", "v_proj"):
            name = f"model.layers.{layer}.self_attn.{proj}"
            out_features, in_features = weights[name + ".weight"].shape
            a = (0.1 * rng.standard_normal((rank, in_features))).astype(np.float32)
            b = (0.1 * rng.standard_normal((out_features, rank))).astype(np.float32)
            tensors[f"base_model.model.{name}.lora_A.weight"] = a
            tensors[f"base_model.model.{name}.lora_B.weight"] = b
            merged[name + ".weight"] = (weights[name + ".weight"].astype(np.float64)
                                        + alpha / rank * (b.astype(np.float64) @ a.astype(np.float64))).astype(np.float32)
    save_file(tensors, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "r": rank, "lora_alpha": alpha, "target_modules": ["q_proj", "v_proj"],
        "lora_dropout": 0.0, "bias": "none", "task_type": "CAUSAL_LM"}))
    return merged

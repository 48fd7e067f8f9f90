"""Tiny model folders for CLI tests, standard library only: a character-level BPE tokenizer.json
(+ tokenizer_config.json) and a small Llama config.json, optionally with random safetensors
weights (numpy) — the same shapes as examples/quickstart/make_example.py, kept here so tests do
not depend on the example's generator."""
import json
import pathlib
import struct

SPECIAL = ["<pad>", "<s>", "</s>", "<unk>"]
CHARACTERS = sorted(set("abcdefghijklmnopqrstuvwxyz :=."))


def char_tokenizer(extra_tokens=0):
    """tokenizer.json: the special tokens, one token per character, and `extra_tokens` added
    tokens after them (to make the tokenizer larger than a model)."""
    vocab = {token: index for index, token in enumerate(SPECIAL)}
    for character in CHARACTERS:
        vocab.setdefault(character, len(vocab))
    added = [{"id": vocab[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in SPECIAL]
    for k in range(extra_tokens):
        added.append({"id": len(vocab) + k, "content": f"<extra_{k}>", "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": {"type": "Fuse"},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


def tokenizer_size(tokenizer):
    return max([*tokenizer["model"]["vocab"].values(), *(t["id"] for t in tokenizer["added_tokens"])]) + 1


TOKENIZER_CONFIG = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>",
                    "model_max_length": 64, "tokenizer_class": "PreTrainedTokenizerFast"}


def llama_config(vocab_size, **overrides):
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size,
        "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 8, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "max_position_embeddings": 64, "tie_word_embeddings": True, "hidden_act": "silu",
        "attention_bias": False, "mlp_bias": False, "torch_dtype": "float32",
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
    }
    config.update(overrides)
    return config


def weight_shapes(config):
    hidden, inter = config["hidden_size"], config["intermediate_size"]
    head_dim = config["head_dim"]
    q, kv = config["num_attention_heads"] * head_dim, config["num_key_value_heads"] * head_dim
    shapes = {"model.embed_tokens.weight": [config["vocab_size"], hidden], "model.norm.weight": [hidden]}
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        shapes.update({
            p + "input_layernorm.weight": [hidden], p + "post_attention_layernorm.weight": [hidden],
            p + "self_attn.q_proj.weight": [q, hidden], p + "self_attn.k_proj.weight": [kv, hidden],
            p + "self_attn.v_proj.weight": [kv, hidden], p + "self_attn.o_proj.weight": [hidden, q],
            p + "mlp.gate_proj.weight": [inter, hidden], p + "mlp.up_proj.weight": [inter, hidden],
            p + "mlp.down_proj.weight": [hidden, inter],
        })
    if not config.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = [config["vocab_size"], hidden]
    return shapes


def write_safetensors(path, tensors):
    """tensors: name -> (dtype string, shape, raw bytes). Written by hand (no numpy needed)."""
    header, offset, blobs = {}, 0, []
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    pathlib.Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def f32_tensor(shape, value=0.01):
    count = 1
    for dimension in shape:
        count *= dimension
    return ("F32", shape, struct.pack(f"<{count}f", *([value] * count)))


def write_model(folder, vocab_size=None, tokenizer=None, weights=False, **config_overrides):
    """A model folder; vocab_size defaults to the tokenizer's size. Returns the folder."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer or char_tokenizer()
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    (folder / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG))
    config = llama_config(vocab_size or tokenizer_size(tokenizer), **config_overrides)
    (folder / "config.json").write_text(json.dumps(config))
    if weights:
        write_safetensors(folder / "model.safetensors",
                          {name: f32_tensor(shape) for name, shape in weight_shapes(config).items()})
    return folder

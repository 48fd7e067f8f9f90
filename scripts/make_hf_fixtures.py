#!/usr/bin/env python3
"""Writes the Hugging Face parity fixtures under tests/fixtures/<name>/.

Each fixture is a tiny random decoder in fp32 (hidden 32, 2 layers, vocab 96) saved the way
transformers saves it (config.json + model.safetensors), plus expected.safetensors holding the
batch that was fed to it and what transformers computed from it on the CPU in fp32:

  input_ids, position_ids, document_ids, targets   int32 [B, T]  (targets are already shifted:
                                                   targets[t] = input_ids[t + 1] inside a
                                                   document, -100 at document ends and on
                                                   masked prompt tokens)
  logits                                           f32 [B, T, V]
  loss                                             f64 [1]  mean CE over valid targets
  grad.<hf parameter name>                         f32, d loss / d parameter (per-expert names for
                                                   MoE experts, as the checkpoint stores them)
  aux_loss                                         f64 [1]  MoE fixtures: transformers' router
                                                   load-balancing loss; loss = CE + coef · aux_loss
  packed                                           int32 [1]  1 when row 1 holds two documents
                                                   (position ids restart) and transformers
                                                   masked across them, 0 when it is one document
  eval_loss_sum, eval_tokens                       f64 [1]   for data.jsonl:
                                                   summed next-token CE of every sequence run
                                                   alone, and the number of predicted tokens

Run it where torch + transformers are installed (any machine; everything runs on the CPU):
  python3 scripts/make_hf_fixtures.py OUT_DIR [NAME ...]     (NAME: only these fixtures)
and copy OUT_DIR/<name>/ into tests/fixtures/. Everything runs on the CPU so the numbers do
not depend on TF32 or kernel choices.
"""
import json
import os
import sys
import traceback

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

BATCH, SEQ, VOCAB = 2, 16, 96
PACKED_LENGTHS = (7, 9)  # row 1: two documents
PROMPT_MASKED = 3        # row 0: the first targets are masked like an instruction prompt
EVAL_LENGTHS = (10, 16, 5, 12)

COMMON = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2, pad_token_id=0)

# name -> (model_type, extra config, rope parameters, keep rope_parameters spelling in config.json)
FIXTURES = {
    "llama_gqa_llama3": ("llama", dict(tie_word_embeddings=False),
                         {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 16}, False),
    "llama_bias_untied": ("llama", dict(tie_word_embeddings=False, attention_bias=True, mlp_bias=True,
                                        num_key_value_heads=4),
                          {"rope_type": "default", "rope_theta": 10000.0}, False),
    "mistral_sliding": ("mistral", dict(tie_word_embeddings=False, sliding_window=4, head_dim=8),
                        {"rope_type": "default", "rope_theta": 10000.0}, False),
    "qwen2_bias_tied": ("qwen2", dict(tie_word_embeddings=True, use_sliding_window=False),
                        {"rope_type": "default", "rope_theta": 1000000.0}, False),
    "qwen3_qknorm": ("qwen3", dict(tie_word_embeddings=False, head_dim=8, attention_bias=False,
                                   use_sliding_window=False),
                     {"rope_type": "default", "rope_theta": 1000000.0}, False),
    "llama_rope_parameters_yarn": ("llama", dict(tie_word_embeddings=True),
                                   {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 2.0,
                                    "original_max_position_embeddings": 8}, True),
    # Mixture-of-experts: 4 experts, top-2, the router loss on (output_router_logits).
    # Qwen3-MoE: normalised top-k, a dense layer in the middle (mlp_only_layers), q/k norm.
    "qwen3_moe_topk": ("qwen3_moe", dict(tie_word_embeddings=False, head_dim=8, num_hidden_layers=3,
                                         num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                                         norm_topk_prob=True, mlp_only_layers=[1], output_router_logits=True,
                                         router_aux_loss_coef=0.05),
                       {"rope_type": "default", "rope_theta": 1000000.0}, True),
    # Qwen2-MoE: raw top-k probabilities, the shared expert with its sigmoid gate, every second
    # layer sparse (decoder_sparse_step 2), q/k/v bias.
    "qwen2_moe_shared": ("qwen2_moe", dict(tie_word_embeddings=False, num_experts=4, num_experts_per_tok=2,
                                           moe_intermediate_size=16, shared_expert_intermediate_size=24,
                                           decoder_sparse_step=2, num_hidden_layers=4, output_router_logits=True,
                                           router_aux_loss_coef=0.05, use_sliding_window=False),
                         {"rope_type": "default", "rope_theta": 1000000.0}, False),
    # Mixtral: block_sparse_moe names (w1 / w2 / w3), always-normalised top-k.
    "mixtral_topk": ("mixtral", dict(tie_word_embeddings=False, num_local_experts=4, num_experts_per_tok=2,
                                     output_router_logits=True, router_aux_loss_coef=0.05, sliding_window=None),
                     {"rope_type": "default", "rope_theta": 1000000.0}, False),
}


def make_config(model_type, extra, rope):
    from transformers import AutoConfig
    kwargs = dict(COMMON)
    kwargs.update(extra)
    try:
        config = AutoConfig.for_model(model_type, rope_parameters=dict(rope), **kwargs)
    except TypeError:
        legacy = dict(rope)
        theta = legacy.pop("rope_theta")
        scaling = None if legacy.get("rope_type") == "default" else legacy
        config = AutoConfig.for_model(model_type, rope_theta=theta, rope_scaling=scaling, **kwargs)
    config._attn_implementation = "eager"
    return config


def randomize(model, generator):
    # HF's init (std 0.02) makes every activation tiny; larger weights make parity meaningful.
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator)
            if name.endswith("norm.weight"):
                parameter.copy_(1.0 + 0.2 * noise)
            elif name.endswith(".bias"):
                parameter.copy_(0.1 * noise)
            elif "embed_tokens" in name:
                parameter.copy_(noise)
            elif parameter.dim() == 3:  # transformers 5's fused experts [E, out, in]
                parameter.copy_(noise / parameter.shape[-1] ** 0.5)
            else:
                parameter.copy_(noise / parameter.shape[-1] ** 0.5)


def batch(generator, packed):
    ids = torch.randint(3, VOCAB, (BATCH, SEQ), generator=generator)
    positions = torch.arange(SEQ).repeat(BATCH, 1)
    documents = torch.zeros(BATCH, SEQ, dtype=torch.long)
    if packed:
        first = PACKED_LENGTHS[0]
        positions[1, first:] = torch.arange(SEQ - first)
        documents[1, first:] = 1
    targets = torch.full((BATCH, SEQ), -100, dtype=torch.long)
    for row in range(BATCH):
        for t in range(SEQ - 1):
            if documents[row, t] == documents[row, t + 1]:
                targets[row, t] = ids[row, t + 1]
    targets[0, :PROMPT_MASKED] = -100
    return ids, positions, documents, targets


def packing_honoured(model, ids, positions):
    # The second document of row 1, run alone, must give the same logits as inside the row.
    first = PACKED_LENGTHS[0]
    with torch.no_grad():
        together = model(input_ids=ids[1:2], position_ids=positions[1:2]).logits[0, first:]
        alone = model(input_ids=ids[1:2, first:], position_ids=positions[1:2, first:]).logits[0]
    return float((together - alone).abs().max()) < 1e-5


def eval_data(generator, directory, model):
    rows, loss_sum, tokens = [], 0.0, 0
    for index, length in enumerate(EVAL_LENGTHS):
        ids = torch.randint(3, VOCAB, (length,), generator=generator)
        labels = ids.clone()
        if index == 1:
            labels[:4] = -100  # a masked prompt
        row = {"input_ids": ids.tolist()}
        if index == 1:
            row["labels"] = labels.tolist()
        rows.append(row)
        with torch.no_grad():
            logits = model(input_ids=ids[None], position_ids=torch.arange(length)[None]).logits[0]
        targets = torch.cat([labels[1:], torch.tensor([-100])])
        valid = targets != -100
        loss_sum += float(F.cross_entropy(logits.double()[valid], targets[valid], reduction="sum"))
        tokens += int(valid.sum())
    with open(os.path.join(directory, "data.jsonl"), "w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    return loss_sum, tokens


def checkpoint_names(model, tensors):
    # transformers 5 fuses MoE experts in memory (experts.gate_up_proj [E, 2I, H]) and splits them
    # back into one tensor per expert when saving; the gradients get the names the checkpoint has.
    try:
        from transformers.core_model_loading import revert_weight_conversion
    except ImportError:  # transformers 4.x: parameters already have the checkpoint's names
        return tensors
    return revert_weight_conversion(model, dict(tensors))


def rewrite_rope_legacy(directory):
    path = os.path.join(directory, "config.json")
    with open(path) as handle:
        config = json.load(handle)
    rope = config.pop("rope_parameters", None)
    if rope is not None:
        rope = dict(rope)
        config["rope_theta"] = rope.pop("rope_theta", 10000.0)
        config["rope_scaling"] = None if rope.get("rope_type", "default") == "default" else rope
    with open(path, "w") as handle:
        json.dump(config, handle, indent=2, sort_keys=True)


def make_fixture(name, spec, out_dir, seed):
    from transformers import AutoModelForCausalLM
    model_type, extra, rope, keep_rope_parameters = spec
    generator = torch.Generator().manual_seed(seed)
    config = make_config(model_type, extra, rope)
    model = AutoModelForCausalLM.from_config(config).float().eval()
    model.config._attn_implementation = "eager"
    randomize(model, generator)
    directory = os.path.join(out_dir, name)
    os.makedirs(directory, exist_ok=True)
    model.save_pretrained(directory, safe_serialization=True)
    for extra_file in ("generation_config.json",):
        path = os.path.join(directory, extra_file)
        if os.path.exists(path):
            os.remove(path)
    if not keep_rope_parameters:
        rewrite_rope_legacy(directory)

    ids, positions, documents, targets = batch(generator, packed=True)
    packed = packing_honoured(model, ids, positions)
    if not packed:
        ids, positions, documents, targets = batch(generator, packed=False)
    model.zero_grad()
    moe = getattr(model.config, "output_router_logits", False)
    output = model(input_ids=ids, position_ids=positions, **({"output_router_logits": True} if moe else {}))
    logits = output.logits
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100)
    if moe:  # transformers' training loss: CE + router_aux_loss_coef · load-balancing loss
        loss = loss + model.config.router_aux_loss_coef * output.aux_loss
    loss.backward()
    expected = {
        "input_ids": ids.int(), "position_ids": positions.int(), "document_ids": documents.int(),
        "targets": targets.int(), "logits": logits.detach().float().contiguous(),
        "loss": loss.detach().double().reshape(1), "packed": torch.tensor([int(packed)], dtype=torch.int32),
    }
    if moe:
        expected["aux_loss"] = output.aux_loss.detach().double().reshape(1)
    gradients = {name: parameter.grad.detach().float().contiguous() for name, parameter in model.named_parameters()}
    for parameter_name, gradient in checkpoint_names(model, gradients).items():
        expected["grad." + parameter_name] = gradient.contiguous()
    # Last, so the weights and the batch above do not depend on it.
    loss_sum, tokens = eval_data(generator, directory, model)
    expected["eval_loss_sum"] = torch.tensor([loss_sum], dtype=torch.float64)
    expected["eval_tokens"] = torch.tensor([float(tokens)], dtype=torch.float64)
    save_file(expected, os.path.join(directory, "expected.safetensors"))
    print(f"{name}: loss={loss.item():.6f} packed={packed} files={sorted(os.listdir(directory))}")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
    torch.manual_seed(0)
    import transformers
    print(f"torch {torch.__version__} transformers {transformers.__version__}")
    failures = 0
    only = set(sys.argv[2:])
    for seed, (name, spec) in enumerate(FIXTURES.items()):
        if only and name not in only:
            continue
        try:
            make_fixture(name, spec, out_dir, 1234 + seed)
        except Exception:  # one broken fixture must not hide the others' results
            failures += 1
            print(f"{name}: FAILED")
            traceback.print_exc()
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

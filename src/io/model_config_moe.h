// The mixture-of-experts keys of config.json (Qwen2-MoE, Qwen3-MoE, Mixtral) → io::MoeConfig, with
// the defaults of transformers' configuration classes, and back. Both spellings of the expert
// count are read: `num_experts` (the Qwen models' key, written by transformers 4.x) and
// `num_local_experts` (Mixtral's, and what transformers 5 writes for Qwen3-MoE through its
// attribute map). Layer sparsity is transformers' rule: layer i is an MoE block unless it is in
// `mlp_only_layers` or (i + 1) is not a multiple of `decoder_sparse_step`. Mixtral's
// `router_jitter_noise` (multiplicative noise on the router input while training) is refused
// when non-zero rather than ignored. Internal to io/model_config.cpp.
#pragma once

#include <nlohmann/json.hpp>

#include "io/json_fields.h"
#include "io/model_config.h"

namespace surogate::io {

bool is_moe_architecture(Architecture architecture);

// nullopt for the dense architectures.
std::optional<MoeConfig> parse_moe_config(const nlohmann::json& config, const JsonFields& fields,
                                          Architecture architecture, int64_t layers, int64_t intermediate_size);

// Overwrites the MoE keys of `config` (keeping the source's spelling of the expert count).
void write_moe_config(const MoeConfig& moe, Architecture architecture, nlohmann::json& config);

}  // namespace surogate::io

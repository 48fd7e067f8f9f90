// The plans a KV-cache model (kv_cache_model.h) compiles, and what they hold on their backends
// beyond the weights: built here so that the model and a memory prediction made before any weight
// loads (GRPO's rollouts in the training plan, train/objective/grpo_rollout_memory.h) agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "generate/decode_graph.h"
#include "generate/next_token_model.h"
#include "graph/graph.h"
#include "graph/op_registry.h"
#include "io/model_config.h"
#include "models/fp8_recipe.h"
#include "models/lora.h"
#include "models/qlora.h"
#include "models/session_loading.h"

namespace surogate::generate {

// A layer's key or value cache (decode_graph.h names them). A slot's KV cache belongs to the model
// whose sequences fill it: never shared between models.
bool is_kv_cache(const std::string& name);

struct PrefillShape {
  int64_t rows = 0;   // 0: min(slots, 4)
  int64_t chunk = 0;  // 0: min(max_context, 256); 1: no prefill plan (prompts fed a token at a time)
};

// The shapes of the three plans: decode [slots, 1], prefill [prefill_rows, chunk] (absent when
// chunk is 1), single [1, single_chunk] (absent when `single` is false: one prefill row, or no
// longer than chunk).
struct KvCachePlanShapes {
  DecodeShape cache;
  int64_t prefill_rows = 0, chunk = 0, single_chunk = 0;
  bool prefill = false, single = false;
};
KvCachePlanShapes kv_cache_plan_shapes(const ModelOptions& options, const PrefillShape& prefill);

// How a trainer's graph holds the weights a model reads in place (open_kv_cache_on_weights): the
// decode graph is rewritten as the trainer's was, so that it names, types and shapes them alike.
struct WeightForms {
  std::optional<models::LoraOptions> lora;    // the unmerged LoRA adapter, live
  std::optional<models::QloraOptions> qlora;  // QLoRA's quantized base (after the adapter, as trained)
  // recipe fp8_hybrid: the projections' FP8 weights, read by linear_fp8 with each activation at its
  // own scale (amax_history 0, no scaling state: the trainer's evaluation graph)
  std::optional<models::Fp8Options> fp8;
};

// The forward graph of `options` (its adapter read from disk, or `live`'s forms applied) and its
// decode graph at [rows, sequence] with greedy_tokens (decode_graph.h), its products fused
// (decode_fusion.h) on CUDA at rows · sequence ≤ kFusedDecodeRows. An IR definition is built
// at its own [B0, T0] and re-inferred at [rows, sequence].
struct DecodeGraph {
  models::SessionGraph session;
  graph::Graph graph;
};
DecodeGraph build_kv_cache_graph(const io::ModelConfig& config, const graph::OpRegistry& registry,
                                 const ModelOptions& options, const WeightForms& live, const DecodeShape& cache,
                                 int64_t rows, int64_t sequence);

// What the model holds beside the weights it reads, by its plans' memory plans: the caches (every
// layer's k_cache and v_cache [slots, capacity, Hkv, D] in the graph's dtype: fp32 on the CPU,
// bf16 on CUDA) and, for each plan (each on a backend of its own), its activation arena and inputs.
struct KvCacheMemory {
  size_t caches = 0;
  size_t activations = 0;
  size_t total() const { return caches + activations; }
};
KvCacheMemory predict_kv_cache_memory(const io::ModelConfig& config, const ModelOptions& options,
                                      const WeightForms& live = {}, const PrefillShape& prefill = {});

}  // namespace surogate::generate

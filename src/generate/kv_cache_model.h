// The fast NextTokenModel (next_token_model.h's open_kv_cache_model): the keys and values of every
// token fed stay in a KV cache, so a token costs one step over the new tokens only.
//
// Plans of the model's decode graph (generate/decode_graph.h) on one backend kind:
//   decode  [slots, 1]            — one new token for each slot fed (the rest padding rows);
//   prefill [rows, chunk]         — prompts, `chunk` tokens of one slot per row and call;
//   single  [1, rows × chunk]     — a round with one prompt in it (no padding rows computed);
// compiled from the same forward graph (LoRA applied unmerged), so they name their weights and
// caches alike. The weights are loaded ONCE, into the decode plan's backend; the prefill backends
// share its parameters (Cpu/CudaBackend::share_parameters_with): the weights and the caches — the
// caches being constants of both graphs, the prefill plan's appends are what the decode plan reads.
// A feed() is run as rounds: while some fed slot has more than one token left, prefill rounds
// (the single plan when only one slot has, else each row up to `chunk` of one slot's tokens;
// spare rows take slots with a single token left),
// then one decode round for the slots with one token left; a slot's logits come from the round
// that feeds its last token. Padding rows name slots no row of the round names, with no new
// tokens (the op's rule: no slot twice). On CUDA the decode plan runs as a captured CUDA graph.
// Every plan ends in greedy_tokens over its logits (decode_graph.h's add_greedy_tokens):
// feed_greedy reads back those ids alone, feed_in_place the logits.
// A model_definition IR is built at its own [B0, T0] and re-inferred at both shapes
// (generate/batch_reshape.h). Not the same as the full forward: dynamic-NTK RoPE (its scaling
// follows the longest position fed so far, as in transformers with a cache).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>

#include "generate/kv_cache_plans.h"
#include "generate/next_token_model.h"
#include "models/lora.h"

namespace surogate::compiler {
struct ExecutionPlan;
}
namespace surogate::runtime {
class Backend;
}

namespace surogate::generate {

std::unique_ptr<NextTokenModel> open_kv_cache_model(const std::filesystem::path& model_dir, const ModelOptions& options,
                                                    const PrefillShape& prefill);

// A model with `options.adapter` that reads the weights of `base` (a KV cache model of the same
// folder, device and definition, with or without an adapter of its own) in place: it holds only
// its adapter's matrices and its own KV caches, so serving N adapters costs one copy of the
// weights. The shared weights stay alive while either model is open.
std::unique_ptr<NextTokenModel> open_kv_cache_adapter(const NextTokenModel& base,
                                                      const std::filesystem::path& model_dir,
                                                      const ModelOptions& options, const PrefillShape& prefill = {});

// Weights already loaded on a backend by someone else — GRPO's trainer — for a model to read in
// place: rollouts sample from the very weights being trained, with no copy and no sync.
struct LoadedWeights {
  const compiler::ExecutionPlan* plan = nullptr;  // the plan the weights were loaded with
  const runtime::Backend* backend = nullptr;      // holds them; stays loaded while the model runs
  std::optional<models::LoraOptions> lora;        // the unmerged LoRA adapter the owner's graph carries
  std::optional<models::QloraOptions> qlora;      // the owner's quantized base (QLoRA)
  std::optional<models::Fp8Options> fp8;          // the owner's fp8_hybrid recipe (kv_cache_plans.h's WeightForms)
};

// A KV cache model whose every weight (the base's — bf16, or quantized as QLoRA or the fp8_hybrid
// recipe stores it, the decode graph rewritten alike — and the LoRA adapter's matrices) is the
// owner's memory, matched by name, dtype and shape (runtime/shared_parameters.h): it holds only
// its KV caches. A write into the owner's weights (an optimizer step) is what the next feed
// computes with; slots fed before it keep the keys and values of the old weights, so clear them.
// `options.adapter` must be empty (the adapter is `weights.lora`, live); the backend kind must be
// `options.cuda`'s. InternalError when the owner lacks a weight the decode graph reads or holds it
// in another dtype or shape (its name said).
std::unique_ptr<NextTokenModel> open_kv_cache_on_weights(const LoadedWeights& weights,
                                                         const std::filesystem::path& model_dir,
                                                         const ModelOptions& options, const PrefillShape& prefill = {});

}  // namespace surogate::generate

// What generation needs of a model: feed tokens into a slot (one sequence being generated), get
// the logits of the next token. A slot keeps what it was fed (its KV cache, or its token history),
// so a prompt is fed once and each new token after it. Two implementations:
//   open_kv_cache_model   — the fast one: keys and values of every fed token stay in a cache;
//   open_full_forward_model — the oracle: every feed runs the whole forward over the slot's
//     history (models::ModelSession), which is what transformers computes without a cache.
// Both give fp32 logits; on the CPU backend the model runs in fp32, on CUDA in bf16.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <vector>

#include "core/token_draw.h"
#include "models/model_definition.h"

namespace surogate::generate {

struct ModelOptions {
  std::filesystem::path adapter;       // PEFT LoRA adapter folder applied unmerged, or empty
  bool cuda = false;                   // the CUDA backend (bf16) instead of the CPU backend (fp32)
  models::ModelDefinition definition;  // the graph's source (default: the built-in builder)
  int64_t slots = 1;                   // sequences held at once
  int64_t max_context = 2048;          // tokens a slot can hold (prompt + generated)
};

struct SlotFeed {
  int64_t slot = 0;
  std::vector<int32_t> tokens;  // appended after what the slot holds; at least one
};

// Slot `to` takes the first `tokens` of what slot `from` holds (NextTokenModel::copy_prefixes).
struct PrefixCopy {
  int64_t from = 0, to = 0, tokens = 0;
};

// One feed's sampled choice (NextTokenModel::feed_sampled): the op's options for the row
// (sampling.h's TokenSampler::take_row; temperature < 0: the feed chooses nothing) and the
// context its repetition penalty reads.
struct RowChoice {
  RowSampling sampling;
  std::span<const int32_t> context;
};

class NextTokenModel {
public:
  virtual ~NextTokenModel() = default;
  // Appends each feed's tokens to its slot (each slot at most once per call) and returns the fp32
  // logits after the last of them, [feeds.size() × vocab_size()] row-major in the feeds' order,
  // in the model's own buffer: valid (and the caller's to change) until the next feed_in_place or
  // clear. No copy, no allocation per step once the buffer has grown: what the engine calls.
  // UserError when a slot would exceed max_context or an id is outside the vocabulary.
  virtual std::span<float> feed_in_place(std::span<const SlotFeed> feeds) = 0;
  // The same logits as a vector of their own.
  std::vector<float> feed(std::span<const SlotFeed> feeds) {
    const std::span<const float> logits = feed_in_place(feeds);
    return {logits.begin(), logits.end()};
  }
  // Feeds as feed_in_place, returning each feed's greedy choice instead of its logits, in the
  // feeds' order: sampling.h's greedy_choice (the first index of the largest logit; -1 when they
  // hold NaN or +inf). The KV cache model computes it where its logits are (on the GPU with
  // CUDA: only the ids come back); this default takes it from feed_in_place's logits.
  virtual std::vector<int32_t> feed_greedy(std::span<const SlotFeed> feeds);
  // Feeds as feed_in_place, returning each feed's choice under choices[i] by ops/sample_tokens.h
  // (its negative codes included: sampling.h's TokenSampler::check_choice reads them). The KV
  // cache model on CUDA runs the op on the GPU over its logits in place (only the ids come back);
  // this default runs it on the host over feed_in_place's logits: the same tokens for the same
  // logits.
  virtual std::vector<int32_t> feed_sampled(std::span<const SlotFeed> feeds, std::span<const RowChoice> choices);
  // Whether copy_prefixes works: a model whose slots hold nothing but what their tokens
  // determine (not a vision-language prompt's image features). The engine then computes a prompt
  // that several sequences share once (engine.h).
  virtual bool copies_prefixes() const { return false; }
  // Each copy's `to` slot then holds the first `tokens` of what its `from` slot holds, as if they
  // had been fed to it (what it held before is dropped); the `from` slots are unchanged.
  // InternalError when the model does not copy prefixes, a `from` slot holds fewer tokens, a slot
  // is both a source and a destination or a destination twice.
  virtual void copy_prefixes(std::span<const PrefixCopy> copies);
  virtual void clear(int64_t slot) = 0;  // the slot then holds nothing
  virtual int64_t held(int64_t slot) const = 0;
  virtual int64_t slots() const = 0;
  virtual int64_t max_context() const = 0;
  virtual int64_t vocab_size() const = 0;
  // The prompt tokens of one slot a round computes at most when several prompts come in at once
  // (0: no such bound). A caller feeding several prompts keeps each to this, so that one round
  // carries them all instead of padding rows.
  virtual int64_t prefill_chunk() const { return 0; }
};

// The fast model: a KV cache per slot, decode and prefill plans sharing one copy of the weights
// (generate/kv_cache_model.h says how; the default prefill shape).
std::unique_ptr<NextTokenModel> open_kv_cache_model(const std::filesystem::path& model_dir,
                                                    const ModelOptions& options);
std::unique_ptr<NextTokenModel> open_full_forward_model(const std::filesystem::path& model_dir,
                                                        const ModelOptions& options);

}  // namespace surogate::generate

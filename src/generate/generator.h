// The generate loop: many requests over a NextTokenModel's slots. Each waiting request takes a
// free slot; the prompts admitted together are fed in one call (prefill), then every active slot
// decodes one token per step in one call; a finished request frees its slot for the next one
// (continuous batching at step granularity). Each request samples with its own TokenSampler and
// seed, so its tokens do not depend on what else runs beside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "generate/next_token_model.h"
#include "generate/sampling.h"

namespace surogate::tokenizer {
class Tokenizer;
}

namespace surogate::generate {

struct GenerationRequest {
  std::vector<int32_t> prompt;     // at least one token
  SamplingOptions sampling;
  uint64_t seed = 0;
  int64_t max_new_tokens = 256;    // >= 1
  std::vector<int32_t> eos_ids;    // any of them ends the completion ("stop"; the id is kept)
  std::vector<std::string> stop;   // stop strings (need a tokenizer): the text ends before one
};

struct GenerationResult {
  std::vector<int32_t> completion_ids;  // the new tokens only
  std::string completion;               // their text, when a tokenizer was given (stop strings cut)
  std::string finish_reason;            // "stop" or "length"
};

// Where the time went: feed calls that held a prompt count as prefill (with the decode tokens fed
// beside it), the others as decode.
struct GenerationStats {
  int64_t prompt_tokens = 0;         // computed
  int64_t shared_prompt_tokens = 0;  // not computed: taken from a sequence with the same prompt (engine.h)
  int64_t generated_tokens = 0;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
  int64_t decode_steps = 0;

  // Another run's (a group of requests, a rank) added to these.
  GenerationStats& operator+=(const GenerationStats& other) {
    prompt_tokens += other.prompt_tokens;
    shared_prompt_tokens += other.shared_prompt_tokens;
    generated_tokens += other.generated_tokens;
    prefill_seconds += other.prefill_seconds;
    decode_seconds += other.decode_seconds;
    decode_steps += other.decode_steps;
    return *this;
  }
};

// Called as text becomes final: (request index, text delta). Deltas of one request concatenate to
// its completion.
using TextCallback = std::function<void(size_t request, const std::string& delta)>;

// Runs every request to completion; results in the requests' order. `tokenizer` may be null when no
// request has stop strings (then `completion` stays empty). UserError naming the request (its index)
// when its prompt is empty, prompt + max_new_tokens exceeds the model's context, or stop strings
// come without a tokenizer. `max_prefill_tokens`: the prompt tokens one feed carries at most
// (engine.h; 0: its default) — a model that must see a prompt whole (a vision-language prompt,
// whose image features are spliced over the whole run of image tokens) is given its length.
std::vector<GenerationResult> generate(NextTokenModel& model, std::span<const GenerationRequest> requests,
                                       const tokenizer::Tokenizer* tokenizer, const TextCallback& on_text = {},
                                       GenerationStats* stats = nullptr, int64_t max_prefill_tokens = 0);

}  // namespace surogate::generate

// The generate loop as an object that takes requests while it runs, for a server: submit() queues
// a sequence with a sink that receives its tokens as they come, step() runs one model feed for
// every admitted sequence: the last token of each decoding one, and up to max_prefill_tokens of
// the prompts still being prefilled (in admission order), so a long prompt is fed in chunks over
// several steps while the others keep decoding (a sequence samples once its prompt is in), cancel()
// drops a sequence, whose slot is freed at the next step. Sequences take free slots in submission
// order; a finished one frees its slot for the next (continuous batching at step granularity).
// Each sequence samples with its own TokenSampler and seed, so its tokens do not depend on what
// else runs beside it. A prompt several sequences share (a GRPO group, `n` completions of one
// request, the same prompt twice in a file) is computed once, when the model copies prefixes
// (NextTokenModel::copies_prefixes): a sequence admitted while another running one has the same
// prompt waits until that one's cache holds the prompt, takes all of it but the last token by
// copy_prefixes, and feeds the last token itself, beside the decoding ones (if the other one is
// gone by then, it feeds its prompt as usual). Not thread-safe: one thread (or one lock) drives it.
//
//   GenerationEngine engine(model, &tokenizer);
//   engine.submit(request, [](const TokenEvent& event) { ... }, /*top_logprobs=*/5);
//   while (engine.has_work()) engine.step();
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "generate/generator.h"
#include "generate/stop_conditions.h"

namespace surogate::generate {

// One generated token of a sequence.
struct TokenEvent {
  int32_t token = 0;
  std::string text;                      // the text that became final with it (often empty)
  std::optional<Logprobs> logprobs;      // when the sequence asked for them (unprocessed logits)
  std::optional<FinishReason> finish;    // set on the sequence's last event
};

// Called on the thread that runs step(); must not call back into the engine.
using TokenSink = std::function<void(const TokenEvent&)>;

// UserError naming `what` when the prompt is empty, prompt + max_new_tokens exceeds the model's
// context, an id is outside the vocabulary, stop strings come without a tokenizer, or a sampling
// option is out of range. Reads only the model's fixed sizes.
void check_request(const GenerationRequest& request, const std::string& what, const NextTokenModel& model,
                   const tokenizer::Tokenizer* tokenizer);

// Prompt tokens one step feeds at most (beside one token of every decoding sequence).
inline constexpr int64_t kDefaultMaxPrefillTokens = 1024;

class GenerationEngine {
 public:
  // `model` and `tokenizer` (may be null: no text, no stop strings) must outlive the engine.
  // UserError when max_prefill_tokens < 1.
  GenerationEngine(NextTokenModel& model, const tokenizer::Tokenizer* tokenizer,
                   int64_t max_prefill_tokens = kDefaultMaxPrefillTokens);

  // Queues a sequence (check_request first: UserError naming "request"); returns its id.
  // `top_logprobs`: when set, each event carries the chosen token's logprob and the top N.
  uint64_t submit(const GenerationRequest& request, TokenSink sink, std::optional<int64_t> top_logprobs = {});
  // The sequence gets no more events; its slot is freed at the next step. Unknown ids are ignored.
  void cancel(uint64_t id);
  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  // Admits waiting sequences into free slots, then one feed, and one token for each running one
  // whose prompt is all in.
  // When the feed throws, every sequence is dropped (slots freed) and the exception propagates.
  void step();
  // Drops every sequence, waiting or running (no events).
  void clear();

  const GenerationStats& stats() const { return stats_; }

 private:
  struct Sequence {
    uint64_t id = 0;
    GenerationRequest request;
    TokenSink sink;
    std::optional<int64_t> top_logprobs;
  };
  struct Running {
    Sequence sequence;
    int64_t slot = 0;
    std::vector<int32_t> context;  // prompt + generated
    TokenSampler sampler;
    StopConditions stop;
    size_t fed = 0;                // tokens of `context` the slot's cache holds
    uint64_t prompt_from = 0;      // the running sequence whose prompt it copies (0: none, or done)
  };

  void admit();
  // The running sequence (not itself waiting for a copy) with this prompt, or 0.
  uint64_t prompt_source(const std::vector<int32_t>& prompt) const;
  // The copies of the sequences whose prompt's source now holds it (those whose source is gone
  // feed their prompt instead).
  void copy_shared_prompts();

  NextTokenModel& model_;
  const tokenizer::Tokenizer* tokenizer_;
  int64_t max_prefill_tokens_;
  std::deque<Sequence> waiting_;
  std::vector<Running> running_;
  std::deque<int64_t> free_slots_;
  std::vector<uint64_t> cancelled_;  // running ids to drop at the next step
  uint64_t next_id_ = 1;
  GenerationStats stats_;
};

}  // namespace surogate::generate

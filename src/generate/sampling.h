// Choosing the next token from a model's logits, with transformers' generate() semantics:
//   1. repetition_penalty (always, also when greedy; off at 1): each distinct token of the context
//      (prompt + tokens generated so far) gets logit < 0 ? logit * penalty : logit / penalty;
//   2. greedy (do_sample false, or temperature 0 — our CLI's convention): the argmax, the first
//      maximum on ties. Otherwise the warpers in transformers' order (_get_logits_processor):
//      temperature (logits / t; off at 1), top_k (keep logits >= the k-th largest, ties kept;
//      off at 0), top_p (sort ascending, drop tokens whose cumulative probability is <= 1 - top_p,
//      the most likely token always kept; off at 1), min_p (drop tokens whose probability is
//      < min_p × the largest probability; off at 0). Filtered tokens get -inf;
//   3. a draw from what is left: ops/sample_tokens.h, the op a model runs where its logits are
//      (on the GPU with CUDA), with integer weights (probabilities in units of 2^-40 of the most
//      likely token's) and the counter-based Philox stream of core/token_draw.h: draw n of a
//      sequence is a pure function of (seed, n), so the same seed and the same logits give the
//      same tokens on the CPU and on CUDA, on every platform. top_p and min_p are read as floats.
//      (Until this op, the draw was std::mt19937_64's over double probabilities on the host: the
//      tokens of a seed changed once with it.)
// process_logits (steps 1-2 on the host, in double) is the reference the op's filters are tested
// against, and what generate_sampling_probe compares with transformers.
//
//   TokenSampler sampler(options, seed);             // validates the options (UserError)
//   int32_t next = sampler.choose(logits, context);   // draw n, then n + 1, ...
//   Logprobs logprobs = log_softmax(logits, next, 5); // the unprocessed distribution's
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/token_draw.h"

namespace surogate::generate {

// Named and defaulted as transformers' GenerationConfig (min_p: transformers' None is 0 here).
struct SamplingOptions {
  bool do_sample = false;
  double temperature = 1.0;         // >= 0; 0 = greedy
  int64_t top_k = 50;               // >= 0; 0 = off
  double top_p = 1.0;               // in (0, 1]; 1 = off
  double min_p = 0.0;               // in [0, 1]; 0 = off
  double repetition_penalty = 1.0;  // > 0; 1 = off

  // Argmax instead of a draw: do_sample false or temperature 0.
  bool greedy() const { return !do_sample || temperature == 0.0; }
  // The choice is the argmax of the model's logits as they come (no penalty changes them): what a
  // model may compute where its logits are (NextTokenModel::feed_greedy).
  bool plain_greedy() const { return greedy() && repetition_penalty == 1.0; }
  bool operator==(const SamplingOptions&) const = default;
};

// UserError naming the option (temperature, top_k, top_p, min_p, repetition_penalty) when a value
// is out of its range above or not finite.
void validate(const SamplingOptions& options);

// Steps 1 and (when not greedy) 2 above, in place: what the draw sees. Context ids outside
// [0, logits.size()) are ignored, as transformers ignores ids beyond the model's logits.
void process_logits(const SamplingOptions& options, std::span<float> logits,
                    std::span<const int32_t> context);

// softmax(logits) in double; -inf logits get probability 0.
std::vector<double> softmax_probabilities(std::span<const float> logits);

// The op's reading of `options` for draw `draw` of the stream `seed` (ops/sample_tokens.h):
// temperature 0 when greedy(), log_min_p -inf when min_p is 0.
RowSampling row_sampling(const SamplingOptions& options, uint64_t seed, uint32_t draw);

class TokenSampler {
 public:
  // Validates `options` (UserError); `seed` names the random stream of this sampler.
  TokenSampler(const SamplingOptions& options, uint64_t seed);

  // The next token, by ops::sample_tokens on the host (the logits are left as they are): the
  // argmax when greedy, else the draw of index draws(), after which draws() grows by one (greedy
  // takes none). `context` is the prompt plus the tokens generated so far. UserError when the
  // logits hold NaN or +inf, or nothing is left to draw (every logit -inf).
  int32_t choose(std::span<float> logits, std::span<const int32_t> context);

  // What a model that samples where its logits are (NextTokenModel::feed_sampled) needs for this
  // sampler's next choice, which then counts as made (draws() grows unless greedy).
  RowSampling take_row();
  // check_choice: the op's token, or the UserError of its negative codes.
  static int32_t check_choice(int32_t token);

  const SamplingOptions& options() const { return options_; }
  uint32_t draws() const { return draws_; }

 private:
  SamplingOptions options_;
  uint64_t seed_ = 0;
  uint32_t draws_ = 0;  // the index of the next draw in the stream
};

// The first index of the largest logit (NaN is never the largest).
int32_t argmax(std::span<const float> logits);

// choose() of a plain_greedy() sampler without its UserError: argmax(logits), or -1 when the
// logits hold NaN or +inf (ops/greedy_tokens.h's rule, which a model applies on its device).
int32_t greedy_choice(std::span<const float> logits);
// The UserError choose() raises for logits holding NaN or +inf.
[[noreturn]] void fail_unusable_logits();

struct TokenLogprob {
  int32_t token = 0;
  double logprob = 0.0;
};

struct Logprobs {
  double chosen = 0.0;            // log_softmax(logits)[chosen]
  std::vector<TokenLogprob> top;  // the top_n most likely, most likely first (ties: lower id first)
};

// The log-probabilities of the *unprocessed* distribution (what OpenAI's `logprobs` reports):
// call it on the model's logits before choose() changes them. top_n is clamped to the vocabulary;
// UserError when it is negative or `chosen` is outside the vocabulary.
Logprobs log_softmax(std::span<const float> logits, int32_t chosen, int64_t top_n);

}  // namespace surogate::generate

// The generate loop as an object (engine.h).
#include "generate/engine.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "core/error.h"
#include "ops/parallel_for.h"
#include "tokenizer/tokenizer.h"

namespace surogate::generate {

void check_request(const GenerationRequest& request, const std::string& what, const NextTokenModel& model,
                   const tokenizer::Tokenizer* tokenizer) {
  if (request.prompt.empty()) fail_user("{}: the prompt has no tokens", what);
  if (request.max_new_tokens < 1) fail_user("{}: max_new_tokens must be at least 1, got {}", what, request.max_new_tokens);
  const int64_t needed = static_cast<int64_t>(request.prompt.size()) + request.max_new_tokens;
  if (needed > model.max_context()) {
    fail_user("{}: a prompt of {} tokens plus max_new_tokens {} needs {} positions, more than the context of "
              "{}; lower max_new_tokens or raise the context", what, request.prompt.size(), request.max_new_tokens,
              needed, model.max_context());
  }
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= model.vocab_size()) {
      fail_user("{}: token id {} is outside the model's vocabulary [0, {})", what, id, model.vocab_size());
    }
  }
  if (!request.stop.empty() && tokenizer == nullptr) fail_user("{}: stop strings need the model's tokenizer", what);
  validate(request.sampling);
}

GenerationEngine::GenerationEngine(NextTokenModel& model, const tokenizer::Tokenizer* tokenizer,
                                   int64_t max_prefill_tokens)
    : model_(model), tokenizer_(tokenizer), max_prefill_tokens_(max_prefill_tokens) {
  if (max_prefill_tokens < 1) fail_user("max_prefill_tokens must be at least 1, got {}", max_prefill_tokens);
  for (int64_t slot = 0; slot < model.slots(); ++slot) free_slots_.push_back(slot);
}

uint64_t GenerationEngine::submit(const GenerationRequest& request, TokenSink sink, std::optional<int64_t> top_logprobs) {
  check_request(request, "request", model_, tokenizer_);
  if (top_logprobs && *top_logprobs < 0) fail_user("request: top_logprobs must be at least 0, got {}", *top_logprobs);
  waiting_.push_back({next_id_, request, std::move(sink), top_logprobs});
  return next_id_++;
}

void GenerationEngine::cancel(uint64_t id) {
  auto waiting = std::find_if(waiting_.begin(), waiting_.end(), [id](const Sequence& s) { return s.id == id; });
  if (waiting != waiting_.end()) {
    waiting_.erase(waiting);
    return;
  }
  cancelled_.push_back(id);
}

void GenerationEngine::clear() {
  waiting_.clear();
  for (Running& run : running_) free_slots_.push_back(run.slot);
  running_.clear();
  cancelled_.clear();
}

void GenerationEngine::admit() {
  if (!cancelled_.empty()) {
    std::vector<Running> kept;
    for (Running& run : running_) {
      if (std::find(cancelled_.begin(), cancelled_.end(), run.sequence.id) != cancelled_.end()) {
        free_slots_.push_back(run.slot);
      } else {
        kept.push_back(std::move(run));
      }
    }
    running_ = std::move(kept);
    cancelled_.clear();
  }
  while (!free_slots_.empty() && !waiting_.empty()) {
    Sequence sequence = std::move(waiting_.front());
    waiting_.pop_front();
    const GenerationRequest& request = sequence.request;
    model_.clear(free_slots_.front());
    // The sampler and the stop rules read the request before it moves into the Running.
    TokenSampler sampler(request.sampling, request.seed);
    StopConditions stop({request.eos_ids, request.stop, request.max_new_tokens}, tokenizer_);
    std::vector<int32_t> context = request.prompt;
    const uint64_t source = model_.copies_prefixes() && context.size() > 1 ? prompt_source(context) : 0;
    running_.push_back({std::move(sequence), free_slots_.front(), std::move(context), std::move(sampler), std::move(stop),
                        0, source});
    free_slots_.pop_front();
  }
}

uint64_t GenerationEngine::prompt_source(const std::vector<int32_t>& prompt) const {
  for (const Running& run : running_) {
    if (run.prompt_from == 0 && run.sequence.request.prompt == prompt) return run.sequence.id;
  }
  return 0;
}

void GenerationEngine::copy_shared_prompts() {
  std::vector<PrefixCopy> copies;
  int64_t shared = 0;
  for (Running& run : running_) {
    if (run.prompt_from == 0) continue;
    const auto source = std::find_if(running_.begin(), running_.end(),
                                     [&](const Running& other) { return other.sequence.id == run.prompt_from; });
    const size_t tokens = run.context.size() - 1;  // the prompt but its last token, which the sequence feeds
    if (source == running_.end()) {
      run.prompt_from = 0;  // finished or cancelled before it held the prompt: fed as any prompt
    } else if (source->fed >= tokens) {
      copies.push_back({source->slot, run.slot, static_cast<int64_t>(tokens)});
      run.fed = tokens;
      run.prompt_from = 0;
      shared += static_cast<int64_t>(tokens);
    }
  }
  if (copies.empty()) return;
  try {
    model_.copy_prefixes(copies);
  } catch (...) {
    clear();
    throw;
  }
  stats_.shared_prompt_tokens += shared;
}

void GenerationEngine::step() {
  admit();
  if (running_.empty()) return;
  copy_shared_prompts();
  // One call feeds the last token of every decoding sequence and the next chunks of the prompts
  // still coming in, up to max_prefill_tokens of them.
  std::vector<SlotFeed> feeds;
  std::vector<size_t> fed_rows;  // the running sequence of each feed
  int64_t budget = max_prefill_tokens_;
  bool prefill = false;
  // Several prompts coming in: each takes at most the model's prefill chunk, so that one round
  // carries several of them (a lone prompt takes what the budget allows).
  const auto prompts = std::count_if(running_.begin(), running_.end(), [](const Running& run) {
    return run.prompt_from == 0 && (run.fed == 0 || run.context.size() - run.fed > 1);
  });
  const size_t per_prompt =
      prompts > 1 && model_.prefill_chunk() > 0 ? static_cast<size_t>(model_.prefill_chunk()) : std::numeric_limits<size_t>::max();
  for (size_t index = 0; index < running_.size(); ++index) {
    Running& run = running_[index];
    if (run.prompt_from != 0) continue;  // waits for the prompt it shares
    const size_t left = run.context.size() - run.fed;
    const bool decoding = run.fed > 0 && left == 1;
    const size_t take = decoding ? 1 : std::min({left, static_cast<size_t>(budget), per_prompt});
    if (take == 0) continue;
    if (!decoding) {
      budget -= static_cast<int64_t>(take);
      stats_.prompt_tokens += static_cast<int64_t>(take);
      prefill = true;
    } else if (run.context.size() == run.sequence.request.prompt.size()) {
      ++stats_.prompt_tokens;  // the last token of a prompt the rest of which was copied
    }
    const auto first = run.context.begin() + static_cast<std::ptrdiff_t>(run.fed);
    feeds.push_back({run.slot, std::vector<int32_t>(first, first + static_cast<std::ptrdiff_t>(take))});
    fed_rows.push_back(index);
  }
  if (feeds.empty()) return;  // (not reached: a sequence waits only on one that is fed)
  // Every row that chooses a token this step greedy, with no penalty and no logprobs: the model
  // chooses them where its logits are and returns the ids alone (the same tokens: sampling.h's
  // greedy_choice is choose()'s rule for such a sampler, and a greedy sampler draws nothing).
  // Else, with no logprobs asked: the sampling op where the logits are (feed_sampled). Logprobs
  // need the unprocessed distribution: those steps take the logits to the host.
  const auto choosing = [&](size_t row) {
    const Running& run = running_[fed_rows[row]];
    return run.fed + feeds[row].tokens.size() == run.context.size();
  };
  const bool greedy = std::all_of(fed_rows.begin(), fed_rows.end(), [&](size_t index) {
    const Running& run = running_[index];
    return run.sampler.options().plain_greedy() && !run.sequence.top_logprobs;
  });
  const bool on_host = std::any_of(fed_rows.begin(), fed_rows.end(),
                                   [&](size_t index) { return running_[index].sequence.top_logprobs.has_value(); });
  std::vector<RowChoice> choices;
  if (!greedy && !on_host) {
    for (size_t row = 0; row < feeds.size(); ++row) {
      Running& run = running_[fed_rows[row]];
      RowChoice choice{RowSampling{.temperature = -1.0f}, run.context};  // a prompt chunk: nothing chosen
      if (choosing(row)) choice.sampling = run.sampler.take_row();
      choices.push_back(choice);
    }
  }
  const auto started = std::chrono::steady_clock::now();
  std::span<float> logits;
  std::vector<int32_t> chosen;
  try {
    if (greedy) {
      chosen = model_.feed_greedy(feeds);
    } else if (!on_host) {
      chosen = model_.feed_sampled(feeds, choices);
    } else {
      logits = model_.feed_in_place(feeds);
    }
  } catch (...) {
    clear();
    throw;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  (prefill ? stats_.prefill_seconds : stats_.decode_seconds) += seconds;
  if (!prefill) ++stats_.decode_steps;
  const size_t vocab = static_cast<size_t>(model_.vocab_size());
  // The rows whose prompt is all in choose a token, each with its own sampler (on the host: in
  // parallel, a large vocabulary makes it the host's main cost of a step), the events then in order.
  std::vector<size_t> sampled;  // feed rows
  for (size_t row = 0; row < feeds.size(); ++row) {
    if (choosing(row)) sampled.push_back(row);  // else more of its prompt to come
  }
  for (size_t row = 0; row < feeds.size(); ++row) running_[fed_rows[row]].fed += feeds[row].tokens.size();
  std::vector<TokenEvent> events(sampled.size());
  if (!on_host) {
    for (size_t index = 0; index < sampled.size(); ++index) {
      const int32_t token = chosen[sampled[index]];
      events[index].token = greedy ? token : TokenSampler::check_choice(token);
      if (events[index].token < 0) fail_unusable_logits();
    }
  } else {
    ops::parallel_for(static_cast<int64_t>(sampled.size()), [&](int64_t index) {
      const size_t row = sampled[static_cast<size_t>(index)];
      Running& run = running_[fed_rows[row]];
      const std::span<float> row_logits = logits.subspan(row * vocab, vocab);
      TokenEvent& event = events[static_cast<size_t>(index)];
      event.token = run.sampler.choose(row_logits, run.context);
      if (run.sequence.top_logprobs) event.logprobs = log_softmax(row_logits, event.token, *run.sequence.top_logprobs);
    });
  }
  std::vector<bool> finished(running_.size(), false);
  for (size_t index = 0; index < sampled.size(); ++index) {
    Running& run = running_[fed_rows[sampled[index]]];
    TokenEvent& event = events[index];
    ++stats_.generated_tokens;
    run.context.push_back(event.token);
    event.text = run.stop.push(event.token);
    event.finish = run.stop.finish_reason();
    run.sequence.sink(event);
    finished[fed_rows[sampled[index]]] = event.finish.has_value();
  }
  std::vector<Running> still_running;
  for (size_t index = 0; index < running_.size(); ++index) {
    if (finished[index]) {
      free_slots_.push_back(running_[index].slot);
    } else {
      still_running.push_back(std::move(running_[index]));
    }
  }
  running_ = std::move(still_running);
}

}  // namespace surogate::generate

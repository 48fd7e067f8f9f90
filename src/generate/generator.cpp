// The generate loop (generator.h).
#include "generate/generator.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>

#include "core/error.h"
#include "generate/stop_conditions.h"
#include "tokenizer/tokenizer.h"

namespace surogate::generate {
namespace {

// One request while it holds a slot.
struct Running {
  size_t request = 0;
  int64_t slot = 0;
  std::vector<int32_t> context;  // prompt + generated
  TokenSampler sampler;
  StopConditions stop;
  bool fed_prompt = false;
};

void check_request(const GenerationRequest& request, size_t index, const NextTokenModel& model,
                   const tokenizer::Tokenizer* tokenizer) {
  if (request.prompt.empty()) fail_user("request {}: the prompt has no tokens", index);
  if (request.max_new_tokens < 1) fail_user("request {}: max_new_tokens must be at least 1, got {}", index, request.max_new_tokens);
  const int64_t needed = static_cast<int64_t>(request.prompt.size()) + request.max_new_tokens;
  if (needed > model.max_context()) {
    fail_user("request {}: a prompt of {} tokens plus max_new_tokens {} needs {} positions, more than the context of "
              "{}; lower max_new_tokens or raise the context", index, request.prompt.size(), request.max_new_tokens,
              needed, model.max_context());
  }
  for (int32_t id : request.prompt) {
    if (id < 0 || id >= model.vocab_size()) {
      fail_user("request {}: token id {} is outside the model's vocabulary [0, {})", index, id, model.vocab_size());
    }
  }
  if (!request.stop.empty() && tokenizer == nullptr) fail_user("request {}: stop strings need the model's tokenizer", index);
  validate(request.sampling);
}

}  // namespace

std::vector<GenerationResult> generate(NextTokenModel& model, std::span<const GenerationRequest> requests,
                                       const tokenizer::Tokenizer* tokenizer, const TextCallback& on_text,
                                       GenerationStats* stats) {
  GenerationStats counted;
  for (size_t index = 0; index < requests.size(); ++index) check_request(requests[index], index, model, tokenizer);
  std::vector<GenerationResult> results(requests.size());
  std::deque<int64_t> free_slots;
  for (int64_t slot = 0; slot < model.slots(); ++slot) free_slots.push_back(slot);
  std::vector<Running> running;
  size_t next_request = 0;
  const size_t vocab = static_cast<size_t>(model.vocab_size());

  while (next_request < requests.size() || !running.empty()) {
    while (!free_slots.empty() && next_request < requests.size()) {
      const GenerationRequest& request = requests[next_request];
      model.clear(free_slots.front());
      running.push_back({next_request, free_slots.front(), request.prompt, TokenSampler(request.sampling, request.seed),
                         StopConditions({request.eos_ids, request.stop, request.max_new_tokens}, tokenizer)});
      free_slots.pop_front();
      ++next_request;
    }
    // One call feeds the prompts just admitted and the last token of every other running request.
    std::vector<SlotFeed> feeds;
    feeds.reserve(running.size());
    bool prefill = false;
    for (Running& run : running) {
      feeds.push_back({run.slot, run.fed_prompt ? std::vector<int32_t>{run.context.back()} : run.context});
      if (!run.fed_prompt) counted.prompt_tokens += static_cast<int64_t>(run.context.size());
      prefill = prefill || !run.fed_prompt;
      run.fed_prompt = true;
    }
    const auto started = std::chrono::steady_clock::now();
    std::vector<float> logits = model.feed(feeds);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    (prefill ? counted.prefill_seconds : counted.decode_seconds) += seconds;
    if (!prefill) ++counted.decode_steps;
    counted.generated_tokens += static_cast<int64_t>(running.size());
    std::vector<Running> still_running;
    for (size_t row = 0; row < running.size(); ++row) {
      Running& run = running[row];
      GenerationResult& result = results[run.request];
      const int32_t token = run.sampler.choose(std::span<float>(logits.data() + row * vocab, vocab), run.context);
      run.context.push_back(token);
      const std::string delta = run.stop.push(token);
      if (on_text && !delta.empty()) on_text(run.request, delta);
      if (run.stop.finished()) {
        result.completion_ids = run.stop.ids();
        result.completion = run.stop.text();
        result.finish_reason = std::string(finish_reason_name(*run.stop.finish_reason()));
      }
      if (result.finish_reason.empty()) {
        still_running.push_back(std::move(run));
      } else {
        free_slots.push_back(run.slot);
      }
    }
    running = std::move(still_running);
  }
  if (stats != nullptr) *stats = counted;
  return results;
}

}  // namespace surogate::generate

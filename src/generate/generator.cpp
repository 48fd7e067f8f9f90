// The generate loop (generator.h): a GenerationEngine run until every request finished.
#include "generate/generator.h"

#include <fmt/format.h>

#include "generate/engine.h"

namespace surogate::generate {

std::vector<GenerationResult> generate(NextTokenModel& model, std::span<const GenerationRequest> requests,
                                       const tokenizer::Tokenizer* tokenizer, const TextCallback& on_text,
                                       GenerationStats* stats, int64_t max_prefill_tokens) {
  for (size_t index = 0; index < requests.size(); ++index) {
    check_request(requests[index], fmt::format("request {}", index), model, tokenizer);
  }
  std::vector<GenerationResult> results(requests.size());
  GenerationEngine engine(model, tokenizer, max_prefill_tokens > 0 ? max_prefill_tokens : kDefaultMaxPrefillTokens);
  for (size_t index = 0; index < requests.size(); ++index) {
    engine.submit(requests[index], [&results, &on_text, index](const TokenEvent& event) {
      GenerationResult& result = results[index];
      result.completion_ids.push_back(event.token);
      result.completion += event.text;
      if (on_text && !event.text.empty()) on_text(index, event.text);
      if (event.finish) result.finish_reason = std::string(finish_reason_name(*event.finish));
    });
  }
  while (engine.has_work()) engine.step();
  if (stats != nullptr) *stats = engine.stats();
  return results;
}

}  // namespace surogate::generate

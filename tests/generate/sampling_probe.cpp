// generate_sampling_probe: reads {"logits": [...], "context": [...], "options": {...}} on stdin and
// prints {"probabilities": [...]}, the softmax of the logits after process_logits — what the draw
// of TokenSampler::choose sees. tests/python/test_generate_sampling.py compares it with
// transformers' own logits processors.
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "generate/generation_defaults.h"
#include "generate/sampling.h"

int main() try {
  const std::string text{std::istreambuf_iterator<char>(std::cin),
                         std::istreambuf_iterator<char>()};
  const nlohmann::json input = nlohmann::json::parse(text);
  std::vector<float> logits = input.at("logits").get<std::vector<float>>();
  const std::vector<int32_t> context = input.at("context").get<std::vector<int32_t>>();
  const surogate::generate::SamplingOptions options =
      surogate::generate::sampling_options_from_json(input.at("options"), "options");
  surogate::generate::process_logits(options, logits, context);
  const nlohmann::json output = {
      {"probabilities", surogate::generate::softmax_probabilities(logits)}};
  std::cout << output.dump() << "\n";
  return 0;
} catch (const surogate::UserError& error) {
  std::cerr << error.what() << "\n";
  return 2;
}

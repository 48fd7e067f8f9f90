// generate_sampling_probe: reads {"logits": [...], "context": [...], "options": {...}} on stdin and
// prints {"probabilities": [...]}, the softmax of the logits after process_logits — what the draw
// of TokenSampler::choose sees. tests/python/test_generate_sampling.py compares it with
// transformers' own logits processors.
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "generate/sampling.h"

int main() try {
  using surogate::generate::SamplingOptions;
  const std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  const nlohmann::json input = nlohmann::json::parse(text);
  std::vector<float> logits = input.at("logits").get<std::vector<float>>();
  const std::vector<int32_t> context = input.at("context").get<std::vector<int32_t>>();
  const nlohmann::json& given = input.at("options");
  SamplingOptions options;
  options.do_sample = given.value("do_sample", options.do_sample);
  options.temperature = given.value("temperature", options.temperature);
  options.top_k = given.value("top_k", options.top_k);
  options.top_p = given.value("top_p", options.top_p);
  options.min_p = given.value("min_p", options.min_p);
  options.repetition_penalty = given.value("repetition_penalty", options.repetition_penalty);
  surogate::generate::validate(options);
  surogate::generate::process_logits(options, logits, context);
  const nlohmann::json output = {{"probabilities", surogate::generate::softmax_probabilities(logits)}};
  std::cout << output.dump() << "\n";
  return 0;
} catch (const surogate::UserError& error) {
  std::cerr << error.what() << "\n";
  return 2;
}

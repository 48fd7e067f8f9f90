// Validation loss and accuracy; see evaluator.h.
#include "train/evaluator.h"

#include <algorithm>
#include <cstring>

#include "models/decoder_graph.h"

namespace surogate::train {

Evaluator::Evaluator(const io::ModelConfig& config, const graph::OpRegistry& registry, int64_t batch, int64_t sequence,
                     int64_t lmhead_chunks, std::shared_ptr<const data::TokenCache> cache, uint64_t seed,
                     int32_t pad_id, const models::LoraSetup* lora)
    : loader_(cache, cache->eval(), batch, seed, pad_id) {
  models::DecoderGraph decoder = models::build_decoder_graph(config, registry, {batch, sequence, lmhead_chunks, true});
  graph::Graph forward = lora ? models::apply_lora(decoder.graph, registry, lora->adapters, lora->options, false)
                              : std::move(decoder.graph);
  plan_ = compiler::compile_forward(std::move(forward), registry);
  loss_ = plan_.tensor("loss");
  correct_ = plan_.tensor("correct");
  backend_.load(plan_, registry);
  inputs_ = std::make_unique<BatchInputs>(plan_);
}

EvalResult Evaluator::run(std::span<const WeightView> weights) {
  for (const WeightView& weight : weights) {
    std::span<float> destination = backend_.view<float>(plan_.tensor(weight.name));
    std::copy(weight.values.begin(), weight.values.end(), destination.begin());
  }
  loader_.seek({0, 0});
  double loss_sum = 0.0, correct = 0.0;
  int64_t tokens = 0;
  for (uint64_t index = 0; index < loader_.batches_per_epoch(); ++index) {
    data::PackedBatch batch = loader_.next();
    backend_.execute(inputs_->bind(batch, 1.0f));
    loss_sum += backend_.view<float>(loss_)[0];
    correct += backend_.view<float>(correct_)[0];
    tokens += static_cast<int64_t>(std::count_if(inputs_->targets().begin(), inputs_->targets().end(),
                                                 [](int32_t target) { return target >= 0; }));
  }
  EvalResult result;
  result.tokens = tokens;
  if (tokens > 0) {
    result.loss = loss_sum / static_cast<double>(tokens);
    result.accuracy = correct / static_cast<double>(tokens);
  }
  return result;
}

}  // namespace surogate::train

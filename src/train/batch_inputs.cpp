// PackedBatch → graph inputs; see batch_inputs.h.
#include "train/batch_inputs.h"

#include <climits>
#include <span>

#include "core/dropout_rate.h"
#include "core/error.h"
#include "data/sample.h"

namespace surogate::train {

BatchInputs::BatchInputs(const compiler::ExecutionPlan& plan)
    : input_ids_(plan.tensor("input_ids")),
      position_ids_(plan.tensor("position_ids")),
      document_ids_(plan.tensor("document_ids")),
      targets_id_(plan.tensor("targets")),
      loss_scale_id_(plan.tensor("loss_scale")),
      loss_weights_id_(plan.graph.find_tensor("loss_weights")) {
  // The micro-batch's [B, T] is the document ids' (under sequence parallelism the other token
  // inputs hold one rank's T/N tokens; the device slices the whole rows bound here).
  const graph::Shape& shape = plan.graph.tensor(document_ids_).type.shape;
  batch_ = shape.at(0);
  sequence_ = shape.at(1);
  targets_.resize(static_cast<size_t>(batch_ * sequence_));
  if (loss_weights_id_) loss_weights_.resize(targets_.size());
}

namespace {
template <typename T>
std::span<const std::byte> bytes_of(const std::vector<T>& values) {
  return std::as_bytes(std::span<const T>(values));
}
}  // namespace

std::vector<runtime::InputBinding> BatchInputs::bind(const data::PackedBatch& batch, float loss_scale) {
  SUROGATE_CHECK(batch.batch_size == batch_ && batch.sequence_length == sequence_, "batch shape matches the plan");
  for (int64_t row = 0; row < batch_; ++row) {
    for (int64_t i = 0; i < sequence_; ++i) {
      size_t at = static_cast<size_t>(row * sequence_ + i);
      targets_[at] = i + 1 < sequence_ ? batch.labels[at + 1] : data::kIgnoreLabel;
    }
  }
  loss_scale_ = loss_scale;
  std::vector<runtime::InputBinding> bindings = {
      {input_ids_, bytes_of(batch.input_ids)},
      {position_ids_, bytes_of(batch.position_ids)},
      // Padding keeps its id −1, which the attention lets see only itself (ops/attention.h): it
      // never attends to a document, and a run of it costs time linear in its length. (Until
      // 2026-11-28 each row's padding was one document: at 483k tokens on 4 GPUs, the last row of
      // an epoch, mostly padding, took longer than a minute.)
      {document_ids_, bytes_of(batch.document_ids)},
      {targets_id_, bytes_of(targets_)},
      {loss_scale_id_, std::as_bytes(std::span<const float>(&loss_scale_, 1))},
  };
  if (loss_weights_id_) {
    const bool weighted = !batch.loss_weights.empty();
    for (size_t at = 0; at < targets_.size(); ++at) {
      const bool last = (at + 1) % static_cast<size_t>(sequence_) == 0;
      loss_weights_[at] = last || targets_[at] == data::kIgnoreLabel ? 0.0f : weighted ? batch.loss_weights[at + 1] : 1.0f;
    }
    bindings.push_back({*loss_weights_id_, bytes_of(loss_weights_)});
  }
  if (extra_) return extra_(batch, std::move(bindings));
  return bindings;
}

int32_t dropout_seed(uint64_t train_seed, int64_t step, int64_t micro) {
  uint64_t value = train_seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(step) * 0x100000001b3ull +
                   static_cast<uint64_t>(micro);
  value ^= value >> 29;
  value *= 0xbf58476d1ce4e5b9ull;
  value ^= value >> 32;
  const auto seed = static_cast<int32_t>(static_cast<uint32_t>(value));
  return seed == kDropoutOffSeed ? INT32_MAX : seed;  // the sentinel means "off"
}

}  // namespace surogate::train

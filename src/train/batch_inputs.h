// A data::PackedBatch turned into the decoder graph's inputs. The one place labels are shifted
// for the loss: targets[b, i] = labels[b, i + 1] inside a row, -100 for a row's last token.
// Because the data path stores labels[first token of every document] = -100, no prediction is
// ever scored across a document boundary. Buffers are reused across micro-batches.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "compiler/execution_plan.h"
#include "data/packing.h"
#include "runtime/backend.h"

namespace surogate::train {

// The dropout seed of micro-batch `micro` (its place in the step's window, whichever rank or
// process trains it) of optimizer step `step`: a function of the run's seed and the position
// only, so a resumed run draws the same masks, and so does any split of the window into ranks.
int32_t dropout_seed(uint64_t train_seed, int64_t step, int64_t micro);

class BatchInputs {
public:
  // Looks up the inputs of `plan` (input_ids, position_ids, document_ids, targets, loss_scale, and
  // loss_weights when the plan weighs tokens: shifted like targets, 1 per labelled token of a
  // batch that carries no weights).
  explicit BatchInputs(const compiler::ExecutionPlan& plan);

  // Fills the buffers from `batch` (its shape must be the plan's [B, T], the document ids' shape)
  // and returns bindings that stay valid until the next call.
  std::vector<runtime::InputBinding> bind(const data::PackedBatch& batch, float loss_scale);

  const std::vector<int32_t>& targets() const { return targets_; }

  // Inputs a model family adds to the text ones (a vision-language plan's images and M-RoPE
  // positions: train/vision_stage.h): given the batch and bind()'s bindings, all of the plan's.
  using ExtraInputs = std::function<std::vector<runtime::InputBinding>(const data::PackedBatch&,
                                                                       std::vector<runtime::InputBinding>)>;
  void extend(ExtraInputs extra) { extra_ = std::move(extra); }

private:
  graph::TensorId input_ids_, position_ids_, document_ids_, targets_id_, loss_scale_id_;
  std::optional<graph::TensorId> loss_weights_id_;
  std::vector<float> loss_weights_;
  int64_t batch_ = 0, sequence_ = 0;
  std::vector<int32_t> targets_;
  float loss_scale_ = 1.0f;
  ExtraInputs extra_;
};

}  // namespace surogate::train

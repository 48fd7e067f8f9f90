// The optimizer interface the trainer drives, and the factory that picks one from the config.
//
// An optimizer sees each trainable parameter as an fp32 master copy plus its fp32 gradient
// (already averaged over micro-batches and clipped). It owns its state (moments), which it
// exposes as named tensors so checkpoints can save and restore it exactly.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace surogate::train {

struct ParameterSlot {
  std::string name;
  float* master = nullptr;          // updated in place
  const float* gradient = nullptr;
  int64_t rows = 1;                 // a 1-D parameter has rows = 1
  int64_t cols = 0;
  bool apply_weight_decay = true;   // false for norms and biases
  // NorMuon orthogonalises only hidden 2-D weight matrices; embeddings and lm_head use AdamW.
  bool is_hidden_matrix = false;
  int64_t size() const { return rows * cols; }
};

struct OptimizerStep {
  int64_t step = 0;                 // 0-based optimizer step (bias correction uses step + 1)
  double learning_rate = 0.0;
  double weight_decay = 0.0;
  // The accumulated gradients are multiplied by this before the norm's clip and the step (fp16
  // training: 1 / the loss scale, train/fp16_loss_scaler.h). The devices apply it, not the optimizers.
  double gradient_scale = 1.0;
};

// A tensor of optimizer state, viewed for checkpointing.
struct StateTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  void* data;
  size_t size_bytes;
};

class Optimizer {
public:
  virtual ~Optimizer() = default;
  virtual std::string_view name() const = 0;
  // `parameters` must be the same slots, in the same order, at every call.
  virtual void step(std::span<const ParameterSlot> parameters, const OptimizerStep& step) = 0;
  // Views of all state for saving, and the same views to fill when restoring.
  virtual std::vector<StateTensor> state_tensors() = 0;
};

struct AdamWSettings {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
};

struct NorMuonSettings {
  double momentum = 0.95;
  double beta2 = 0.95;
  bool cautious_weight_decay = true;
  AdamWSettings adamw;              // for the parameters that are not hidden matrices
};

std::unique_ptr<Optimizer> make_adamw(std::span<const ParameterSlot> parameters, const AdamWSettings& settings);
std::unique_ptr<Optimizer> make_adamw_8bit(std::span<const ParameterSlot> parameters, const AdamWSettings& settings);
std::unique_ptr<Optimizer> make_normuon(std::span<const ParameterSlot> parameters, const NorMuonSettings& settings);

}  // namespace surogate::train

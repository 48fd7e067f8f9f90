// Dynamic loss scaling for fp16 training (torch_dtype: float16). fp16 holds values down to 2^-24,
// so small gradients would flush to zero: the loss is multiplied by a scale S before the backward
// (every gradient is S times larger) and the accumulated fp32 gradients are divided by S before the
// norm, the clip and the optimizer. S starts at fp16_loss_scale; a step whose gradients are not
// finite (some fp16 gradient overflowed at this S) is skipped — nothing applied — and S halves
// (not below 1); after fp16_loss_scale_window finite steps in a row S doubles. The state is saved
// in every checkpoint's trainer_state.json ("loss_scale"), so a resumed run scales exactly as the
// uninterrupted one.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace surogate::train {

class Fp16LossScaler {
public:
  Fp16LossScaler(double initial_scale, int64_t window);

  double scale() const { return scale_; }
  int64_t overflows() const { return overflows_; }  // steps skipped because the gradients overflowed
  bool at_minimum() const { return scale_ <= 1.0; }
  // After a step at scale(): finite gradients count towards growth; otherwise the scale halves.
  // Returns the scale the next step uses.
  double update(bool finite_gradients);

  nlohmann::json to_json() const;
  // From a checkpoint's "loss_scale" (null: keep the initial state).
  void restore(const nlohmann::json& state);

private:
  double scale_;
  int64_t window_;
  int64_t clean_steps_ = 0;
  int64_t overflows_ = 0;
};

}  // namespace surogate::train

// Dynamic loss scaling; see fp16_loss_scaler.h.
#include "train/fp16_loss_scaler.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::train {

Fp16LossScaler::Fp16LossScaler(double initial_scale, int64_t window)
    : scale_(std::max(1.0, initial_scale)), window_(std::max<int64_t>(1, window)) {}

double Fp16LossScaler::update(bool finite_gradients) {
  if (!finite_gradients) {
    scale_ = std::max(1.0, scale_ / 2.0);
    clean_steps_ = 0;
    ++overflows_;
  } else if (++clean_steps_ >= window_) {
    scale_ *= 2.0;
    clean_steps_ = 0;
  }
  return scale_;
}

nlohmann::json Fp16LossScaler::to_json() const {
  return {{"scale", scale_}, {"clean_steps", clean_steps_}, {"overflows", overflows_}};
}

void Fp16LossScaler::restore(const nlohmann::json& state) {
  if (state.is_null()) return;
  if (!state.is_object() || !state.contains("scale") || !state["scale"].is_number() || !state.contains("clean_steps") ||
      !state["clean_steps"].is_number_integer()) {
    fail_user("trainer_state.json: 'loss_scale' is damaged ({}); resume from another checkpoint", state.dump());
  }
  scale_ = std::max(1.0, state["scale"].get<double>());
  clean_steps_ = state["clean_steps"].get<int64_t>();
  overflows_ = state.value("overflows", int64_t{0});
}

}  // namespace surogate::train

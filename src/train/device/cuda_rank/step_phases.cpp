// A rank's step phases on its compute stream; see step_phases.h.
#include "train/device/cuda_rank/step_phases.h"

namespace surogate::train {

void CudaStepPhases::begin_step() {
  previous_ = std::move(current_);
  current_.clear();
  current_.push_back({std::string(), cuda::Event()});
  current_.back().event.record(stream_);
}

void CudaStepPhases::end_phase(std::string phase) {
  if (current_.empty()) return;  // no step began (a phase outside the step loop)
  current_.push_back({std::move(phase), cuda::Event()});
  current_.back().event.record(stream_);
}

std::vector<std::pair<std::string, double>> CudaStepPhases::previous() {
  std::vector<std::pair<std::string, double>> phases;
  if (previous_.size() < 2) return phases;
  previous_.back().event.synchronize();
  for (size_t i = 1; i < previous_.size(); ++i) {
    phases.emplace_back(previous_[i].phase, previous_[i].event.elapsed_ms_since(previous_[i - 1].event));
  }
  previous_.clear();
  return phases;
}

}  // namespace surogate::train

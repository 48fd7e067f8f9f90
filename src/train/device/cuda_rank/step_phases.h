// debug_time_breakdown on the parallel device: where a rank's GPU spends a data-parallel step
// outside the plan's ops — the micro-batches, the gradient reduction left after the backward, the
// norm, the optimizer, the weight exchange, the FP8 copies and zeroing. Each phase's end is an
// event recorded on the rank's compute stream, so a phase's time is how long the stream took to
// get through what was enqueued for it, waits on the side stream's collectives included (the
// reduction's tail is the compute stream waiting for the last bucket). A step's events are read
// once the next step began and its measure waited for the device: previous() then gives the last
// complete step's milliseconds in order.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "cuda/device_buffer.h"

namespace surogate::train {

class CudaStepPhases {
public:
  explicit CudaStepPhases(cudaStream_t stream) : stream_(stream) {}

  // A step starts on the stream: the one before it is complete once the device is waited for.
  void begin_step();
  // The stream reaches the end of `phase` (everything enqueued since the last mark).
  void end_phase(std::string phase);
  // The previous step's phases in order, milliseconds each (waits for its last event); empty
  // before a second step began, and after a call until the next step's start.
  std::vector<std::pair<std::string, double>> previous();

private:
  struct Mark {
    std::string phase;  // empty: the step's start
    cuda::Event event;
  };
  cudaStream_t stream_;
  std::vector<Mark> current_, previous_;
};

}  // namespace surogate::train

// The order in which a pipeline stage runs its micro-batches: one forward, one backward (1F1B,
// PipeDream-Flush / Megatron's non-interleaved schedule). With P stages and M micro-batches per
// optimizer step, stage s first runs min(P − 1 − s, M) forwards (the warm-up that fills the
// pipeline), then alternates one forward and one backward, then runs the remaining backwards. A
// stage thus holds at most P − s micro-batches in flight (their received inputs; the activations
// themselves are recomputed in the backward, see pipeline_graph.h), whatever M is, and every stage
// is busy from its first forward to its last backward except for the bubble: with forward time f
// and backward time b per micro-batch and stage, a step takes (M + P − 1)(f + b), of which the
// fraction (P − 1) / (M + P − 1) is idle. simulate_pipeline computes a schedule's time from the
// dependencies alone, which the tests compare with that formula.
//
// Interleaved schedules (several chunks of layers per stage) shrink the bubble by the number of
// chunks at the price of more transfers; they are not built yet.
#pragma once

#include <vector>

namespace surogate::distributed {

struct PipelineStep {
  enum class Kind { Forward, Backward };
  Kind kind = Kind::Forward;
  int micro_batch = 0;
  bool operator==(const PipelineStep&) const = default;
};

// Stage `stage`'s steps for one optimizer step of `micro_batches` micro-batches.
std::vector<PipelineStep> one_forward_one_backward(int stage, int stages, int micro_batches);

// (P − 1) / (M + P − 1): the share of a step each stage waits, when every forward takes one time
// and every backward another, the same at every stage.
double pipeline_bubble_fraction(int stages, int micro_batches);

// The time one optimizer step takes when stage s runs its schedule in order, each forward taking
// `forward_time` and each backward `backward_time`, a forward waiting for the previous stage's
// forward of the same micro-batch and a backward for the next stage's backward (transfers free).
double simulate_pipeline(int stages, int micro_batches, double forward_time, double backward_time);

}  // namespace surogate::distributed

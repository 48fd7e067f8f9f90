// The 1F1B schedule; see pipeline_schedule.h.
#include "distributed/pipeline_schedule.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::distributed {

std::vector<PipelineStep> one_forward_one_backward(int stage, int stages, int micro_batches) {
  SUROGATE_CHECK(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1, "a stage of a pipeline");
  using Kind = PipelineStep::Kind;
  const int warmup = std::min(stages - 1 - stage, micro_batches);
  std::vector<PipelineStep> steps;
  int forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards) steps.push_back({Kind::Forward, forwards});
  while (forwards < micro_batches) {
    steps.push_back({Kind::Forward, forwards++});
    steps.push_back({Kind::Backward, backwards++});
  }
  while (backwards < micro_batches) steps.push_back({Kind::Backward, backwards++});
  return steps;
}

double pipeline_bubble_fraction(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

double simulate_pipeline(int stages, int micro_batches, double forward_time, double backward_time) {
  // finished[s][m]: when stage s completes the forward (0) / backward (1) of micro-batch m.
  std::vector<std::vector<double>> forward_done(static_cast<size_t>(stages), std::vector<double>(static_cast<size_t>(micro_batches), -1.0));
  std::vector<std::vector<double>> backward_done = forward_done;
  std::vector<std::vector<PipelineStep>> schedules;
  for (int s = 0; s < stages; ++s) schedules.push_back(one_forward_one_backward(s, stages, micro_batches));
  std::vector<size_t> next(static_cast<size_t>(stages), 0);
  std::vector<double> clock(static_cast<size_t>(stages), 0.0);
  // Repeatedly run every stage's next step whose dependency is done; the schedule is deadlock free
  // when this finishes every step.
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (int s = 0; s < stages; ++s) {
      const auto stage = static_cast<size_t>(s);
      if (next[stage] == schedules[stage].size()) continue;
      const PipelineStep step = schedules[stage][next[stage]];
      const auto m = static_cast<size_t>(step.micro_batch);
      double ready = 0.0;
      if (step.kind == PipelineStep::Kind::Forward) {
        if (s > 0 && forward_done[stage - 1][m] < 0.0) continue;
        if (s > 0) ready = forward_done[stage - 1][m];
        clock[stage] = std::max(clock[stage], ready) + forward_time;
        forward_done[stage][m] = clock[stage];
      } else {
        if (s + 1 < stages && backward_done[stage + 1][m] < 0.0) continue;
        ready = s + 1 < stages ? backward_done[stage + 1][m] : forward_done[stage][m];
        clock[stage] = std::max(clock[stage], ready) + backward_time;
        backward_done[stage][m] = clock[stage];
      }
      ++next[stage];
      progressed = true;
    }
  }
  for (int s = 0; s < stages; ++s) {
    SUROGATE_CHECK(next[static_cast<size_t>(s)] == schedules[static_cast<size_t>(s)].size(), "the 1F1B schedule never deadlocks");
  }
  return *std::max_element(clock.begin(), clock.end());
}

}  // namespace surogate::distributed

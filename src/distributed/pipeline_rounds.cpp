// The pipeline's rounds; see pipeline_rounds.h.
#include "distributed/pipeline_rounds.h"

#include <algorithm>

#include "core/error.h"

namespace surogate::distributed {

std::vector<std::vector<PipelineRound>> pipeline_rounds(std::span<const StageGraph* const> stages, int micro_batches) {
  const int count = static_cast<int>(stages.size());
  std::vector<std::vector<PipelineStep>> schedules;
  for (int s = 0; s < count; ++s) schedules.push_back(one_forward_one_backward(s, count, micro_batches));
  // The round in which stage s finished the forward / backward of micro-batch m (-1: not yet).
  const std::vector<int> none(static_cast<size_t>(micro_batches), -1);
  std::vector<std::vector<int>> forward_round(static_cast<size_t>(count), none), backward_round = forward_round;
  std::vector<size_t> next(static_cast<size_t>(count), 0);
  std::vector<std::vector<PipelineRound>> programs(static_cast<size_t>(count));
  auto done_before = [](int round, int now) { return round >= 0 && round < now; };
  for (int round = 0;; ++round) {
    std::vector<std::pair<int, PipelineStep>> ran;  // (stage, step), stages ascending
    for (int s = 0; s < count; ++s) {
      const auto stage = static_cast<size_t>(s);
      if (next[stage] == schedules[stage].size()) continue;
      const PipelineStep step = schedules[stage][next[stage]];
      const auto m = static_cast<size_t>(step.micro_batch);
      bool ready = true;
      if (step.kind == PipelineStep::Kind::Forward) {
        for (const BoundaryTensor& tensor : stages[stage]->received) {
          ready = ready && done_before(forward_round[static_cast<size_t>(tensor.from)][m], round);
        }
      } else {
        for (const BoundaryTensor& tensor : stages[stage]->sent) {
          for (int reader : tensor.to) ready = ready && done_before(backward_round[static_cast<size_t>(reader)][m], round);
        }
      }
      if (ready) ran.emplace_back(s, step);
    }
    if (ran.empty()) break;
    std::vector<PipelineTransfer> transfers;  // the round's, in one order for every rank
    for (const auto& [s, step] : ran) {
      const auto stage = static_cast<size_t>(s);
      PipelineRound own;
      own.step = step;
      programs[stage].push_back(std::move(own));
      ++next[stage];
      if (step.kind == PipelineStep::Kind::Forward) {
        forward_round[stage][static_cast<size_t>(step.micro_batch)] = round;
        for (const BoundaryTensor& tensor : stages[stage]->sent) {
          for (int reader : tensor.to) transfers.push_back({tensor.name, step.micro_batch, false, s, reader});
        }
      } else {
        backward_round[stage][static_cast<size_t>(step.micro_batch)] = round;
        for (const BoundaryTensor& tensor : stages[stage]->received) {
          transfers.push_back({tensor.name, step.micro_batch, true, s, tensor.from});
        }
      }
    }
    // Each stage's share of the round's transfers, joined to its step of the round or a round of
    // its own.
    for (int s = 0; s < count; ++s) {
      std::vector<PipelineTransfer> own;
      for (const PipelineTransfer& transfer : transfers) {
        if (transfer.sender == s || transfer.receiver == s) own.push_back(transfer);
      }
      if (own.empty()) continue;
      std::vector<PipelineRound>& program = programs[static_cast<size_t>(s)];
      const bool stepped = std::any_of(ran.begin(), ran.end(), [&](const auto& entry) { return entry.first == s; });
      if (!stepped) program.emplace_back();
      program.back().transfers = std::move(own);
    }
  }
  for (int s = 0; s < count; ++s) {
    SUROGATE_CHECK(next[static_cast<size_t>(s)] == schedules[static_cast<size_t>(s)].size(),
                   "every step of the 1F1B schedule finds its inputs");
  }
  return programs;
}

}  // namespace surogate::distributed

// A developer's measurement of where a decode call's wall time goes on the host
// (SUROGATE_GENERATE_STEP_TIMING=1; docs/generation.md#speed): for every call that runs the decode
// plan alone, the time since the previous call returned (the engine's bookkeeping), from entry to
// the plan's execute (the round's inputs), inside execute (the upload and the launch), and from
// there to the ids read back (the GPU finishing, the copy). Printed by summary() when the model
// closes. Clock reads only: nothing waits on the GPU for it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace surogate::generate {

class StepTiming {
 public:
  static bool requested();  // SUROGATE_GENERATE_STEP_TIMING=1

  void call_started();
  void execute_started();
  void execute_returned();
  // `decode_only`: the call ran one decode round and nothing else (counted); others only reset.
  void call_returned(bool decode_only);
  std::string summary() const;  // empty when no call was counted

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point previous_end_{}, start_{}, execute_start_{}, execute_end_{};
  bool has_previous_ = false;
  int64_t calls_ = 0;
  double between_ = 0.0, before_ = 0.0, execute_ = 0.0, after_ = 0.0;  // µs summed over the calls
};

}  // namespace surogate::generate

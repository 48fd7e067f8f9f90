// See step_timing.h.
#include "generate/step_timing.h"

#include <cstdlib>

#include <fmt/format.h>

namespace surogate::generate {
namespace {

double microseconds(std::chrono::steady_clock::duration duration) {
  return std::chrono::duration<double, std::micro>(duration).count();
}

}  // namespace

bool StepTiming::requested() {
  const char* value = std::getenv("SUROGATE_GENERATE_STEP_TIMING");
  return value != nullptr && std::string(value) == "1";
}

void StepTiming::call_started() { start_ = Clock::now(); }
void StepTiming::execute_started() { execute_start_ = Clock::now(); }
void StepTiming::execute_returned() { execute_end_ = Clock::now(); }

void StepTiming::call_returned(bool decode_only) {
  const Clock::time_point end = Clock::now();
  if (decode_only && has_previous_) {
    ++calls_;
    between_ += microseconds(start_ - previous_end_);
    before_ += microseconds(execute_start_ - start_);
    execute_ += microseconds(execute_end_ - execute_start_);
    after_ += microseconds(end - execute_end_);
  }
  previous_end_ = end;
  has_previous_ = decode_only;
}

std::string StepTiming::summary() const {
  if (calls_ == 0) return {};
  const auto mean = [&](double total) { return total / static_cast<double>(calls_); };
  return fmt::format("step timing: {} decode calls, µs each: {:.1f} between calls, {:.1f} to execute, {:.1f} in "
                     "execute (upload + launch), {:.1f} to the ids read back; {:.1f} in all\n",
                     calls_, mean(between_), mean(before_), mean(execute_), mean(after_),
                     mean(between_ + before_ + execute_ + after_));
}

}  // namespace surogate::generate

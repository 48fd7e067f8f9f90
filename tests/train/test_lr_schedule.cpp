#include <cmath>

#include <gtest/gtest.h>

#include "core/error.h"
#include "train/lr_schedule.h"

namespace surogate::train {
namespace {

LrScheduleSettings settings(LrScheduleType type, int64_t total, int64_t warmup, int64_t cooldown, double final_fraction) {
  return LrScheduleSettings{type, 1.0, total, warmup, cooldown, final_fraction};
}

TEST(LrSchedule, WarmupRampsLinearlyFromTheFirstStep) {
  LrSchedule schedule(settings(LrScheduleType::Linear, 100, 4, 0, 0.0));
  EXPECT_DOUBLE_EQ(schedule.learning_rate(0), 0.25);
  EXPECT_DOUBLE_EQ(schedule.learning_rate(1), 0.5);
  EXPECT_DOUBLE_EQ(schedule.learning_rate(3), 1.0);
  EXPECT_DOUBLE_EQ(schedule.learning_rate(4), 1.0);  // first decay step is the peak
}

TEST(LrSchedule, LinearReachesTheFinalFractionAtTheLastStep) {
  LrSchedule schedule(settings(LrScheduleType::Linear, 11, 0, 0, 0.1));
  EXPECT_DOUBLE_EQ(schedule.learning_rate(0), 1.0);
  EXPECT_NEAR(schedule.learning_rate(5), 0.55, 1e-12);
  EXPECT_NEAR(schedule.learning_rate(10), 0.1, 1e-12);
  EXPECT_NEAR(schedule.learning_rate(50), 0.1, 1e-12);
}

TEST(LrSchedule, CosineIsHalfwayAtTheMiddle) {
  LrSchedule schedule(settings(LrScheduleType::Cosine, 12, 2, 0, 0.0));
  EXPECT_DOUBLE_EQ(schedule.learning_rate(2), 1.0);
  // decay phase: steps 2..11 (10 steps), progress at step 2 + 4.5 would be 0.5; check monotone + ends.
  double previous = 2.0;
  for (int64_t step = 2; step < 12; ++step) {
    double rate = schedule.learning_rate(step);
    EXPECT_LT(rate, previous);
    previous = rate;
  }
  EXPECT_NEAR(schedule.learning_rate(11), 0.0, 1e-12);
  LrSchedule odd(settings(LrScheduleType::Cosine, 11, 0, 0, 0.0));
  EXPECT_NEAR(odd.learning_rate(5), 0.5, 1e-12);
}

TEST(LrSchedule, WsdHoldsThenCoolsDown) {
  LrSchedule schedule(settings(LrScheduleType::Wsd, 10, 2, 4, 0.0));
  EXPECT_DOUBLE_EQ(schedule.learning_rate(0), 0.5);
  EXPECT_DOUBLE_EQ(schedule.learning_rate(5), 1.0);
  EXPECT_DOUBLE_EQ(schedule.learning_rate(6), 0.75);
  EXPECT_DOUBLE_EQ(schedule.learning_rate(9), 0.0);
}

TEST(LrSchedule, RejectsImpossibleSettings) {
  EXPECT_THROW(LrSchedule(settings(LrScheduleType::Linear, 10, 11, 0, 0.0)), UserError);
  EXPECT_THROW(LrSchedule(settings(LrScheduleType::Cosine, 10, 0, 3, 0.0)), UserError);
  EXPECT_THROW(LrSchedule(settings(LrScheduleType::Wsd, 10, 6, 6, 0.0)), UserError);
  EXPECT_THROW(LrSchedule(settings(LrScheduleType::Wsd, 0, 0, 0, 0.0)), UserError);
}

TEST(LrSchedule, WarmupStepsOverrideTheRatio) {
  EXPECT_EQ(resolve_warmup_steps(7, 0.5, 100), 7);
  EXPECT_EQ(resolve_warmup_steps(0, 0.03, 100), 3);
  EXPECT_EQ(resolve_warmup_steps(0, 0.0, 100), 0);
}

}  // namespace
}  // namespace surogate::train

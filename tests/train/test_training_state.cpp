// trainer_state.json read back on resume: what the trainer wrote round-trips, and a damaged
// value (a negative count, a schedule this engine does not have) is one UserError naming the file
// and the key, not a resume from nonsense.
#include <gtest/gtest.h>

#include "train/training_state.h"
#include "user_error_of.h"

namespace surogate::train {
namespace {

nlohmann::json written_state() {
  TrainingState state;
  state.step = 7;
  state.total_steps = 20;
  state.loader = {1, 3};
  state.train_seed = 42;
  state.schedule = {{"type", "cosine"}, {"peak", 1e-3}};
  return to_json(state);
}

TEST(TrainingStateTest, WhatTheTrainerWroteReadsBack) {
  const TrainingState state = training_state_from_json(written_state(), "ckpt/trainer_state.json");
  EXPECT_EQ(state.step, 7);
  EXPECT_EQ(state.loader.epoch, 1u);
  EXPECT_EQ(state.loader.index, 3u);
  EXPECT_EQ(state.schedule["type"], "cosine");
}

TEST(TrainingStateTest, NegativeCountsAreDamage) {
  for (const char* key : {"step", "total_steps"}) {
    nlohmann::json json = written_state();
    json[key] = -1;
    const std::string message = error_of([&] { training_state_from_json(json, "ckpt/trainer_state.json"); });
    EXPECT_NE(message.find(fmt::format("ckpt/trainer_state.json: '{}' is -1, not a non-negative integer", key)),
              std::string::npos) << message;
  }
  nlohmann::json json = written_state();
  json["loader"]["epoch"] = -2;
  std::string message = error_of([&] { training_state_from_json(json, "ckpt/trainer_state.json"); });
  EXPECT_NE(message.find("'loader.epoch' is -2, not a non-negative integer"), std::string::npos) << message;
  json = written_state();
  json["loader"]["index"] = 1.5;
  message = error_of([&] { training_state_from_json(json, "ckpt/trainer_state.json"); });
  EXPECT_NE(message.find("'loader.index' is 1.5"), std::string::npos) << message;
}

TEST(TrainingStateTest, AnUnknownScheduleTypeIsDamage) {
  nlohmann::json json = written_state();
  json["schedule"]["type"] = "polynomial";
  std::string message = error_of([&] { training_state_from_json(json, "ckpt/trainer_state.json"); });
  EXPECT_NE(message.find("'schedule.type' is 'polynomial', not a schedule Surogate writes (linear, cosine, wsd)"),
            std::string::npos) << message;
  json["schedule"] = 3;
  message = error_of([&] { training_state_from_json(json, "ckpt/trainer_state.json"); });
  EXPECT_NE(message.find("'schedule' must be an object with a 'type'"), std::string::npos) << message;
}

}  // namespace
}  // namespace surogate::train

// trainer_state.json (de)serialisation; see training_state.h.
#include "train/training_state.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config/config_enums.h"
#include "core/error.h"

namespace surogate::train {

nlohmann::json to_json(const TrainingState& state) {
  nlohmann::json json{{"format", "surogate-trainer-state"},
                      {"version", 1},
                      {"step", state.step},
                      {"total_steps", state.total_steps},
                      {"loader", {{"epoch", state.loader.epoch}, {"index", state.loader.index}}},
                      {"train_seed", state.train_seed},
                      {"schedule", state.schedule},
                      {"history", state.history},
                      {"eval_history", state.eval_history},
                      {"gpu_history", state.gpu_history},
                      {"skipped_steps", state.skipped_steps},
                      {"consecutive_nonfinite_steps", state.consecutive_nonfinite_steps},
                      {"loss_scale", state.loss_scale}};
  if (!state.objective.is_null()) json["objective"] = state.objective;  // surogate grpo: the sampling seeds
  return json;
}

namespace {

// A count the trainer wrote (a step, an epoch, a position): a non-negative integer. nlohmann would
// read -1 as 2^64 - 1 into an unsigned field and resume from nonsense.
int64_t counter(const nlohmann::json& object, const char* key, const std::string& source, const char* prefix = "") {
  const nlohmann::json& value = object.at(key);
  if (!value.is_number_integer() || value.get<int64_t>() < 0) {
    fail_user("{}: '{}{}' is {}, not a non-negative integer; the trainer state is damaged: resume from an earlier "
              "checkpoint or set resume_from_checkpoint: false", source, prefix, key, value.dump());
  }
  return value.get<int64_t>();
}

// The schedule record names a schedule this engine has (lr_scheduler_type's values).
void check_schedule(const nlohmann::json& schedule, const std::string& source) {
  if (!schedule.is_object() || !schedule.contains("type") || !schedule["type"].is_string()) {
    fail_user("{}: 'schedule' must be an object with a 'type'; the trainer state is damaged: resume from an earlier "
              "checkpoint or set resume_from_checkpoint: false", source);
  }
  const std::string type = schedule["type"].get<std::string>();
  if (!enum_from_string<LrScheduler>(type)) {
    fail_user("{}: 'schedule.type' is '{}', not a schedule Surogate writes ({}); the trainer state is damaged: "
              "resume from an earlier checkpoint or set resume_from_checkpoint: false", source, type,
              fmt::join(enum_names<LrScheduler>(), ", "));
  }
}

}  // namespace

TrainingState training_state_from_json(const nlohmann::json& json, const std::string& source) {
  try {
    if (json.value("format", "") != "surogate-trainer-state" || json.at("version").get<int>() != 1) {
      fail_user("{}: not a Surogate trainer state (version 1); the checkpoint was written by another tool", source);
    }
    TrainingState state;
    state.step = counter(json, "step", source);
    state.total_steps = counter(json, "total_steps", source);
    state.loader.epoch = static_cast<uint64_t>(counter(json.at("loader"), "epoch", source, "loader."));
    state.loader.index = static_cast<uint64_t>(counter(json.at("loader"), "index", source, "loader."));
    state.train_seed = json.at("train_seed").get<uint64_t>();
    state.schedule = json.at("schedule");
    check_schedule(state.schedule, source);
    state.history = json.at("history");
    state.eval_history = json.at("eval_history");
    // Absent in checkpoints written before log_gpu_util was implemented.
    state.gpu_history = json.value("gpu_history", nlohmann::json::array());
    // Written since the async checkpoints (earlier checkpoints: nothing skipped, no loss scale).
    state.skipped_steps = json.value("skipped_steps", int64_t{0});
    state.consecutive_nonfinite_steps = json.value("consecutive_nonfinite_steps", int64_t{0});
    state.loss_scale = json.value("loss_scale", nlohmann::json());
    state.objective = json.value("objective", nlohmann::json());
    return state;
  } catch (const nlohmann::json::exception& error) {
    fail_user("{}: trainer state is damaged ({}); resume from an earlier checkpoint or set "
              "resume_from_checkpoint: false",
              source, error.what());
  }
}

TrainingState read_training_state(const std::filesystem::path& file) {
  std::ifstream stream(file);
  if (!stream) fail_user("{}: cannot read the trainer state", file.string());
  std::stringstream text;
  text << stream.rdbuf();
  nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, false);
  if (json.is_discarded()) fail_user("{}: trainer state is not valid JSON", file.string());
  return training_state_from_json(json, file.string());
}

}  // namespace surogate::train

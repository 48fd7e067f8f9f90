// trainer_state.json (de)serialisation; see training_state.h.
#include "train/training_state.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace surogate::train {

nlohmann::json to_json(const TrainingState& state) {
  return {{"format", "surogate-trainer-state"},
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
}

TrainingState training_state_from_json(const nlohmann::json& json, const std::string& source) {
  try {
    if (json.value("format", "") != "surogate-trainer-state" || json.at("version").get<int>() != 1) {
      fail_user("{}: not a Surogate trainer state (version 1); the checkpoint was written by another tool", source);
    }
    TrainingState state;
    state.step = json.at("step").get<int64_t>();
    state.total_steps = json.at("total_steps").get<int64_t>();
    state.loader.epoch = json.at("loader").at("epoch").get<uint64_t>();
    state.loader.index = json.at("loader").at("index").get<uint64_t>();
    state.train_seed = json.at("train_seed").get<uint64_t>();
    state.schedule = json.at("schedule");
    state.history = json.at("history");
    state.eval_history = json.at("eval_history");
    // Absent in checkpoints written before log_gpu_util was implemented.
    state.gpu_history = json.value("gpu_history", nlohmann::json::array());
    // Written since the async checkpoints (earlier checkpoints: nothing skipped, no loss scale).
    state.skipped_steps = json.value("skipped_steps", int64_t{0});
    state.consecutive_nonfinite_steps = json.value("consecutive_nonfinite_steps", int64_t{0});
    state.loss_scale = json.value("loss_scale", nlohmann::json());
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

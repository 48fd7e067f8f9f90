// The feature-support table: every combination of backend × layout × option that Surogate refuses,
// each row with the message the user sees. It is the only place a combination is refused; the
// validation of one option on its own (ranges, enum names) stays in config_rules.cpp.
//
// A row is judged at the first stage that knows what it needs:
//   - Options: the configuration alone, when it is loaded (validate_config);
//   - Backend: once the backend and the layout of ranks are chosen
//     (train/device/backend_selection.cpp, before any data or weight is loaded);
//   - Hardware: once the GPU's compute capability is known (validate_for_hardware);
//   - Device: the training device the trainer builds (a data-parallel device of one rank, which
//     tests ask for; a pipeline device over several processes), once every process is connected
//     and before anything loads;
//   - Model: once the model's config.json is read (before the weights load).
// The configuration layer knows no backend or layout types, so the later stages describe them in
// a RunShape the train layer fills in.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "config/config.h"

namespace surogate {

enum class SupportStage { Options, Backend, Hardware, Device, Model };

// Which backend a row applies to.
enum class SupportBackend { Any, Cpu, Cuda };

// What the stages after Options know about the run.
struct RunShape {
  SupportBackend backend = SupportBackend::Any;
  // The layout of ranks (distributed/parallel_layout.h).
  int world_size = 1;
  int sequence_size = 1;
  int pipeline_size = 1;
  int processes = 1;
  std::string layout_description;  // ParallelLayout::describe()
  // Hardware: the compute capability (major · 10 + minor) of the GPU used; 0: no GPU.
  int gpu_sm = 0;
  // Device: the trainer builds the data-parallel device (several ranks, or one when asked for),
  // and why it trains on this backend (the line it prints, or "chosen by the caller").
  bool data_parallel_device = false;
  std::string backend_line;
  // Model: a mixture-of-experts model, and its model_type for the message.
  bool moe = false;
  std::string model_type;
  // Model: the folder is a vision-language model (model_type then holds its architecture).
  bool vision_language = false;

  bool several_ranks() const { return world_size > 1; }
  bool spans_processes() const { return processes > 1; }
};

struct SupportRow {
  std::string name;  // unique; tests/config/test_feature_support.cpp fires each row by it
  SupportStage stage;
  SupportBackend backend;
  std::function<bool(const Config&, const RunShape&)> refuses;
  // The whole message, starting with where the option was set (Config::source_of).
  std::function<std::string(const Config&, const RunShape&)> message;
};

// Every row, in the order they are judged within a stage.
const std::vector<SupportRow>& feature_support_table();

// The first row of `stage` (for shape.backend: rows of that backend and of Any) that refuses the
// configuration; nullptr when none does.
const SupportRow* first_refusal(const Config& config, SupportStage stage, const RunShape& shape = {});

// Throws the UserError of first_refusal, if any.
void refuse_unsupported(const Config& config, SupportStage stage, const RunShape& shape = {});

}  // namespace surogate

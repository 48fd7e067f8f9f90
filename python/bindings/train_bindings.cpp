// Configuration and training for surogate.train (python/surogate/training.py). A configuration
// arrives as a YAML file or as YAML/JSON text (a dict, serialised by the Python side), goes
// through the same loader, rules and pre-training checks as `surogate sft|pt`
// (config/config_loader.h, train/training_inputs.h), and trains through train::run_training.
// The GIL is released while the engine works; it is taken back only to hand a step's metrics to
// the callback and, at each step boundary, to let Python run its signal handlers: a
// KeyboardInterrupt there stops the run with a checkpoint (TrainerOptions::stop_requested) and is
// raised again once the engine has returned.
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <yaml-cpp/yaml.h>

#include "bindings.h"
#include "config/config_loader.h"
#include "data/pipeline.h"
#include "train/trainer.h"
#include "train/training_inputs.h"

namespace nb = nanobind;

namespace surogate::python {
namespace {

struct ConfigSource {
  std::string text;  // a path when is_file
  bool is_file = false;
  std::string label;  // names a text configuration in messages
  std::vector<std::string> overrides;
};

Config load(const ConfigSource& source) {
  return source.is_file ? load_config(source.text, source.overrides)
                        : load_config_from_string(source.text, source.label, source.overrides);
}

// Thrown through the trainer when the callback raised: the Python exception itself waits in an
// exception_ptr until the GIL is held again.
struct CallbackFailed {};

nb::dict summary(const train::TrainingResult& result, const Config& config) {
  nb::dict out;
  out["steps"] = result.steps;
  out["first_step"] = result.first_step;
  nb::list losses;
  for (double loss : result.step_losses) losses.append(loss);
  out["step_losses"] = losses;
  out["eval_loss"] = result.eval_loss;
  out["eval_accuracy"] = result.eval_accuracy;
  out["initial_eval_loss"] = result.initial_eval_loss;
  out["seconds"] = result.seconds;
  out["output_dir"] = config.run.output_dir;
  out["log_file"] = result.log_file.string();
  out["report_file"] = result.report_file.empty() ? std::optional<std::string>() : result.report_file.string();
  out["checkpoint"] = result.checkpoint.empty() ? std::optional<std::string>() : result.checkpoint.string();
  out["stopped"] = result.stopped;
  return out;
}

nb::dict train(const ConfigSource& source, bool pretraining, const std::string& run_name, nb::object callback) {
  std::exception_ptr callback_error, interrupt;
  train::TrainingResult result;
  Config config;
  train::TrainerOptions options;
  options.pretraining = pretraining;
  options.default_run_name = run_name;
  if (!callback.is_none()) {
    options.on_record = [&](const std::string& type, const nlohmann::json& record) {
      if (type != "step" && type != "eval") return;
      nb::gil_scoped_acquire acquire;
      try {
        nlohmann::json metrics = record;
        metrics["type"] = type;
        callback(to_python(metrics));
      } catch (nb::python_error& error) {
        // Ctrl-C while the callback ran: the same clean stop as Ctrl-C while the engine ran.
        if (error.matches(PyExc_KeyboardInterrupt)) {
          interrupt = std::current_exception();
          return;
        }
        callback_error = std::current_exception();
        throw CallbackFailed{};
      } catch (...) {
        callback_error = std::current_exception();
        throw CallbackFailed{};
      }
    };
  }
  options.stop_requested = [&] {
    if (interrupt) return true;
    nb::gil_scoped_acquire acquire;
    if (PyErr_CheckSignals() == 0) return false;
    interrupt = std::make_exception_ptr(nb::python_error());  // takes the KeyboardInterrupt out of Python's state
    return true;
  };
  try {
    nb::gil_scoped_release release;
    config = load(source);
    if (config.run.max_restarts > 0) {
      // Restarts need a supervising process (the CLI's, train/supervise/restart_supervisor.h).
      fail_user("{}: max_restarts restarts the `surogate sft|pt` command after a failure; in Python, catch the "
                "error and call train() again with resume_from_checkpoint: true",
                config.sources.of("max_restarts"));
    }
    train::prepare_training_inputs(config, pretraining);
    result = train::run_training(config, options);
  } catch (const CallbackFailed&) {
    std::rethrow_exception(callback_error);
  }
  if (interrupt) std::rethrow_exception(interrupt);
  return summary(result, config);
}

// Each top-level option with its default as YAML text (the resolved defaults of a configuration
// that names only what is required), in reference order: what help(surogate.train) lists.
std::vector<std::pair<std::string, std::string>> option_defaults() {
  const Config config = load_config_from_string("model: MODEL\ndatasets:\n  - path: DATA\n    type: text\n", "defaults");
  const YAML::Node dump = YAML::Load(dump_config_yaml(config));
  std::vector<std::pair<std::string, std::string>> options;
  for (const auto& entry : dump) {
    YAML::Emitter emitter;
    emitter << YAML::Flow << entry.second;
    options.emplace_back(entry.first.Scalar(), emitter.c_str());
  }
  return options;
}

}  // namespace

void bind_training(nb::module_& module) {
  nb::class_<ConfigSource>(module, "ConfigSource")
      .def(nb::init<>())
      .def_rw("text", &ConfigSource::text)
      .def_rw("is_file", &ConfigSource::is_file)
      .def_rw("label", &ConfigSource::label)
      .def_rw("overrides", &ConfigSource::overrides);
  module.def(
      "resolve_config", [](const ConfigSource& source) { return dump_config_yaml(load(source)); },
      "The configuration with every default and implication applied, as YAML; UserError on a bad option.");
  module.def(
      "run_facts",
      [](const ConfigSource& source, bool pretraining) {
        Config config = load(source);
        train::prepare_training_inputs(config, pretraining);
        nb::dict facts;
        facts["batch"] = config.schedule.per_device_train_batch_size;
        facts["sequence"] = static_cast<int64_t>(data::data_settings_from_config(config).sequence_len);
        facts["model"] = config.model.name_or_path;
        facts["output_dir"] = config.run.output_dir;
        return facts;
      },
      "The micro-batch shape [batch, sequence], model folder and output_dir of the run a configuration describes.");
  module.def("option_defaults", &option_defaults);
  module.def("train", &train, nb::arg("source"), nb::arg("pretraining"), nb::arg("run_name"), nb::arg("callback").none());
}

}  // namespace surogate::python

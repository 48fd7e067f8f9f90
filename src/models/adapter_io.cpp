// PEFT adapter files and merging; see adapter_io.h.
#include "models/adapter_io.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "io/safetensors.h"
#include "io/tensor_finite_check.h"
#include "io/safetensors_writer.h"

namespace surogate::models {
namespace fs = std::filesystem;

void save_peft_adapter(const fs::path& dir, const std::vector<LoraAdapter>& adapters,
                       const std::function<std::span<const float>(const ParameterSpec&)>& values,
                       const nlohmann::json& adapter_config) {
  fs::create_directories(dir);
  std::vector<io::TensorToWrite> tensors;
  for (const LoraAdapter& adapter : adapters) {
    for (const ParameterSpec* matrix : {&adapter.a, &adapter.b}) {
      std::span<const float> data = values(*matrix);
      SUROGATE_CHECK(static_cast<int64_t>(data.size()) == graph::shape_numel(matrix->shape), "adapter {} size",
                     matrix->name);
      for (HfPiece& piece : hf_pieces(*matrix)) {  // per expert for adapters of stacked experts
        tensors.push_back({std::move(piece.name), DType::F32, piece.shape,
                           std::as_bytes(data.subspan(static_cast<size_t>(piece.offset),
                                                      static_cast<size_t>(graph::shape_numel(piece.shape))))});
      }
    }
  }
  io::write_safetensors(dir / kAdapterWeightsFile, tensors, {{"format", "pt"}});
  // Same temp + rename discipline as the weights: a reader never sees half a config.
  const fs::path config_path = dir / kAdapterConfigFile, temporary = dir / (std::string(kAdapterConfigFile) + ".tmp");
  {
    std::ofstream stream(temporary, std::ios::binary | std::ios::trunc);
    stream << adapter_config.dump(2) << "\n";
    if (!stream) fail_user("cannot write {}: check the disk and permissions", temporary.string());
  }
  fs::rename(temporary, config_path);
}

namespace {

void refuse_unapplied_settings(const nlohmann::json& config, const fs::path& file);

nlohmann::json read_adapter_config(const fs::path& file) {
  if (!fs::exists(file)) {
    fail_user("{} does not exist: an adapter folder holds adapter_config.json and adapter_model.safetensors",
              file.string());
  }
  std::ifstream stream(file);
  nlohmann::json json = nlohmann::json::parse(stream, nullptr, false);
  if (json.is_discarded() || !json.is_object()) fail_user("{}: not a JSON object", file.string());
  if (json.value("peft_type", std::string("LORA")) != "LORA") {
    fail_user("{}: peft_type '{}' is not supported; only LoRA adapters (peft_type LORA) can be loaded", file.string(),
              json.value("peft_type", std::string()));
  }
  for (const char* key : {"r", "lora_alpha"}) {
    if (!json.contains(key) || !json[key].is_number() || json[key].get<double>() <= 0) {
      fail_user("{}: '{}' must be a positive number", file.string(), key);
    }
  }
  refuse_unapplied_settings(json, file);
  return json;
}

// PEFT settings that change what the adapter does, with the value under which it is plain LoRA:
// any other value would be read and not applied, so the adapter would act differently from how
// it was trained. The one place these are refused.
struct PeftSetting {
  const char* key;
  const char* what;
  bool (*neutral)(const nlohmann::json& value);
};

bool absent_or_false(const nlohmann::json& value) { return value.is_null() || value == false; }
bool absent_or_empty(const nlohmann::json& value) { return value.is_null() || value.empty(); }
bool no_bias(const nlohmann::json& value) { return value.is_null() || value == "none"; }

constexpr PeftSetting kUnappliedSettings[] = {
    {"use_dora", "DoRA (weight-decomposed LoRA)", absent_or_false},
    {"modules_to_save", "fully trained copies of whole modules", absent_or_empty},
    {"rank_pattern", "per-module ranks", absent_or_empty},
    {"alpha_pattern", "per-module alphas", absent_or_empty},
    {"layers_to_transform", "adapting only some layers", absent_or_empty},
    {"lora_bias", "LoRA bias vectors", absent_or_false},
    {"bias", "trained biases", no_bias},
    {"fan_in_fan_out", "transposed (Conv1D) weights", absent_or_false},
};

void refuse_unapplied_settings(const nlohmann::json& config, const fs::path& file) {
  for (const PeftSetting& setting : kUnappliedSettings) {
    auto found = config.find(setting.key);
    if (found == config.end() || setting.neutral(*found)) continue;
    fail_user("{}: '{}' is {} ({}), which Surogate does not apply; loading the adapter as plain LoRA would not "
              "reproduce the trained model. Only plain LoRA adapters are supported", file.string(), setting.key,
              found->dump(), setting.what);
  }
}

// target_modules (a list of module names, or "all-linear") must name projections this model has:
// PEFT adapts every module whose name ends with an entry, so an entry this model lacks means the
// adapter was made for another architecture, or its tensors were lost.
void check_target_modules(const nlohmann::json& config, const fs::path& file, const std::vector<std::string>& projections,
                          const std::set<std::string>& adapted) {
  auto found = config.find("target_modules");
  if (found == config.end() || found->is_null() || *found == "all-linear") return;
  if (found->is_string()) {
    fail_user("{}: 'target_modules' is the pattern {}; Surogate reads adapters whose target_modules is a list of "
              "module names (or \"all-linear\")", file.string(), found->dump());
  }
  if (!found->is_array()) fail_user("{}: 'target_modules' must be a list of module names", file.string());
  for (const nlohmann::json& entry : *found) {
    const std::string name = entry.is_string() ? entry.get<std::string>() : entry.dump();
    if (std::find(projections.begin(), projections.end(), name) == projections.end()) {
      fail_user("{}: target_modules names '{}', which is not a projection of this model ({}); the adapter would not "
                "be applied there. Is this adapter for another base model?", file.string(), name,
                fmt::join(projections, ", "));
    }
    if (!adapted.contains(name)) {
      fail_user("{}: target_modules names '{}', but {} holds no lora_A / lora_B for it; the adapter file is "
                "incomplete", file.string(), name, kAdapterWeightsFile);
    }
  }
}

}  // namespace

PeftAdapter load_peft_adapter(const fs::path& dir, const io::ModelConfig& config) {
  return load_peft_adapter(dir, config, parameter_specs(config));
}

PeftAdapter load_peft_adapter(const fs::path& dir, const io::ModelConfig& config, std::span<const ParameterSpec> specs,
                              std::span<const std::string> other_modules) {
  PeftAdapter adapter;
  adapter.config = read_adapter_config(dir / kAdapterConfigFile);
  const double rank = adapter.config["r"].get<double>(), alpha = adapter.config["lora_alpha"].get<double>();
  adapter.scaling = adapter.config.value("use_rslora", false) ? alpha / std::sqrt(rank) : alpha / rank;

  const fs::path weights_file = dir / kAdapterWeightsFile;
  if (!fs::exists(weights_file)) {
    fail_user("{} does not exist (adapters saved as .bin are not read: convert them to safetensors)",
              weights_file.string());
  }
  io::SafetensorsCheckpoint checkpoint = io::SafetensorsCheckpoint::open(weights_file);
  // PEFT key → the base projection and, for stacked experts, which expert (PEFT adapts each
  // expert's projection on its own: one lora_A / lora_B per expert).
  struct Target {
    const ParameterSpec* base;
    int64_t expert;  // -1: a plain projection
  };
  std::map<std::string, Target> by_key;
  for (const ParameterSpec& spec : specs) {
    if (spec.shape.size() != (spec.experts > 0 ? 3u : 2u)) continue;
    const std::vector<HfPiece> pieces = hf_pieces(spec);
    for (size_t expert = 0; expert < pieces.size(); ++expert) {
      const Target target{&spec, spec.experts > 0 ? static_cast<int64_t>(expert) : -1};
      by_key[peft_key(pieces[expert].name, 'A')] = target;
      by_key[peft_key(pieces[expert].name, 'B')] = target;
    }
  }
  const int64_t r = static_cast<int64_t>(rank);
  std::map<std::string, AdapterMatrices> found;  // base engine name → matrices
  std::map<std::string, int64_t> pieces_read;    // key count per base, to find a missing half
  for (const std::string& key : checkpoint.tensor_names()) {
    auto target = by_key.find(key);
    if (target == by_key.end()) {
      fail_user("{}: tensor '{}' is not the lora_A / lora_B of a projection of this model (embedding adapters, "
                "modules_to_save, DoRA and transformers 5 fused-expert adapters (target_parameters) are not "
                "supported); is this adapter for another base model?",
                weights_file.string(), key);
    }
    const ParameterSpec& base = *target->second.base;
    const io::SafetensorsTensor& tensor = checkpoint.tensor(key);
    io::require_finite(tensor, weights_file.string(),
                       "the adapter is damaged (a diverged run saves NaN): use an earlier checkpoint's adapter");
    const bool is_a = key.ends_with(".lora_A.weight");
    const int64_t out = base.shape[base.shape.size() - 2], in = base.shape.back();
    graph::Shape expected = is_a ? graph::Shape{r, in} : graph::Shape{out, r};
    if (tensor.shape != expected) {
      fail_user("{}: tensor '{}' has shape {}, expected {} (r = {} from adapter_config.json, base weight {} {})",
                weights_file.string(), key, graph::format_shape(tensor.shape), graph::format_shape(expected), rank,
                base.hf_name, graph::format_shape(base.shape));
    }
    AdapterMatrices& matrices = found[base.name];
    matrices.base = base;
    matrices.rank = r;
    ++pieces_read[base.name];
    std::vector<float>& values = is_a ? matrices.a : matrices.b;
    const std::vector<float> piece = io::read_tensor_as_float32(tensor);
    if (target->second.expert < 0) {
      values = piece;
      continue;
    }
    values.resize(static_cast<size_t>(base.experts) * piece.size());
    std::copy(piece.begin(), piece.end(), values.begin() + target->second.expert * static_cast<int64_t>(piece.size()));
  }
  if (found.empty()) fail_user("{}: holds no LoRA tensors", weights_file.string());
  for (const ParameterSpec& spec : specs) {
    auto entry = found.find(spec.name);
    if (entry == found.end()) continue;
    const int64_t expected_keys = 2 * std::max<int64_t>(1, spec.experts);
    if (entry->second.a.empty() || entry->second.b.empty() || pieces_read[spec.name] != expected_keys) {
      fail_user("{}: the adapter of '{}' is incomplete: every adapted projection needs both lora_A and lora_B{}",
                weights_file.string(), spec.hf_name, spec.experts > 0 ? ", for every expert" : "");
    }
    adapter.matrices.push_back(std::move(entry->second));
  }
  std::set<std::string> adapted;
  for (const AdapterMatrices& matrices : adapter.matrices) {
    std::string module = peft_module_name(matrices.base);
    const std::string& path = matrices.base.hf_name;
    const std::string stem = path.ends_with(".weight") ? path.substr(0, path.size() - 7) : path;
    for (size_t i = 0; module.empty() && i < other_modules.size(); ++i) {
      if (stem.ends_with("." + other_modules[i])) module = other_modules[i];
    }
    adapted.insert(module);
  }
  std::vector<std::string> projections = lora_module_names(config);
  for (const std::string& module : other_modules) {
    if (std::find(projections.begin(), projections.end(), module) == projections.end()) projections.push_back(module);
  }
  check_target_modules(adapter.config, dir / kAdapterConfigFile, projections, adapted);
  return adapter;
}

void merge_peft_adapter(const PeftAdapter& adapter, std::span<const ParameterSpec> specs,
                        std::span<std::vector<float>> weights) {
  SUROGATE_CHECK(specs.size() == weights.size(), "one weight per spec");
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < specs.size(); ++i) index[specs[i].name] = i;
  for (const AdapterMatrices& matrices : adapter.matrices) {
    std::vector<float>& weight = weights[index.at(matrices.base.name)];
    const graph::Shape& shape = matrices.base.shape;
    const int64_t out = shape[shape.size() - 2], in = shape.back(), rank = matrices.rank;
    const int64_t experts = std::max<int64_t>(1, matrices.base.experts);  // stacked experts: one product each
    for (int64_t expert = 0; expert < experts; ++expert) {
      const float* a = matrices.a.data() + expert * rank * in;
      const float* b = matrices.b.data() + expert * out * rank;
      float* w = weight.data() + expert * out * in;
      for (int64_t row = 0; row < out; ++row) {
        for (int64_t col = 0; col < in; ++col) {
          double sum = 0.0;
          for (int64_t k = 0; k < rank; ++k) {
            sum += static_cast<double>(b[row * rank + k]) * static_cast<double>(a[k * in + col]);
          }
          w[row * in + col] += static_cast<float>(adapter.scaling * sum);
        }
      }
    }
  }
}

}  // namespace surogate::models

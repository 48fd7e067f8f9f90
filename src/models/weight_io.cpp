// HF checkpoint <-> engine parameters (see weight_io.h).
#include "models/weight_io.h"

#include <set>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "io/safetensors_writer.h"

namespace surogate::models {
namespace {

// Buffers transformers may store that carry no weights of ours (older Llama checkpoints keep
// the RoPE inverse frequencies).
bool is_ignorable(const std::string& name) { return name.ends_with("rotary_emb.inv_freq"); }

std::string list_some(const std::vector<std::string>& names) {
  constexpr size_t kShown = 5;
  std::string out;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kShown) out += fmt::format(" and {} more", names.size() - kShown);
  return out;
}

bool is_float(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16 || dtype == DType::F64;
}

}  // namespace

void load_hf_weights(const std::filesystem::path& model_dir, std::span<const ParameterSpec> specs,
                     const WeightSink& sink) {
  io::SafetensorsCheckpoint checkpoint = io::SafetensorsCheckpoint::open(model_dir);
  const std::string where = model_dir.string();
  std::set<std::string> expected;
  std::vector<std::string> missing;
  for (const ParameterSpec& spec : specs) {
    expected.insert(spec.hf_name);
    if (!checkpoint.contains(spec.hf_name)) missing.push_back(spec.hf_name);
  }
  if (!missing.empty()) {
    fail_user("{}: the checkpoint lacks {} tensor(s) that config.json implies: {}. Check that "
              "config.json belongs to these weights (layer count, biases, qk-norm, "
              "tie_word_embeddings).", where, missing.size(), list_some(missing));
  }
  std::vector<std::string> extra;
  for (const std::string& name : checkpoint.tensor_names()) {
    if (expected.count(name) == 0 && !is_ignorable(name)) extra.push_back(name);
  }
  if (!extra.empty()) {
    fail_user("{}: the checkpoint holds {} tensor(s) that config.json does not describe: {}. "
              "Check config.json (e.g. tie_word_embeddings, attention_bias, num_hidden_layers).",
              where, extra.size(), list_some(extra));
  }
  for (const ParameterSpec& spec : specs) {
    const io::SafetensorsTensor& tensor = checkpoint.tensor(spec.hf_name);
    if (tensor.shape != spec.shape) {
      fail_user("{}: tensor {} has shape {} but config.json implies {}; the config does not "
                "match the weights.", checkpoint.file_of(spec.hf_name).string(), spec.hf_name,
                graph::format_shape(tensor.shape), graph::format_shape(spec.shape));
    }
    if (!is_float(tensor.dtype)) {
      fail_user("{}: tensor {} is stored as {}; only F32, BF16, F16 and F64 weights can be loaded "
                "(quantized checkpoints are not supported here).",
                checkpoint.file_of(spec.hf_name).string(), spec.hf_name, dtype_safetensors_name(tensor.dtype));
    }
  }
  for (const ParameterSpec& spec : specs) sink(spec, checkpoint.tensor(spec.hf_name));
}

std::vector<std::vector<float>> load_hf_weights_as_float32(const std::filesystem::path& model_dir,
                                                           std::span<const ParameterSpec> specs) {
  std::vector<std::vector<float>> values;
  values.reserve(specs.size());
  load_hf_weights(model_dir, specs, [&](const ParameterSpec&, const io::SafetensorsTensor& tensor) {
    values.push_back(io::read_tensor_as_float32(tensor));
  });
  return values;
}

void save_hf_weights(const std::filesystem::path& model_dir, std::span<const ParameterSpec> specs,
                     std::span<const std::vector<float>> values, uint64_t max_shard_bytes) {
  SUROGATE_CHECK(specs.size() == values.size(), "{} specs but {} value buffers", specs.size(), values.size());
  std::vector<io::TensorToWrite> tensors;
  tensors.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    SUROGATE_CHECK(static_cast<int64_t>(values[i].size()) == graph::shape_numel(specs[i].shape),
                   "parameter {} has {} values for shape {}", specs[i].name, values[i].size(),
                   graph::format_shape(specs[i].shape));
    tensors.push_back(io::TensorToWrite{
        .name = specs[i].hf_name,
        .dtype = DType::F32,
        .shape = specs[i].shape,
        .bytes = std::as_bytes(std::span<const float>(values[i])),
    });
  }
  io::write_safetensors_sharded(model_dir, tensors, max_shard_bytes, {{"format", "pt"}});
}

}  // namespace surogate::models

#include "gguf/export.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "core/bfloat16.h"
#include "core/error.h"
#include "gguf/gguf_writer.h"
#include "gguf/model_metadata.h"
#include "gguf/quantize.h"
#include "gguf/tensor_plan.h"
#include "gguf/vocab_metadata.h"
#include "io/model_config.h"
#include "io/safetensors.h"
#include "models/adapter_io.h"
#include "models/model_spec.h"
#include "models/weight_io.h"

namespace surogate::gguf {
namespace {

namespace fs = std::filesystem;

// HF orders each head's q / k rows as two halves (rotate_half); llama.cpp's llama architecture
// rotates adjacent pairs. Row (h, half, i) moves to (h, i, half), as the converter's permute does.
std::vector<float> regroup_rotary_rows(const std::vector<float>& values, int64_t rows, int64_t heads) {
  const int64_t columns = static_cast<int64_t>(values.size()) / rows;
  const int64_t head_dim = rows / heads, half = head_dim / 2;
  std::vector<float> out(values.size());
  for (int64_t head = 0; head < heads; ++head) {
    for (int64_t part = 0; part < 2; ++part) {
      for (int64_t i = 0; i < half; ++i) {
        const int64_t from = head * head_dim + part * half + i;
        const int64_t to = head * head_dim + i * 2 + part;
        std::copy_n(values.begin() + from * columns, columns, out.begin() + to * columns);
      }
    }
  }
  return out;
}

// The tensor in `type`, rows split over the cores (rows are whole blocks, so the bytes are those of
// one pass over the tensor).
std::vector<std::byte> encode(GgmlType type, const std::vector<float>& values, int64_t row) {
  const int64_t rows = static_cast<int64_t>(values.size()) / row;
  const int64_t workers = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, std::max<int64_t>(1, rows));
  if (!is_quantized(type) || workers == 1 || values.size() < (1u << 16)) {
    return quantize(type, values);
  }
  const int64_t per_worker = (rows + workers - 1) / workers;
  std::vector<std::vector<std::byte>> parts(static_cast<size_t>(workers));
  std::vector<std::jthread> threads;
  for (int64_t w = 0; w < workers; ++w) {
    const int64_t first = std::min(rows, w * per_worker), last = std::min(rows, first + per_worker);
    threads.emplace_back([&, w, first, last] {
      parts[w] = quantize(type, std::span<const float>(values).subspan(first * row, (last - first) * row));
    });
  }
  threads.clear();  // joins
  std::vector<std::byte> out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

std::string model_name(const fs::path& model) {
  const fs::path absolute = fs::absolute(model).lexically_normal();
  const std::string name = absolute.filename().string();
  return name.empty() ? absolute.parent_path().filename().string() : name;
}

}  // namespace

ExportSummary export_gguf(const ExportOptions& options) {
  if (!fs::is_directory(options.model)) {
    fail_user("--model {}: not a folder; give a Hugging Face model folder (config.json, safetensors, tokenizer.json)",
              options.model.string());
  }
  if (options.adapter && !fs::is_directory(*options.adapter)) {
    fail_user("--adapter {}: not a folder; give a PEFT adapter folder (adapter_config.json + "
              "adapter_model.safetensors)", options.adapter->string());
  }
  if (fs::is_directory(options.output)) {
    fail_user("--output {}: is a folder; give the path of the .gguf file to write", options.output.string());
  }
  const io::ModelConfig config = io::load_model_config(options.model);
  const ModelFacts facts = model_facts(config);
  const std::vector<models::ParameterSpec> specs = models::parameter_specs(config);

  Metadata metadata;
  add_model_metadata(metadata, facts, config, options.type, model_name(options.model));
  add_vocab_metadata(metadata, options.model, config);
  const std::vector<PlannedTensor> plan = plan_tensors(facts, config, specs, options.type);
  metadata.set_string("general.size_label", size_label(plan));

  // The adapter's matrices by the parameter they adapt, so each weight merges as it streams past.
  std::map<std::string, models::PeftAdapter> adapter_by_parameter;
  ExportSummary summary;
  if (options.adapter) {
    models::PeftAdapter adapter = models::load_peft_adapter(*options.adapter, config);
    summary.merged_projections = adapter.matrices.size();
    for (models::AdapterMatrices& matrices : adapter.matrices) {
      models::PeftAdapter& one = adapter_by_parameter[matrices.base.name];
      one.config = adapter.config;
      one.scaling = adapter.scaling;
      one.matrices.push_back(std::move(matrices));
    }
  }
  if (config.sliding_window &&
      std::any_of(config.sliding_window_layers.begin(), config.sliding_window_layers.end(), [](bool on) { return on; })) {
    fmt::print(stderr, "note: config.json's sliding_window ({}) is not written: llama.cpp's {} architecture attends to "
                       "the whole context, which equals the model's attention up to {} tokens\n",
               *config.sliding_window, facts.architecture, *config.sliding_window);
  }

  std::vector<TensorInfo> infos;
  for (const PlannedTensor& tensor : plan) infos.push_back(tensor.info);
  std::map<std::string, const PlannedTensor*> by_parameter;
  for (const PlannedTensor& tensor : plan) {
    if (tensor.spec_index) by_parameter[specs[*tensor.spec_index].name] = &tensor;
  }
  write_gguf(options.output, metadata, infos, [&](const TensorSink& sink) {
    for (const PlannedTensor& tensor : plan) {
      if (!tensor.spec_index) sink(quantize(GgmlType::F32, llama3_rope_factors(config)));  // rope_freqs.weight
    }
    models::load_hf_weights(options.model, specs, [&](const models::ParameterSpec& spec, const io::SafetensorsTensor& stored) {
      const PlannedTensor& tensor = *by_parameter.at(spec.name);
      std::vector<float> values = io::read_tensor_as_float32(stored);
      if (auto adapter = adapter_by_parameter.find(spec.name); adapter != adapter_by_parameter.end()) {
        std::vector<std::vector<float>> one;
        one.push_back(std::move(values));
        models::merge_peft_adapter(adapter->second, std::span<const models::ParameterSpec>(&spec, 1), one);
        values = std::move(one[0]);
      }
      if (tensor.permute_heads > 0) values = regroup_rotary_rows(values, spec.shape[0], tensor.permute_heads);
      // llama-quantize makes Q4_K_M from an f16 file: it quantizes the f16 values, not the checkpoint's.
      if (options.type == ExportType::Q4_K_M && is_quantized(tensor.info.type)) {
        for (float& value : values) value = f16_to_float(float_to_f16(value));
      }
      sink(encode(tensor.info.type, values, tensor.info.dims[0]));
    });
  });

  summary.architecture = facts.architecture;
  summary.tensors = plan.size();
  for (const PlannedTensor& tensor : plan) ++summary.tensors_by_type[tensor.info.type];
  summary.file_bytes = fs::file_size(options.output);
  return summary;
}

}  // namespace surogate::gguf

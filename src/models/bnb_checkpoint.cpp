// bitsandbytes 4-bit weights in a Hugging Face checkpoint; see bnb_checkpoint.h.
#include "models/bnb_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "ops/parallel_for.h"

namespace surogate::models {
namespace {

constexpr const char* kStatePrefix = ".quant_state.bitsandbytes__";

bool is_float_dtype(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16 || dtype == DType::F64;
}

// Reads the pieces of one weight, each problem a UserError naming the file and the tensor.
class StateReader {
public:
  StateReader(const io::SafetensorsCheckpoint& checkpoint, const ParameterSpec& spec)
      : checkpoint_(checkpoint), spec_(spec) {}

  [[noreturn]] void fail(const std::string& tensor, const std::string& problem) const {
    const std::string file = checkpoint_.contains(tensor) ? checkpoint_.file_of(tensor).string()
                                                          : checkpoint_.file_of(spec_.hf_name).string();
    fail_user("{}: tensor {} {}; the bitsandbytes 4-bit checkpoint is incomplete or damaged: re-download or re-export "
              "it", file, tensor, problem);
  }

  const io::SafetensorsTensor& piece(const std::string& suffix, bool floating, int64_t count) const {
    const std::string name = spec_.hf_name + suffix;
    const io::SafetensorsTensor* tensor = checkpoint_.find(name);
    if (tensor == nullptr) fail(name, fmt::format("is missing (the quant state of {})", spec_.hf_name));
    if (floating ? !is_float_dtype(tensor->dtype) : tensor->dtype != DType::U8) {
      fail(name, fmt::format("is {}, expected {}", dtype_safetensors_name(tensor->dtype),
                             floating ? "a float dtype" : "U8"));
    }
    if (count >= 0 && tensor->element_count() != count) {
      fail(name, fmt::format("holds {} values, expected {}", tensor->element_count(), count));
    }
    return *tensor;
  }

  template <size_t N>
  std::array<float, N> table(const std::string& suffix) const {
    const std::vector<float> values = io::read_tensor_as_float32(piece(suffix, true, static_cast<int64_t>(N)));
    std::array<float, N> result{};
    std::copy(values.begin(), values.end(), result.begin());
    return result;
  }

  nlohmann::json state(std::string& quant_type) const {
    std::vector<std::string> found;
    for (const char* type : {"nf4", "fp4"}) {
      if (checkpoint_.contains(spec_.hf_name + kStatePrefix + type)) found.emplace_back(type);
    }
    if (found.size() != 1) {
      fail(spec_.hf_name + kStatePrefix + "nf4",
           found.empty() ? "(or its __fp4 twin) is missing: a U8 weight needs its quant state"
                         : "and its __fp4 twin are both present: one quant state per weight");
    }
    quant_type = found[0];
    const io::SafetensorsTensor& tensor = piece(kStatePrefix + quant_type, false, -1);
    const std::string_view text(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size());
    nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
    if (!json.is_object()) fail(tensor.name, "does not hold a JSON object (bitsandbytes' packed quant state)");
    return json;
  }

  int64_t positive(const nlohmann::json& state, const std::string& name, const std::string& key) const {
    const auto found = state.find(key);
    if (found == state.end() || !found->is_number_integer() || found->get<int64_t>() < 1) {
      fail(name, fmt::format("has no positive integer '{}' in its JSON", key));
    }
    return found->get<int64_t>();
  }

private:
  const io::SafetensorsCheckpoint& checkpoint_;
  const ParameterSpec& spec_;
};

}  // namespace

std::vector<std::string> bnb_4bit_state_names(const io::SafetensorsCheckpoint& checkpoint, const std::string& hf_name) {
  std::vector<std::string> names;
  for (const char* suffix : {".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
                             ".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4"}) {
    if (checkpoint.contains(hf_name + suffix)) names.push_back(hf_name + suffix);
  }
  return names;
}

Bnb4bitTensor read_bnb_4bit_tensor(const io::SafetensorsCheckpoint& checkpoint, const ParameterSpec& spec) {
  const StateReader reader(checkpoint, spec);
  const int64_t numel = graph::shape_numel(spec.shape);
  std::string quant_type;
  const nlohmann::json state = reader.state(quant_type);
  const std::string state_name = spec.hf_name + kStatePrefix + quant_type;
  const nlohmann::json stated_type = state.value("quant_type", nlohmann::json());
  if (stated_type != nlohmann::json(quant_type)) {
    reader.fail(state_name, fmt::format("says quant_type {}, its name {}", stated_type.dump(), quant_type));
  }
  const nlohmann::json shape = state.value("shape", nlohmann::json());
  bool same_shape = shape.is_array() && shape.size() == spec.shape.size();
  for (size_t i = 0; same_shape && i < shape.size(); ++i) {
    same_shape = shape[i].is_number_integer() && shape[i].get<int64_t>() == spec.shape[i];
  }
  if (!same_shape) {
    reader.fail(state_name, fmt::format("gives the shape {} but config.json implies {}", shape.dump(),
                                        graph::format_shape(spec.shape)));
  }
  const int64_t block_size = reader.positive(state, state_name, "blocksize");
  const int64_t blocks = (numel + block_size - 1) / block_size;
  const bool double_quant = checkpoint.contains(spec.hf_name + ".nested_absmax");
  Bnb4bitTensor tensor{reader.piece("", false, (numel + 1) / 2), reader.piece(".absmax", !double_quant, blocks),
                       nullptr, quant_type};
  tensor.numel = numel;
  tensor.block_size = block_size;
  tensor.quant_map = reader.table<16>(".quant_map");
  if (double_quant) {
    tensor.nested_block_size = reader.positive(state, state_name, "nested_blocksize");
    const auto offset = state.find("nested_offset");
    if (offset == state.end() || !offset->is_number() || !std::isfinite(offset->get<double>())) {
      reader.fail(state_name, "has no finite 'nested_offset' in its JSON (double quantization)");
    }
    tensor.nested_offset = offset->get<float>();
    tensor.nested_absmax =
        &reader.piece(".nested_absmax", true, (blocks + tensor.nested_block_size - 1) / tensor.nested_block_size);
    tensor.nested_quant_map = reader.table<256>(".nested_quant_map");
  }
  for (float value : bnb_4bit_block_absmax(tensor)) {
    if (!std::isfinite(value)) reader.fail(spec.hf_name + ".absmax", "gives a block a non-finite absmax");
  }
  return tensor;
}

std::vector<float> bnb_4bit_block_absmax(const Bnb4bitTensor& tensor) {
  if (!tensor.double_quant()) return io::read_tensor_as_float32(tensor.absmax);
  const std::vector<float> nested = io::read_tensor_as_float32(*tensor.nested_absmax);
  const auto* codes = reinterpret_cast<const uint8_t*>(tensor.absmax.bytes.data());
  std::vector<float> absmax(static_cast<size_t>(tensor.blocks()));
  for (int64_t block = 0; block < tensor.blocks(); ++block) {
    const float nested_scale = nested[static_cast<size_t>(block / tensor.nested_block_size)];
    const float scaled = tensor.nested_quant_map[codes[block]] * nested_scale;
    absmax[static_cast<size_t>(block)] = scaled + tensor.nested_offset;
  }
  return absmax;
}

void dequantize_bnb_4bit(const Bnb4bitTensor& tensor, std::span<float> out) {
  SUROGATE_CHECK(static_cast<int64_t>(out.size()) == tensor.numel, "bitsandbytes weight {}: {} values for {}",
                 tensor.codes.name, out.size(), tensor.numel);
  const std::vector<float> absmax = bnb_4bit_block_absmax(tensor);
  const auto* packed = reinterpret_cast<const uint8_t*>(tensor.codes.bytes.data());
  ops::parallel_for(tensor.blocks(), [&](int64_t block) {
    const float scale = absmax[static_cast<size_t>(block)];
    const int64_t end = std::min(tensor.numel, (block + 1) * tensor.block_size);
    for (int64_t i = block * tensor.block_size; i < end; ++i) {
      const uint8_t byte = packed[i / 2];
      out[static_cast<size_t>(i)] = tensor.quant_map[i % 2 == 0 ? byte >> 4 : byte & 0x0F] * scale;
    }
  });
}

}  // namespace surogate::models

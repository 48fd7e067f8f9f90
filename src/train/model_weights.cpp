// Weight loading and from-scratch initialisation; see model_weights.h.
#include "train/model_weights.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/weight_io.h"

namespace surogate::train {
namespace fs = std::filesystem;

bool has_safetensors(const fs::path& model_dir) {
  if (!fs::is_directory(model_dir)) return false;
  for (const auto& entry : fs::directory_iterator(model_dir)) {
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json")) return true;
  }
  return false;
}

namespace {
bool ends_with(const std::string& text, std::string_view suffix) { return text.ends_with(suffix); }

bool is_norm(const std::string& name) {
  return ends_with(name, "ln1.weight") || ends_with(name, "ln2.weight") || ends_with(name, "norm.weight");
}
}  // namespace

void initialize_weights(std::span<const models::ParameterSpec> specs, std::span<const WeightView> weights,
                        uint64_t seed, bool projections_to_zero, const WeightWritten& written) {
  SUROGATE_CHECK(specs.size() == weights.size(), "one weight view per parameter");
  std::mt19937_64 generator(seed);
  // Box-Muller on the standard 64-bit Mersenne twister: the same values on every platform.
  auto uniform = [&generator] { return (static_cast<double>(generator() >> 11) + 0.5) * 0x1.0p-53; };
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string& name = specs[i].name;
    std::span<float> values = weights[i].values;
    bool zero_projection = projections_to_zero && (ends_with(name, "o_proj.weight") || ends_with(name, "down_proj.weight"));
    if (is_norm(name)) {
      std::fill(values.begin(), values.end(), 1.0f);
    } else if (ends_with(name, ".bias") || zero_projection) {
      std::fill(values.begin(), values.end(), 0.0f);
    } else {
      for (float& value : values) {
        double radius = std::sqrt(-2.0 * std::log(uniform()));
        value = static_cast<float>(0.02 * radius * std::cos(2.0 * M_PI * uniform()));
      }
    }
    if (written) written(i);
  }
}

void load_weights(const fs::path& model_dir, std::span<const models::ParameterSpec> specs,
                  std::span<const WeightView> weights, const WeightWritten& written,
                  const models::Fp8BlockSink& stored_fp8, const models::Bnb4bitSink& stored_bnb) {
  SUROGATE_CHECK(specs.size() == weights.size(), "one weight view per parameter");
  size_t index = 0;
  models::load_hf_weights(model_dir, specs, [&](const models::ParameterSpec& spec, const io::SafetensorsTensor& tensor) {
    SUROGATE_CHECK(spec.name == weights[index].name, "weights follow spec order");
    io::read_tensor_as_float32(tensor, weights[index].values);  // load_hf_weights checked it is finite
    if (written) written(index);
    ++index;
  }, [&](const models::ParameterSpec& spec, const models::Fp8BlockTensor& tensor) {
    if (!stored_fp8 || !stored_fp8(spec, tensor)) return false;
    ++index;
    return true;
  }, [&](const models::ParameterSpec& spec, const models::Bnb4bitTensor& tensor) {
    if (!stored_bnb || !stored_bnb(spec, tensor)) return false;
    ++index;
    return true;
  });
}

void initialize_lora(const models::LoraSetup& lora, std::span<const WeightView> weights, uint64_t seed) {
  std::mt19937_64 generator(seed ^ 0x4c6f5241ull);  // "LoRA"
  for (const models::LoraAdapter& adapter : lora.adapters) {
    for (const WeightView& weight : weights) {
      if (weight.name == adapter.a.name) {
        // fan-in = in: A is [r, in], or [E, r, in] for stacked experts (one adapter per expert)
        const double bound = 1.0 / std::sqrt(static_cast<double>(adapter.a.shape.back()));
        for (float& value : weight.values) {
          const double uniform = static_cast<double>(generator() >> 11) * 0x1.0p-53;
          value = static_cast<float>((2.0 * uniform - 1.0) * bound);
        }
      } else if (weight.name == adapter.b.name) {
        std::fill(weight.values.begin(), weight.values.end(), 0.0f);
      }
    }
  }
}

}  // namespace surogate::train

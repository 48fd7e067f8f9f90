// The enumerated options of the run configuration as C++ enums, each with the exact spelling the
// YAML file uses. One table per enum (EnumNames<E>::table) drives parsing, error messages that list
// the allowed values, and printing, so a name can never be accepted but printed differently.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace surogate {

// recipe: mixed-precision recipe.
enum class Recipe { Bf16, Fp8Hybrid, Nvfp4 };
// optimizer. `adamw` (fp32 moments) is an addition to the reference.
enum class Optimizer { AdamW8bit, NorMuon, AdamW };
// lr_scheduler_type.
enum class LrScheduler { Linear, Cosine, Wsd };
// truncation_strategy: what happens to a sample longer than max_length.
enum class TruncationStrategy { Delete, Left, Right, Split };
// padding_side.
enum class PaddingSide { Left, Right };
// datasets[i].type.
enum class DatasetType { Text, Instruction, Conversation, Auto, Preference, Kto, Prompt };
// datasets[i].system_prompt_type.
enum class SystemPromptType { Field, Fixed };
// torch_dtype: the dtype the model weights are loaded in.
enum class TorchDtype { BFloat16, Float16, Float32 };
// gradient_dtype: activation-gradient / backward-matmul dtype.
enum class GradientDtype { Bf16, Fp32, Fp8E4M3, Fp8E5M2 };
// master_dtype: dtype of the master weights the optimizer updates.
enum class MasterDtype { Bf16, Fp32 };
// lora_dtype: dtype of the LoRA adapter weights.
enum class LoraDtype { Bf16, Fp32 };
// fp4_backend: FP4 matmul implementation for the nvfp4 recipe.
enum class Fp4Backend { Cutlass, Cudnn };
// norm_bbox: bounding-box normalisation for vision models.
enum class NormBbox { Norm1000, None };
// report_to entries.
enum class ReportTarget { Wandb, Aim };

// EnumNames<E>::table lists every value of E with its configuration spelling, in the order the
// documentation lists them (error messages list them in this order too).
template <typename E>
struct EnumNames;

#define SUROGATE_ENUM_NAMES(Enum, ...)                                            \
  template <>                                                                     \
  struct EnumNames<Enum> {                                                        \
    static constexpr std::pair<Enum, std::string_view> table[] = {__VA_ARGS__}; \
  }

SUROGATE_ENUM_NAMES(Recipe, {Recipe::Bf16, "bf16"}, {Recipe::Fp8Hybrid, "fp8_hybrid"}, {Recipe::Nvfp4, "nvfp4"});
SUROGATE_ENUM_NAMES(Optimizer, {Optimizer::AdamW8bit, "adamw_8bit"}, {Optimizer::NorMuon, "normuon"},
                    {Optimizer::AdamW, "adamw"});
SUROGATE_ENUM_NAMES(LrScheduler, {LrScheduler::Linear, "linear"}, {LrScheduler::Cosine, "cosine"},
                    {LrScheduler::Wsd, "wsd"});
SUROGATE_ENUM_NAMES(TruncationStrategy, {TruncationStrategy::Delete, "delete"}, {TruncationStrategy::Left, "left"},
                    {TruncationStrategy::Right, "right"}, {TruncationStrategy::Split, "split"});
SUROGATE_ENUM_NAMES(PaddingSide, {PaddingSide::Left, "left"}, {PaddingSide::Right, "right"});
SUROGATE_ENUM_NAMES(DatasetType, {DatasetType::Text, "text"}, {DatasetType::Instruction, "instruction"},
                    {DatasetType::Conversation, "conversation"}, {DatasetType::Auto, "auto"},
                    {DatasetType::Preference, "preference"}, {DatasetType::Kto, "kto"},
                    {DatasetType::Prompt, "prompt"});
SUROGATE_ENUM_NAMES(SystemPromptType, {SystemPromptType::Field, "field"}, {SystemPromptType::Fixed, "fixed"});
SUROGATE_ENUM_NAMES(TorchDtype, {TorchDtype::BFloat16, "bfloat16"}, {TorchDtype::Float16, "float16"},
                    {TorchDtype::Float32, "float32"});
SUROGATE_ENUM_NAMES(GradientDtype, {GradientDtype::Bf16, "bf16"}, {GradientDtype::Fp32, "fp32"},
                    {GradientDtype::Fp8E4M3, "fp8_e4m3"}, {GradientDtype::Fp8E5M2, "fp8_e5m2"});
SUROGATE_ENUM_NAMES(MasterDtype, {MasterDtype::Bf16, "bf16"}, {MasterDtype::Fp32, "fp32"});
SUROGATE_ENUM_NAMES(LoraDtype, {LoraDtype::Bf16, "bf16"}, {LoraDtype::Fp32, "fp32"});
SUROGATE_ENUM_NAMES(Fp4Backend, {Fp4Backend::Cutlass, "cutlass"}, {Fp4Backend::Cudnn, "cudnn"});
SUROGATE_ENUM_NAMES(NormBbox, {NormBbox::Norm1000, "norm1000"}, {NormBbox::None, "none"});
SUROGATE_ENUM_NAMES(ReportTarget, {ReportTarget::Wandb, "wandb"}, {ReportTarget::Aim, "aim"});

#undef SUROGATE_ENUM_NAMES

template <typename E>
concept ConfigEnum = requires { EnumNames<E>::table; };

// The configuration spelling of `value` ("adamw_8bit" for Optimizer::AdamW8bit).
template <ConfigEnum E>
constexpr std::string_view to_string(E value) {
  for (const auto& [candidate, name] : EnumNames<E>::table) {
    if (candidate == value) return name;
  }
  return "?";  // unreachable for a value of the enum
}

// The value spelled `name`, or nullopt when `name` is not one of them (case-sensitive).
template <ConfigEnum E>
constexpr std::optional<E> enum_from_string(std::string_view name) {
  for (const auto& [candidate, spelling] : EnumNames<E>::table) {
    if (spelling == name) return candidate;
  }
  return std::nullopt;
}

// Every spelling of E, in table order.
template <ConfigEnum E>
std::vector<std::string> enum_names() {
  std::vector<std::string> names;
  for (const auto& entry : EnumNames<E>::table) names.emplace_back(entry.second);
  return names;
}

// The tensor dtypes the dtype options stand for.
constexpr DType to_dtype(TorchDtype value) {
  switch (value) {
    case TorchDtype::BFloat16: return DType::BF16;
    case TorchDtype::Float16: return DType::F16;
    case TorchDtype::Float32: return DType::F32;
  }
  return DType::F32;
}
constexpr DType to_dtype(GradientDtype value) {
  switch (value) {
    case GradientDtype::Bf16: return DType::BF16;
    case GradientDtype::Fp32: return DType::F32;
    case GradientDtype::Fp8E4M3: return DType::F8_E4M3;
    case GradientDtype::Fp8E5M2: return DType::F8_E5M2;
  }
  return DType::F32;
}
constexpr DType to_dtype(MasterDtype value) { return value == MasterDtype::Bf16 ? DType::BF16 : DType::F32; }
constexpr DType to_dtype(LoraDtype value) { return value == LoraDtype::Bf16 ? DType::BF16 : DType::F32; }

}  // namespace surogate

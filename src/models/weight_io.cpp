// HF checkpoint <-> engine parameters (see weight_io.h).
#include "models/weight_io.h"

#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "io/safetensors_writer.h"
#include "io/tensor_finite_check.h"
#include "ops/parallel_for.h"

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

std::string scale_name(const ParameterSpec& spec) { return spec.hf_name + "_scale_inv"; }

// The FP8 block layout of a spec's F8_E4M3 tensor, its scale_inv checked (see weight_io.h).
quant::Fp8BlockShape fp8_block_shape(const io::SafetensorsCheckpoint& checkpoint, const ParameterSpec& spec) {
  const std::string file = checkpoint.file_of(spec.hf_name).string();
  if (!spec.checkpoint_fp8_blocks || spec.shape.size() != 2) {
    fail_user("{}: tensor {} is stored as F8_E4M3, but {}; only FP8 checkpoints with block scales "
              "(quantization_config quant_method 'fp8' with weight_block_size) load: give the full-precision "
              "checkpoint or fix config.json", file, spec.hf_name,
              spec.checkpoint_fp8_blocks ? "it is not a matrix" : "config.json has no FP8 quantization_config");
  }
  const quant::Fp8BlockShape shape{spec.shape[0], spec.shape[1], spec.checkpoint_fp8_blocks->block_rows,
                                   spec.checkpoint_fp8_blocks->block_cols};
  const io::SafetensorsTensor* scale = checkpoint.find(scale_name(spec));
  if (scale == nullptr) {
    fail_user("{}: tensor {} is stored as F8_E4M3 but its block scales {} are missing; the checkpoint is incomplete: "
              "re-download it", file, spec.hf_name, scale_name(spec));
  }
  const graph::Shape expected{shape.row_blocks(), shape.col_blocks()};
  if (scale->shape != expected || !is_float(scale->dtype)) {
    fail_user("{}: tensor {} is {}{} but FP8 blocks of {}x{} (quantization_config.weight_block_size) over {} need "
              "a float tensor of shape {}; config.json does not match the weights",
              checkpoint.file_of(scale_name(spec)).string(), scale_name(spec), dtype_safetensors_name(scale->dtype),
              graph::format_shape(scale->shape), shape.block_rows, shape.block_cols, spec.hf_name,
              graph::format_shape(expected));
  }
  return shape;
}

// The weight dequantized to F32, handed on as a tensor that views `buffer`.
io::SafetensorsTensor dequantized(const Fp8BlockTensor& tensor, std::vector<float>& buffer) {
  const std::vector<float> scale_inv = io::read_tensor_as_float32(tensor.scale_inv);
  buffer.resize(static_cast<size_t>(tensor.shape.numel()));
  const auto* codes = reinterpret_cast<const uint8_t*>(tensor.codes.bytes.data());
  ops::parallel_for(tensor.shape.row_blocks(), [&](int64_t block_row) {
    quant::dequantize_fp8_blocks(codes, scale_inv.data(), tensor.shape, block_row, block_row + 1, buffer.data());
  });
  return io::SafetensorsTensor{tensor.codes.name, DType::F32, tensor.codes.shape,
                               std::as_bytes(std::span<const float>(buffer))};
}

// A spec whose tensor is U8 in a bitsandbytes 4-bit checkpoint: packed codes with a quant state.
bool is_bnb_4bit(const ParameterSpec& spec, const io::SafetensorsTensor& tensor) {
  return spec.checkpoint_bnb_4bit && tensor.dtype == DType::U8;
}

// The weight dequantized to F32, handed on as a tensor that views `buffer`.
io::SafetensorsTensor dequantized(const Bnb4bitTensor& tensor, const ParameterSpec& spec, std::vector<float>& buffer) {
  buffer.resize(static_cast<size_t>(tensor.numel));
  dequantize_bnb_4bit(tensor, buffer);
  return io::SafetensorsTensor{tensor.codes.name, DType::F32, spec.shape,
                               std::as_bytes(std::span<const float>(buffer))};
}

// The spec of one piece of a stacked parameter (for the FP8 checks, which read hf_name and shape).
ParameterSpec piece_spec(const ParameterSpec& spec, const HfPiece& piece) {
  ParameterSpec single = spec;
  single.hf_name = piece.name;
  single.shape = piece.shape;
  single.experts = 0;
  return single;
}

// A stacked expert parameter assembled from its per-expert tensors into `bytes`: in their dtype
// when they share one float dtype, else (mixed dtypes, FP8 blocks) as F32.
io::SafetensorsTensor stack_pieces(const io::SafetensorsCheckpoint& checkpoint, const ParameterSpec& spec,
                                   std::vector<std::byte>& bytes) {
  const std::vector<HfPiece> pieces = hf_pieces(spec);
  DType dtype = checkpoint.tensor(pieces.front().name).dtype;
  for (const HfPiece& piece : pieces) {
    if (checkpoint.tensor(piece.name).dtype != dtype || dtype == DType::F8_E4M3) dtype = DType::F32;
  }
  const size_t element = dtype_size_bytes(dtype);
  bytes.resize(static_cast<size_t>(graph::shape_numel(spec.shape)) * element);
  std::vector<float> converted;
  for (const HfPiece& piece : pieces) {
    const io::SafetensorsTensor& tensor = checkpoint.tensor(piece.name);
    std::byte* target = bytes.data() + static_cast<size_t>(piece.offset) * element;
    if (tensor.dtype == dtype) {
      std::memcpy(target, tensor.bytes.data(), tensor.bytes.size());
      continue;
    }
    if (tensor.dtype == DType::F8_E4M3) {
      const ParameterSpec single = piece_spec(spec, piece);
      const Fp8BlockTensor fp8{tensor, checkpoint.tensor(scale_name(single)), fp8_block_shape(checkpoint, single)};
      io::SafetensorsTensor plain = dequantized(fp8, converted);
      std::memcpy(target, plain.bytes.data(), plain.bytes.size());
      continue;
    }
    converted = io::read_tensor_as_float32(tensor);
    std::memcpy(target, converted.data(), converted.size() * sizeof(float));
  }
  return io::SafetensorsTensor{spec.hf_name, dtype, spec.shape, std::span<const std::byte>(bytes)};
}

// transformers 5 keeps a layer's experts fused in memory (`mlp.experts.gate_up_proj` [E, 2I, H],
// gate rows first, and `mlp.experts.down_proj` [E, H, I]; Mixtral's under `mlp.` too) and writes
// that layout when saved with save_original_format=False. The stacked parameter's part of it.
struct FusedExperts {
  std::string name;
  int64_t part = 0, parts = 1;  // along dimension 1
};

std::optional<FusedExperts> fused_source(const ParameterSpec& spec) {
  if (spec.experts == 0) return std::nullopt;
  const std::string slot = ".experts." + std::string(kExpertSlot) + ".";
  const size_t at = spec.hf_name.find(slot);
  if (at == std::string::npos) return std::nullopt;
  std::string prefix = spec.hf_name.substr(0, at);
  if (const size_t moe = prefix.find(".block_sparse_moe"); moe != std::string::npos) {
    prefix.replace(moe, std::string(".block_sparse_moe").size(), ".mlp");
  }
  const std::string module = spec.hf_name.substr(at + slot.size());
  if (module == "gate_proj.weight" || module == "w1.weight") return FusedExperts{prefix + ".experts.gate_up_proj", 0, 2};
  if (module == "up_proj.weight" || module == "w3.weight") return FusedExperts{prefix + ".experts.gate_up_proj", 1, 2};
  if (module == "down_proj.weight" || module == "w2.weight") return FusedExperts{prefix + ".experts.down_proj", 0, 1};
  return std::nullopt;
}

graph::Shape fused_shape(const ParameterSpec& spec, const FusedExperts& fused) {
  return {spec.shape[0], spec.shape[1] * fused.parts, spec.shape[2]};
}

// The spec's rows of the fused tensor, copied into `bytes` in the stored dtype.
io::SafetensorsTensor slice_fused(const io::SafetensorsTensor& tensor, const ParameterSpec& spec,
                                  const FusedExperts& fused, std::vector<std::byte>& bytes) {
  const size_t element = dtype_size_bytes(tensor.dtype);
  const int64_t block = spec.shape[1] * spec.shape[2];  // one expert's part, elements
  bytes.resize(static_cast<size_t>(spec.experts * block) * element);
  for (int64_t expert = 0; expert < spec.experts; ++expert) {
    const int64_t source = (expert * fused.parts + fused.part) * block;
    std::memcpy(bytes.data() + static_cast<size_t>(expert * block) * element,
                tensor.bytes.data() + static_cast<size_t>(source) * element, static_cast<size_t>(block) * element);
  }
  return io::SafetensorsTensor{tensor.name, tensor.dtype, spec.shape, std::span<const std::byte>(bytes)};
}

}  // namespace

void load_hf_weights(const std::filesystem::path& model_dir, std::span<const ParameterSpec> requested,
                     const WeightSink& sink, const Fp8BlockSink& fp8_sink, const Bnb4bitSink& bnb_sink) {
  io::SafetensorsCheckpoint checkpoint = io::SafetensorsCheckpoint::open(model_dir);
  const std::string where = model_dir.string();
  // Mixtral saved in transformers 5's layout has its router under `mlp.` too: the names as stored.
  std::vector<ParameterSpec> specs(requested.begin(), requested.end());
  for (ParameterSpec& spec : specs) {
    const size_t moe = spec.hf_name.find(".block_sparse_moe.");
    if (spec.experts > 0 || moe == std::string::npos || checkpoint.contains(spec.hf_name)) continue;
    std::string renamed = spec.hf_name;
    renamed.replace(moe, std::string(".block_sparse_moe.").size(), ".mlp.");
    if (checkpoint.contains(renamed)) spec.hf_name = renamed;
  }
  std::set<std::string> expected;
  std::vector<std::string> missing;
  // Stacked experts stored fused (transformers 5's layout) instead of per expert: spec index → source.
  std::map<size_t, FusedExperts> fused;
  for (const ParameterSpec& spec : specs) {
    if (spec.experts > 0) {
      const std::optional<FusedExperts> source = fused_source(spec);
      if (source && !checkpoint.contains(hf_pieces(spec).front().name) && checkpoint.contains(source->name)) {
        const io::SafetensorsTensor& tensor = checkpoint.tensor(source->name);
        if (tensor.shape != fused_shape(spec, *source) || !is_float(tensor.dtype)) {
          fail_user("{}: tensor {} is {}{} but config.json implies a float tensor of shape {} (the experts of {} "
                    "fused); the config does not match the weights.", checkpoint.file_of(source->name).string(),
                    source->name, dtype_safetensors_name(tensor.dtype), graph::format_shape(tensor.shape),
                    graph::format_shape(fused_shape(spec, *source)), spec.name);
        }
        expected.insert(source->name);
        fused[static_cast<size_t>(&spec - specs.data())] = *source;
        continue;
      }
      for (const HfPiece& piece : hf_pieces(spec)) {
        expected.insert(piece.name);
        const io::SafetensorsTensor* tensor = checkpoint.find(piece.name);
        if (tensor == nullptr) missing.push_back(piece.name);
        if (tensor != nullptr && tensor->dtype == DType::F8_E4M3) expected.insert(piece.name + "_scale_inv");
      }
      continue;
    }
    expected.insert(spec.hf_name);
    if (!checkpoint.contains(spec.hf_name)) missing.push_back(spec.hf_name);
    const io::SafetensorsTensor* tensor = checkpoint.find(spec.hf_name);
    if (tensor != nullptr && tensor->dtype == DType::F8_E4M3) expected.insert(scale_name(spec));
    if (tensor != nullptr && is_bnb_4bit(spec, *tensor)) {
      for (std::string& name : bnb_4bit_state_names(checkpoint, spec.hf_name)) expected.insert(std::move(name));
    }
  }
  if (!missing.empty()) {
    fail_user("{}: the checkpoint lacks {} tensor(s) that config.json implies: {}. Check that "
              "config.json belongs to these weights (layer count, biases, qk-norm, "
              "tie_word_embeddings, experts).", where, missing.size(), list_some(missing));
  }
  for (const ParameterSpec& spec : specs) {
    // Before the stray-tensor check: a bitsandbytes state would read as stray tensors.
    if (spec.experts == 0 && checkpoint.tensor(spec.hf_name).dtype == DType::U8 && !spec.checkpoint_bnb_4bit) {
      fail_user("{}: tensor {} is stored as U8 (4-bit codes?), but config.json has no bitsandbytes 4-bit "
                "quantization_config (quant_method 'bitsandbytes', load_in_4bit): give the full-precision "
                "checkpoint or fix config.json", checkpoint.file_of(spec.hf_name).string(), spec.hf_name);
    }
  }
  std::vector<std::string> extra;
  for (const std::string& name : checkpoint.tensor_names()) {
    if (expected.count(name) == 0 && !is_ignorable(name)) extra.push_back(name);
  }
  if (!extra.empty()) {
    fail_user("{}: the checkpoint holds {} tensor(s) that config.json does not describe: {}. "
              "Check config.json (e.g. tie_word_embeddings, attention_bias, num_hidden_layers, num_experts, "
              "mlp_only_layers).", where, extra.size(), list_some(extra));
  }
  auto check_float = [&](const std::string& name, const io::SafetensorsTensor& tensor) {
    if (!is_float(tensor.dtype)) {
      fail_user("{}: tensor {} is stored as {}; only F32, BF16, F16 and F64 weights can be loaded (and F8_E4M3 "
                "with block scales, U8 with a bitsandbytes 4-bit quant state: config.json's quantization_config says "
                "which).", checkpoint.file_of(name).string(), name, dtype_safetensors_name(tensor.dtype));
    }
  };
  auto check_shape = [&](const std::string& name, const io::SafetensorsTensor& tensor, const graph::Shape& shape) {
    if (tensor.shape != shape) {
      fail_user("{}: tensor {} has shape {} but config.json implies {}; the config does not "
                "match the weights.", checkpoint.file_of(name).string(), name, graph::format_shape(tensor.shape),
                graph::format_shape(shape));
    }
  };
  for (const ParameterSpec& spec : specs) {
    if (fused.contains(static_cast<size_t>(&spec - specs.data()))) continue;  // checked above
    if (spec.experts > 0) {
      for (const HfPiece& piece : hf_pieces(spec)) {
        const io::SafetensorsTensor& tensor = checkpoint.tensor(piece.name);
        check_shape(piece.name, tensor, piece.shape);
        if (tensor.dtype == DType::F8_E4M3) fp8_block_shape(checkpoint, piece_spec(spec, piece));
        else check_float(piece.name, tensor);
      }
      continue;
    }
    const io::SafetensorsTensor& tensor = checkpoint.tensor(spec.hf_name);
    if (is_bnb_4bit(spec, tensor)) {
      read_bnb_4bit_tensor(checkpoint, spec);  // its shape is in its quant state
      continue;
    }
    check_shape(spec.hf_name, tensor, spec.shape);
    if (tensor.dtype == DType::F8_E4M3) fp8_block_shape(checkpoint, spec);
    else check_float(spec.hf_name, tensor);
  }
  std::vector<float> buffer;       // one dequantized weight at a time
  std::vector<std::byte> stacked;  // one stacked expert parameter at a time
  // A NaN or Inf weight would make the first loss NaN (read as a divergence to fix with the
  // learning rate), an evaluation's loss null, or a merged model NaN: it is a damaged file.
  const auto deliver = [&](const ParameterSpec& spec, const io::SafetensorsTensor& tensor) {
    io::require_finite(tensor, model_dir.string(), "the weights are damaged: re-download or re-export the model");
    sink(spec, tensor);
  };
  for (const ParameterSpec& spec : specs) {
    const ParameterSpec& original = requested[static_cast<size_t>(&spec - specs.data())];  // what the sink knows
    if (auto source = fused.find(static_cast<size_t>(&spec - specs.data())); source != fused.end()) {
      deliver(original, slice_fused(checkpoint.tensor(source->second.name), spec, source->second, stacked));
      continue;
    }
    if (spec.experts > 0) {
      deliver(original, stack_pieces(checkpoint, spec, stacked));
      continue;
    }
    const io::SafetensorsTensor& tensor = checkpoint.tensor(spec.hf_name);
    if (is_bnb_4bit(spec, tensor)) {
      const Bnb4bitTensor bnb = read_bnb_4bit_tensor(checkpoint, spec);
      if (!bnb_sink || !bnb_sink(original, bnb)) deliver(original, dequantized(bnb, spec, buffer));
      continue;
    }
    if (tensor.dtype != DType::F8_E4M3) {
      deliver(original, tensor);
      continue;
    }
    const Fp8BlockTensor fp8{tensor, checkpoint.tensor(scale_name(spec)), fp8_block_shape(checkpoint, spec)};
    if (!fp8_sink || !fp8_sink(original, fp8)) deliver(original, dequantized(fp8, buffer));
  }
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
    for (HfPiece& piece : hf_pieces(specs[i])) {
      const std::span<const float> slice(values[i].data() + piece.offset, static_cast<size_t>(graph::shape_numel(piece.shape)));
      tensors.push_back(io::TensorToWrite{
          .name = std::move(piece.name),
          .dtype = DType::F32,
          .shape = std::move(piece.shape),
          .bytes = std::as_bytes(slice),
      });
    }
  }
  io::write_safetensors_sharded(model_dir, tensors, max_shard_bytes, {{"format", "pt"}});
}

}  // namespace surogate::models

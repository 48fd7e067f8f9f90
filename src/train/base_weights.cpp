// The base weights into a run's device; see base_weights.h.
#include "train/base_weights.h"

#include <cstdint>
#include <utility>

#include <fmt/format.h>

#include "ops/parallel_for.h"
#include "train/model_outputs.h"
#include "train/overlapped_quantizer.h"
#include "train/quantized_weights.h"

namespace surogate::train {

void read_base_weights(const Config& config, std::span<const models::ParameterSpec> specs,
                       std::span<const WeightView> views, const WeightWritten& written,
                       const models::Fp8BlockSink& stored_fp8, const models::Bnb4bitSink& stored_bnb) {
  if (has_safetensors(config.model.name_or_path)) {
    load_weights(config.model.name_or_path, specs, views, written, stored_fp8, stored_bnb);
  } else {
    initialize_weights(specs, views, static_cast<uint64_t>(config.data.train_seed),
                       config.model.init_projections_to_zero, written);
  }
}

const models::QuantizedWeight* find_quantized(std::span<const models::QuantizedWeight> quantized,
                                              const std::string& name) {
  for (const models::QuantizedWeight& weight : quantized) {
    if (weight.name == name) return &weight;
  }
  return nullptr;
}

std::vector<std::string> load_base_weights(const BaseWeightSetup& setup, std::span<const WeightView> device_views,
                                           TrainingDevice& device) {
  const Config& config = *setup.config;
  const io::ModelConfig& model = *setup.model;
  // Each quantized weight is read into one of the quantizer's two scratch buffers instead.
  OverlappedQuantizer quantizer(
      [&](const models::QuantizedWeight& weight, const QuantizedPieces& pieces) { device.store_quantized(weight, pieces); },
      setup.quantized);
  std::vector<WeightView> views(device_views.begin(), device_views.end());
  std::vector<const models::QuantizedWeight*> quantized(views.size(), nullptr);
  std::vector<size_t> ordinal(views.size(), 0);
  size_t next_ordinal = 0;
  for (size_t i = 0; i < views.size(); ++i) {
    quantized[i] = find_quantized(setup.quantized, setup.specs[i].name);
    if (!quantized[i]) continue;
    ordinal[i] = next_ordinal++;
    views[i].values = quantizer.scratch(ordinal[i], quantized[i]->numel());
  }
  int64_t taken_as_stored = 0, dequantized = 0;
  auto take = [&](const std::string& name, auto stored) {
    const models::QuantizedWeight* weight = find_quantized(setup.quantized, name);
    std::optional<QuantizedPieces> pieces = weight ? stored(*weight) : std::nullopt;
    if (!pieces) {
      ++dequantized;
      return false;
    }
    quantizer.drain();  // the scratch of the weight after this one may be the one in flight
    device.store_quantized(*weight, *pieces);
    ++taken_as_stored;
    return true;
  };
  const WeightWritten written = [&](size_t index) {
    if (quantized[index]) quantizer.quantize(ordinal[index], *quantized[index]);
  };
  if (setup.reader) {
    setup.reader(views, written);
  } else {
    read_base_weights(
        config, setup.specs, views, written,
        [&](const models::ParameterSpec& spec, const models::Fp8BlockTensor& tensor) {
          return take(spec.name,
                      [&](const models::QuantizedWeight& weight) { return stored_fp8_pieces(weight, tensor); });
        },
        [&](const models::ParameterSpec& spec, const models::Bnb4bitTensor& tensor) {
          return take(spec.name,
                      [&](const models::QuantizedWeight& weight) { return stored_bnb_pieces(weight, tensor); });
        });
  }
  quantizer.drain();
  std::vector<std::string> lines;
  if (!has_safetensors(config.model.name_or_path)) {
    lines.push_back(fmt::format("{} has no safetensors: initialising the model from scratch (seed {})",
                                config.model.name_or_path, config.data.train_seed));
  }
  if (dequantized > 0 && model.fp8_block_checkpoint) {
    const io::Fp8BlockCheckpoint& blocks = *model.fp8_block_checkpoint;
    const char* again = config.quant.qlora_fp8 ? " (qlora_block_size differs: quantized again in its blocks)" : "";
    lines.push_back(fmt::format("{} is saved in FP8 blocks of {}x{}: {} weights dequantized on load{}",
                                config.model.name_or_path, blocks.block_rows, blocks.block_cols, dequantized, again));
  }
  const models::QloraOptions* qlora = setup.qlora;
  if (dequantized > 0 && model.bnb_4bit_checkpoint) {
    const io::Bnb4bitCheckpoint& bnb = *model.bnb_4bit_checkpoint;
    const char* again = !qlora ? ""
                        : qlora->format != models::WeightFormat::Nf4 || bnb.quant_type != "nf4"
                            ? " (the plan's format differs: quantized again)"
                            : " (qlora_bnb_block_size differs: quantized again in its blocks)";
    lines.push_back(fmt::format("{} is saved in bitsandbytes 4-bit ({}): {} weights dequantized on load{}",
                                config.model.name_or_path, bnb.quant_type, dequantized, again));
  }
  if (quantizer.weights() > 0) {
    lines.push_back(fmt::format("base weights quantized on the host: {} weights in {:.1f} s on {} threads, overlapped "
                                "with reading the next (the reader waited {:.1f} s)",
                                quantizer.weights(), quantizer.quantizing_seconds(), ops::parallel_thread_count(),
                                quantizer.waiting_seconds()));
  }
  if (!qlora || setup.quantized.empty()) return lines;
  const size_t count = setup.quantized.size();
  if (qlora->format == models::WeightFormat::Fp8Block) {
    lines.push_back(fmt::format("QLoRA: {} base weights stored in FP8 E4M3 (blocks of {}x{}{})", count, qlora->block_size,
                                qlora->block_size,
                                taken_as_stored > 0
                                    ? fmt::format(", {} taken as stored from the FP8 checkpoint", taken_as_stored)
                                    : std::string()));
  } else if (qlora->format == models::WeightFormat::Nvfp4) {
    lines.push_back(fmt::format("QLoRA: {} base weights stored in NVFP4 (E2M1, an E4M3 scale per 16 values and a "
                                "tensor scale; {} block scales), dequantized to {} for the products",
                                count, qlora->four_over_six ? "Four Over Six" : "6-based", setup.cuda ? "bf16" : "fp32"));
  } else {
    lines.push_back(fmt::format(
        "QLoRA: {} base weights stored in NF4 (block {}, double quantization {}{})", count, qlora->block_size,
        qlora->double_quant ? "on" : "off",
        taken_as_stored > 0 ? fmt::format("; {} taken as stored from the bitsandbytes checkpoint", taken_as_stored)
                            : std::string()));
  }
  return lines;
}

std::vector<std::vector<float>> merge_into_base(const Config& config, std::span<const models::ParameterSpec> specs,
                                                const models::LoraSetup& lora, std::span<const WeightView> weights,
                                                std::span<const WeightView> trainable, bool quantized_base,
                                                const BaseWeightReader& reader) {
  if (!quantized_base) return merge_lora_weights(lora, specs, weights);
  std::vector<std::vector<float>> original(specs.size());
  std::vector<WeightView> sources;
  for (size_t i = 0; i < specs.size(); ++i) {
    original[i].resize(static_cast<size_t>(graph::shape_numel(specs[i].shape)));
    sources.push_back({specs[i].name, specs[i].shape, original[i]});
  }
  if (reader) {
    reader(sources, {});
  } else {
    read_base_weights(config, specs, sources);
  }
  for (const WeightView& adapter : trainable) sources.push_back(adapter);
  return merge_lora_weights(lora, specs, sources);
}

}  // namespace surogate::train

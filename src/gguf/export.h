// `surogate export`: a Hugging Face model folder (optionally with a PEFT LoRA adapter merged in,
// models/adapter_io.h) → one GGUF file that llama.cpp / Ollama / LM Studio load. Everything that
// can be refused is checked before a weight is read (architecture and RoPE, gguf/model_metadata.h;
// tokenizer, gguf/vocab_metadata.h; the adapter against the model); then the checkpoint streams
// through one tensor at a time (merged, rows regrouped for llama.cpp's rotary layout where needed,
// encoded) into the file, which appears atomically.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>

#include "gguf/export_type.h"
#include "gguf/ggml_type.h"

namespace surogate::gguf {

struct ExportOptions {
  std::filesystem::path model;
  std::optional<std::filesystem::path> adapter;
  std::filesystem::path output;
  ExportType type = ExportType::F16;
};

struct ExportSummary {
  std::string architecture;
  size_t tensors = 0;
  std::map<GgmlType, size_t> tensors_by_type;
  size_t merged_projections = 0;
  uint64_t file_bytes = 0;
};

ExportSummary export_gguf(const ExportOptions& options);

}  // namespace surogate::gguf

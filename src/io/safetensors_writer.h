// Writing safetensors files the way Hugging Face does: an 8-byte little-endian header length, a
// JSON header padded with spaces to a multiple of 8 bytes, then the tensors' bytes back to back.
// Every file is written atomically (temporary file in the same folder, fsync, rename), so a
// crash never leaves a half-written model behind. The sharded writer splits a model into
// model-00001-of-0000N.safetensors files plus model.safetensors.index.json, like
// transformers' save_pretrained(max_shard_size=...).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"

namespace surogate::io {

// One tensor to write. `bytes` must hold exactly shape-product x dtype-size bytes
// (checked: a mismatch is an InternalError, it is the caller's bug).
struct TensorToWrite {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;
};

// Writes one .safetensors file atomically. Tensor order in the data section follows `tensors`.
// Names must be unique and non-empty; "__metadata__" is reserved.
void write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata = {});

struct ShardedWriteResult {
  std::vector<std::filesystem::path> files;  // the .safetensors files written, in order
  std::filesystem::path index_file;          // empty when everything fit in one file
  uint64_t total_size_bytes = 0;             // sum of tensor byte sizes (index metadata.total_size)
};

// Writes `tensors` into `directory` split so that each shard's tensor bytes stay at or under
// `max_shard_bytes` (a tensor larger than the limit gets a shard of its own). One shard is
// written as `<base_name>.safetensors` with no index; more as
// `<base_name>-00001-of-0000N.safetensors` plus `<base_name>.safetensors.index.json`
// ({"metadata": {"total_size": N}, "weight_map": {name: file}}). The folder is created if needed.
// Files of an earlier save with the same base name that this save did not write (old shards, a
// stale index or single file) are removed once the new files are complete.
ShardedWriteResult write_safetensors_sharded(const std::filesystem::path& directory,
                                             std::span<const TensorToWrite> tensors,
                                             uint64_t max_shard_bytes,
                                             const std::map<std::string, std::string>& metadata = {},
                                             std::string_view base_name = "model");

// Parses a size like "5GB" (10^9), "500MB", "2GiB" (2^30), "1024" (bytes), as transformers'
// max_shard_size does. `what` names the option in the UserError for bad text.
uint64_t parse_byte_size(std::string_view text, std::string_view what);

}  // namespace surogate::io

// The token cache: a tokenized, packed dataset (train and validation rows) in one binary file
// that training memory-maps instead of tokenizing again.
//
// Layout (little-endian): a 128-byte header, then the payload.
//   header: magic "SUROTOK\0", u32 format version, u32 header bytes, u64 key, u64 payload bytes,
//           u64 payload checksum (XXH3-64 of the payload), u64 T, u64 train rows, u64 train
//           segments, u64 eval rows, u64 eval segments, u64 stats bytes, u64 weighted, u64 vision
//           bytes, zero padding.
//   payload, per split (train then eval): input_ids, labels, position_ids (rows × T int32),
//           row_segment_offsets ((rows + 1) uint64), segment_lengths (segments int32);
//           then, for a vision-language model's data (header u64 vision bytes > 0), per split:
//           mrope_positions (rows × 3 × T int32), row_image_offsets ((rows + 1) uint64),
//           image_sizes (images × 2 int32: width, height), image_pixel_offsets ((images + 1)
//           uint64), image_pixels (uint8 RGB, zero-padded to a multiple of 8 bytes): the images
//           kept at the processor's target size, 8 times smaller than their float32 pixel_values,
//           which batches recompute (vision::ImageProcessor::patches);
//           then the data report as JSON text (stats bytes).
// The key hashes everything the content depends on (see cache_key in pipeline.cpp); a file with
// another key is stale, a file whose checksum or size is wrong is corrupt; both are rebuilt.
// Writing is atomic (temporary file + rename), so a crash never leaves a torn cache.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "data/packing.h"

namespace surogate::io {
class MappedFile;
}

namespace surogate::data {

inline constexpr uint32_t kTokenCacheVersion = 2;  // 2: optional loss weights

void write_token_cache(const std::filesystem::path& path, uint64_t key, const PackedRows& train,
                       const PackedRows& eval, const nlohmann::json& report);

class TokenCache {
public:
  // Why an existing file cannot be used, or nullopt when it can.
  struct Problem {
    std::string reason;  // "stale (...)" or "corrupt (...)"
  };
  // Maps `path` and checks magic, version, sizes, key and checksum. Returns the cache, or the
  // problem in `problem` (a missing file is a problem too: "missing").
  static std::shared_ptr<TokenCache> open(const std::filesystem::path& path, uint64_t expected_key, Problem& problem);

  ~TokenCache();
  PackedRowsView train() const { return train_; }
  PackedRowsView eval() const { return eval_; }
  const nlohmann::json& report() const { return report_; }
  uint64_t key() const { return key_; }

private:
  TokenCache() = default;
  std::unique_ptr<io::MappedFile> file_;
  PackedRowsView train_;
  PackedRowsView eval_;
  nlohmann::json report_;
  uint64_t key_ = 0;
};

}  // namespace surogate::data

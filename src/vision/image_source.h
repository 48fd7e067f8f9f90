// Where a dataset row's image comes from: a file path (relative to the dataset file's folder), an
// http:// or https:// URL (downloaded: image_download.h), a data: URI with base64 payload, or a
// Parquet image struct {bytes, path} (HF datasets' Image feature). `field` names the row's field in
// every error (e.g. "rows.jsonl:12: messages[0]...").
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vision/decoded_image.h"

namespace surogate::vision {

ImageBytes load_image_reference(std::string_view reference, const std::filesystem::path& base_dir,
                                std::string_view field);

// A Parquet {bytes, path} struct: the bytes when present (the path then only names the image),
// else the file at path.
ImageBytes load_image_struct(const std::optional<std::vector<uint8_t>>& bytes, const std::optional<std::string>& path,
                             const std::filesystem::path& base_dir, std::string_view field);

// RFC 4648 base64 (padding optional, whitespace ignored, as Python's base64.decodebytes);
// a UserError naming `what` for any other character.
std::vector<uint8_t> decode_base64(std::string_view text, std::string_view what);

}  // namespace surogate::vision

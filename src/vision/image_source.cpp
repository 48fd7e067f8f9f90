#include "vision/image_source.h"

#include <fstream>
#include <iterator>

#include "core/error.h"
#include "vision/image_download.h"

namespace surogate::vision {
namespace {

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

bool starts_with(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

ImageBytes read_image_file(const std::filesystem::path& file, std::string_view field) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(file, error)) {
    fail_user("{}: image file not found: {}", field, file.string());
  }
  std::ifstream stream(file, std::ios::binary);
  if (!stream) fail_user("{}: cannot read image file {}", field, file.string());
  ImageBytes image{file.string(), {}};
  image.bytes.assign(std::istreambuf_iterator<char>(stream), std::istreambuf_iterator<char>());
  return image;
}

std::filesystem::path resolve(std::string_view path, const std::filesystem::path& base_dir) {
  std::filesystem::path file(path);
  return file.is_absolute() ? file : base_dir / file;
}

}  // namespace

std::vector<uint8_t> decode_base64(std::string_view text, std::string_view what) {
  std::vector<uint8_t> out;
  out.reserve(text.size() / 4 * 3);
  uint32_t buffer = 0;
  int bits = 0;
  bool padding = false;
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      padding = true;
      continue;
    }
    const int value = base64_value(c);
    if (value < 0 || padding) fail_user("{}: not valid base64 (character '{}')", what, c);
    buffer = (buffer << 6) | static_cast<uint32_t>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((buffer >> bits) & 0xff));
    }
  }
  return out;
}

ImageBytes load_image_reference(std::string_view reference, const std::filesystem::path& base_dir,
                                std::string_view field) {
  if (reference.empty()) fail_user("{}: the image reference is empty", field);
  if (is_image_url(reference)) return download_image(reference, field);
  if (starts_with(reference, "data:")) {
    const size_t comma = reference.find(',');
    if (comma == std::string_view::npos || reference.substr(0, comma).find(";base64") == std::string_view::npos) {
      fail_user("{}: a data: URI image must be base64 (data:image/png;base64,...)", field);
    }
    const std::string name = fmt::format("data URI in {}", field);
    return ImageBytes{name, decode_base64(reference.substr(comma + 1), name)};
  }
  return read_image_file(resolve(reference, base_dir), field);
}

ImageBytes load_image_struct(const std::optional<std::vector<uint8_t>>& bytes, const std::optional<std::string>& path,
                             const std::filesystem::path& base_dir, std::string_view field) {
  if (bytes.has_value() && !bytes->empty()) {
    return ImageBytes{path.has_value() && !path->empty() ? fmt::format("{} (bytes in {})", *path, field)
                                                          : fmt::format("bytes in {}", field),
                      *bytes};
  }
  if (path.has_value() && !path->empty()) return read_image_file(resolve(*path, base_dir), field);
  fail_user("{}: the image struct has neither bytes nor a path", field);
}

}  // namespace surogate::vision

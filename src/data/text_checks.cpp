// UTF-8 validation and typed field access for formatters; see text_checks.h.
#include "data/text_checks.h"

#include "core/error.h"

namespace surogate::data {

bool is_valid_utf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    auto byte = static_cast<unsigned char>(text[i]);
    size_t extra;
    uint32_t code;
    if (byte < 0x80) { ++i; continue; }
    if ((byte & 0xE0) == 0xC0) { extra = 1; code = byte & 0x1F; }
    else if ((byte & 0xF0) == 0xE0) { extra = 2; code = byte & 0x0F; }
    else if ((byte & 0xF8) == 0xF0) { extra = 3; code = byte & 0x07; }
    else return false;
    if (i + extra >= text.size()) return false;
    for (size_t k = 1; k <= extra; ++k) {
      auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    if ((extra == 1 && code < 0x80) || (extra == 2 && code < 0x800) || (extra == 3 && code < 0x10000) ||
        code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

namespace {
std::string checked_string(const RowValue& value, const std::string& field, const RowOrigin& origin,
                           const std::string& what) {
  if (!value.is_string()) {
    fail_user("{}: field '{}' ({}) must be a string but is a {}; fix the row or point {} at a text column",
              origin.describe(), field, what, value.type_name(), what);
  }
  const auto& text = value.get_ref<const std::string&>();
  if (!is_valid_utf8(text)) {
    fail_user("{}: field '{}' is not valid UTF-8 text; re-encode the file as UTF-8", origin.describe(), field);
  }
  return text;
}
}  // namespace

std::string required_string(const RowValue& object, const std::string& field, const RowOrigin& origin,
                            const std::string& what) {
  auto found = object.find(field);
  if (found != object.end() && found->is_null()) {
    fail_user("{}: field '{}' ({}) is null; give it a string or remove the row", origin.describe(), field, what);
  }
  if (found == object.end()) {
    std::string present;
    for (auto it = object.begin(); it != object.end(); ++it) present += (present.empty() ? "" : ", ") + it.key();
    fail_user("{}: missing field '{}' ({}); the row has: {}. Set {} to the right column name", origin.describe(), field,
              what, present.empty() ? "no fields" : present, what);
  }
  return checked_string(*found, field, origin, what);
}

std::string optional_string(const RowValue& object, const std::string& field, const RowOrigin& origin,
                            const std::string& what) {
  auto found = object.find(field);
  if (found == object.end() || found->is_null()) return {};
  return checked_string(*found, field, origin, what);
}

}  // namespace surogate::data

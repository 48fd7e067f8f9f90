// UTF-8 validation follows the table of well-formed byte sequences in the Unicode standard
// (chapter 3, table 3-7); the replacement policy is "maximal subparts", which is what Python
// and Rust use, so our U+FFFD count matches the HF oracle's input exactly.
#include "tokenizer/utf8.h"

#include <cstring>

namespace surogate::tokenizer {
namespace {

// How long the maximal subpart starting at `position` is: the bytes that are a valid prefix of
// some well-formed sequence (at least 1). Returns also whether the sequence is complete.
size_t maximal_subpart(std::string_view text, size_t position, bool& complete) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const size_t size = text.size();
  const uint8_t lead = byte(position);
  complete = false;
  if (lead < 0x80) {
    complete = true;
    return 1;
  }
  size_t needed = 0;
  uint8_t second_low = 0x80, second_high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    needed = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    needed = 3;
    if (lead == 0xE0) second_low = 0xA0;
    if (lead == 0xED) second_high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    needed = 4;
    if (lead == 0xF0) second_low = 0x90;
    if (lead == 0xF4) second_high = 0x8F;
  } else {
    return 1;  // 0x80..0xC1, 0xF5..0xFF can never start a sequence
  }
  size_t length = 1;
  for (; length < needed; ++length) {
    if (position + length >= size) return length;
    const uint8_t next = byte(position + length);
    const uint8_t low = length == 1 ? second_low : 0x80;
    const uint8_t high = length == 1 ? second_high : 0xBF;
    if (next < low || next > high) return length;
  }
  complete = true;
  return length;
}

}  // namespace

size_t valid_sequence_length(std::string_view text, size_t position) {
  bool complete = false;
  const size_t length = maximal_subpart(text, position, complete);
  return complete ? length : 0;
}

char32_t decode_code_point(std::string_view text, size_t position, size_t& length) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[position + i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) {
    length = 1;
    return lead;
  }
  if (lead < 0xE0) {
    length = 2;
    return (char32_t(lead & 0x1F) << 6) | (byte(1) & 0x3F);
  }
  if (lead < 0xF0) {
    length = 3;
    return (char32_t(lead & 0x0F) << 12) | (char32_t(byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
  }
  length = 4;
  return (char32_t(lead & 0x07) << 18) | (char32_t(byte(1) & 0x3F) << 12) |
         (char32_t(byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
}

char32_t decode_code_point_before(std::string_view text, size_t end, size_t& length) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return decode_code_point(text, start, length);
}

void append_code_point(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

bool is_valid_utf8(std::string_view text) {
  size_t position = 0;
  const size_t size = text.size();
  while (position < size) {
    // Skip ASCII eight bytes at a time.
    while (position + 8 <= size) {
      uint64_t chunk;
      std::memcpy(&chunk, text.data() + position, sizeof(chunk));
      if (chunk & 0x8080808080808080ull) break;
      position += 8;
    }
    if (position >= size) break;
    if (static_cast<uint8_t>(text[position]) < 0x80) {
      ++position;
      continue;
    }
    const size_t length = valid_sequence_length(text, position);
    if (length == 0) return false;
    position += length;
  }
  return true;
}

std::string replace_invalid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  size_t position = 0;
  while (position < text.size()) {
    bool complete = false;
    const size_t length = maximal_subpart(text, position, complete);
    if (complete) {
      out.append(text.substr(position, length));
    } else {
      append_code_point(out, kReplacementCharacter);
    }
    position += length;
  }
  return out;
}

}  // namespace surogate::tokenizer

// Computed, not tabulated: a byte is its own character when it is printable Latin-1
// ('!'..'~', '¡'..'¬', '®'..'ÿ'); the remaining bytes take U+0100 + their rank among them.
#include "tokenizer/byte_alphabet.h"

#include <array>

#include "tokenizer/utf8.h"

namespace surogate::tokenizer {
namespace {

bool stands_for_itself(uint32_t byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
         (byte >= 0xAE && byte <= 0xFF);
}

struct Alphabet {
  std::array<char32_t, 256> byte_to_char{};
  std::array<int16_t, 512> char_to_byte{};  // every alphabet character is below U+0200
  Alphabet() {
    char_to_byte.fill(-1);
    uint32_t next_extra = 0;
    for (uint32_t byte = 0; byte < 256; ++byte) {
      const char32_t c = stands_for_itself(byte) ? byte : 0x100 + next_extra++;
      byte_to_char[byte] = c;
      char_to_byte[c] = static_cast<int16_t>(byte);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet instance;
  return instance;
}

}  // namespace

char32_t byte_to_alphabet(uint8_t byte) { return alphabet().byte_to_char[byte]; }

int alphabet_to_byte(char32_t code_point) {
  return code_point < 512 ? alphabet().char_to_byte[code_point] : -1;
}

std::optional<std::string> alphabet_to_bytes(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  size_t position = 0;
  while (position < token.size()) {
    if (valid_sequence_length(token, position) == 0) return std::nullopt;
    size_t length = 0;
    const int byte = alphabet_to_byte(decode_code_point(token, position, length));
    if (byte < 0) return std::nullopt;
    bytes.push_back(static_cast<char>(byte));
    position += length;
  }
  return bytes;
}

std::string bytes_to_alphabet(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char byte : bytes)
    append_code_point(out, byte_to_alphabet(static_cast<uint8_t>(byte)));
  return out;
}

}  // namespace surogate::tokenizer

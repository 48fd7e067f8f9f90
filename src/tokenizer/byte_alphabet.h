// The GPT-2 byte-level alphabet: every byte 0..255 has a printable stand-in character so that
// byte-level vocabularies can be stored as text ("Ġ" is the space byte 0x20, "Ċ" is 0x0A).
// Printable Latin-1 bytes stand for themselves; the other 68 bytes map, in order, to U+0100...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace surogate::tokenizer {

char32_t byte_to_alphabet(uint8_t byte);
// The byte a character stands for, or -1 when the character is not in the alphabet.
int alphabet_to_byte(char32_t code_point);
// Raw bytes of a token spelled in the alphabet; nullopt when some character is not in it.
std::optional<std::string> alphabet_to_bytes(std::string_view token);
// The alphabet spelling of raw bytes.
std::string bytes_to_alphabet(std::string_view bytes);

}  // namespace surogate::tokenizer

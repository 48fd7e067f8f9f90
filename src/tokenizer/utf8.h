// UTF-8 helpers for the tokenizer: decoding one code point, appending one, and replacing invalid
// sequences by U+FFFD exactly as Python's `bytes.decode("utf-8", "replace")` (and Rust's
// `String::from_utf8_lossy`) do: one U+FFFD per maximal subpart of an ill-formed sequence.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace surogate::tokenizer {

inline constexpr char32_t kReplacementCharacter = 0xFFFD;

// Length in bytes of the valid UTF-8 sequence starting at text[position], or 0 when the bytes
// there are not a well-formed sequence (overlong, surrogate, above U+10FFFF, truncated).
size_t valid_sequence_length(std::string_view text, size_t position);

// The code point starting at text[position], which must be valid UTF-8; `length` gets its size.
char32_t decode_code_point(std::string_view text, size_t position, size_t& length);

// The code point that ends at text[end] (exclusive), which must be valid UTF-8; `length` gets
// its size. Used to look one character to the left.
char32_t decode_code_point_before(std::string_view text, size_t end, size_t& length);

void append_code_point(std::string& out, char32_t code_point);

// True when `text` is entirely well-formed UTF-8 (fast path for ASCII).
bool is_valid_utf8(std::string_view text);

// `text` with every maximal ill-formed subpart replaced by U+FFFD.
std::string replace_invalid_utf8(std::string_view text);

}  // namespace surogate::tokenizer

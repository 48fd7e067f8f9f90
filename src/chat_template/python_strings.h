// Python's str methods over UTF-8 text, as chat templates call them (`.strip()`, `.split()`,
// `| title`, slicing, `| length`, ...). Python counts code points, not bytes, and its whitespace
// and case rules are Unicode's; these helpers reproduce that so output matches jinja2 exactly.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace surogate::chat_template {

// Decodes UTF-8 into code points (invalid bytes become U+FFFD) and back.
std::u32string utf8_decode(std::string_view text);
std::string utf8_encode(std::u32string_view code_points);
size_t utf8_length(std::string_view text);

bool is_python_whitespace(char32_t code_point);

// str.strip / lstrip / rstrip; `characters` nullopt strips Unicode whitespace.
std::string python_strip(std::string_view text, const std::optional<std::string>& characters, bool left, bool right);
// str.split / str.rsplit; `separator` nullopt splits on runs of whitespace. max_split < 0: no limit.
std::vector<std::string> python_split(std::string_view text, const std::optional<std::string>& separator,
                                      int64_t max_split, bool from_right);
// str.replace(old, new, count); count < 0 replaces all.
std::string python_replace(std::string_view text, std::string_view old_text, std::string_view new_text, int64_t count);
std::string python_upper(std::string_view text);
std::string python_lower(std::string_view text);
// str.title(): words (runs of cased letters) get an upper-case first letter, the rest lower.
std::string python_title(std::string_view text);
// str.capitalize(): the first character upper-case, the rest lower-case.
std::string python_capitalize(std::string_view text);
// Jinja's `title` filter: upper-cases the first letter after spaces, '-', and opening brackets.
std::string jinja_title(std::string_view text);
// str.splitlines() (without keepends).
std::vector<std::string> python_splitlines(std::string_view text);

}  // namespace surogate::chat_template

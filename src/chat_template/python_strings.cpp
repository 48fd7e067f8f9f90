// Python str semantics over UTF-8 (see python_strings.h). Case mapping uses ICU's full Unicode
// mappings (as Python does: "ß".upper() == "SS"); ASCII text takes a fast path.
#include "chat_template/python_strings.h"

#include <algorithm>

#include <unicode/uchar.h>
#include <unicode/ustring.h>

namespace surogate::chat_template {
namespace {

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

void append_utf8(std::string& out, char32_t code_point) {
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

// Full Unicode case mapping of a whole string through ICU (UTF-16 in between).
std::string icu_case_map(std::string_view text, bool upper) {
  UErrorCode status = U_ZERO_ERROR;
  int32_t utf16_length = 0;
  u_strFromUTF8WithSub(nullptr, 0, &utf16_length, text.data(), static_cast<int32_t>(text.size()), 0xFFFD, nullptr,
                       &status);
  status = U_ZERO_ERROR;
  std::u16string utf16(static_cast<size_t>(utf16_length), u'\0');
  u_strFromUTF8WithSub(utf16.data(), utf16_length, nullptr, text.data(), static_cast<int32_t>(text.size()), 0xFFFD,
                       nullptr, &status);
  std::u16string mapped(utf16.size() * 3 + 4, u'\0');
  status = U_ZERO_ERROR;
  int32_t mapped_length =
      upper ? u_strToUpper(mapped.data(), static_cast<int32_t>(mapped.size()), utf16.data(), utf16_length, "", &status)
            : u_strToLower(mapped.data(), static_cast<int32_t>(mapped.size()), utf16.data(), utf16_length, "", &status);
  mapped.resize(static_cast<size_t>(std::max(mapped_length, 0)));
  int32_t utf8_length_needed = 0;
  status = U_ZERO_ERROR;
  u_strToUTF8(nullptr, 0, &utf8_length_needed, mapped.data(), mapped_length, &status);
  std::string out(static_cast<size_t>(utf8_length_needed), '\0');
  status = U_ZERO_ERROR;
  u_strToUTF8(out.data(), utf8_length_needed, nullptr, mapped.data(), mapped_length, &status);
  return out;
}

std::string map_code_point(char32_t code_point, bool upper) {
  std::string single;
  append_utf8(single, code_point);
  return icu_case_map(single, upper);
}

bool is_cased(char32_t code_point) { return u_hasBinaryProperty(static_cast<UChar32>(code_point), UCHAR_CASED); }

}  // namespace

std::u32string utf8_decode(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    auto byte = static_cast<unsigned char>(text[i]);
    int extra = byte < 0x80 ? 0 : (byte >> 5) == 0x6 ? 1 : (byte >> 4) == 0xE ? 2 : (byte >> 3) == 0x1E ? 3 : -1;
    if (extra < 0 || i + static_cast<size_t>(extra) >= text.size()) {
      out.push_back(U'\uFFFD');
      ++i;
      continue;
    }
    char32_t code_point = extra == 0 ? byte : (byte & (0x3F >> extra));
    bool valid = true;
    for (int k = 1; k <= extra; ++k) {
      auto next = static_cast<unsigned char>(text[i + static_cast<size_t>(k)]);
      if ((next & 0xC0) != 0x80) {
        valid = false;
        break;
      }
      code_point = (code_point << 6) | (next & 0x3F);
    }
    if (!valid) {
      out.push_back(U'\uFFFD');
      ++i;
      continue;
    }
    out.push_back(code_point);
    i += static_cast<size_t>(extra) + 1;
  }
  return out;
}

std::string utf8_encode(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t code_point : code_points) append_utf8(out, code_point);
  return out;
}

size_t utf8_length(std::string_view text) {
  size_t count = 0;
  for (char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

bool is_python_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string python_strip(std::string_view text, const std::optional<std::string>& characters, bool left, bool right) {
  std::u32string points = utf8_decode(text);
  std::u32string strip_set = characters ? utf8_decode(*characters) : std::u32string();
  auto strips = [&](char32_t c) {
    return characters ? strip_set.find(c) != std::u32string::npos : is_python_whitespace(c);
  };
  size_t begin = 0;
  size_t end = points.size();
  if (left)
    while (begin < end && strips(points[begin])) ++begin;
  if (right)
    while (end > begin && strips(points[end - 1])) --end;
  return utf8_encode(std::u32string_view(points).substr(begin, end - begin));
}

std::vector<std::string> python_split(std::string_view text, const std::optional<std::string>& separator,
                                      int64_t max_split, bool from_right) {
  std::vector<std::string> parts;
  if (separator) {
    if (!from_right) {
      size_t start = 0;
      while (max_split < 0 || static_cast<int64_t>(parts.size()) < max_split) {
        size_t found = text.find(*separator, start);
        if (found == std::string_view::npos) break;
        parts.emplace_back(text.substr(start, found - start));
        start = found + separator->size();
      }
      parts.emplace_back(text.substr(start));
    } else {
      size_t end = text.size();
      std::vector<std::string> reversed;
      while (max_split < 0 || static_cast<int64_t>(reversed.size()) < max_split) {
        if (end < separator->size()) break;
        size_t found = text.rfind(*separator, end - separator->size());
        if (found == std::string_view::npos) break;
        reversed.emplace_back(text.substr(found + separator->size(), end - found - separator->size()));
        end = found;
      }
      reversed.emplace_back(text.substr(0, end));
      parts.assign(reversed.rbegin(), reversed.rend());
    }
    return parts;
  }
  std::u32string points = utf8_decode(text);
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < points.size() && is_python_whitespace(points[i])) ++i;
      if (i >= points.size()) break;
      if (max_split >= 0 && static_cast<int64_t>(parts.size()) >= max_split) {
        size_t end = points.size();
        while (end > i && is_python_whitespace(points[end - 1])) --end;
        parts.push_back(utf8_encode(std::u32string_view(points).substr(i, end - i)));
        break;
      }
      size_t start = i;
      while (i < points.size() && !is_python_whitespace(points[i])) ++i;
      parts.push_back(utf8_encode(std::u32string_view(points).substr(start, i - start)));
    }
  } else {
    std::vector<std::string> reversed;
    size_t i = points.size();
    while (true) {
      while (i > 0 && is_python_whitespace(points[i - 1])) --i;
      if (i == 0) break;
      if (max_split >= 0 && static_cast<int64_t>(reversed.size()) >= max_split) {
        size_t start = 0;
        while (start < i && is_python_whitespace(points[start])) ++start;
        reversed.push_back(utf8_encode(std::u32string_view(points).substr(start, i - start)));
        break;
      }
      size_t end = i;
      while (i > 0 && !is_python_whitespace(points[i - 1])) --i;
      reversed.push_back(utf8_encode(std::u32string_view(points).substr(i, end - i)));
    }
    parts.assign(reversed.rbegin(), reversed.rend());
  }
  return parts;
}

std::string python_replace(std::string_view text, std::string_view old_text, std::string_view new_text, int64_t count) {
  std::string out;
  if (old_text.empty()) {
    // Python inserts `new` before every code point and at the end.
    std::u32string points = utf8_decode(text);
    int64_t done = 0;
    for (char32_t c : points) {
      if (count < 0 || done < count) {
        out.append(new_text);
        ++done;
      }
      append_utf8(out, c);
    }
    if (count < 0 || done < count) out.append(new_text);
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t found = text.find(old_text, start);
    if (found == std::string_view::npos) break;
    out.append(text.substr(start, found - start));
    out.append(new_text);
    start = found + old_text.size();
    ++done;
  }
  out.append(text.substr(start));
  return out;
}

std::string python_upper(std::string_view text) {
  if (is_ascii(text)) {
    std::string out(text);
    for (char& c : out)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    return out;
  }
  return icu_case_map(text, true);
}

std::string python_lower(std::string_view text) {
  if (is_ascii(text)) {
    std::string out(text);
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
  }
  return icu_case_map(text, false);
}

std::string python_title(std::string_view text) {
  std::string out;
  bool previous_cased = false;
  for (char32_t c : utf8_decode(text)) {
    if (previous_cased) {
      out += map_code_point(c, false);
    } else {
      UChar32 title = u_totitle(static_cast<UChar32>(c));
      append_utf8(out, static_cast<char32_t>(title));
    }
    previous_cased = is_cased(c);
  }
  return out;
}

std::string python_capitalize(std::string_view text) {
  std::u32string points = utf8_decode(text);
  if (points.empty()) return {};
  std::string out;
  append_utf8(out, static_cast<char32_t>(u_totitle(static_cast<UChar32>(points[0]))));
  out += python_lower(utf8_encode(std::u32string_view(points).substr(1)));
  return out;
}

std::string jinja_title(std::string_view text) {
  // Words start after runs of whitespace, '-', '(', '{', '[' or '<'; each word is
  // word[0].upper() + word[1:].lower().
  std::u32string points = utf8_decode(text);
  auto is_separator = [](char32_t c) {
    return is_python_whitespace(c) || c == U'-' || c == U'(' || c == U'{' || c == U'[' || c == U'<';
  };
  std::string out;
  size_t i = 0;
  while (i < points.size()) {
    if (is_separator(points[i])) {
      append_utf8(out, points[i]);
      ++i;
      continue;
    }
    size_t start = i;
    while (i < points.size() && !is_separator(points[i])) ++i;
    out += map_code_point(points[start], true);
    out += python_lower(utf8_encode(std::u32string_view(points).substr(start + 1, i - start - 1)));
  }
  return out;
}

std::vector<std::string> python_splitlines(std::string_view text) {
  std::vector<std::string> lines;
  std::u32string points = utf8_decode(text);
  auto is_break = [](char32_t c) {
    return c == U'\n' || c == U'\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
           c == 0x85 || c == 0x2028 || c == 0x2029;
  };
  size_t start = 0;
  size_t i = 0;
  while (i < points.size()) {
    if (is_break(points[i])) {
      lines.push_back(utf8_encode(std::u32string_view(points).substr(start, i - start)));
      if (points[i] == U'\r' && i + 1 < points.size() && points[i + 1] == U'\n') ++i;
      start = ++i;
    } else {
      ++i;
    }
  }
  if (start < points.size()) lines.push_back(utf8_encode(std::u32string_view(points).substr(start)));
  return lines;
}

}  // namespace surogate::chat_template

// Decoder steps over the list of token strings, applied in order; the final text is the
// concatenation of what the last step leaves.
#include "tokenizer/decoder.h"

#include <fmt/format.h>

#include <cctype>

#include "core/error.h"
#include "tokenizer/byte_alphabet.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace surogate::tokenizer {
namespace {

std::vector<char32_t> code_points(std::string_view text) {
  std::vector<char32_t> out;
  size_t position = 0;
  while (position < text.size()) {
    size_t length = 0;
    out.push_back(decode_code_point(text, position, length));
    position += length;
  }
  return out;
}

void decode_byte_level(std::vector<std::string>& tokens) {
  std::string bytes;
  for (const std::string& token : tokens) {
    if (auto raw = alphabet_to_bytes(token)) {
      bytes += *raw;
    } else {
      bytes += token;  // a token outside the alphabet (an added token) is kept as written
    }
  }
  tokens.assign(1, replace_invalid_utf8(bytes));
}

void decode_byte_fallback(std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string pending;
  const auto flush = [&] {
    if (pending.empty()) return;
    if (is_valid_utf8(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
    }
    pending.clear();
  };
  for (std::string& token : tokens) {
    const bool is_byte = token.size() == 6 && token.starts_with("<0x") && token.back() == '>' &&
                         std::isxdigit(static_cast<unsigned char>(token[3])) &&
                         std::isxdigit(static_cast<unsigned char>(token[4]));
    if (is_byte) {
      pending.push_back(static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16)));
    } else {
      flush();
      out.push_back(std::move(token));
    }
  }
  flush();
  tokens.swap(out);
}

void strip_token(std::string& token, char32_t content, size_t start, size_t stop) {
  const std::vector<char32_t> characters = code_points(token);
  size_t begin = 0;
  for (size_t i = 0; i < start && i < characters.size() && characters[i] == content; ++i)
    begin = i + 1;
  size_t end = characters.size();
  for (size_t i = 0; i < stop && i < characters.size(); ++i) {
    const size_t index = characters.size() - i - 1;
    if (characters[index] != content) break;
    end = index;
  }
  std::string out;
  for (size_t i = begin; i < end; ++i) append_code_point(out, characters[i]);
  token.swap(out);
}

}  // namespace

Decoder Decoder::from_json(const nlohmann::json& component, const JsonPath& where) {
  Decoder decoder;
  if (!component.is_null()) {
    decoder.configured_ = true;
    decoder.append_steps(component, where);
    check_text_growth(decoder.growth_, where, "each Replace multiplies a token's length by the length of its content");
  }
  return decoder;
}

void Decoder::append_steps(const nlohmann::json& component, const JsonPath& where) {
  const std::string type = component_type(component, where);
  if (type == "Sequence") {
    const nlohmann::json& list = require_field(component, "decoders", where);
    if (!list.is_array()) fail_at(where.child("decoders"), "expected a list of decoders");
    for (size_t i = 0; i < list.size(); ++i)
      append_steps(list[i], where.child("decoders").index(i));
  } else if (type == "ByteLevel") {
    steps_.push_back(ByteLevelStep{});
  } else if (type == "Replace") {
    ReplaceStep step;
    parse_pattern(require_field(component, "pattern", where), where.child("pattern"), step.literal,
                  step.regex);
    step.content = require_string(component, "content", where);
    growth_.multiply(step.content.size());
    steps_.push_back(std::move(step));
  } else if (type == "ByteFallback") {
    steps_.push_back(ByteFallbackStep{});
  } else if (type == "Fuse") {
    steps_.push_back(FuseStep{});
  } else if (type == "Strip") {
    const std::string content = require_string(component, "content", where);
    const int64_t start = require_integer(component, "start", where);
    const int64_t stop = require_integer(component, "stop", where);
    if (start < 0 || stop < 0) fail_at(where, "start and stop must not be negative");
    steps_.push_back(StripStep{single_character(content, where.child("content")),
                               static_cast<size_t>(start), static_cast<size_t>(stop)});
  } else if (type == "Metaspace") {
    MetaspaceStep step;
    step.replacement = require_string(component, "replacement", where);
    single_character(step.replacement, where.child("replacement"));
    if (auto scheme = optional_string(component, "prepend_scheme", where)) {
      step.strip_first = *scheme != "never";
    } else {
      step.strip_first = bool_or(component, "add_prefix_space", true, where);
    }
    steps_.push_back(std::move(step));
  } else {
    fail_unsupported(where, "decoder", type,
                     "ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence");
  }
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (!configured_) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) joined += ' ';
      joined += tokens[i];
    }
    return joined;
  }
  std::string scratch;
  RegexScratch regex_scratch;
  for (const Step& step : steps_) {
    if (std::holds_alternative<ByteLevelStep>(step)) {
      decode_byte_level(tokens);
    } else if (const auto* replace = std::get_if<ReplaceStep>(&step)) {
      for (std::string& token : tokens) {
        replace_all(token, replace->literal, replace->regex.get(), replace->content, scratch,
                    regex_scratch);
      }
    } else if (std::holds_alternative<ByteFallbackStep>(step)) {
      decode_byte_fallback(tokens);
    } else if (std::holds_alternative<FuseStep>(step)) {
      std::string fused;
      for (const std::string& token : tokens) fused += token;
      tokens.assign(1, std::move(fused));
    } else if (const auto* strip = std::get_if<StripStep>(&step)) {
      for (std::string& token : tokens)
        strip_token(token, strip->content, strip->start, strip->stop);
    } else if (const auto* metaspace = std::get_if<MetaspaceStep>(&step)) {
      for (size_t i = 0; i < tokens.size(); ++i) {
        const bool drop = i == 0 && metaspace->strip_first;
        replace_all(tokens[i], metaspace->replacement, nullptr,
                    drop ? std::string() : std::string(" "), scratch, regex_scratch);
      }
    }
  }
  std::string text;
  for (const std::string& token : tokens) text += token;
  if (!is_valid_utf8(text)) return replace_invalid_utf8(text);
  return text;
}

}  // namespace surogate::tokenizer

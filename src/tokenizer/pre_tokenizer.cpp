// Pre-tokenizer steps over `Pieces`. Splits only produce new spans of the same text; steps that
// change the text (ByteLevel's prefix space, Metaspace) write a new text into the scratch pieces
// and swap, so no step allocates once the scratch buffers have grown.
#include "tokenizer/pre_tokenizer.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/normalizer.h"

namespace surogate::tokenizer {
namespace {

// The pattern GPT-2's ByteLevel pre-tokenizer splits with when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

SplitBehavior parse_behavior(const std::string& name, const JsonPath& where) {
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  fail_at(where, fmt::format(
                     "unknown split behavior '{}' (expected Removed, Isolated, MergedWithPrevious, "
                     "MergedWithNext or Contiguous)",
                     name));
}

void find_literal(std::string_view text, std::string_view literal, uint32_t base,
                  std::vector<ByteSpan>& matches) {
  size_t found = text.find(literal);
  while (found != std::string_view::npos) {
    matches.push_back({static_cast<uint32_t>(base + found),
                       static_cast<uint32_t>(base + found + literal.size())});
    found = text.find(literal, found + literal.size());
  }
}

}  // namespace

void split_span(ByteSpan span, const std::vector<ByteSpan>& matches, SplitBehavior behavior,
                bool invert, std::vector<std::pair<ByteSpan, bool>>& segments,
                std::vector<ByteSpan>& out) {
  // Every byte of the span lands in one segment flagged "is a match".
  segments.clear();
  uint32_t previous = span.begin;
  for (const ByteSpan& match : matches) {
    if (match.begin > previous) segments.push_back({{previous, match.begin}, invert});
    segments.push_back({match, !invert});
    previous = match.end;
  }
  if (previous < span.end) segments.push_back({{previous, span.end}, invert});

  const size_t first_out = out.size();
  switch (behavior) {
    case SplitBehavior::Removed:
      for (const auto& [segment, is_match] : segments) {
        if (!is_match) out.push_back(segment);
      }
      break;
    case SplitBehavior::Isolated:
      for (const auto& [segment, is_match] : segments) out.push_back(segment);
      break;
    case SplitBehavior::MergedWithPrevious: {
      bool previous_match = false;
      for (const auto& [segment, is_match] : segments) {
        if (is_match && !previous_match && out.size() > first_out) {
          out.back().end = segment.end;
        } else {
          out.push_back(segment);
        }
        previous_match = is_match;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      // A match joins the segment after it: walk from the right.
      const size_t before = out.size();
      bool previous_match = false;
      for (size_t i = segments.size(); i-- > 0;) {
        const auto& [segment, is_match] = segments[i];
        if (is_match && !previous_match && out.size() > before) {
          out.back().begin = segment.begin;
        } else {
          out.push_back(segment);
        }
        previous_match = is_match;
      }
      std::reverse(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
      break;
    }
    case SplitBehavior::Contiguous: {
      bool previous_match = false;
      for (const auto& [segment, is_match] : segments) {
        if (is_match == previous_match && out.size() > first_out) {
          out.back().end = segment.end;
        } else {
          out.push_back(segment);
        }
        previous_match = is_match;
      }
      break;
    }
  }
}

PreTokenizer PreTokenizer::from_json(const nlohmann::json& component, const JsonPath& where) {
  PreTokenizer pre_tokenizer;
  if (!component.is_null()) pre_tokenizer.append_steps(component, where);
  return pre_tokenizer;
}

void PreTokenizer::append_steps(const nlohmann::json& component, const JsonPath& where) {
  const std::string type = component_type(component, where);
  if (type == "Sequence") {
    const nlohmann::json& list = require_field(component, "pretokenizers", where);
    if (!list.is_array())
      fail_at(where.child("pretokenizers"), "expected a list of pre-tokenizers");
    for (size_t i = 0; i < list.size(); ++i)
      append_steps(list[i], where.child("pretokenizers").index(i));
    return;
  }
  if (byte_level_) {
    fail_at(
        where,
        fmt::format("a '{}' pre-tokenizer after ByteLevel is not supported; ByteLevel must be the "
                    "last pre-tokenizer of the Sequence",
                    type));
  }
  if (type == "Split") {
    SplitStep step;
    parse_pattern(require_field(component, "pattern", where), where.child("pattern"), step.literal,
                  step.regex);
    step.behavior =
        parse_behavior(require_string(component, "behavior", where), where.child("behavior"));
    step.invert = bool_or(component, "invert", false, where);
    steps_.push_back(std::move(step));
    return;
  }
  if (type == "ByteLevel") {
    ByteLevelStep step;
    step.add_prefix_space = bool_or(component, "add_prefix_space", true, where);
    if (step.add_prefix_space) growth_.multiply(2);
    if (bool_or(component, "use_regex", true, where)) {
      step.regex = std::make_shared<const Regex>(Regex::compile(kGpt2Pattern, where));
    }
    steps_.push_back(std::move(step));
    byte_level_ = true;
    return;
  }
  if (type == "Metaspace") {
    MetaspaceStep step;
    step.replacement = require_string(component, "replacement", where);
    single_character(step.replacement, where.child("replacement"));  // a Rust char in HF
    growth_.multiply(1 + step.replacement.size());
    step.split = bool_or(component, "split", true, where);
    if (auto scheme = optional_string(component, "prepend_scheme", where)) {
      if (*scheme == "always")
        step.prepend_scheme = PrependScheme::Always;
      else if (*scheme == "first")
        step.prepend_scheme = PrependScheme::First;
      else if (*scheme == "never")
        step.prepend_scheme = PrependScheme::Never;
      else
        fail_at(where.child("prepend_scheme"),
                fmt::format("unknown value '{}' (expected always, first or never)", *scheme));
    } else {
      step.prepend_scheme = bool_or(component, "add_prefix_space", true, where)
                                ? PrependScheme::Always
                                : PrependScheme::Never;
    }
    steps_.push_back(std::move(step));
    return;
  }
  fail_unsupported(where, "pre-tokenizer", type, "Split, ByteLevel, Metaspace, Sequence");
}

void PreTokenizer::pre_tokenize(Pieces& pieces, bool at_text_start,
                                PreTokenizerScratch& scratch) const {
  for (const Step& step : steps_) {
    if (const auto* split = std::get_if<SplitStep>(&step)) {
      apply_split(*split, pieces, scratch);
    } else if (const auto* byte_level = std::get_if<ByteLevelStep>(&step)) {
      apply_byte_level(*byte_level, pieces, scratch);
    } else if (const auto* metaspace = std::get_if<MetaspaceStep>(&step)) {
      apply_metaspace(*metaspace, pieces, at_text_start, scratch);
    }
  }
}

void PreTokenizer::apply_split(const SplitStep& step, Pieces& pieces,
                               PreTokenizerScratch& scratch) const {
  std::vector<ByteSpan>& out = scratch.other.spans;
  out.clear();
  for (const ByteSpan span : pieces.spans) {
    scratch.matches.clear();
    const std::string_view piece(pieces.text.data() + span.begin, span.end - span.begin);
    if (step.regex) {
      step.regex->find_all(piece, span.begin, scratch.regex, scratch.matches);
    } else {
      find_literal(piece, step.literal, span.begin, scratch.matches);
    }
    split_span(span, scratch.matches, step.behavior, step.invert, scratch.segments, out);
  }
  pieces.spans.swap(out);
}

void PreTokenizer::apply_byte_level(const ByteLevelStep& step, Pieces& pieces,
                                    PreTokenizerScratch& scratch) const {
  if (step.add_prefix_space) {
    Pieces& next = scratch.other;
    next.text.clear();
    next.spans.clear();
    for (const ByteSpan span : pieces.spans) {
      const uint32_t begin = static_cast<uint32_t>(next.text.size());
      if (pieces.text[span.begin] != ' ') next.text.push_back(' ');
      next.text.append(pieces.text, span.begin, span.end - span.begin);
      next.spans.push_back({begin, static_cast<uint32_t>(next.text.size())});
    }
    std::swap(pieces, next);
  }
  if (step.regex) {
    std::vector<ByteSpan>& out = scratch.other.spans;
    out.clear();
    for (const ByteSpan span : pieces.spans) {
      scratch.matches.clear();
      const std::string_view piece(pieces.text.data() + span.begin, span.end - span.begin);
      step.regex->find_all(piece, span.begin, scratch.regex, scratch.matches);
      split_span(span, scratch.matches, SplitBehavior::Isolated, false, scratch.segments, out);
    }
    pieces.spans.swap(out);
  }
}

void PreTokenizer::apply_metaspace(const MetaspaceStep& step, Pieces& pieces, bool at_text_start,
                                   PreTokenizerScratch& scratch) const {
  Pieces& next = scratch.other;
  next.text.clear();
  next.spans.clear();
  for (size_t i = 0; i < pieces.spans.size(); ++i) {
    const ByteSpan span = pieces.spans[i];
    const uint32_t begin = static_cast<uint32_t>(next.text.size());
    const bool starts_with_space = pieces.text[span.begin] == ' ';
    const std::string_view piece(pieces.text.data() + span.begin, span.end - span.begin);
    const bool starts_with_replacement = starts_with_space || piece.starts_with(step.replacement);
    const bool first = at_text_start && i == 0 && span.begin == 0;
    const bool prepend =
        !starts_with_replacement && (step.prepend_scheme == PrependScheme::Always ||
                                     (step.prepend_scheme == PrependScheme::First && first));
    if (prepend) next.text += step.replacement;
    for (const char c : piece) {
      if (c == ' ') {
        next.text += step.replacement;
      } else {
        next.text.push_back(c);
      }
    }
    next.spans.push_back({begin, static_cast<uint32_t>(next.text.size())});
  }
  std::swap(pieces, next);
  if (!step.split) return;
  std::vector<ByteSpan>& out = scratch.other.spans;
  out.clear();
  for (const ByteSpan span : pieces.spans) {
    scratch.matches.clear();
    find_literal(std::string_view(pieces.text.data() + span.begin, span.end - span.begin),
                 step.replacement, span.begin, scratch.matches);
    split_span(span, scratch.matches, SplitBehavior::MergedWithNext, false, scratch.segments, out);
  }
  pieces.spans.swap(out);
}

}  // namespace surogate::tokenizer

// A single-sequence template reduces to "ids before" + text + "ids after", which is all
// encode() needs; pair templates are for two-sequence inputs, which this API does not take.
#include "tokenizer/post_processor.h"

#include <fmt/format.h>

#include "core/error.h"
#include "tokenizer/json_fields.h"

namespace surogate::tokenizer {
namespace {

// A token id as written in the file: a non-negative integer that fits int32 (a larger one would
// silently wrap around).
int32_t token_id(const nlohmann::json& value, const JsonPath& where) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > INT32_MAX) {
    fail_at(where, fmt::format("token ids must be non-negative 32-bit integers, found {}", value.dump()));
  }
  return value.get<int32_t>();
}

int32_t token_id_of_pair(const nlohmann::json& pair, const JsonPath& where) {
  // BertProcessing / RobertaProcessing spell a token as ["[CLS]", 101].
  if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer()) {
    fail_at(where, "expected [\"token\", id]");
  }
  return token_id(pair[1], where);
}

}  // namespace

PostProcessor PostProcessor::from_json(const nlohmann::json& component, const JsonPath& where) {
  PostProcessor processor;
  if (!component.is_null()) processor.append(component, where);
  return processor;
}

void PostProcessor::append(const nlohmann::json& component, const JsonPath& where) {
  const std::string type = component_type(component, where);
  if (type == "Sequence") {
    const nlohmann::json& list = require_field(component, "processors", where);
    if (!list.is_array()) fail_at(where.child("processors"), "expected a list of post-processors");
    for (size_t i = 0; i < list.size(); ++i) append(list[i], where.child("processors").index(i));
    return;
  }
  if (type == "ByteLevel") return;  // trims offsets only
  if (has_template_)
    fail_at(where, "only one special-token-adding post-processor is supported in a Sequence");
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    prefix_.push_back(token_id_of_pair(require_field(component, "cls", where), where.child("cls")));
    id_sources_.push_back({prefix_.back(), where.file(), where.child("cls").key()});
    suffix_.push_back(token_id_of_pair(require_field(component, "sep", where), where.child("sep")));
    id_sources_.push_back({suffix_.back(), where.file(), where.child("sep").key()});
    has_template_ = true;
    return;
  }
  if (type == "TemplateProcessing") {
    const nlohmann::json& single = require_field(component, "single", where);
    const nlohmann::json& special_tokens = require_field(component, "special_tokens", where);
    if (!single.is_array()) fail_at(where.child("single"), "expected a list of template pieces");
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      const JsonPath at = where.child("single").index(i);
      const nlohmann::json& piece = single[i];
      if (piece.is_object() && piece.contains("Sequence")) {
        if (seen_sequence) fail_at(at, "the single template may name its sequence only once");
        seen_sequence = true;
        continue;
      }
      if (!piece.is_object() || !piece.contains("SpecialToken")) {
        fail_at(at, "expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
      }
      const std::string name =
          require_string(piece["SpecialToken"], "id", at.child("SpecialToken"));
      if (!special_tokens.is_object() || !special_tokens.contains(name)) {
        fail_at(where.child("special_tokens"),
                fmt::format("the template uses {:?}, which is not listed here", name));
      }
      const nlohmann::json& ids =
          require_field(special_tokens[name], "ids", where.child("special_tokens").child(name));
      if (!ids.is_array())
        fail_at(where.child("special_tokens").child(name).child("ids"), "expected a list of ids");
      const JsonPath ids_at = where.child("special_tokens").child(name).child("ids");
      for (const auto& id : ids) {
        (seen_sequence ? suffix_ : prefix_).push_back(token_id(id, ids_at));
        id_sources_.push_back({token_id(id, ids_at), ids_at.file(), ids_at.key()});
      }
    }
    if (!seen_sequence)
      fail_at(where.child("single"), "the template must contain {\"Sequence\": {\"id\": \"A\"}}");
    has_template_ = true;
    return;
  }
  fail_unsupported(where, "post-processor", type,
                   "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence");
}

void PostProcessor::check_ids_below(size_t vocab_size) const {
  for (const IdSource& source : id_sources_) {
    if (static_cast<size_t>(source.id) >= vocab_size) {
      fail_at(JsonPath(source.file, source.key),
              fmt::format("the post-processor adds token id {}, but the tokenizer's ids end at {} (model.vocab and "
                          "added_tokens); use the id of one of its tokens",
                          source.id, vocab_size - 1));
    }
  }
}

void PostProcessor::apply(std::vector<int32_t>& ids) const {
  if (!prefix_.empty()) ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
  ids.insert(ids.end(), suffix_.begin(), suffix_.end());
}

}  // namespace surogate::tokenizer

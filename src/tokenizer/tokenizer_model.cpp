// Assembles the pipeline from tokenizer.json and runs it; see tokenizer_model.h for the order.
#include "tokenizer/tokenizer_model.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/utf8.h"

namespace surogate::tokenizer {

WorkspacePool::Lease WorkspacePool::acquire() {
  std::unique_ptr<Workspace> workspace;
  {
    std::lock_guard lock(mutex_);
    if (!free_.empty()) {
      workspace = std::move(free_.back());
      free_.pop_back();
    }
  }
  if (!workspace) workspace = std::make_unique<Workspace>();
  return Lease(*this, std::move(workspace));
}

void WorkspacePool::give_back(std::unique_ptr<Workspace> workspace) {
  std::lock_guard lock(mutex_);
  free_.push_back(std::move(workspace));
}

std::shared_ptr<const TokenizerModel> TokenizerModel::from_json(const nlohmann::json& document,
                                                                const std::string& source) {
  const JsonPath root(source);
  if (!document.is_object()) fail_at(root, "expected a JSON object at the top level");
  std::shared_ptr<TokenizerModel> tokenizer(new TokenizerModel());
  const auto component = [&](const char* key) -> const nlohmann::json& {
    static const nlohmann::json null_value;
    auto found = document.find(key);
    return found == document.end() ? null_value : *found;
  };
  tokenizer->normalizer_ = Normalizer::from_json(component("normalizer"), root.child("normalizer"));
  tokenizer->pre_tokenizer_ =
      PreTokenizer::from_json(component("pre_tokenizer"), root.child("pre_tokenizer"));
  TextGrowth growth = tokenizer->normalizer_.growth();
  growth.multiply(tokenizer->pre_tokenizer_.growth().factor());
  check_text_growth(growth, JsonPath(source, "normalizer, pre_tokenizer"),
                    fmt::format("the normalizer up to {} times: NFC / NFD 3, NFKC / NFKD 11, Prepend 1 + its length, "
                                "each Replace the length of its content; the pre-tokenizer up to {}: ByteLevel's "
                                "prefix space 2, each Metaspace 1 + the length of its replacement",
                                tokenizer->normalizer_.growth().describe(), tokenizer->pre_tokenizer_.growth().describe()));
  tokenizer->model_ =
      BpeModel::from_json(require_field(document, "model", root),
                          tokenizer->pre_tokenizer_.byte_level(), root.child("model"));
  tokenizer->added_ = AddedVocabulary::from_json(component("added_tokens"), tokenizer->normalizer_,
                                                 tokenizer->model_, root.child("added_tokens"));
  tokenizer->post_processor_ =
      PostProcessor::from_json(component("post_processor"), root.child("post_processor"));
  tokenizer->decoder_ = Decoder::from_json(component("decoder"), root.child("decoder"));
  size_t limit = tokenizer->model_.id_limit();
  for (const AddedToken& token : tokenizer->added_.tokens())
    limit = std::max(limit, static_cast<size_t>(token.id) + 1);
  tokenizer->vocab_size_ = limit;
  tokenizer->post_processor_.check_ids_below(limit);
  return tokenizer;
}

void TokenizerModel::encode(std::string_view text, bool add_special_tokens, Workspace& workspace,
                            std::vector<int32_t>& out) const {
  if (!is_valid_utf8(text)) {
    workspace.sanitized = replace_invalid_utf8(text);
    text = workspace.sanitized;
  }
  const size_t first = out.size();
  added_.split(text, false, workspace.raw_segments);
  // encode_plain reuses raw_segments' sibling buffers only, so iterating here is safe.
  for (const TextSegment& segment : workspace.raw_segments) {
    if (segment.token_id >= 0) {
      out.push_back(segment.token_id);
      continue;
    }
    encode_plain(text.substr(segment.begin, segment.end - segment.begin), segment.begin == 0,
                 workspace, out);
  }
  if (add_special_tokens && post_processor_.added_count() > 0) {
    std::vector<int32_t> encoded(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    post_processor_.apply(encoded);
    out.resize(first);
    out.insert(out.end(), encoded.begin(), encoded.end());
  }
}

void TokenizerModel::encode_plain(std::string_view text, bool at_text_start, Workspace& workspace,
                                  std::vector<int32_t>& out) const {
  std::string& normalized = workspace.normalized;
  normalized.assign(text);
  normalizer_.normalize(normalized, workspace.normalize_scratch, workspace.pre_tokenizer.regex);
  std::vector<TextSegment>& segments = workspace.normalized_segments;
  if (added_.has_normalized_tokens()) {
    added_.split(normalized, true, segments);
  } else {
    segments.assign(1, TextSegment{0, static_cast<uint32_t>(normalized.size()), -1});
  }
  for (const TextSegment& segment : segments) {
    if (segment.token_id >= 0) {
      out.push_back(segment.token_id);
      continue;
    }
    if (segment.end == segment.begin) continue;
    Pieces& pieces = workspace.pieces;
    pieces.text.assign(normalized, segment.begin, segment.end - segment.begin);
    pieces.spans.assign(1, ByteSpan{0, static_cast<uint32_t>(pieces.text.size())});
    pre_tokenizer_.pre_tokenize(pieces, at_text_start && segment.begin == 0,
                                workspace.pre_tokenizer);
    for (const ByteSpan span : pieces.spans) {
      model_.tokenize(std::string_view(pieces.text).substr(span.begin, span.end - span.begin),
                      workspace.bpe, out);
    }
  }
}

std::string TokenizerModel::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    const std::string* token = id_to_token(id);
    if (!token) continue;  // unknown ids are skipped, as in HF
    if (skip_special_tokens && added_.is_special_content(*token)) continue;
    tokens.push_back(*token);
  }
  return decoder_.decode(std::move(tokens));
}

std::optional<int32_t> TokenizerModel::token_to_id(std::string_view token) const {
  if (auto id = added_.find_by_content(token)) return id;
  return model_.token_to_id(token);
}

const std::string* TokenizerModel::id_to_token(int32_t id) const {
  if (const AddedToken* added = added_.find_by_id(id)) return &added->content;
  return model_.id_to_token(id);
}

bool TokenizerModel::is_special(int32_t id) const {
  const std::string* token = id_to_token(id);
  return token && added_.is_special_content(*token);
}

}  // namespace surogate::tokenizer

// The loaded tokenizer.json pipeline, in HF's order: added tokens are cut out of the raw text,
// each remaining piece is normalized (and searched for normalized added tokens), pre-tokenized
// into words, and each word goes through the BPE model; the post-processor then adds special
// tokens. Per-thread memory lives in a Workspace taken from a pool, so encode() allocates
// nothing once the workspace has warmed up.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace surogate::tokenizer {

struct Workspace {
  std::string sanitized;
  std::vector<TextSegment> raw_segments;
  std::vector<TextSegment> normalized_segments;
  std::string normalized;
  std::string normalize_scratch;
  Pieces pieces;
  PreTokenizerScratch pre_tokenizer;
  BpeScratch bpe;
};

// Workspaces kept for reuse by encode() calls from any thread.
class WorkspacePool {
 public:
  class Lease {
   public:
    Lease(WorkspacePool& pool, std::unique_ptr<Workspace> workspace)
        : pool_(pool), workspace_(std::move(workspace)) {}
    ~Lease() { pool_.give_back(std::move(workspace_)); }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Workspace& operator*() const { return *workspace_; }

   private:
    WorkspacePool& pool_;
    std::unique_ptr<Workspace> workspace_;
  };
  Lease acquire();

 private:
  void give_back(std::unique_ptr<Workspace> workspace);
  std::mutex mutex_;
  std::vector<std::unique_ptr<Workspace>> free_;
};

class TokenizerModel {
 public:
  // `source` names the file in error messages.
  static std::shared_ptr<const TokenizerModel> from_json(const nlohmann::json& document,
                                                         const std::string& source);

  // Appends the ids of `text` (valid UTF-8 or not; see tokenizer.h) to `out`.
  void encode(std::string_view text, bool add_special_tokens, Workspace& workspace,
              std::vector<int32_t>& out) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;
  size_t vocab_size() const { return vocab_size_; }
  bool is_special(int32_t id) const;
  WorkspacePool& workspaces() const { return workspaces_; }

 private:
  TokenizerModel() = default;
  void encode_plain(std::string_view text, bool at_text_start, Workspace& workspace,
                    std::vector<int32_t>& out) const;

  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  BpeModel model_;
  AddedVocabulary added_;
  PostProcessor post_processor_;
  Decoder decoder_;
  size_t vocab_size_ = 0;
  mutable WorkspacePool workspaces_;
};

}  // namespace surogate::tokenizer

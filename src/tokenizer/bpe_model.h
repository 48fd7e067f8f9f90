// The BPE model of tokenizer.json: vocabulary, ranked merges, unknown-token handling
// (unk_token, fuse_unk, byte_fallback to <0xNN> tokens), ignore_merges, and the
// continuing_subword_prefix / end_of_word_suffix conventions.
//
// For byte-level tokenizers the vocabulary is re-keyed at load from the GPT-2 alphabet to raw
// bytes, so a word is split into bytes directly and no per-call alphabet mapping is needed.
// Words are merged lowest rank first (leftmost on ties), exactly as HF; results are cached per
// worker thread.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace surogate::tokenizer {

class JsonPath;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view text) const noexcept {
    return std::hash<std::string_view>{}(text);
  }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Per-thread memory of the BPE model: merge buffers and the word cache.
struct BpeScratch {
  std::vector<int32_t> symbols;
  std::vector<int32_t> ranks;
  std::vector<int32_t> merged_ids;
  struct Node {
    int32_t id, previous, next;
  };
  std::vector<Node> nodes;
  struct Candidate {
    int32_t rank, position, new_id;
  };
  std::vector<Candidate> heap;
  std::string lookup;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache;
};

class BpeModel {
 public:
  // `byte_level`: the pre-tokenizer is ByteLevel, so vocabulary entries are spelled in the
  // GPT-2 byte alphabet.
  static BpeModel from_json(const nlohmann::json& model, bool byte_level, const JsonPath& where);

  // Appends the ids of one pre-tokenized word (non-empty, valid UTF-8) to `out`.
  void tokenize(std::string_view word, BpeScratch& scratch, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  const std::string* id_to_token(int32_t id) const;
  // One more than the largest id of the model vocabulary.
  size_t id_limit() const { return id_to_token_.size(); }

  struct Merge {
    int32_t rank;
    int32_t new_id;
  };
  // The merge of the adjacent pair (left, right), if any.
  const Merge* find_merge(int32_t left, int32_t right) const;

 private:
  void load_merges(const nlohmann::json& merges, const JsonPath& where);
  void symbolize(std::string_view word, BpeScratch& scratch) const;
  void merge_short(BpeScratch& scratch) const;
  void merge_long(BpeScratch& scratch) const;

  // Open-addressing table of merges keyed by (left << 32 | right).
  struct MergeSlot {
    uint64_t key = ~0ull;
    Merge merge{};
  };
  std::vector<MergeSlot> merge_slots_;
  uint64_t merge_mask_ = 0;

  TokenMap token_to_id_;   // as spelled in tokenizer.json
  TokenMap symbol_to_id_;  // raw bytes for byte-level models; unused otherwise
  std::vector<std::string> id_to_token_;
  std::vector<uint8_t> id_present_;
  std::array<int32_t, 256> byte_ids_{};           // byte-level: single raw byte -> id or -1
  std::array<int32_t, 256> byte_fallback_ids_{};  // "<0xNN>" -> id or -1
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  int32_t unk_id_ = -1;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
};

}  // namespace surogate::tokenizer

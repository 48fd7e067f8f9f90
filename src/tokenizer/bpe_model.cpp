// BPE model: loading (vocab, merges in "a b" or ["a", "b"] form) and word tokenization.
// Short words merge with a rank array scanned for the minimum (few hash look-ups, no heap);
// long words (e.g. whole Llama 2 segments, which have no pre-tokenizer) use a heap over a
// linked list so the cost stays O(n log n). Both pick the lowest rank, leftmost first.
#include "tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <climits>

#include "core/error.h"
#include "tokenizer/byte_alphabet.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/utf8.h"

namespace surogate::tokenizer {
namespace {

constexpr size_t kShortWordSymbols = 96;
constexpr size_t kCachedWordBytes = 128;
constexpr size_t kCacheEntries = 1 << 17;
// Ids below the largest vocabulary id that no token uses.
constexpr size_t kMaxUnusedIds = 1 << 20;

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t hash_key(uint64_t key) { return (key * 0x9E3779B97F4A7C15ull) ^ (key >> 29); }

std::string byte_token(uint8_t byte) { return fmt::format("<0x{:02X}>", byte); }

}  // namespace

BpeModel BpeModel::from_json(const nlohmann::json& model, bool byte_level, const JsonPath& where) {
  BpeModel bpe;
  if (!model.is_object()) fail_at(where, "expected the model object");
  const std::string type = model.contains("type") ? component_type(model, where) : "BPE";
  if (type != "BPE") fail_unsupported(where, "model", type, "BPE");
  if (const nlohmann::json* dropout = optional_field(model, "dropout")) {
    if (!dropout->is_number() || dropout->get<double>() != 0.0) {
      fail_at(where.child("dropout"),
              "BPE dropout makes tokenization random and is not supported; set it to null");
    }
  }
  bpe.byte_level_ = byte_level;
  bpe.byte_fallback_ = bool_or(model, "byte_fallback", false, where);
  bpe.fuse_unk_ = bool_or(model, "fuse_unk", false, where);
  bpe.ignore_merges_ = bool_or(model, "ignore_merges", false, where);
  bpe.continuing_subword_prefix_ =
      optional_string(model, "continuing_subword_prefix", where).value_or("");
  bpe.end_of_word_suffix_ = optional_string(model, "end_of_word_suffix", where).value_or("");
  if (byte_level && (!bpe.continuing_subword_prefix_.empty() || !bpe.end_of_word_suffix_.empty())) {
    fail_at(where,
            "continuing_subword_prefix / end_of_word_suffix with a ByteLevel pre-tokenizer is not "
            "supported");
  }

  const nlohmann::json& vocab = require_field(model, "vocab", where);
  if (!vocab.is_object())
    fail_at(where.child("vocab"), "expected an object mapping token strings to ids");
  int64_t max_id = -1;
  bpe.token_to_id_.reserve(vocab.size());
  for (const auto& [token, id_json] : vocab.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 ||
        id_json.get<int64_t>() >= INT32_MAX) {
      fail_at(where.child("vocab"),
              fmt::format("the id of token {:?} must be a non-negative integer", token));
    }
    const int64_t id = id_json.get<int64_t>();
    bpe.token_to_id_.emplace(token, static_cast<int32_t>(id));
    max_id = std::max(max_id, id);
  }
  // One slot per id up to the largest: a few holes (ids of added tokens) are fine, a stray huge
  // id would allocate gigabytes.
  if (max_id >= static_cast<int64_t>(vocab.size() + kMaxUnusedIds)) {
    fail_at(where.child("vocab"),
            fmt::format("the largest id is {}, but there are only {} tokens: ids must number the vocabulary "
                        "from 0 with at most {} unused ids; fix the stray id",
                        max_id, vocab.size(), kMaxUnusedIds));
  }
  bpe.id_to_token_.resize(static_cast<size_t>(max_id + 1));
  bpe.id_present_.assign(static_cast<size_t>(max_id + 1), 0);
  for (const auto& [token, id] : bpe.token_to_id_) {
    bpe.id_to_token_[id] = token;
    bpe.id_present_[id] = 1;
  }

  bpe.byte_ids_.fill(-1);
  if (byte_level) {
    bpe.symbol_to_id_.reserve(bpe.token_to_id_.size());
    for (const auto& [token, id] : bpe.token_to_id_) {
      if (auto bytes = alphabet_to_bytes(token)) bpe.symbol_to_id_.emplace(std::move(*bytes), id);
    }
    for (int byte = 0; byte < 256; ++byte) {
      auto found = bpe.symbol_to_id_.find(std::string(1, static_cast<char>(byte)));
      if (found != bpe.symbol_to_id_.end()) bpe.byte_ids_[byte] = found->second;
    }
  }
  bpe.byte_fallback_ids_.fill(-1);
  for (int byte = 0; byte < 256; ++byte) {
    auto found = bpe.token_to_id_.find(byte_token(static_cast<uint8_t>(byte)));
    if (found != bpe.token_to_id_.end()) bpe.byte_fallback_ids_[byte] = found->second;
  }
  if (auto unk = optional_string(model, "unk_token", where)) {
    auto found = bpe.token_to_id_.find(*unk);
    if (found == bpe.token_to_id_.end()) {
      fail_at(where.child("unk_token"),
              fmt::format("the unknown token {:?} is not in model.vocab; add it or set "
                          "unk_token to null",
                          *unk));
    }
    bpe.unk_id_ = found->second;
  }
  bpe.load_merges(require_field(model, "merges", where), where.child("merges"));
  return bpe;
}

void BpeModel::load_merges(const nlohmann::json& merges, const JsonPath& where) {
  if (!merges.is_array()) fail_at(where, "expected a list of merges");
  const size_t capacity = std::bit_ceil(std::max<size_t>(16, merges.size() * 2));
  merge_slots_.assign(capacity, MergeSlot{});
  merge_mask_ = capacity - 1;
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const nlohmann::json& entry = merges[rank];
    std::string left, right;
    if (entry.is_string()) {
      const std::string& text = entry.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos)
        fail_at(where.index(rank),
                fmt::format("the merge {:?} must be two tokens separated by a space", text));
      left = text.substr(0, space);
      right = text.substr(space + 1);
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
               entry[1].is_string()) {
      left = entry[0].get<std::string>();
      right = entry[1].get<std::string>();
    } else {
      fail_at(where.index(rank), "a merge must be \"left right\" or [\"left\", \"right\"]");
    }
    const auto left_id = token_to_id_.find(left);
    const auto right_id = token_to_id_.find(right);
    if (left_id == token_to_id_.end() || right_id == token_to_id_.end()) {
      fail_at(where.index(rank),
              fmt::format("the merge ({:?}, {:?}) uses a token that is not in model.vocab", left,
                          right));
    }
    const size_t prefix = std::min(continuing_subword_prefix_.size(), right.size());
    const bool has_prefix = right.compare(0, prefix, continuing_subword_prefix_) == 0;
    joined = left;
    joined.append(right, has_prefix ? prefix : 0, std::string::npos);
    const auto new_id = token_to_id_.find(joined);
    if (new_id == token_to_id_.end()) {
      fail_at(where.index(rank),
              fmt::format("the merge ({:?}, {:?}) makes {:?}, which is not in model.vocab", left,
                          right, joined));
    }
    const uint64_t key = pair_key(left_id->second, right_id->second);
    for (uint64_t slot = hash_key(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
      if (merge_slots_[slot].key == key || merge_slots_[slot].key == ~0ull) {
        // A repeated pair keeps its last rank, as HF's map does.
        merge_slots_[slot] = MergeSlot{key, Merge{static_cast<int32_t>(rank), new_id->second}};
        break;
      }
    }
  }
}

const BpeModel::Merge* BpeModel::find_merge(int32_t left, int32_t right) const {
  const uint64_t key = pair_key(left, right);
  for (uint64_t slot = hash_key(key) & merge_mask_;; slot = (slot + 1) & merge_mask_) {
    const MergeSlot& entry = merge_slots_[slot];
    if (entry.key == key) return &entry.merge;
    if (entry.key == ~0ull) return nullptr;
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto found = token_to_id_.find(token);
  if (found == token_to_id_.end()) return std::nullopt;
  return found->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !id_present_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::symbolize(std::string_view word, BpeScratch& scratch) const {
  std::vector<int32_t>& symbols = scratch.symbols;
  symbols.clear();
  // An unknown character is held back so that runs of them can fuse into one unk (fuse_unk);
  // like HF, byte-fallback tokens do not flush a held unk.
  bool unk_pending = false;
  const auto add_known = [&](int32_t id) {
    if (unk_pending) symbols.push_back(unk_id_);
    unk_pending = false;
    symbols.push_back(id);
  };
  const auto add_unknown = [&](std::string_view spelled) {
    if (byte_fallback_) {
      bool all = true;
      for (const char byte : spelled)
        all = all && byte_fallback_ids_[static_cast<uint8_t>(byte)] >= 0;
      if (all) {
        for (const char byte : spelled)
          symbols.push_back(byte_fallback_ids_[static_cast<uint8_t>(byte)]);
        return;
      }
    }
    if (unk_id_ < 0) return;  // no unk token: the character is dropped, as in HF
    if (unk_pending && !fuse_unk_) symbols.push_back(unk_id_);
    unk_pending = true;
  };

  if (byte_level_) {
    for (const char byte : word) {
      const int32_t id = byte_ids_[static_cast<uint8_t>(byte)];
      if (id >= 0) {
        add_known(id);
      } else {
        std::string spelled;
        append_code_point(spelled, byte_to_alphabet(static_cast<uint8_t>(byte)));
        add_unknown(spelled);
      }
    }
  } else {
    const bool plain = continuing_subword_prefix_.empty() && end_of_word_suffix_.empty();
    size_t position = 0;
    while (position < word.size()) {
      size_t length = 0;
      decode_code_point(word, position, length);
      std::string_view character = word.substr(position, length);
      if (!plain) {
        scratch.lookup.clear();
        if (position > 0) scratch.lookup += continuing_subword_prefix_;
        scratch.lookup += character;
        if (position + length == word.size()) scratch.lookup += end_of_word_suffix_;
        character = scratch.lookup;
      }
      auto found = token_to_id_.find(character);
      if (found != token_to_id_.end()) {
        add_known(found->second);
      } else {
        add_unknown(character);
      }
      position += length;
    }
  }
  if (unk_pending) symbols.push_back(unk_id_);
}

void BpeModel::merge_short(BpeScratch& scratch) const {
  std::vector<int32_t>& symbols = scratch.symbols;
  std::vector<int32_t>& ranks = scratch.ranks;
  std::vector<int32_t>& merged = scratch.merged_ids;
  const size_t count = symbols.size();
  ranks.assign(count, INT32_MAX);
  merged.assign(count, -1);
  const auto update = [&](size_t i) {
    const Merge* merge = find_merge(symbols[i], symbols[i + 1]);
    ranks[i] = merge ? merge->rank : INT32_MAX;
    merged[i] = merge ? merge->new_id : -1;
  };
  for (size_t i = 0; i + 1 < count; ++i) update(i);
  size_t size = count;
  while (size > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < size; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == INT32_MAX) break;
    symbols[best] = merged[best];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    merged.erase(merged.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    --size;
    if (best + 1 < size) {
      update(best);
    } else {
      ranks[best] = INT32_MAX;
    }
    if (best > 0) update(best - 1);
  }
}

void BpeModel::merge_long(BpeScratch& scratch) const {
  using Node = BpeScratch::Node;
  using Candidate = BpeScratch::Candidate;
  std::vector<Node>& nodes = scratch.nodes;
  std::vector<Candidate>& heap = scratch.heap;
  const int32_t count = static_cast<int32_t>(scratch.symbols.size());
  nodes.resize(count);
  for (int32_t i = 0; i < count; ++i)
    nodes[i] = Node{scratch.symbols[i], i - 1, i + 1 < count ? i + 1 : -1};
  // Min-heap on (rank, position).
  const auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.position > b.position;
  };
  heap.clear();
  const auto push_pair = [&](int32_t position) {
    const int32_t next = nodes[position].next;
    if (next < 0) return;
    if (const Merge* merge = find_merge(nodes[position].id, nodes[next].id)) {
      heap.push_back(Candidate{merge->rank, position, merge->new_id});
      std::push_heap(heap.begin(), heap.end(), later);
    }
  };
  for (int32_t i = 0; i + 1 < count; ++i) push_pair(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate top = heap.back();
    heap.pop_back();
    Node& left = nodes[top.position];
    if (left.id < 0 || left.next < 0) continue;  // merged away, or nothing on the right any more
    const Node& right = nodes[left.next];
    const Merge* current = find_merge(left.id, right.id);
    if (!current || current->new_id != top.new_id) continue;  // stale: the pair changed
    const int32_t removed = left.next;
    left.id = top.new_id;
    left.next = right.next;
    if (left.next >= 0) nodes[left.next].previous = top.position;
    nodes[removed].id = -1;
    if (left.previous >= 0) push_pair(left.previous);
    push_pair(top.position);
  }
  scratch.symbols.clear();
  for (int32_t i = count > 0 ? 0 : -1; i >= 0; i = nodes[i].next)
    scratch.symbols.push_back(nodes[i].id);
}

void BpeModel::tokenize(std::string_view word, BpeScratch& scratch,
                        std::vector<int32_t>& out) const {
  if (word.empty()) return;
  const TokenMap& symbols = byte_level_ ? symbol_to_id_ : token_to_id_;
  if (ignore_merges_) {
    auto whole = symbols.find(word);
    if (whole != symbols.end()) {
      out.push_back(whole->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kCachedWordBytes;
  if (cacheable) {
    auto hit = scratch.cache.find(word);
    if (hit != scratch.cache.end()) {
      out.insert(out.end(), hit->second.begin(), hit->second.end());
      return;
    }
  }
  symbolize(word, scratch);
  if (scratch.symbols.size() <= kShortWordSymbols) {
    merge_short(scratch);
  } else {
    merge_long(scratch);
  }
  out.insert(out.end(), scratch.symbols.begin(), scratch.symbols.end());
  if (cacheable) {
    if (scratch.cache.size() >= kCacheEntries) scratch.cache.clear();
    scratch.cache.emplace(std::string(word), scratch.symbols);
  }
}

}  // namespace surogate::tokenizer

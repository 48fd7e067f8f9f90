// Small hand-built tokenizer.json documents for the unit tests.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace surogate::tokenizer::testing {

// A byte-level BPE over "a", "b", "c", " " with merges "a b" (rank 0), "ab c" (rank 1), "Ġ a" (rank
// 2).
inline nlohmann::json byte_level_tokenizer() {
  return nlohmann::json::parse(R"({
    "added_tokens": [],
    "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false, "byte_fallback": false,
              "vocab": {"a": 0, "b": 1, "c": 2, "Ġ": 3, "ab": 4, "abc": 5, "Ġa": 6, "Ċ": 7},
              "merges": ["a b", "ab c", "Ġ a"]}
  })");
}

// A SentencePiece-style BPE (Llama 2 shape): Prepend/Replace normalizer, byte fallback, unk.
inline nlohmann::json sentencepiece_tokenizer() {
  nlohmann::json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}, {"▁", 3},
                          {"h", 4},     {"i", 5},   {"▁h", 6},   {"▁hi", 7}};
  for (int byte = 0; byte < 256; ++byte) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", byte);
    vocab[name] = 8 + byte;
  }
  nlohmann::json document = nlohmann::json::parse(R"({
    "added_tokens": [
      {"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 1, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
      {"id": 2, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
    ],
    "normalizer": {"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [
      {"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"},
      {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
              "merges": [["▁", "h"], ["▁h", "i"]]}
  })");
  document["model"]["vocab"] = vocab;
  return document;
}

inline Tokenizer make(const nlohmann::json& document) {
  return Tokenizer::from_json(document, nlohmann::json::object(), "test tokenizer.json");
}

}  // namespace surogate::tokenizer::testing

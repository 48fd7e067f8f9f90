// What fuzz_tokenizer_json does with one input, shared with the CI test that replays its corpus
// (tests/tokenizer/test_tokenizer_json_corpus.cpp): the bytes are the text of a tokenizer.json,
// loaded as the engine loads a model folder's tokenizer (Tokenizer::from_text is Tokenizer::load
// without the files), then a fixed short text is encoded with and without special tokens (it
// holds the special tokens of the common families, combining marks, ZWJ emoji, right-to-left
// text, NFKC-sensitive characters, control characters, a NUL, invalid UTF-8 and a run long enough
// for the BPE's long-word path) and decoded with and without skipping special tokens. Throws a
// UserError when the file is rejected (the only acceptable exception); returns what is wrong when
// a loaded tokenizer breaks its contract (an id outside [0, vocab_size()), decode() returning
// invalid UTF-8), or an empty string.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace surogate::fuzz {

inline std::string tokenizer_case_text() {
  using namespace std::string_literals;
  std::string text =
      "<s>[INST] Hello, world! It's 2024 </s><|im_start|>user\n"
      "<|begin_of_text|><|endoftext|><unk><pad>[CLS] [SEP] <mask>  <|im_end|>\n"
      "  caf\xC3\xA9 cafe\xCC\x81 \xEF\xAC\x81 \xE2\x85\xAB \xEF\xBC\xA1\xEF\xBD\x82 "  // é, e+U+0301, ﬁ, Ⅻ, ＡＢ
      "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7 "       // 👩‍👩‍👧 (ZWJ)
      "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 "     // שלום مرحبا
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xC2\xA0\xE2\x80\xA8\xE2\x80\xAF\xEF\xBB\xBF"  // 日本語 NBSP U+2028 U+202F BOM
      "\t\r\x01\x7F"s;
  text += '\0';
  text += "\xFF\xC3(\xED\xA0\x80 \xF4\x90\x80\x80 \xE2\x96\x81\xC4\xA0 ";  // invalid UTF-8, ▁ and Ġ
  text += std::string(150, 'a');
  return text;
}

inline std::string run_tokenizer_json_case(std::string_view tokenizer_json, const std::string& source_name) {
  static const std::string text = tokenizer_case_text();
  const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_text(tokenizer_json, source_name);
  for (const bool add_special_tokens : {false, true}) {
    const std::vector<int32_t> ids = tokenizer.encode(text, add_special_tokens);
    for (const int32_t id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= tokenizer.vocab_size())
        return "encode() gave id " + std::to_string(id) + ", outside the vocabulary";
    }
    for (const bool skip_special_tokens : {false, true}) {
      if (!tokenizer::is_valid_utf8(tokenizer.decode(ids, skip_special_tokens))) return "decode() gave invalid UTF-8";
    }
  }
  return {};
}

}  // namespace surogate::fuzz
